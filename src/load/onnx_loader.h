// Reads an ONNX model (protobuf) and its external data into the graph IR.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace vlrt {

// Fails with a message naming the file and what is wrong: missing, truncated,
// not an ONNX model, external data missing or short, an unsupported data type.
Model load_onnx(const std::string& path);

// The external-data files a model references (locations relative to its folder, each once,
// in order of first use), read from the protobuf without loading any tensor.
std::vector<std::string> external_data_files(const std::string& path);

// Decodes a serialized TensorProto (the .pb files of the ONNX test suite).
// `base_dir` resolves external data locations.
Tensor parse_tensor_proto(const std::string& bytes, const std::string& base_dir = ".",
                          std::string* name = nullptr);

// Decodes a serialized TensorProto (kind tensor), SequenceProto (kind sequence) or
// OptionalProto (an optional kind) of the ONNX test suite. `element_type` is the tensors'
// type when the value holds none (an empty sequence or optional).
Tensor parse_value_proto(const std::string& bytes, ValueKind kind, DType element_type,
                         const std::string& base_dir = ".", std::string* name = nullptr);

}  // namespace vlrt
