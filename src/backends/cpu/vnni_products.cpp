#include "backends/cpu/vnni_products.h"

#include "backends/cpu/isa.h"
#include "backends/cpu/packed_matmul.h"
#include "core/error.h"
#include "core/reference_mode.h"

namespace vlrt {

#if defined(__x86_64__)
namespace packed {
// The jobs [begin, end) of `jobs` on AVX512-VNNI (vnni_products_avx512.cpp).
void vnni_products_avx512(const uint8_t* a, int64_t lda, int32_t a_zp, const VnniPanels& b,
                          const ProductJobs& jobs, int64_t begin, int64_t end, const VnniEpilogue& epilogue);
}  // namespace packed
#endif

bool vnni_products_available() {
#if defined(__x86_64__)
  static const bool vnni = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") != 0;
  }();
  return vnni && cpu_isa() == CpuIsa::avx512 && !reference_kernels_requested() &&
         enabled_by_env("VLRT_VNNI_PRODUCTS");
#else
  return false;
#endif
}

size_t vnni_panel_bytes(int64_t k, int64_t n) {
  return size_t((n + 15) / 16 * (k + 3) / 4 * 64) + size_t(n) * sizeof(int32_t);
}

VnniPanels pack_vnni_panels(const int8_t* b, int64_t k, int64_t n) {
  VnniPanels p;
  p.k = k;
  p.n = n;
  const int64_t quads = p.quads();
  p.data.assign(size_t((n + 15) / 16 * quads * 64), 0);
  p.column_sums.assign(size_t(n), 0);
  for (int64_t t = 0; t < k; t++)
    for (int64_t j = 0; j < n; j++) {
      int8_t v = b[t * n + j];
      p.data[size_t(((j / 16 * quads + t / 4) * 16 + j % 16) * 4 + t % 4)] = v;
      p.column_sums[size_t(j)] += v;
    }
  return p;
}

void vnni_products(const uint8_t* a, int64_t lda, int64_t m, int32_t a_zp, const VnniPanels& b,
                   const VnniEpilogue& epilogue, ThreadPool& pool) {
#if defined(__x86_64__)
  // The planner took the node only where vnni_products_available() held.
  VLRT_CHECK(b.k % 4 == 0 && lda % 4 == 0, "the VNNI product needs K (", b.k, ") and the row stride (", lda,
             ") to be multiples of 4");
  if (m == 0 || b.n == 0) return;
  // Jobs sized as for float32 A of k / 4 values: the same bytes per row.
  const packed::ProductJobs jobs(m, b.quads(), b.n);
  pool.parallel_for(jobs.count(), [&](int64_t begin, int64_t end) {
    packed::vnni_products_avx512(a, lda, a_zp, b, jobs, begin, end, epilogue);
  });
#else
  (void)a, (void)lda, (void)m, (void)a_zp, (void)b, (void)epilogue, (void)pool;
  fail("the VNNI product runs only on x86-64");
#endif
}

}  // namespace vlrt
