// The CPU kernels' shared way into BLAS (implemented in linalg.cpp): a row-major float32
// GEMM run on the calling thread, so that BLAS never starts threads beside vlrt's pool.
#pragma once

#include <cstdint>

namespace vlrt {

// c = alpha * op(a) * op(b) + beta * c; op transposes when ta / tb.
void blas_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace vlrt
