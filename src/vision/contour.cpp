#include "vision/contour.h"

#include <cmath>
#include <cstdint>

namespace vlrt::vision {

namespace {

// Component labels (1, 2, ...; 0 outside the mask) by 4-connected flood fill, and their count.
std::pair<std::vector<int>, int> label_components(const Mask& mask) {
  std::vector<int> labels(mask.pixels.size(), 0);
  int count = 0;
  std::vector<size_t> stack;
  for (size_t start = 0; start < mask.pixels.size(); start++) {
    if (!mask.pixels[start] || labels[start]) continue;
    labels[start] = ++count;
    stack.push_back(start);
    while (!stack.empty()) {
      size_t p = stack.back();
      stack.pop_back();
      int x = int(p % size_t(mask.width)), y = int(p / size_t(mask.width));
      auto visit = [&](int nx, int ny) {
        if (nx < 0 || ny < 0 || nx >= mask.width || ny >= mask.height) return;
        size_t q = size_t(ny) * size_t(mask.width) + size_t(nx);
        if (mask.pixels[q] && !labels[q]) labels[q] = count, stack.push_back(q);
      };
      visit(x - 1, y), visit(x + 1, y), visit(x, y - 1), visit(x, y + 1);
    }
  }
  return {std::move(labels), count};
}

// Walks the boundary edges of component `label` from the top-left corner of its first pixel
// (x0, y0), keeping the component on the right and turning right whenever it can, so that
// pixels touching only at a corner stay apart. Points are the corners where the walk turns.
Polygon trace_outer_boundary(const std::vector<int>& labels, int width, int height, int label, int x0,
                             int y0) {
  auto inside = [&](int x, int y) {
    return x >= 0 && y >= 0 && x < width && y < height &&
           labels[size_t(y) * size_t(width) + size_t(x)] == label;
  };
  // The pixel in quadrant (sx, sy) of corner (cx, cy).
  auto quadrant = [&](int cx, int cy, int sx, int sy) {
    return inside(sx > 0 ? cx : cx - 1, sy > 0 ? cy : cy - 1);
  };
  Polygon polygon{{double(x0), double(y0)}};
  int cx = x0, cy = y0, dx = 1, dy = 0;  // heading right along the first pixel's top edge
  for (;;) {
    cx += dx, cy += dy;
    int rx = -dy, ry = dx;  // right of the heading (y grows downwards)
    bool front_right = quadrant(cx, cy, dx + rx, dy + ry);
    bool front_left = quadrant(cx, cy, dx - rx, dy - ry);
    int ndx = dx, ndy = dy;
    if (!front_right)
      ndx = rx, ndy = ry;
    else if (front_left)
      ndx = -rx, ndy = -ry;
    if (cx == x0 && cy == y0) break;
    if (ndx != dx || ndy != dy) polygon.push_back({double(cx), double(cy)});
    dx = ndx, dy = ndy;
  }
  return polygon;
}

double distance_to_segment(const PolygonPoint& p, const PolygonPoint& a, const PolygonPoint& b) {
  double vx = b.x - a.x, vy = b.y - a.y, len2 = vx * vx + vy * vy;
  double t = len2 > 0 ? std::fmax(0.0, std::fmin(1.0, ((p.x - a.x) * vx + (p.y - a.y) * vy) / len2)) : 0.0;
  return std::hypot(p.x - (a.x + t * vx), p.y - (a.y + t * vy));
}

// Marks the points of the open chain [first, last] that Douglas-Peucker keeps.
void keep_points(const Polygon& points, size_t first, size_t last, double tolerance,
                 std::vector<bool>& keep) {
  if (last <= first + 1) return;
  size_t farthest = first;
  double max_distance = -1;
  for (size_t i = first + 1; i < last; i++) {
    double d = distance_to_segment(points[i], points[first], points[last % points.size()]);
    if (d > max_distance) max_distance = d, farthest = i;
  }
  if (max_distance <= tolerance) return;
  keep[farthest] = true;
  keep_points(points, first, farthest, tolerance, keep);
  keep_points(points, farthest, last, tolerance, keep);
}

}  // namespace

std::vector<Polygon> mask_contours(const Mask& mask) {
  auto [labels, count] = label_components(mask);
  std::vector<Polygon> polygons;
  int next = 1;
  for (size_t p = 0; p < labels.size() && next <= count; p++)
    if (labels[p] == next) {
      polygons.push_back(trace_outer_boundary(labels, mask.width, mask.height, next,
                                              int(p % size_t(mask.width)), int(p / size_t(mask.width))));
      next++;
    }
  return polygons;
}

double polygon_area(const Polygon& polygon) {
  double twice = 0;
  for (size_t i = 0; i < polygon.size(); i++) {
    const PolygonPoint &a = polygon[i], &b = polygon[(i + 1) % polygon.size()];
    twice += a.x * b.y - b.x * a.y;
  }
  return std::fabs(twice) / 2;
}

Polygon simplify_polygon(const Polygon& polygon, double tolerance) {
  if (polygon.size() <= 3 || tolerance <= 0) return polygon;
  // The closed ring splits at its first point and the point farthest from it.
  size_t farthest = 0;
  double max_distance = -1;
  for (size_t i = 1; i < polygon.size(); i++) {
    double d = std::hypot(polygon[i].x - polygon[0].x, polygon[i].y - polygon[0].y);
    if (d > max_distance) max_distance = d, farthest = i;
  }
  std::vector<bool> keep(polygon.size(), false);
  keep[0] = keep[farthest] = true;
  keep_points(polygon, 0, farthest, tolerance, keep);
  keep_points(polygon, farthest, polygon.size(), tolerance, keep);
  Polygon out;
  for (size_t i = 0; i < polygon.size(); i++)
    if (keep[i]) out.push_back(polygon[i]);
  return out.size() >= 3 ? out : polygon;
}

std::vector<Polygon> mask_polygons(const Mask& mask, double tolerance, bool largest_only) {
  std::vector<Polygon> contours = mask_contours(mask);
  if (largest_only && contours.size() > 1) {
    size_t best = 0;
    for (size_t i = 1; i < contours.size(); i++)
      if (polygon_area(contours[i]) > polygon_area(contours[best])) best = i;
    contours = {contours[best]};
  }
  for (auto& c : contours) c = simplify_polygon(c, tolerance);
  return contours;
}

}  // namespace vlrt::vision
