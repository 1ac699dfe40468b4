// A labelled box in the pixels of an image: what detectors give, what labels are written
// from and what is drawn.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace vlrt::vision {

struct Detection {
  std::string label;  // "" when no category passed its threshold
  int category = -1;  // the label's index in the request's categories (-1: none)
  float score = 0;
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // pixels of the original image
};

inline float iou(const Detection& a, const Detection& b) {
  float ix = std::max(0.f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  float iy = std::max(0.f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  float inter = ix * iy;
  float uni = (a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter;
  return uni > 0 ? inter / uni : 0.f;
}

// Non-maximum suppression of detections sorted by descending score: a box overlapping a kept
// one by more than `iou_threshold` goes when both have one label, or whatever their labels
// when `agnostic` (one object boxed as "car" and as "truck" keeps the higher score).
inline std::vector<Detection> suppress_overlaps(const std::vector<Detection>& sorted, float iou_threshold,
                                                bool agnostic) {
  std::vector<Detection> kept;
  for (auto& d : sorted) {
    bool suppressed = false;
    for (auto& k : kept)
      suppressed = suppressed || ((agnostic || k.label == d.label) && iou(k, d) > iou_threshold);
    if (!suppressed) kept.push_back(d);
  }
  return kept;
}

}  // namespace vlrt::vision
