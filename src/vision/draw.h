// Draws detections (boxes and "label score" tags) and masks onto an image.
#pragma once

#include <vector>

#include "vision/detection.h"
#include "vision/image.h"
#include "vision/mask.h"

namespace vlrt::vision {

Image draw_detections(const Image& img, const std::vector<Detection>& detections);
// Masks (each the image's size) blended half over the image in their label's colour.
Image draw_masks(const Image& img, const std::vector<Mask>& masks, const std::vector<std::string>& labels);

}  // namespace vlrt::vision
