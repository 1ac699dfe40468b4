// Draws detections (boxes and "label score" tags) onto an image.
#pragma once

#include <vector>

#include "vision/detection.h"
#include "vision/image.h"

namespace vlrt::vision {

Image draw_detections(const Image& img, const std::vector<Detection>& detections);

}  // namespace vlrt::vision
