#include "pipelines/vlm/rope_index.h"

#include <algorithm>

namespace vlrt::vlm {

namespace {

// One row's positions (3 axes, its unpadded tokens), as get_rope_index's loop builds them.
struct RowPositions {
  std::vector<int64_t> axis[3];
  int64_t max = -1;
  void push(int64_t t, int64_t h, int64_t w) {
    axis[0].push_back(t);
    axis[1].push_back(h);
    axis[2].push_back(w);
    max = std::max({max, t, h, w});
  }
  void push_text(int64_t count) {
    const int64_t start = max + 1;
    for (int64_t k = 0; k < count; k++) push(start + k, start + k, start + k);
  }
};

RowPositions row_positions(const std::vector<int64_t>& tokens, const std::vector<Grid>& grids,
                           size_t& next_grid, const RopeConfig& c, int64_t row) {
  const size_t n = tokens.size();
  int64_t images = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    if (tokens[i] != c.vision_start_token_id) continue;
    VLRT_CHECK(tokens[i + 1] != c.video_token_id, "row ", row,
               " holds a video (<|video_pad|> after <|vision_start|>", " at token ", i,
               "): only images are supported");
    images += tokens[i + 1] == c.image_token_id;
  }
  RowPositions pos;
  size_t st = 0;
  for (int64_t k = 0; k < images; k++) {
    const size_t ed = size_t(std::find(tokens.begin() + st, tokens.end(), c.image_token_id) - tokens.begin());
    VLRT_CHECK(ed < n, "row ", row, ": image ", k + 1, " of ", images,
               " has no <|image_pad|> token after token ", st);
    VLRT_CHECK(next_grid < grids.size(), "row ", row, " holds more images than the ", grids.size(),
               " image grids given");
    const Grid& g = grids[next_grid++];
    const int64_t gh = g.h / c.merge_size, gw = g.w / c.merge_size;
    pos.push_text(int64_t(ed - st));
    const int64_t base = pos.max + 1;
    for (int64_t t = 0; t < g.t; t++)
      for (int64_t y = 0; y < gh; y++)
        for (int64_t x = 0; x < gw; x++) pos.push(base + t, base + y, base + x);
    st = ed + size_t(g.t * gh * gw);
  }
  if (st < n) pos.push_text(int64_t(n - st));
  VLRT_CHECK(pos.axis[0].size() == n, "row ", row, ": its images' grids need ", pos.axis[0].size(),
             " positions but the row has ", n, " tokens: the <|image_pad|> runs must hold t*h*w/",
             c.merge_size * c.merge_size, " tokens each");
  return pos;
}

}  // namespace

RopeIndex rope_index(const Tensor& input_ids, const Tensor& attention_mask, const std::vector<Grid>& grids,
                     const RopeConfig& c) {
  VLRT_CHECK(input_ids.dtype() == DType::i64 && input_ids.shape().size() == 2,
             "input_ids must be i64[B,S], got ", dtype_name(input_ids.dtype()), shape_str(input_ids.shape()));
  const int64_t batch = input_ids.shape()[0], seq = input_ids.shape()[1];
  const bool masked = attention_mask.numel() > 0;
  VLRT_CHECK(!masked || (attention_mask.dtype() == DType::i64 && attention_mask.shape() == input_ids.shape()),
             "attention_mask must be i64", shape_str(input_ids.shape()), " like input_ids, got ",
             dtype_name(attention_mask.dtype()), shape_str(attention_mask.shape()));
  const int64_t* ids = input_ids.data<int64_t>();
  const int64_t* mask = masked ? attention_mask.data<int64_t>() : nullptr;
  RopeIndex r;
  r.position_ids = Tensor(DType::i64, {3, batch, seq});
  int64_t* out = r.position_ids.data<int64_t>();
  std::fill(out, out + 3 * batch * seq, 1);
  size_t next_grid = 0;
  for (int64_t b = 0; b < batch; b++) {
    std::vector<int64_t> tokens;
    for (int64_t s = 0; s < seq; s++)
      if (!mask || mask[b * seq + s] == 1) tokens.push_back(ids[b * seq + s]);
    VLRT_CHECK(!tokens.empty(), "row ", b, " of the batch is all padding");
    RowPositions pos = row_positions(tokens, grids, next_grid, c, b);
    for (int axis = 0; axis < 3; axis++) {
      size_t k = 0;
      for (int64_t s = 0; s < seq; s++)
        if (!mask || mask[b * seq + s] == 1) out[(axis * batch + b) * seq + s] = pos.axis[axis][k++];
    }
    r.deltas.push_back(pos.max + 1 - seq);
  }
  return r;
}

Tensor decode_position_ids(const std::vector<int64_t>& deltas, int64_t cache_length, int64_t seq_length) {
  const int64_t batch = int64_t(deltas.size());
  Tensor t(DType::i64, {3, batch, seq_length});
  int64_t* out = t.data<int64_t>();
  for (int axis = 0; axis < 3; axis++)
    for (int64_t b = 0; b < batch; b++)
      for (int64_t s = 0; s < seq_length; s++)
        out[(axis * batch + b) * seq_length + s] = cache_length + deltas[b] + s;
  return t;
}

}  // namespace vlrt::vlm
