// Writes the graph IR back to an ONNX model (ModelProto), the counterpart of onnx_loader.h:
// load → write → load gives the same Model. Every tensor is written inline (raw_data).
#pragma once

#include <string>

#include "graph/graph.h"

namespace vlrt {

// The ModelProto bytes. Fails when the model would exceed protobuf's 2 GiB limit
// (external data is not written).
std::string serialize_onnx(const Model& model);

// Writes serialize_onnx(model) to `path` through a temporary file and a rename.
void write_onnx(const Model& model, const std::string& path);

}  // namespace vlrt
