// The CPU backend's prepared kernels on oneDNN: float32 Conv and FusedConv, MatMul and Gemm
// whose B is a constant (with bf16_products the same in bfloat16 with float32 sums), and
// MatMulInteger and DynamicQuantizeMatMul whose B is a constant int8 tensor with zero points 0
// (uint8 A, exact int32 products, on CPUs with VNNI). Their weights are reordered once, at
// prepare, into the layout oneDNN's kernels read; the state holds that copy in place of the
// initializer. Every other node, and these where oneDNN does not take them, runs the reference
// kernels of src/backends/cpu/ops.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/prepared_kernel.h"

namespace vlrt {

// What the oneDNN kernel of this node would hold (bytes 0 and nothing replaced: none
// takes the node). A primitive splits its work for the thread count it is made with and
// keeps that split, so both take the threads it will run on. With `bf16_products` the float32
// Conv, FusedConv, BlockedConv, MatMul, Gemm and FusedMatMul kernels multiply bfloat16 values
// (their activations rounded on the way in, their weights packed as bfloat16: half the bytes)
// with float32 sums and outputs; only where onednn_bf16_products() holds.
PrepareInfo onednn_prepare_info(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs,
                                int threads, bool bf16_products = false);
// Whether oneDNN has bfloat16 kernels for this CPU (AVX512-BF16 or AMX).
bool onednn_bf16_products();
// The channel block (16 or 8) in which oneDNN's convolutions on this CPU read and write
// activations without converting them; 0 when VLRT_ONEDNN_CONV_LAYOUT asks for another layout.
int64_t onednn_conv_channel_block();
// Whether oneDNN's uint8 x int8 products are exact on this CPU (VNNI); elsewhere the integer
// nodes run the reference kernels.
bool onednn_exact_integer_products();
// That kernel, its weights packed; nullptr where oneDNN does not take the node.
std::unique_ptr<PreparedKernel> make_onednn_kernel(const Node& node, int64_t opset,
                                                   const std::vector<const ValueInfo*>& inputs, int threads,
                                                   bool bf16_products = false);

}  // namespace vlrt
