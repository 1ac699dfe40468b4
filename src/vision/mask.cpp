#include "vision/mask.h"

#include <algorithm>

#include "core/error.h"

namespace vlrt::vision {

int64_t mask_area(const Mask& mask) { return std::count(mask.pixels.begin(), mask.pixels.end(), uint8_t(1)); }

MaskBox mask_box(const Mask& mask) {
  MaskBox b{mask.width, mask.height, 0, 0};
  for (int y = 0; y < mask.height; y++)
    for (int x = 0; x < mask.width; x++)
      if (mask.pixels[size_t(y) * mask.width + x]) {
        b.x1 = std::min(b.x1, x), b.y1 = std::min(b.y1, y);
        b.x2 = std::max(b.x2, x + 1), b.y2 = std::max(b.y2, y + 1);
      }
  return b.x2 > 0 ? b : MaskBox{};
}

std::vector<int64_t> rle_counts(const Mask& mask) {
  std::vector<int64_t> counts;
  uint8_t current = 0;
  int64_t run = 0;
  for (int x = 0; x < mask.width; x++)
    for (int y = 0; y < mask.height; y++) {
      uint8_t v = mask.pixels[size_t(y) * mask.width + x] ? 1 : 0;
      if (v != current) {
        counts.push_back(run);
        current = v;
        run = 0;
      }
      run++;
    }
  counts.push_back(run);
  return counts;
}

Mask mask_from_rle(int width, int height, const std::vector<int64_t>& counts) {
  Mask mask{width, height, std::vector<uint8_t>(size_t(width) * size_t(height), 0)};
  int64_t total = int64_t(width) * height, at = 0;
  for (size_t i = 0; i < counts.size(); i++) {
    VLRT_CHECK(counts[i] >= 0 && counts[i] <= total - at, "RLE counts of a ", width, "x", height,
               " mask run past its ", total, " pixels (run ", i, " is ", counts[i], ")");
    if (i % 2)
      for (int64_t p = at; p < at + counts[i]; p++) mask.pixels[size_t(p % height) * size_t(width) + size_t(p / height)] = 1;
    at += counts[i];
  }
  VLRT_CHECK(at == total, "RLE counts of a ", width, "x", height, " mask cover ", at, " pixels, expected ", total);
  return mask;
}

}  // namespace vlrt::vision
