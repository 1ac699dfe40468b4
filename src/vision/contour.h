// Polygons from binary masks: the outer contour of each 4-connected component, traced along
// the pixel edges (so a lone pixel is a unit square and the polygon covers exactly the
// component's pixels when it has no holes), and Douglas-Peucker simplification.
#pragma once

#include <vector>

#include "vision/mask.h"

namespace vlrt::vision {

struct PolygonPoint {
  double x = 0, y = 0;  // pixel corners: 0..width, 0..height
};
using Polygon = std::vector<PolygonPoint>;  // closed; the last point is not repeated

// One polygon per 4-connected component, clockwise on screen, starting at the component's
// top-left corner; components in the order of their first pixel (rows top to bottom). Holes
// are not traced: a polygon is the component's outer boundary.
std::vector<Polygon> mask_contours(const Mask& mask);

// The polygon's area (shoelace; positive for either orientation).
double polygon_area(const Polygon& polygon);

// Douglas-Peucker on the closed polygon: drops points closer than `tolerance` pixels to the
// chord that replaces them. A result of fewer than three points keeps the input instead.
Polygon simplify_polygon(const Polygon& polygon, double tolerance);

// The outer contours simplified: every component's, or only the largest (by polygon area,
// the first of equals) when `largest_only`. Empty for an empty mask.
std::vector<Polygon> mask_polygons(const Mask& mask, double tolerance, bool largest_only);

}  // namespace vlrt::vision
