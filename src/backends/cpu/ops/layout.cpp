// CPU kernels of the channel-blocked layout ops (src/ops/layout.cpp). BlockedConv's reference
// kernel converts to the plain layout, runs FusedConv's reference kernel and converts back;
// oneDNN's kernel (backends/cpu/onednn.cpp) reads and writes the blocks directly.
#include <cstring>

#include "backends/cpu/kernel.h"
#include "ops/layout_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// Copies between a plain [N, C, spatial...] float32 tensor and its blocked form: one job per
// (n, block of channels). `to_blocks` picks the direction; the padding channels become zeros.
void convert_channel_blocks(ThreadPool& pool, const Shape& plain_shape, float* plain, float* blocked, int64_t block,
                            bool to_blocks) {
  int64_t n = plain_shape[0], c = plain_shape[1], blocks = (c + block - 1) / block, spatial = 1;
  for (size_t d = 2; d < plain_shape.size(); d++) spatial *= plain_shape[d];
  pool.parallel_for(n * blocks, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; j++) {
      int64_t b = j % blocks, c0 = b * block, width = std::min(block, c - c0);
      float* p = plain + (j / blocks * c + c0) * spatial;
      float* q = blocked + j * spatial * block;
      for (int64_t i = 0; i < spatial; i++) {
        float* row = q + i * block;
        if (to_blocks) {
          for (int64_t k = 0; k < width; k++) row[k] = p[k * spatial + i];
          for (int64_t k = width; k < block; k++) row[k] = 0.f;
        } else {
          for (int64_t k = 0; k < width; k++) p[k * spatial + i] = row[k];
        }
      }
    }
  });
}

Tensor unblocked(ThreadPool& pool, const Tensor& blocked, int64_t block, int64_t channels) {
  Tensor plain(DType::f32, channel_logical_shape(blocked.shape(), block, channels));
  convert_channel_blocks(pool, plain.shape(), plain.data<float>(), const_cast<float*>(blocked.data<float>()), block, false);
  return plain;
}

void from_channel_blocks_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  VLRT_CHECK(y.dtype() == DType::f32, "FromChannelBlocks takes float32, got ", dtype_name(y.dtype()));
  convert_channel_blocks(ctx.pool, y.shape(), y.data<float>(), const_cast<float*>(ctx.input(0).data<float>()),
                         ctx.node.attr_int("block", 0), false);
}

// act(pre(Conv(X, W, B)) + Z) through FusedConv's reference kernel, in the plain layout.
void blocked_conv_kernel(KernelContext& ctx) {
  ConvBlocks blocks = conv_blocks(ctx.node);
  const Tensor& w = ctx.input(1);
  int64_t in_channels = w.dim(1) * ctx.node.attr_int("group", 1), out_channels = w.dim(0);
  Tensor x = blocks.src ? unblocked(ctx.pool, ctx.input(0), blocks.src, in_channels) : ctx.input(0);
  std::vector<const Tensor*> inputs{&x};
  for (size_t i = 1; i < ctx.input_count(); i++) inputs.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  Tensor widened;  // weights stored in half precision, exactly as float32
  if (w.dtype() != DType::f32) {
    widened = w.converted(DType::f32);
    inputs[1] = &widened;
  }
  Tensor z;
  if (ctx.has_input(3) && blocks.sum) {
    z = unblocked(ctx.pool, ctx.input(3), blocks.sum, out_channels);
    inputs[3] = &z;
  }
  Tensor& out = ctx.output(0);
  Tensor y = blocks.dst ? Tensor(DType::f32, channel_logical_shape(out.shape(), blocks.dst, out_channels)) : out;
  KernelContext inner(ctx.node, ctx.opset, ctx.pool, inputs, {&y});
  find_cpu_kernel("com.microsoft", "FusedConv")->fn(inner);
  if (blocks.dst) convert_channel_blocks(ctx.pool, y.shape(), y.data<float>(), out.data<float>(), blocks.dst, true);
}

}  // namespace

void register_layout_kernels(CpuKernelTable& t) {
  t["vlrt.BlockedConv"] = {blocked_conv_kernel};
  t["vlrt.FromChannelBlocks"] = {from_channel_blocks_kernel};
}

}  // namespace vlrt
