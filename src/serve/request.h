// What KServe v2 (Open Inference Protocol) clients send and get back: JSON tensors, and
// Triton's binary tensor data extension (a JSON header of Inference-Header-Content-Length
// bytes, then each binary tensor's bytes in order: row-major, little-endian, a BYTES element
// as a 4-byte length and its bytes). Every refusal is an HttpError whose message names the
// field and what was expected.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "exec/executor.h"
#include "graph/graph.h"
#include "pipelines/pipeline.h"

namespace vlrt::serve {

// A request the server refuses (pipelines/pipeline.h): the HTTP status and the message of
// the {"error": ...} body.
using HttpError = RequestError;

// The KServe v2 name of a dtype ("FP32", "INT64", "BOOL", ...) and back ("" / undefined
// when there is none).
std::string kserve_datatype(DType t);
DType dtype_from_kserve(const std::string& name);

// A BYTES tensor: each element a byte string of its own length.
struct BytesTensor {
  Shape shape;
  std::vector<std::string> elements;
};

struct RequestedOutput {
  std::string name;
  bool binary = false;  // parameters.binary_data (or binary_data_output): in the binary part
};

struct InferRequest {
  std::string id;
  TensorMap inputs;                                      // numeric inputs
  std::map<std::string, BytesTensor> bytes_inputs;       // BYTES inputs
  std::vector<RequestedOutput> outputs;                  // requested outputs; empty: all
  bool binary_outputs = false;                           // parameters.binary_data_output: all binary
  nlohmann::json parameters = nlohmann::json::object();  // the request's parameters
};

// {"inputs": [{"name", "shape", "datatype", "data" | "parameters": {"binary_data_size"}}],
// "outputs": [{"name", "parameters"}], "id", "parameters"}: data flat in row-major order
// (nested arrays are flattened). json_length: the Inference-Header-Content-Length, the
// JSON header's size when the body carries binary tensors after it (npos: JSON only).
// Checks each tensor's own consistency (datatype, shape, element count, types and binary
// sizes); the caller checks the inputs and output names against the model.
InferRequest parse_infer_request(std::string_view body, size_t json_length = std::string::npos);
// 400 unless every requested output is one of `names`.
void check_output_names(const InferRequest& request, const std::vector<std::string>& names);

// An inference's results: numeric and BYTES tensors, in the order they are answered.
struct InferOutputs {
  TensorMap tensors;
  std::map<std::string, BytesTensor> bytes;
  std::vector<std::string> names;  // every output, in order
};

struct InferReply {
  std::string body;
  size_t json_length = std::string::npos;  // the header's size when binary tensors follow it
};

// The response to `request`: its requested outputs (else all), each as JSON data or, when
// asked, as binary data after the JSON header.
InferReply infer_response(const std::string& model_name, const InferRequest& request,
                          const InferOutputs& outputs);

// GET /v2/models/{name}: inputs and outputs with datatypes and shapes (-1: dynamic).
nlohmann::json model_metadata(const std::string& name, const Model& model);
// GET /v2/models/{name}/config: the model configuration as Triton returns it for an ONNX
// model without batching (max_batch_size 0: the batch dimension is part of the dims).
nlohmann::json model_config(const std::string& name, const Model& model);

}  // namespace vlrt::serve
