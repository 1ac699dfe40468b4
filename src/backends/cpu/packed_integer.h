// The integer products with a constant 8-bit weight (ConvInteger, QLinearConv, MatMulInteger,
// QLinearMatMul, com.microsoft DynamicQuantizeMatMul, MatMulIntegerToFloat and QGemm) on AVX2 without
// VNNI: the weight, less its zero points, is packed once at prepare into the layout integer_gemm
// reads (backends/cpu/integer_gemm.h), and each run calls the node's own CPU kernel with it, so
// a product no longer repacks its weight on every call (BERT-base's 73 products repacked 85
// million weights per run). The packed copy is int16 (int32 pairs for a convolution's), kept
// beside the initializer. oneDNN's VNNI kernels (or vlrt's, vnni_products.h) take these nodes first where the
// CPU has VNNI; not under VLRT_REFERENCE_KERNELS.
#pragma once

#include <memory>
#include <vector>

#include "backends/cpu/prepared_kernel.h"

namespace vlrt {

// What the packed kernel of this node would hold (bytes 0: it does not take the node).
PrepareInfo packed_integer_prepare_info(const Node& node, const std::vector<const ValueInfo*>& inputs);
// That kernel, the weight packed on `pool`; nullptr where it does not take the node.
std::unique_ptr<PreparedKernel> make_packed_integer(const Node& node, int64_t opset,
                                                    const std::vector<const ValueInfo*>& inputs,
                                                    ThreadPool& pool);

}  // namespace vlrt
