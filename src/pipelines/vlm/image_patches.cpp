#include "pipelines/vlm/image_patches.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace vlrt::vlm {

std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                         int64_t max_pixels) {
  VLRT_CHECK(height >= factor && width >= factor, "image of ", width, "x", height,
             " is too small: both sides must be at least ", factor,
             " pixels (the patch size times the merge size)");
  double ratio = double(std::max(height, width)) / double(std::min(height, width));
  VLRT_CHECK(ratio <= 200, "image of ", width, "x", height, " has an aspect ratio of ", ratio,
             ": it must be at most 200; crop or pad it first");
  // Python's round() rounds halves to even, as rint does in the default rounding mode.
  int64_t h_bar = int64_t(std::rint(double(height) / double(factor))) * factor;
  int64_t w_bar = int64_t(std::rint(double(width) / double(factor))) * factor;
  if (h_bar * w_bar > max_pixels) {
    double beta = std::sqrt(double(height * width) / double(max_pixels));
    h_bar = int64_t(std::floor(double(height) / beta / double(factor))) * factor;
    w_bar = int64_t(std::floor(double(width) / beta / double(factor))) * factor;
  } else if (h_bar * w_bar < min_pixels) {
    double beta = std::sqrt(double(min_pixels) / double(height * width));
    h_bar = int64_t(std::ceil(double(height) * beta / double(factor))) * factor;
    w_bar = int64_t(std::ceil(double(width) * beta / double(factor))) * factor;
  }
  return {h_bar, w_bar};
}

namespace {

// Writes one resized image's rows of pixel_values: row (block_h, block_w, merge_h, merge_w),
// column (channel, frame, patch_y, patch_x), as the reference's reshape and transpose order them.
void write_patches(const vision::Image& img, const PatchConfig& c, float* out) {
  const int p = c.patch_size, m = c.merge_size, tp = c.temporal_patch_size;
  const int64_t gh = img.height / p, gw = img.width / p;
  std::vector<float> plane[3];
  for (int ch = 0; ch < 3; ch++) {
    plane[ch].resize(size_t(img.width) * img.height);
    for (size_t i = 0; i < plane[ch].size(); i++) {
      float scaled = float(double(img.rgb[i * 3 + ch]) * c.rescale_factor);
      plane[ch][i] = (scaled - c.image_mean[ch]) / c.image_std[ch];
    }
  }
  for (int64_t bh = 0; bh < gh / m; bh++)
    for (int64_t bw = 0; bw < gw / m; bw++)
      for (int mh = 0; mh < m; mh++)
        for (int mw = 0; mw < m; mw++) {
          const int64_t y0 = (bh * m + mh) * p, x0 = (bw * m + mw) * p;
          for (int ch = 0; ch < 3; ch++)
            for (int f = 0; f < tp; f++)  // a still image: every frame is the same
              for (int py = 0; py < p; py++) {
                const float* src = &plane[ch][size_t(y0 + py) * img.width + x0];
                out = std::copy(src, src + p, out);
              }
        }
}

}  // namespace

Grid image_grid(const vision::Image& image, const PatchConfig& c) {
  auto [h, w] = smart_resize(image.height, image.width, int64_t(c.patch_size) * c.merge_size, c.min_pixels,
                             c.max_pixels);
  return {1, h / c.patch_size, w / c.patch_size};
}

ImagePatches image_patches(const std::vector<const vision::Image*>& images, const PatchConfig& c) {
  VLRT_CHECK(!images.empty(), "no images to preprocess");
  std::vector<vision::Image> resized;
  ImagePatches r;
  int64_t rows = 0;
  for (const vision::Image* img : images) {
    r.grids.push_back(image_grid(*img, c));
    int64_t h = r.grids.back().h * c.patch_size, w = r.grids.back().w * c.patch_size;
    resized.push_back(h == img->height && w == img->width ? *img
                                                          : vision::resize_bicubic(*img, int(w), int(h)));
    rows += r.grids.back().patches();
  }
  const int64_t cols = int64_t(3) * c.temporal_patch_size * c.patch_size * c.patch_size;
  r.pixel_values = Tensor(DType::f32, {rows, cols});
  float* out = r.pixel_values.data<float>();
  for (size_t i = 0; i < resized.size(); i++) {
    write_patches(resized[i], c, out);
    out += r.grids[i].patches() * cols;
  }
  return r;
}

