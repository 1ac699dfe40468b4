// The model manifest reader (model, files: path, size, sha256).
#include "fuzz_util.h"
#include "integrity/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    vlrt::Manifest m = vlrt::read_manifest(vlrt::fuzz::write_scratch("model.manifest.json",
                                                                     vlrt::fuzz::bytes_of(data, size)));
    (void)m.files.size();
  } catch (const vlrt::Error&) {
  }
  return 0;
}
