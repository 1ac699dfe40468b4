// MatMul, Gemm and vlrt.FusedMatMul with a constant float32 B (float16 or bfloat16 for
// FusedMatMul, which then stays in half precision, half the bytes) on vlrt's own AVX2 or AVX-512 product: B
// is packed once, at prepare, into panels of 16 columns (k rows of 16 floats, the last panel padded with
// zeros) held in place of the initializer, and each run multiplies A's rows through the 6x16 register tile
// (gemm_tile_avx2.h), or on AVX-512 an 8x16 one (packed_matmul_avx512.cpp), without repacking anything.
// oneDNN's AVX2 matmul reads B as it is and packs it again on every call, which costs as much as the product
// itself when A has few rows (BERT's 32 tokens: each weight is read for 32 multiply-adds). Bias, residual and
// activation (the fused epilogue) run on each block of Y as its job finishes it. A Conv whose kernel tiles
// the image (a vision transformer's patch embedding) runs on the same product. VLRT_PACKED_MATMUL=0 leaves
// these nodes to oneDNN; not under VLRT_REFERENCE_KERNELS.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backends/cpu/prepared_kernel.h"

namespace vlrt {

// The packed kernel runs here (AVX2, not turned off by VLRT_PACKED_MATMUL=0).
bool packed_matmul_available();
// What the packed kernel of this node would hold (bytes 0: it does not take the node).
PrepareInfo packed_matmul_prepare_info(const Node& node, const std::vector<const ValueInfo*>& inputs);
// That kernel, B packed; nullptr where it does not take the node.
std::unique_ptr<PreparedKernel> make_packed_matmul(const Node& node, const std::vector<const ValueInfo*>& inputs);

namespace packed {

inline constexpr int64_t kRowBlock = 48;     // rows of A one job runs through a panel
inline constexpr int64_t kDepthBlock = 256;  // K at a time: 16 KiB of the panel

// How a product is cut into jobs, each one range of A's rows through one panel. While A fits in
// the last-level cache the jobs go panel by panel, kRowBlock rows each: a thread's run of jobs
// keeps one panel in L1 and reads A from that cache. A larger A (a detector's encoder: 22,223
// tokens) would come from memory once per panel; its jobs go range by range instead, each range
// sized to stay in L2 while it runs through every panel, so A is read from memory once.
class ProductJobs {
 public:
  ProductJobs(int64_t m, int64_t k, int64_t n);
  int64_t count() const { return panels_ * ranges_; }
  // Job j's panel and rows [r0, r1).
  void at(int64_t j, int64_t& panel, int64_t& r0, int64_t& r1) const;
  // Whether job j + 1 reads panel p + 1 after job j read panel p (not so when the panel's next
  // range of rows comes next).
  bool next_panel_follows() const { return by_range_ || ranges_ == 1; }
  // Whether the tiles reading rows [k0, k0 + depth) of panel p (k rows per panel) prefetch the
  // `depth` rows that follow in memory (panel_prefetch.h): those are read next (the panel's next
  // depth block, or the next panel's first) and lie within the panels.
  bool prefetch_next(int64_t p, int64_t k0, int64_t depth, int64_t k) const {
    return (k0 + depth < k || next_panel_follows()) && (panels_ - p) * k - k0 >= 2 * depth;
  }

 private:
  int64_t m_, panels_, rows_, ranges_;
  bool by_range_;
};

// Called on each block of Y a job has finished: rows [r0, r1), columns [c0, c1).
using FinishBlock = std::function<void(int64_t r0, int64_t r1, int64_t c0, int64_t c1)>;

// Y [m, n] = A [m, k] times the panels (of float, half_t or bf16_t: a weight stored in half
// precision stays so, widened as it is loaded), for jobs [begin, end) of ProductJobs(m, k, n);
// then `finish` (may be null) on each job's block.
template <class W>
void products(const float* a, int64_t k, const W* panels, int64_t n, float* y, const ProductJobs& jobs,
              int64_t begin, int64_t end, const FinishBlock* finish = nullptr);
// The same for float32 panels on AVX-512 (packed_matmul_avx512.cpp): tiles of 8 rows.
void products_avx512(const float* a, int64_t k, const float* panels, int64_t n, float* y,
                     const ProductJobs& jobs, int64_t begin, int64_t end,
                     const FinishBlock* finish = nullptr);
// products() on the widest tile this CPU runs (cpu_isa()).
template <class W>
void products_here(const float* a, int64_t k, const W* panels, int64_t n, float* y, const ProductJobs& jobs,
                   int64_t begin, int64_t end, const FinishBlock* finish = nullptr);

}  // namespace packed

}  // namespace vlrt
