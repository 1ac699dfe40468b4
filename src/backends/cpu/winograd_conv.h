// Winograd F(4x4, 3x3) for the channel-blocked 3x3 convolutions of a conv region (vlrt.BlockedConv
// with X, Y and Z in blocks of 8 channels, stride 1, dilation 1, padding 1, one group): each 6x6
// input tile and each 3x3 filter are transformed once, their products become 36 matrix products
// over the channels (4x fewer multiplications than the direct convolution), and the output
// transform adds the bias and the residual and applies the activation on the way out (Relu,
// LeakyRelu, Clip, Sigmoid, SiLU, HardSigmoid, HardSwish).
//
// The transformed filters (36 per input/output channel pair, 4x the weight bytes) are made at
// prepare and held in place of W. The result differs from the direct convolution by rounding
// only (the transforms' constants are small: 4, 5, 1/6, 1/24); tests/backends/test_cpu_winograd.cpp
// checks it against the reference kernels. It runs on AVX2 CPUs; not under VLRT_REFERENCE_KERNELS
// nor with VLRT_WINOGRAD=0, where oneDNN's direct convolution takes the node.
#pragma once

#include <memory>
#include <vector>

#include "backends/cpu/prepared_kernel.h"

namespace vlrt {

// Where it pays on the measured models: outputs at least kWinogradMinSide on each side and at
// least 16 channels in and out. `any_size` drops that rule (for tests).
constexpr int64_t kWinogradMinSide = 12;

// What the Winograd kernel of this node would hold (bytes 0: it does not take the node).
PrepareInfo winograd_prepare_info(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs,
                                  bool any_size = false);
// That kernel, its filters transformed; nullptr where it does not take the node.
std::unique_ptr<PreparedKernel> make_winograd_conv(const Node& node, int64_t opset,
                                                   const std::vector<const ValueInfo*>& inputs,
                                                   bool any_size = false);

}  // namespace vlrt
