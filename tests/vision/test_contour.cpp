// The contour tracer and Douglas-Peucker on small masks drawn as text, and RLE decoding.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "vision/contour.h"

namespace vlrt::vision {

namespace {

// Rows of '#' (in the mask) and '.' (outside).
Mask mask_of(const std::vector<std::string>& rows) {
  Mask m{int(rows[0].size()), int(rows.size()), {}};
  for (auto& r : rows)
    for (char c : r) m.pixels.push_back(c == '#' ? 1 : 0);
  return m;
}

std::string describe(const Polygon& p) {
  std::string s;
  for (auto& q : p) {
    s += '(';
    s += std::to_string(int(q.x));
    s += ',';
    s += std::to_string(int(q.y));
    s += ')';
  }
  return s;
}

}  // namespace

TEST(Contour, SquareIsItsFourPixelCornersClockwise) {
  auto polygons = mask_contours(mask_of({"....", ".##.", ".##.", "...."}));
  ASSERT_EQ(polygons.size(), 1u);
  EXPECT_EQ(describe(polygons[0]), "(1,1)(3,1)(3,3)(1,3)");
  EXPECT_EQ(polygon_area(polygons[0]), 4);
}

TEST(Contour, LonePixelIsAUnitSquare) {
  auto polygons = mask_contours(mask_of({"...", ".#.", "..."}));
  ASSERT_EQ(polygons.size(), 1u);
  EXPECT_EQ(describe(polygons[0]), "(1,1)(2,1)(2,2)(1,2)");
}

TEST(Contour, LShapeHasSixCornersAndItsArea) {
  Mask m = mask_of({"#...", "#...", "###."});
  auto polygons = mask_contours(m);
  ASSERT_EQ(polygons.size(), 1u);
  EXPECT_EQ(describe(polygons[0]), "(0,0)(1,0)(1,2)(3,2)(3,3)(0,3)");
  EXPECT_EQ(polygon_area(polygons[0]), double(mask_area(m)));
}

TEST(Contour, HoleIsNotTracedOnlyTheOuterBoundary) {
  Mask m = mask_of({"#####", "#...#", "#...#", "#####"});
  auto polygons = mask_contours(m);
  ASSERT_EQ(polygons.size(), 1u);
  EXPECT_EQ(describe(polygons[0]), "(0,0)(5,0)(5,4)(0,4)");
  EXPECT_EQ(polygon_area(polygons[0]), 20);
  EXPECT_EQ(mask_area(m), 14);
}

TEST(Contour, MaskTouchingEveryBorderIsTheImageFrame) {
  auto polygons = mask_contours(mask_of({"###", "###"}));
  ASSERT_EQ(polygons.size(), 1u);
  EXPECT_EQ(describe(polygons[0]), "(0,0)(3,0)(3,2)(0,2)");
}

TEST(Contour, TwoComponentsGiveTwoPolygonsOrTheLargest) {
  Mask m = mask_of({"##...", "##..#", ".....", "...##"});
  auto polygons = mask_contours(m);
  ASSERT_EQ(polygons.size(), 3u);
  EXPECT_EQ(describe(polygons[0]), "(0,0)(2,0)(2,2)(0,2)");
  EXPECT_EQ(describe(polygons[1]), "(4,1)(5,1)(5,2)(4,2)");
  EXPECT_EQ(describe(polygons[2]), "(3,3)(5,3)(5,4)(3,4)");
  auto largest = mask_polygons(m, 0, true);
  ASSERT_EQ(largest.size(), 1u);
  EXPECT_EQ(describe(largest[0]), "(0,0)(2,0)(2,2)(0,2)");
  EXPECT_EQ(mask_polygons(m, 0, false).size(), 3u);
}

TEST(Contour, PixelsTouchingAtACornerAreSeparateComponents) {
  auto polygons = mask_contours(mask_of({"#.", ".#"}));
  ASSERT_EQ(polygons.size(), 2u);
  EXPECT_EQ(describe(polygons[0]), "(0,0)(1,0)(1,1)(0,1)");
  EXPECT_EQ(describe(polygons[1]), "(1,1)(2,1)(2,2)(1,2)");
}

TEST(Contour, EmptyMaskHasNoPolygons) {
  EXPECT_TRUE(mask_contours(mask_of({"...", "..."})).empty());
  EXPECT_TRUE(mask_polygons(mask_of({"..."}), 1, true).empty());
}

TEST(Contour, DouglasPeuckerDropsStaircaseStepsWithinTheTolerance) {
  // A diagonal staircase: the triangle below the diagonal of a 6x6 square.
  Mask m = mask_of({"#.....", "##....", "###...", "####..", "#####.", "######"});
  Polygon traced = mask_contours(m)[0];
  EXPECT_EQ(describe(traced), "(0,0)(1,0)(1,1)(2,1)(2,2)(3,2)(3,3)(4,3)(4,4)(5,4)(5,5)(6,5)(6,6)(0,6)");
  Polygon coarse = simplify_polygon(traced, 1.0);
  EXPECT_EQ(describe(coarse), "(0,0)(6,6)(0,6)");
  EXPECT_EQ(simplify_polygon(traced, 0.0).size(), traced.size());
  EXPECT_GT(simplify_polygon(traced, 0.5).size(), 3u);
  // Every kept point is one of the traced ones.
  for (auto& p : coarse) {
    bool found = false;
    for (auto& q : traced) found = found || (p.x == q.x && p.y == q.y);
    EXPECT_TRUE(found);
  }
}

TEST(Contour, SimplifyingNeverLeavesFewerThanThreePoints) {
  Polygon pixel = mask_contours(mask_of({"#"}))[0];
  EXPECT_EQ(simplify_polygon(pixel, 5.0).size(), 4u);
}

TEST(Mask, RleRoundTripsAndBadCountsFail) {
  Mask m = mask_of({"#..#", ".##.", "#..."});
  Mask back = mask_from_rle(4, 3, rle_counts(m));
  EXPECT_EQ(back.pixels, m.pixels);
  EXPECT_THROW(mask_from_rle(4, 3, {5, 3}), Error);
  EXPECT_THROW(mask_from_rle(4, 3, {5, 9}), Error);
}

}  // namespace vlrt::vision
