// vlrt's own 8-bit products on AVX512-VNNI: uint8 A [m, k] times a constant int8 B [k, n] with exact
// int32 sums, for the integer MatMuls with a constant weight (MatMulInteger, com.microsoft
// DynamicQuantizeMatMul, vlrt.DynamicQuantizeMatMuls; backends/cpu/onednn.cpp plans them). B is packed
// once into panels of 16 columns whose rows are quads of k (vpdpbusd multiplies 4 uint8 of A by 4 int8
// of each column and adds the 4 products to that column's int32 sum), and each run goes through the
// packed product's jobs (packed_matmul.h): 8-row tiles, the slice of a panel a job reads kept in L1,
// the next slice prefetched as the tiles run (panel_prefetch.h), each block finished (dequantized)
// while it is in cache. It takes the products of fewer than 2048 rows, where weights stream from
// memory (BERT-base: 85 MB of int8 weights for 32 rows of A) and oneDNN 2.6 leaves the
// dequantization to a pass of its own (docs/ARCHITECTURE.md has the measurements).
// VLRT_VNNI_PRODUCTS=0 leaves the products to oneDNN; not under VLRT_REFERENCE_KERNELS.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/prepare_util.h"
#include "core/thread_pool.h"

namespace vlrt {

// The kernel runs here: AVX-512 with VNNI, not turned off.
bool vnni_products_available();

// B [k, n] int8 in panels of 16 columns: panel p holds ceil(k / 4) rows of 64 bytes, row q the
// values B[4q .. 4q + 3][16p + c] at bytes 4c .. 4c + 3 (zeros past k and past n); and each column's sum.
struct VnniPanels {
  int64_t k = 0, n = 0;
  std::vector<int8_t, CacheLineAllocator<int8_t>> data;
  std::vector<int32_t> column_sums;
  int64_t quads() const { return (k + 3) / 4; }
  size_t bytes() const { return data.size() + column_sums.size() * sizeof(int32_t); }
};
size_t vnni_panel_bytes(int64_t k, int64_t n);
VnniPanels pack_vnni_panels(const int8_t* b, int64_t k, int64_t n);

// What is done with each block of the product as it is finished, in cache: with S the exact sums
// sum_t (A[i, t] - a_zp) * B[t, j], wrapped to 32 bits as ONNX's integer products are,
//   S[i, j] += column_offsets[j] * row_sums[i] (wrapping) where column_offsets is given, then either
//   int_out[i * n + j] = S[i, j], or
//   float(S[i, j]) * scale[j] (+ bias[j]), rounded after each step as the reference kernels round,
//   into the output that holds column j (vlrt.DynamicQuantizeMatMuls's products side by side).
struct VnniEpilogue {
  const int32_t* column_offsets = nullptr;  // n values, or none
  const uint32_t* row_sums = nullptr;       // m values where column_offsets is given
  int32_t* int_out = nullptr;
  const float* scale = nullptr;  // n values
  const float* bias = nullptr;   // n values, or none
  struct Output {
    float* data;
    int64_t first, columns;  // the product's columns [first, first + columns), rows `columns` apart
  };
  std::vector<Output> outputs;
};

// The product of A (m rows of b.k values, lda bytes apart; both multiples of 4) and B into the
// epilogue, on `pool`.
void vnni_products(const uint8_t* a, int64_t lda, int64_t m, int32_t a_zp, const VnniPanels& b,
                   const VnniEpilogue& epilogue, ThreadPool& pool);

}  // namespace vlrt
