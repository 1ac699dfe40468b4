// The .npy reader: header dict (descr, fortran_order, shape), versions 1-3, data size.
#include "fuzz_util.h"
#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    vlrt::Tensor t = vlrt::parse_npy(vlrt::fuzz::bytes_of(data, size), "fuzz.npy");
    (void)t.nbytes();
  } catch (const vlrt::Error&) {
  }
  return 0;
}
