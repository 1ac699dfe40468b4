// The cuBLAS entry points the CUDA backend calls, loaded from libcublas when the first CUDA
// backend starts (dlopen), so that a program with this backend built in maps none of cuBLAS's
// hundreds of megabytes on machines that never use a GPU.
#pragma once

#include <cublas_v2.h>

namespace vlrt {

struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// Loaded once; fails naming the library when it or one of its functions is missing.
const CublasApi& cublas_api();

}  // namespace vlrt
