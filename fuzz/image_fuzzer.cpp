// The image decoders (PNG, JPEG, BMP, GIF, WebP, TIFF by their signature) and the JPEG EXIF
// orientation reader. The pixel limit is low so that huge declared sizes are refused, as the
// server refuses them, instead of being allocated.
#include "fuzz_util.h"
#include "vision/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(vlrt::fuzz::bytes_of(data, size));
  int orientation = vlrt::vision::jpeg_orientation(bytes);
  try {
    vlrt::vision::Image img = vlrt::vision::decode_image(bytes, "fuzz image", 1 << 20);
    (void)vlrt::vision::apply_orientation(img, orientation);
  } catch (const vlrt::Error&) {
  }
  return 0;
}
