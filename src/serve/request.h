// What KServe v2 (Open Inference Protocol) clients send and get back: JSON tensors. Every
// refusal is an HttpError whose message names the field and what was expected.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
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

struct InferRequest {
  std::string id;
  TensorMap inputs;
  std::vector<std::string> outputs;  // requested outputs; empty: all
};

// {"inputs": [{"name", "shape", "datatype", "data"}], "outputs": [{"name"}], "id"}: data
// flat in row-major order (nested arrays are flattened). Checks each tensor's own
// consistency (datatype, shape, element count and types) and the output names; the caller
// checks the inputs against the model.
InferRequest parse_infer_request(const std::string& body, const Model& model);

nlohmann::json infer_response(const std::string& model_name, const std::string& id, const TensorMap& outputs,
                              const std::vector<std::string>& names);

// GET /v2/models/{name}: inputs and outputs with datatypes and shapes (-1: dynamic).
nlohmann::json model_metadata(const std::string& name, const Model& model);

}  // namespace vlrt::serve
