// Calibration for `vlrt quantize --int8 static`: the float32 model run on a folder of images
// through its pipeline's preprocessing, with the range of every activation to quantize kept.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "quantize/static_int8.h"

namespace vlrt {

struct CalibrationArgs {
  std::string dir;     // the calibration images (PNG, JPEG, BMP, GIF, WebP, TIFF, told by content)
  int64_t images = 0;  // the first this many of them, by name (0: all)
  std::string prompt;  // a GroundingDINO-contract model: the prompt of images without IMAGE.txt
  std::string vocab;   // its vocabulary (default: beside the model)
  int threads = 0;
};

// The images of the folder, sorted by name; fails when the folder cannot be read or holds none.
std::vector<std::string> calibration_images(const CalibrationArgs& args);

// The range of each of `values` over runs of the model on the images. A GroundingDINO-contract
// model is fed each image as `vlrt detect` preprocesses it with its prompt (IMAGE.txt beside the
// image, else --prompt); a model with one float input [N,3,H,W] gets each image resized to H x W
// (224 x 224 where they are dynamic) and normalized with ImageNet's mean and std. Fails for other
// models, naming their inputs.
ActivationRanges calibrate(const Model& model, const std::vector<std::string>& values, const CalibrationArgs& args);

}  // namespace vlrt
