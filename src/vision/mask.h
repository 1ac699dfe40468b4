// Binary masks in the pixels of an image: area, bounding box and COCO run-length encoding.
#pragma once

#include <cstdint>
#include <vector>

namespace vlrt::vision {

// Rows top to bottom; 1 inside, 0 outside.
struct Mask {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;
};

int64_t mask_area(const Mask& mask);

// The tightest box [x1, y1, x2, y2) around the mask's pixels; all zero for an empty mask.
struct MaskBox {
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};
MaskBox mask_box(const Mask& mask);

// COCO's uncompressed RLE: run lengths over the pixels in column-major order (down each
// column, columns left to right), starting with a run of zeros (0 when the first pixel is set).
std::vector<int64_t> rle_counts(const Mask& mask);
// The mask those counts encode; fails when they are negative or do not sum to width * height.
Mask mask_from_rle(int width, int height, const std::vector<int64_t>& counts);

}  // namespace vlrt::vision
