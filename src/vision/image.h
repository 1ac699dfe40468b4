// Images in, model input out: decode (PNG/JPEG/BMP/GIF/WebP/TIFF), EXIF orientation, the DETR-family
// aspect-keeping resize (PIL bilinear, antialiased), PIL's bicubic resize and ImageNet normalization; PNG out.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace vlrt::vision {

// 8-bit RGB, rows top to bottom, pixels interleaved.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

// Images above this many pixels are refused before decoding (a 50000x50000 header
// would need 7.5 GB).
constexpr int64_t kDefaultMaxPixels = 64'000'000;

enum class ImageFormat { unknown, png, jpeg, bmp, gif, webp, tiff };

// The format of encoded bytes by their signature (magic bytes), whatever the file's name.
ImageFormat image_format(const std::string& bytes);
// Reads the first bytes of a file: true when they are the signature of a format decode_image reads.
bool looks_like_image(const std::string& path);

// Decodes PNG, JPEG, BMP, GIF (its first frame), WebP (still) or TIFF (its first page),
// told apart by content; JPEG EXIF orientation is applied. `what` names the source in
// errors: not an image, truncated, too many pixels, corrupt data.
Image decode_image(const std::string& bytes, const std::string& what, int64_t max_pixels = kDefaultMaxPixels);
Image load_image(const std::string& path, int64_t max_pixels = kDefaultMaxPixels);

// The EXIF orientation tag (1..8) of a JPEG, 1 when absent or unreadable.
int jpeg_orientation(const std::string& bytes);
Image apply_orientation(const Image& img, int orientation);

struct ResizeOptions {
  int short_side = 800;  // the reference resizes the short side to 800 ...
  int max_side = 1333;   // ... unless the long side would exceed 1333
  int fixed_width = 0;   // > 0: exactly this size (exports with static shapes)
  int fixed_height = 0;
};

// Output (width, height) as DETR's and GroundingDINO's RandomResize compute it.
std::pair<int, int> target_size(int width, int height, const ResizeOptions& o);

// PIL's bilinear resize (Image.resize, BILINEAR with its antialiasing filter
// support, 8-bit fixed-point arithmetic), so pixels match the reference exactly.
Image resize_bilinear(const Image& img, int width, int height);
// PIL's bicubic resize (BICUBIC: Keys' cubic, a = -0.5, support 2, the same antialiasing and
// fixed-point arithmetic), as Qwen2-VL's image processor resizes.
Image resize_bicubic(const Image& img, int width, int height);

// float32 [B,3,H,W]: (pixel/255 - mean) / std with ImageNet mean and std; all
// images must have the same size.
Tensor normalize_images(const std::vector<const Image*>& images);

// PNG encoding of an image.
std::string encode_png(const Image& img);

}  // namespace vlrt::vision
