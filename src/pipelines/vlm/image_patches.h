// Qwen2-VL / Qwen2.5-VL image preprocessing (Qwen2VLImageProcessor) and the vision tower's
// index inputs (rot_pos_emb ids, cu_seqlens attention blocks, Qwen2.5's windows), so that
// vision.onnx gets exactly what the reference computes in Python.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "vision/image.h"

namespace vlrt::vlm {

// preprocessor_config.json's values; the defaults are Qwen2VLImageProcessor's (CLIP mean/std).
struct PatchConfig {
  int patch_size = 14;
  int merge_size = 2;
  int temporal_patch_size = 2;
  int64_t min_pixels = 56 * 56;
  int64_t max_pixels = 28 * 28 * 1280;
  double rescale_factor = 1.0 / 255.0;
  std::array<float, 3> image_mean = {0.48145466f, 0.4578275f, 0.40821073f};
  std::array<float, 3> image_std = {0.26862954f, 0.26130258f, 0.27577711f};
};

// An image's patch grid: frames (after temporal merging), rows and columns of patches.
struct Grid {
  int64_t t = 1, h = 0, w = 0;
  int64_t patches() const { return t * h * w; }
  bool operator==(const Grid&) const = default;
};

// The reference's smart_resize: (height, width) divisible by `factor`, the pixel count within
// [min_pixels, max_pixels], the aspect ratio kept as closely as possible. Refuses a side
// shorter than `factor` and an aspect ratio over 200, as the reference does.
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor = 28,
                                         int64_t min_pixels = 56 * 56, int64_t max_pixels = 28 * 28 * 1280);

// The grid an image gets (smart_resize's size in patches), without resizing it.
Grid image_grid(const vision::Image& image, const PatchConfig& config = {});

// pixel_values f32[sum of t*h*w, C*temporal_patch_size*patch*patch] and each image's grid.
struct ImagePatches {
  Tensor pixel_values;
  std::vector<Grid> grids;
};

// Each image as Qwen2VLImageProcessor: bicubic resize to smart_resize's size, rescale,
// normalize, the frame repeated temporal_patch_size times, patches in the reference's
// merge-block order; several images are concatenated along rows.
ImagePatches image_patches(const std::vector<const vision::Image*>& images, const PatchConfig& config = {});

// The vision tower's geometry. window_size > 0 (Qwen2.5-VL) adds the window inputs.
struct VisionIndexConfig {
  int merge_size = 2;
  int patch_size = 14;
  int window_size = 0;
};

// vision.onnx's index inputs for the images' grids (Np = total patches):
//   rotary_pos_ids      i64[Np,2]  each patch's (row, column), rot_pos_emb's order
//   attention_bias      f32[Np,Np] 0 within a frame, lowest float across (cu_seqlens blocks)
// with window_size > 0 also
//   window_index         i64[Np/merge²] get_window_index's order of merge blocks
//   reverse_window_index i64[Np/merge²] its inverse (argsort)
//   window_attention_bias f32[Np,Np] 0 within a window, in window order (cu_window_seqlens)
struct VisionIndices {
  Tensor rotary_pos_ids, attention_bias;
  Tensor window_index, reverse_window_index, window_attention_bias;
};
VisionIndices vision_indices(const std::vector<Grid>& grids, const VisionIndexConfig& config);

}  // namespace vlrt::vlm
