// The JSON request bodies of the pipelines' endpoints (parse_json_object: an object, a depth limit).
#include "fuzz_util.h"
#include "pipelines/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)vlrt::parse_json_object(vlrt::fuzz::bytes_of(data, size));
  } catch (const vlrt::Error&) {
  }
  return 0;
}
