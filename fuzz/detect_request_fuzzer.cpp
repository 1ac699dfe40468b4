// The /v1/detect request parser over both wire forms. Byte 0 even: the rest is a JSON body (with
// byte 0 >= 128, under a Content-Type other than JSON). Odd: multipart/form-data fields as
// httplib hands them over, each "name\x01content" and separated by "\x00".
#include "fuzz_util.h"
#include "pipelines/grounding/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest = vlrt::fuzz::bytes_of(data + 1, size - 1);
  vlrt::RequestBody body;
  if (data[0] & 1) {
    body.multipart = true;
    while (!rest.empty()) {
      std::string_view field = rest.substr(0, rest.find('\0'));
      rest.remove_prefix(std::min(rest.size(), field.size() + 1));
      size_t split = field.find('\x01');
      body.parts.emplace_back(field.substr(0, split), split == field.npos ? "" : field.substr(split + 1));
    }
  } else {
    body.content_type = data[0] >= 128 ? "text/plain" : "application/json";
    body.body = rest;
  }
  try {
    (void)vlrt::grounding::parse_detect_request(body);
  } catch (const vlrt::Error&) {
  }
  return 0;
}
