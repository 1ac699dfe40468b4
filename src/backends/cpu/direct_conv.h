// vlrt's own AVX2 convolutions for the two-dimensional float32 convolutions that the Winograd
// kernel does not take (vlrt.BlockedConv with X, Z and Y each in blocks of 8 channels or plain,
// FusedConv, Conv; any kernel size, stride, padding and dilation): the direct convolution for one
// group, the depthwise convolution for one group per channel. With them a model's convolutions
// run on the session's pool, without oneDNN's OpenMP threads.
//
// The direct convolution's filters are packed once, at prepare, into panels of 16 output
// channels (two blocks) holding, for every input block, filter row and column, the 8 input
// channels' 16 weights: [panel][in block][kh][kw][8][16]. A job computes up to 96 output pixels
// (in row order, across rows) by 16 output channels, 6 pixels at a time in the 6x16 register
// tile, the depth (blocks x kh x kw x 8) in blocks of 32 steps whose slice of the panel stays in
// L1, the partial sums waiting in Y; then one pass adds the bias and the residual and applies the
// activation. A padded or plain X is first copied into a zero-bordered blocked scratch, so that
// the tile never tests a bound; a plain Z is copied into blocks and a plain Y written from blocks
// the same way. With fewer than 8 input channels (an image's 3) a depth step takes only those,
// not 8 with zeros.
//
// The depthwise kernel reads a blocked X as it is (a plain one from the same blocked copy): each
// block of 8 channels is its own convolution, up to 8 output pixels of a row at a time; the rows
// at the top and bottom skip the filter rows outside X, the tiles at the left and right edges the
// taps outside it; at stride 1 each source pixel is loaded once per filter row, the row's filters
// held in registers.
//
// Both sum in the reference convolution's order up to the channel blocking, so they differ from
// it by rounding only; tests/backends/test_cpu_direct_conv.cpp checks them. Not under
// VLRT_REFERENCE_KERNELS, nor with VLRT_DIRECT_CONV=0 (VLRT_DEPTHWISE_CONV=0: the depthwise ones),
// where oneDNN takes the node.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/prepared_kernel.h"
#include "ops/contrib_semantics.h"

namespace vlrt {

// The direct convolution runs here (AVX2, not turned off by VLRT_DIRECT_CONV=0).
bool direct_conv_available();
// What the direct or depthwise kernel of this node would hold (bytes 0: neither takes the node).
PrepareInfo direct_conv_prepare_info(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs);
// That kernel, its filters packed; nullptr where it does not take the node.
std::unique_ptr<PreparedKernel> make_direct_conv(const Node& node, int64_t opset,
                                                 const std::vector<const ValueInfo*>& inputs);

namespace direct {

inline constexpr int64_t kChunkPixels = 96;       // output pixels (in row order) a direct job computes
inline constexpr int64_t kMaxDepthwiseRows = 16;  // filter rows the depthwise kernel takes

// An activation [batch][channels][h][w] and the blocked copy the kernel reads of it:
// [batch][blocks][hp][wp][8], X at rows top.. and columns left.., zeros around it.
struct Frame {
  int64_t batch = 0, channels = 0, h = 0, w = 0;
  int64_t top = 0, left = 0, hp = 0, wp = 0;
  bool plain = false;  // given as plain NCHW rather than in blocks of 8

  int64_t blocks() const { return (channels + 7) / 8; }
  bool copied() const { return plain || top || left || hp != h || wp != w; }
  int64_t copy_rows() const { return batch * blocks() * hp; }
  size_t copy_floats() const { return size_t(copy_rows() * wp * 8); }
};

struct Geometry {
  Frame x;                       // the source, with the convolution's padding
  int64_t out_channels = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t lanes = 8;             // input channels per depth step: 8, or fewer when X has fewer
  bool plain_sum = false, plain_output = false;  // Z, Y as plain NCHW
  bool skips_padding = false;  // the depthwise kernel reads a blocked X as it is, without padding

  int64_t out_blocks() const { return (out_channels + 7) / 8; }
  Frame output() const { return {x.batch, out_channels, oh, ow, 0, 0, oh, ow, true}; }  // Y or Z when plain
  int64_t panels() const { return (out_blocks() + 1) / 2; }
  int64_t groups() const { return x.blocks() * kh * kw; }  // depth steps of `lanes` channels
  int64_t chunks() const { return (oh * ow + kChunkPixels - 1) / kChunkPixels; }  // per image
  int64_t jobs() const { return panels() * x.batch * chunks(); }
  // The depthwise kernel's jobs: an image's block, some 64 output pixels of it (whole rows) each.
  int64_t depthwise_rows_per_job() const {
    return std::clamp<int64_t>((64 + ow - 1) / std::max<int64_t>(ow, 1), 1, std::max<int64_t>(oh, 1));
  }
  int64_t depthwise_jobs() const {
    return x.batch * out_blocks() * ((oh + depthwise_rows_per_job() - 1) / depthwise_rows_per_job());
  }
};

struct Epilogue {
  const float* bias = nullptr;  // panels * 16 values (zeros past out_channels)
  const float* z = nullptr;     // the residual, Y's layout, or null
  FusedActivation act;
  FusedActivation pre;  // before z is added: act(pre(conv + bias) + z)
};

// The frame's blocked copy of x (plain or blocked as f says), rows [begin, end) of f.copy_rows().
void copy_to_blocks(const Frame& f, const float* x, float* blocked, int64_t begin, int64_t end);
// A blocked [batch][blocks][h][w][8] tensor as plain NCHW, jobs [begin, end) of batch * blocks.
void copy_to_plain(const Frame& f, const float* blocked, float* plain, int64_t begin, int64_t end);
// Y [batch][out_blocks][oh][ow][8] for jobs [begin, end) of g.jobs() (panel, image, chunk) from
// the blocked source; `offsets` holds, for each of g.groups() steps, where its channels lie from
// the top-left tap of an output pixel; z (in e) blocked like Y. Filters of float, half_t or
// bf16_t (weights stored in half precision, widened as they are loaded).
template <class W>
void rows(const Geometry& g, const float* source, const W* filters, const int64_t* offsets, const Epilogue& e,
          float* y, int64_t begin, int64_t end);

// The depthwise convolution (one filter per channel, filters [block][kh][kw][8]) from the
// blocked source: Y for jobs [begin, end) of g.depthwise_jobs() (image, block, group of output
// rows). In depthwise_conv_avx2.cpp.
void depthwise_rows(const Geometry& g, const float* source, const float* filters, const Epilogue& e, float* y,
                    int64_t begin, int64_t end);

}  // namespace direct

}  // namespace vlrt
