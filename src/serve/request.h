// What clients send and get back: /v1/detect requests (multipart or JSON), the KServe v2
// (Open Inference Protocol) JSON tensors, base64. Every refusal is an HttpError whose
// message names the field and what was expected.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/executor.h"
#include "graph/graph.h"

namespace vlrt::serve {

// A request the server refuses: the HTTP status and the message of the {"error": ...} body.
class HttpError : public Error {
 public:
  HttpError(int status, const std::string& msg) : Error(msg), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

template <class... Args>
[[noreturn]] void refuse(int status, const Args&... args) {
  throw HttpError(status, cat(args...));
}

struct DetectRequest {
  std::string image;  // encoded PNG/JPEG/BMP bytes
  std::string prompt;
  std::optional<float> box_threshold, text_threshold;
};

// multipart/form-data (fields image (a file), prompt, box_threshold, text_threshold) or
// application/json ({"image": base64, "prompt", "box_threshold", "text_threshold"}).
// Checks presence and types only; the prompt's and the image's content are checked later.
DetectRequest parse_detect_request(const httplib::Request& req);

// Standard base64 (RFC 4648), padding optional, whitespace ignored; a "data:...;base64,"
// prefix is skipped. Fails naming the offending position.
std::string base64_decode(const std::string& text);
std::string base64_encode(const std::string& bytes);

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