namespace {

constexpr float kMasked = std::numeric_limits<float>::lowest();

// f32[n,n]: 0 inside each [cu[i-1], cu[i]) square block, kMasked elsewhere, as the reference's
// eager attention builds its mask from cu_seqlens.
Tensor block_bias(const std::vector<int64_t>& cu, int64_t n) {
  Tensor t(DType::f32, {n, n});
  float* b = t.data<float>();
  std::fill(b, b + n * n, kMasked);
  for (size_t i = 1; i < cu.size(); i++)
    for (int64_t y = cu[i - 1]; y < cu[i]; y++) std::fill(b + y * n + cu[i - 1], b + y * n + cu[i], 0.0f);
  return t;
}

Tensor rotary_pos_ids(const std::vector<Grid>& grids, int64_t total, int m) {
  Tensor t(DType::i64, {total, 2});
  int64_t* ids = t.data<int64_t>();
  for (const Grid& g : grids)
    for (int64_t f = 0; f < g.t; f++)
      for (int64_t bh = 0; bh < g.h / m; bh++)
        for (int64_t bw = 0; bw < g.w / m; bw++)
          for (int mh = 0; mh < m; mh++)
            for (int mw = 0; mw < m; mw++) {
              *ids++ = bh * m + mh;
              *ids++ = bw * m + mw;
            }
  return t;
}

// get_window_index: merge blocks reordered window by window (windows of window_size pixels,
// each frame's blocks padded to whole windows), and the windows' cumulative patch counts.
void window_index(const std::vector<Grid>& grids, const VisionIndexConfig& c, std::vector<int64_t>& index,
                  std::vector<int64_t>& cu_window_seqlens) {
  const int64_t vws = c.window_size / c.merge_size / c.patch_size,
                unit = int64_t(c.merge_size) * c.merge_size;
  VLRT_CHECK(vws > 0, "window_size ", c.window_size, " is smaller than a merge block of ", c.merge_size, "x",
             c.merge_size, " patches of ", c.patch_size, " pixels");
  cu_window_seqlens = {0};
  int64_t base = 0;
  for (const Grid& g : grids) {
    const int64_t lh = g.h / c.merge_size, lw = g.w / c.merge_size;
    const int64_t nwh = (lh + vws - lh % vws) / vws, nww = (lw + vws - lw % vws) / vws;
    for (int64_t f = 0; f < g.t; f++)
      for (int64_t wy = 0; wy < nwh; wy++)
        for (int64_t wx = 0; wx < nww; wx++) {
          int64_t count = 0;
          for (int64_t y = wy * vws; y < std::min((wy + 1) * vws, lh); y++)
            for (int64_t x = wx * vws; x < std::min((wx + 1) * vws, lw); x++, count++)
              index.push_back(base + (f * lh + y) * lw + x);
          cu_window_seqlens.push_back(cu_window_seqlens.back() + count * unit);
        }
    base += g.t * lh * lw;
  }
  // The reference drops the repeats that empty windows leave (torch.unique_consecutive).
  cu_window_seqlens.erase(std::unique(cu_window_seqlens.begin(), cu_window_seqlens.end()),
                          cu_window_seqlens.end());
}

}  // namespace

VisionIndices vision_indices(const std::vector<Grid>& grids, const VisionIndexConfig& c) {
  VLRT_CHECK(!grids.empty(), "no image grids for the vision indices");
  int64_t total = 0;
  std::vector<int64_t> cu = {0};
  for (const Grid& g : grids) {
    VLRT_CHECK(g.t > 0 && g.h > 0 && g.w > 0 && g.h % c.merge_size == 0 && g.w % c.merge_size == 0,
               "image grid ", g.t, "x", g.h, "x", g.w, " is not whole merge blocks of ", c.merge_size, "x",
               c.merge_size);
    for (int64_t f = 0; f < g.t; f++) cu.push_back(cu.back() + g.h * g.w);
    total += g.patches();
  }
  VisionIndices r;
  r.rotary_pos_ids = rotary_pos_ids(grids, total, c.merge_size);
  r.attention_bias = block_bias(cu, total);
  if (c.window_size > 0) {
    std::vector<int64_t> index, cu_window;
    window_index(grids, c, index, cu_window);
    const int64_t blocks = int64_t(index.size());
    r.window_index = Tensor(DType::i64, {blocks});
    r.reverse_window_index = Tensor(DType::i64, {blocks});
    std::copy(index.begin(), index.end(), r.window_index.data<int64_t>());
    for (int64_t i = 0; i < blocks; i++) r.reverse_window_index.data<int64_t>()[index[size_t(i)]] = i;
    r.window_attention_bias = block_bias(cu_window, total);
  }
  return r;
}

}  // namespace vlrt::vlm
