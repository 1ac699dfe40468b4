// Draws detections (boxes and "label score" tags) onto an image.
#pragma once

#include <vector>

#include "pipelines/grounding/detector.h"
#include "pipelines/grounding/image.h"

namespace vlrt::grounding {

Image draw_detections(const Image& img, const std::vector<Detection>& detections);

}  // namespace vlrt::grounding
