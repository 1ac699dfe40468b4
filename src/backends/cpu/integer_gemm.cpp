#include "backends/cpu/integer_gemm.h"

#include <algorithm>

#include "backends/cpu/isa.h"
#include "core/reference_mode.h"

namespace vlrt {

namespace {

constexpr int64_t kRows = 6;          // rows of a tile
constexpr int64_t kCols = 16;         // columns of a tile (a panel of B)
constexpr int64_t kPairsPerBlock = 256;  // pairs of k per cache block: a B panel block is 16 KiB
constexpr int64_t kStripsPerTask = 8;    // 48 rows of A packed together
constexpr int64_t kPanelsPerTask = 4;    // 64 columns of B
// Work below these sizes runs on the calling thread: a parallel region costs more than it saves
// (and much more when another process holds the cores).
constexpr int64_t kParallelElements = 1 << 15;    // packing
constexpr int64_t kParallelProducts = 1 << 20;    // multiply-adds of the product

// Items per chunk of a parallel loop over `items` of `work` each.
int64_t grain(int64_t work_per_item, int64_t threshold) { return std::max<int64_t>(1, threshold / std::max<int64_t>(1, work_per_item)); }

int32_t pair(int32_t lo, int32_t hi) { return int32_t(uint32_t(uint16_t(lo)) | uint32_t(uint16_t(hi)) << 16); }

}  // namespace

bool integer_gemm_available() {
#if defined(__x86_64__)
  return cpu_isa() >= CpuIsa::avx2 && !reference_kernels_requested();
#else
  return false;
#endif
}

size_t integer_gemm_a_elements(int64_t m, int64_t k) {
  int64_t kp = (k + 1) / 2, strips = (m + kRows - 1) / kRows,
          blocks = (kp + kPairsPerBlock - 1) / kPairsPerBlock;
  return size_t(blocks * strips * kPairsPerBlock * kRows);
}

size_t integer_gemm_b_elements(int64_t k, int64_t n) {
  return size_t((n + kCols - 1) / kCols * ((k + 1) / 2) * 2 * kCols);
}

IntegerGemmB::IntegerGemmB(int64_t k_, int64_t n_)
    : k(k_), n(n_), panels(integer_gemm_b_elements(k_, n_), 0) {}

template <class TA>
IntegerGemmA pack_integer_a(int64_t m, int64_t k, const TA* a, int64_t lda, const std::vector<int32_t>& zp,
                            ThreadPool& pool) {
  // For each block of kPairsPerBlock pairs of k, each strip of 6 rows holds the block's pairs as
  // 6 int32 each (rows past m and k past its end are 0): strip s of block b starts at
  // (b * strips + s) * kPairsPerBlock * 6.
  int64_t kp = (k + 1) / 2, strips = (m + kRows - 1) / kRows;
  IntegerGemmA packed{m, k, std::vector<int32_t>(integer_gemm_a_elements(m, k), 0)};
  pool.parallel_for(strips, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; s++)
      for (int64_t r = 0; r < kRows && s * kRows + r < m; r++) {
        int64_t i = s * kRows + r;
        const TA* row = a + i * lda;
        int32_t z = zp.size() == 1 ? zp[0] : zp[size_t(i)];
        for (int64_t p0 = 0; p0 < kp; p0 += kPairsPerBlock) {  // row r of the strip in each block
          int32_t* dst =
              packed.tiles.data() + ((p0 / kPairsPerBlock * strips + s) * kPairsPerBlock) * kRows + r;
          int64_t p1 = std::min(kp, p0 + kPairsPerBlock), whole = std::min(p1, k / 2);
          for (int64_t p = p0; p < whole; p++, dst += kRows)
            *dst = pair(int32_t(row[2 * p]) - z, int32_t(row[2 * p + 1]) - z);
          if (whole < p1) *dst = pair(int32_t(row[2 * whole]) - z, 0);  // odd k: the last pair's second is 0
        }
      }
  }, grain(kRows * k, kParallelElements));
  return packed;
}

