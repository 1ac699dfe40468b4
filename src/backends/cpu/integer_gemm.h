// Exact 8-bit integer products on AVX2 without VNNI: both operands, less their zero points, are
// widened to int16 (|v| <= 255) and multiplied by vpmaddwd, which sums pairs of products in 32
// bits without saturating (2 * 255 * 255 < 2^31). The int32 sums wrap as ONNX's do, so the result
// is the reference kernels' bit for bit. The integer kernels of backends/cpu/ops/quantization.cpp
// use it at CpuIsa::avx2 and above (not under VLRT_REFERENCE_KERNELS=1); oneDNN's VNNI kernels
// take the nodes first where the CPU has VNNI.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/thread_pool.h"

namespace vlrt {

// Whether integer_gemm runs here: an AVX2 CPU level and not the reference path.
bool integer_gemm_available();

// Elements of the packed A (int32 pairs) and B (int16) for these sizes: what the packers below
// allocate, and what a prepared kernel tells the planner before packing.
size_t integer_gemm_a_elements(int64_t m, int64_t k);
size_t integer_gemm_b_elements(int64_t k, int64_t n);

// A, less its zero points, in the tiles integer_gemm reads (packed once, used for many B).
struct IntegerGemmA {
  int64_t m = 0, k = 0;
  std::vector<int32_t> tiles;
};
// B, less its zero points, in panels of 16 columns: element (t, j) is at panel_index(t, j).
struct IntegerGemmB {
  int64_t k = 0, n = 0;
  std::vector<int16_t> panels;
  IntegerGemmB() = default;
  IntegerGemmB(int64_t k, int64_t n);  // zeros
  size_t panel_index(int64_t t, int64_t j) const { return size_t(((j / 16) * ((k + 1) / 2) + t / 2) * 32 + (j % 16) * 2 + t % 2); }
};

// A node's constant weight, less its zero points, packed once by a prepared kernel
// (packed_integer.h) for integer_matmul (a 2-D B) or integer_conv (each group's weights as A).
struct PackedIntegerWeight {
  IntegerGemmB matmul_b;
  std::vector<IntegerGemmA> conv_groups;
  size_t bytes() const {
    size_t total = matmul_b.panels.size() * sizeof(int16_t);
    for (const IntegerGemmA& g : conv_groups) total += g.tiles.size() * sizeof(int32_t);
    return total;
  }
};

// A is uint8 or int8 (m x k, rows lda apart; a_zp one value or m); B is uint8, int8 or int16
// (k x n, rows ldb apart; b_zp one value or n), within [-255, 255] once centred.
template <class TA>
IntegerGemmA pack_integer_a(int64_t m, int64_t k, const TA* a, int64_t lda, const std::vector<int32_t>& a_zp,
                            ThreadPool& pool);
template <class TB>
IntegerGemmB pack_integer_b(int64_t k, int64_t n, const TB* b, int64_t ldb, const std::vector<int32_t>& b_zp,
                            ThreadPool& pool);

// Called when rows [r0, r1) and columns [c0, c1) of the product hold their final sums, on the
// thread that computed them while they are in its cache: the product's epilogue (dequantization).
using IntegerGemmDone = std::function<void(int64_t r0, int64_t r1, int64_t c0, int64_t c1)>;

// c[i, j] = sum_t a[i, t] * b[t, j] (both centred) into c (rows ldc apart); `done` (optional) is
// called for each part of c as it is finished.
void integer_gemm(const IntegerGemmA& a, const IntegerGemmB& b, int32_t* c, int64_t ldc, ThreadPool& pool,
                  const IntegerGemmDone* done = nullptr);

// c[i, j] = sum_t (a[i, t] - a_zp[i]) * (b[t, j] - b_zp[j]): the three steps above.
template <class TA, class TB>
void integer_gemm(int64_t m, int64_t n, int64_t k, const TA* a, int64_t lda, const std::vector<int32_t>& a_zp,
                  const TB* b, int64_t ldb, const std::vector<int32_t>& b_zp, int32_t* c, int64_t ldc,
                  ThreadPool& pool) {
  integer_gemm(pack_integer_a(m, k, a, lda, a_zp, pool), pack_integer_b(k, n, b, ldb, b_zp, pool), c, ldc, pool);
}

// The AVX2 tile (integer_gemm_avx2.cpp): c[r, j] (+)= sum_p a[p, r] . b[p, j] over kp pairs of k,
// for r < rows (<= 6) and j < cols (<= 16); a holds kp x 6 int32 (two int16 each), b kp x 16 x 2
// int16. With `accumulate` the tile adds to c, else it writes c.
void integer_gemm_tile_avx2(int64_t kp, const int32_t* a, const int16_t* b, int32_t* c, int64_t ldc, int rows,
                            int cols, bool accumulate);

}  // namespace vlrt
