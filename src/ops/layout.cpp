// vlrt's channel-blocked layout ops (src/ops/layout_semantics.h describes the layout), written by
// the layout pass (src/passes/conv_layout.cpp); never in a model file. Exactly:
//
// vlrt.BlockedConv(X, W, B?, Z?) -> Y
//   com.microsoft FusedConv (act(Conv(X, W, B) + Z), the same attributes) with X, Z and Y each
//   stored plain or channel-blocked: attributes src_block, sum_block, dst_block (0 = plain NCHW,
//   b > 0 = blocks of b channels). W and B are as Conv's, except that W may also be float16 or
//   bfloat16 (a weight stored in half precision, read as its float32 values). Two-dimensional
//   convolutions only.
//
// vlrt.FromChannelBlocks(X) -> Y
//   The plain [N, channels, spatial...] tensor of a blocked X. Attributes block, channels.
#include "ops/layout_semantics.h"

#include "ops/contrib_semantics.h"
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

Shape channel_blocked_shape(const Shape& logical, int64_t block) {
  VLRT_CHECK(logical.size() >= 3 && block > 0, "a channel-blocked tensor needs rank >= 3 and a block, got ",
             shape_str(logical), " in blocks of ", block);
  Shape s = logical;
  s[1] = (logical[1] + block - 1) / block;
  s.push_back(block);
  return s;
}

Shape channel_logical_shape(const Shape& blocked, int64_t block, int64_t channels) {
  VLRT_CHECK(blocked.size() >= 4 && blocked.back() == block,
             "a tensor in blocks of ", block, " channels has shape [N, C/", block, ", spatial..., ", block,
             "], got ", shape_str(blocked));
  VLRT_CHECK(blocked[1] == (channels + block - 1) / block, "a tensor of ", channels, " channels in blocks of ",
             block, " has ", (channels + block - 1) / block, " blocks, got ", shape_str(blocked));
  Shape s(blocked.begin(), blocked.end() - 1);
  s[1] = channels;
  return s;
}

ConvBlocks conv_blocks(const Node& n) {
  ConvBlocks b{n.attr_int("src_block", 0), n.attr_int("sum_block", 0), n.attr_int("dst_block", 0)};
  VLRT_CHECK(b.src >= 0 && b.sum >= 0 && b.dst >= 0, "src_block, sum_block and dst_block must be >= 0");
  return b;
}

namespace {

void infer_blocked_conv(InferContext& ctx) {
  ConvBlocks blocks = conv_blocks(ctx.node);
  VLRT_CHECK(ctx.input_dtype(0) == DType::f32, "X must be float32, got ", dtype_name(ctx.input_dtype(0)));
  const Shape& w = ctx.input_shape(1);
  VLRT_CHECK(w.size() == 4, "W must have rank 4 (a two-dimensional convolution), got ", shape_str(w));
  int64_t in_channels = w[1] * ctx.node.attr_int("group", 1), out_channels = w[0];
  ValueInfo x{DType::f32, true,
              blocks.src ? channel_logical_shape(ctx.input_shape(0), blocks.src, in_channels) : ctx.input_shape(0),
              {}};
  DType wt = ctx.input_dtype(1);
  VLRT_CHECK(wt == DType::f32 || dtype_is_half(wt),
             "W must be float32, float16 or bfloat16, got ", dtype_name(wt));
  ValueInfo w_info{DType::f32, true, w, {}};  // a half-precision W is read as its float32 values
  std::vector<const ValueInfo*> conv_inputs{&x, &w_info};
  for (size_t i = 2; i < std::min<size_t>(ctx.input_count(), 3); i++)
    conv_inputs.push_back(ctx.has_input(i) ? &ctx.input_info(i) : nullptr);
  InferContext inner(ctx.node, ctx.opset, conv_inputs);
  find_schema("com.microsoft", "FusedConv")->infer(inner);
  Shape y = inner.outputs[0].shape;
  if (ctx.has_input(3)) {
    Shape z = blocks.sum ? channel_logical_shape(ctx.input_shape(3), blocks.sum, out_channels) : ctx.input_shape(3);
    VLRT_CHECK(ctx.input_dtype(3) == DType::f32 && z == y, "Z must be float32 of the output's shape ",
               shape_str(y), ", got ", shape_str(z));
  }
  ctx.set_output(0, DType::f32, blocks.dst ? channel_blocked_shape(y, blocks.dst) : y);
}

void infer_from_channel_blocks(InferContext& ctx) {
  int64_t block = ctx.node.attr_int("block", 0), channels = ctx.node.attr_int("channels", 0);
  VLRT_CHECK(block > 0 && channels > 0, "the attributes block and channels must be > 0");
  ctx.set_output(0, ctx.input_dtype(0), channel_logical_shape(ctx.input_shape(0), block, channels));
}

}  // namespace

void register_layout_schemas(SchemaTable& t) {
  t["vlrt.BlockedConv"] = {infer_blocked_conv, 2, 4};
  t["vlrt.FromChannelBlocks"] = {infer_from_channel_blocks, 1, 1};
}

}  // namespace vlrt