template <class TB>
IntegerGemmB pack_integer_b(int64_t k, int64_t n, const TB* b, int64_t ldb, const std::vector<int32_t>& zp,
                            ThreadPool& pool) {
  IntegerGemmB packed(k, n);
  int64_t panels = (n + kCols - 1) / kCols;
  pool.parallel_for(panels, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; q++) {
      int64_t cols = std::min(kCols, n - q * kCols);
      for (int64_t t = 0; t < k; t++) {
        const TB* row = b + t * ldb + q * kCols;
        int16_t* dst = packed.panels.data() + packed.panel_index(t, q * kCols);
        for (int64_t j = 0; j < cols; j++)
          dst[2 * j] = int16_t(int32_t(row[j]) - (zp.size() == 1 ? zp[0] : zp[size_t(q * kCols + j)]));
      }
    }
  }, grain(kCols * k, kParallelElements));
  return packed;
}

void integer_gemm(const IntegerGemmA& a, const IntegerGemmB& b, int32_t* c, int64_t ldc, ThreadPool& pool,
                  const IntegerGemmDone* done) {
  int64_t m = a.m, n = b.n, k = a.k;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; i++) std::fill_n(c + i * ldc, n, 0);
    if (done) (*done)(0, m, 0, n);
    return;
  }
  int64_t kp = (k + 1) / 2, panels = (n + kCols - 1) / kCols, strips = (m + kRows - 1) / kRows;
  int64_t strip_groups = (strips + kStripsPerTask - 1) / kStripsPerTask;
  int64_t panel_groups = (panels + kPanelsPerTask - 1) / kPanelsPerTask;
  pool.parallel_for(strip_groups * panel_groups, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; task++) {
      int64_t sg = task / panel_groups, pg = task % panel_groups;
      int64_t s0 = sg * kStripsPerTask, s1 = std::min(strips, s0 + kStripsPerTask);
      int64_t q0 = pg * kPanelsPerTask, q1 = std::min(panels, q0 + kPanelsPerTask);
      for (int64_t p0 = 0; p0 < kp; p0 += kPairsPerBlock) {
        int64_t pairs = std::min(kp, p0 + kPairsPerBlock) - p0, block = p0 / kPairsPerBlock;
        for (int64_t q = q0; q < q1; q++) {
          const int16_t* panel = b.panels.data() + (q * kp + p0) * 2 * kCols;
          int cols = int(std::min(kCols, n - q * kCols));
          for (int64_t s = s0; s < s1; s++) {
            int rows = int(std::min(kRows, m - s * kRows));
#if defined(__x86_64__)
            integer_gemm_tile_avx2(pairs, a.tiles.data() + (block * strips + s) * kPairsPerBlock * kRows, panel,
                                   c + s * kRows * ldc + q * kCols, ldc, rows, cols, p0 > 0);
#endif
          }
        }
      }
      if (done) (*done)(s0 * kRows, std::min(m, s1 * kRows), q0 * kCols, std::min(n, q1 * kCols));
    }
  }, grain(kStripsPerTask * kRows * kPanelsPerTask * kCols * k, kParallelProducts));
}

template IntegerGemmA pack_integer_a<uint8_t>(int64_t, int64_t, const uint8_t*, int64_t, const std::vector<int32_t>&,
                                              ThreadPool&);
template IntegerGemmA pack_integer_a<int8_t>(int64_t, int64_t, const int8_t*, int64_t, const std::vector<int32_t>&,
                                             ThreadPool&);
template IntegerGemmB pack_integer_b<uint8_t>(int64_t, int64_t, const uint8_t*, int64_t, const std::vector<int32_t>&,
                                              ThreadPool&);
template IntegerGemmB pack_integer_b<int8_t>(int64_t, int64_t, const int8_t*, int64_t, const std::vector<int32_t>&,
                                             ThreadPool&);

}  // namespace vlrt
