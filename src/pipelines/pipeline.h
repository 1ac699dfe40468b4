// A pipeline puts a model to one use: it turns requests into model inputs and the model's
// outputs into answers, around one Session. `vlrt serve`, `vlrt label` and `vlrt detect`
// run any registered pipeline through this interface; each pipeline lives in its own folder
// (pipelines/<name>/) and is listed once in pipelines/registry.cpp.
//
// A request's way: parse (the HTTP body's fields, presence and types) and preprocess
// (decode, resize, normalize, tokenize) on the HTTP thread; run with the other queued
// requests of the same batch key on the worker thread; postprocess and respond on the
// HTTP thread again. The command line makes its requests with query() and request().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "exec/session.h"
#include "pipelines/ontology.h"
#include "vision/detection.h"
#include "vision/image.h"

namespace vlrt {

// A request refused: the HTTP status and the message of the {"error": ...} body.
class RequestError : public Error {
 public:
  RequestError(int status, const std::string& msg) : Error(msg), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

template <class... Args>
[[noreturn]] void refuse(int status, const Args&... args) {
  throw RequestError(status, cat(args...));
}

// An HTTP request's body as the server hands it over; views into the request, valid while
// it is parsed.
struct RequestBody {
  bool multipart = false;                                            // multipart/form-data
  std::vector<std::pair<std::string_view, std::string_view>> parts;  // multipart: name, content
  std::string_view content_type;                                     // otherwise
  std::string_view body;

  bool has_part(std::string_view name) const;
};

// The body as a JSON object; 400 when it is empty, not JSON, not an object or nested
// deeper than 64 levels (refused while parsing, so nothing recurses on a client's depth).
nlohmann::json parse_json_object(std::string_view body);
// A base64 field of a JSON body; 400 naming the field when it is not base64.
std::string decode_base64_field(const std::string& field, const std::string& text);

// What a server lets one request hold.
struct RequestLimits {
  size_t max_prompt_bytes = 2048;
  int64_t max_image_pixels = vision::kDefaultMaxPixels;
};

// Input name -> dtype and shape: what a batch is planned for.
using Signature = std::map<std::string, std::pair<DType, Shape>>;

// One request on its way through a pipeline. Each pipeline derives its own, which carries
// the parsed fields, the preprocessed inputs, its rows of the batch's outputs, the result.
struct Request {
  virtual ~Request() = default;
  std::string batch_key;  // set when preprocessed: requests with equal keys can share a batch
};

// What a command-line run asks of every image (the prompt, encoded once).
struct Query {
  virtual ~Query() = default;
  std::string text;                     // as the model sees it ("person . bicycle .")
  std::string warning;                  // "" or what preparing it changed (phrases dropped)
  std::vector<std::string> categories;  // what a detection's category indexes: phrases or class names
};

// An image's answer as `vlrt detect` prints it and `vlrt label` writes it.
struct Record {
  int width = 0, height = 0;              // the image
  int input_width = 0, input_height = 0;  // the model's input
  std::vector<vision::Detection> detections;
};

// Settings over the model's metadata defaults, named as the metadata keys without "vlrt."
// ("box_threshold", "short_side", ...); a pipeline fails on a name it does not know.
struct PipelineConfig {
  SessionOptions session;
  std::string vocab;  // a pipeline with a tokenizer: its vocab ("": the model's, beside it)
  std::map<std::string, double> settings;
};

class Pipeline {
 public:
  virtual ~Pipeline() = default;

  virtual std::string name() const = 0;
  virtual Session& session() = 0;
  // The HTTP route its requests are posted to ("/v1/detect").
  virtual std::string endpoint() const = 0;

  // HTTP threads: the body's fields, their presence and types; RequestError otherwise.
  virtual std::unique_ptr<Request> parse(const RequestBody& body) const = 0;
  // HTTP threads: checks the fields' content, decodes, resizes, normalizes, tokenizes and
  // sets the batch key; RequestError (4xx) on bad content.
  virtual void preprocess(Request& request, const RequestLimits& limits) const = 0;
  // The model inputs' dtypes and shapes for a batch of n requests like this one.
  virtual Signature signature(const Request& request, int64_t n) const = 0;
  // Worker thread: runs the model once for preprocessed requests of one batch key; each
  // keeps its rows of the outputs (and lets go of its inputs). Fails on a model error.
  virtual void run(const std::vector<Request*>& batch) = 0;
  // HTTP threads: the request's result from its rows.
  virtual void postprocess(Request& request) const = 0;
  // The response body for a postprocessed request; the server adds "timing" and "batch_size".
  virtual nlohmann::json response(const Request& request) const = 0;
  // A preprocessed request a server runs before it takes clients (a gray image).
  virtual std::unique_ptr<Request> warm_up_request() const = 0;

  // Command line: the prompt prepared once for every image; fails saying what is wrong.
  virtual std::shared_ptr<const Query> query(const std::string& prompt) const = 0;
  // The same for the prompt an ontology's phrases make: its detections are labelled with
  // class names, and its categories are the ontology's classes.
  virtual std::shared_ptr<const Query> query(const Ontology& classes) const = 0;
  // A preprocessed request for one image of the run.
  virtual std::unique_ptr<Request> request(const std::shared_ptr<const Query>& query,
                                           const vision::Image& image) const = 0;
  // A postprocessed request's detections.
  virtual Record record(const Request& request) const = 0;
  // What a resumed `vlrt label` must find unchanged: the query and the settings in effect.
  virtual nlohmann::json settings(const Query& query) const = 0;

  // The largest batch of requests like this one that the memory plan allows (>= 1).
  int64_t max_batch(const Request& request);
};

using PipelineFactory = std::function<std::unique_ptr<Pipeline>(Model model, const PipelineConfig& config)>;

struct PipelineInfo {
  std::string name;
  std::string summary;  // one line for --help
  PipelineFactory make;
  // The shipped model used when none is given; fails saying what to pass. Empty: none.
  std::function<std::string()> default_model;
};

// Every pipeline, in the order pipelines/registry.cpp lists them.
const std::vector<PipelineInfo>& pipelines();
// Fails listing the registered names.
const PipelineInfo& find_pipeline(const std::string& name);

}  // namespace vlrt
