// The decoder's 3-D M-RoPE position ids (temporal, height, width) for prompts with images:
// get_rope_index of Qwen2-VL and Qwen2.5-VL (their image paths are the same), and the
// positions of the tokens decoded after the prompt.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "pipelines/vlm/image_patches.h"

namespace vlrt::vlm {

// config.json's token ids and the vision tower's merge size.
struct RopeConfig {
  int64_t image_token_id = 151655;
  int64_t video_token_id = 151656;
  int64_t vision_start_token_id = 151652;
  int merge_size = 2;
};

struct RopeIndex {
  Tensor position_ids;          // i64[3,B,S]; padding positions are 1, as the reference leaves them
  std::vector<int64_t> deltas;  // per row: max position + 1 - S
};

// input_ids i64[B,S] and attention_mask i64[B,S] (1: token, 0: padding, left or right; an
// empty Tensor means all ones). `grids` are the images' patch grids in the order their
// <|vision_start|><|image_pad|>… runs appear, row after row. Text continues after each
// image at the image's largest position + 1.
RopeIndex rope_index(const Tensor& input_ids, const Tensor& attention_mask, const std::vector<Grid>& grids,
                     const RopeConfig& config = {});

// i64[3,B,S]: the next S tokens' positions after `cache_length` cached ones, cache_length +
// delta + s on all three axes.
Tensor decode_position_ids(const std::vector<int64_t>& deltas, int64_t cache_length, int64_t seq_length = 1);

}  // namespace vlrt::vlm
