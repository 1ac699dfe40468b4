// The KServe v2 inference request parser: a JSON body, or (when the first byte is odd) a JSON
// header of the length the next two bytes give followed by binary tensor data, as Triton's binary
// extension sends it with Inference-Header-Content-Length.
#include "fuzz_util.h"
#include "serve/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body = vlrt::fuzz::bytes_of(data, size);
  size_t json_length = std::string::npos;
  if (size >= 3 && data[0] & 1) {
    json_length = size_t(data[1]) | size_t(data[2]) << 8;
    body.remove_prefix(3);
  } else if (size >= 1) {
    body.remove_prefix(1);
  }
  try {
    vlrt::serve::InferRequest request = vlrt::serve::parse_infer_request(body, json_length);
    vlrt::serve::check_output_names(request, {"output"});
  } catch (const vlrt::Error&) {
  }
  return 0;
}
