// Decoders for the formats beyond stb_image: WebP (still images) and TIFF (the first page).
// decode_image picks one by the bytes' signature; `what` names the source in errors.
#pragma once

#include <cstdint>
#include <string>

#include "vision/image.h"

namespace vlrt::vision {

Image decode_webp(const std::string& bytes, const std::string& what, int64_t max_pixels);
Image decode_tiff(const std::string& bytes, const std::string& what, int64_t max_pixels);

// Refuses an image of w x h pixels (as its header declares them) with none or more than max_pixels.
void check_pixels(const std::string& what, int64_t w, int64_t h, int64_t max_pixels);

}  // namespace vlrt::vision
