// How every command loads a model: checked against its manifest, parsed, and its
// weights checked for the signature of a failed export.
#pragma once

#include <string>

#include "graph/graph.h"

namespace vlrt {

struct LoadOptions {
  bool verify_hash = true;  // sizes are always checked against a manifest; hashes unless false
};

// When MODEL.manifest.json exists, fails before parsing if a file is missing, truncated,
// corrupted, or the manifest belongs to another model. Then loads the ONNX file and its
// external data (see load_onnx) and refuses initializers that are all NaN or Inf.
Model load_model(const std::string& path, const LoadOptions& options = {});

// Fails naming the first floating-point initializer (more than one value) whose values are all
// NaN or Inf: that is a corrupted file or a failed export, never usable weights. A single
// -inf is a legitimate mask constant, so one-value tensors pass.
void check_initializers_finite(const Model& model);

}  // namespace vlrt
