#include "backends/cuda/cublas_api.h"

#include <dlfcn.h>

#include "core/error.h"

namespace vlrt {

const CublasApi& cublas_api() {
  static const CublasApi api = [] {
    const char* names[] = {"libcublas.so.13", "libcublas.so"};
    void* lib = nullptr;
    for (const char* n : names)
      if ((lib = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) fail("cannot load cuBLAS (libcublas.so.13): ", dlerror(), "; install the CUDA toolkit's cuBLAS");
    auto load = [lib](const char* symbol) {
      void* f = dlsym(lib, symbol);
      if (!f) fail("cuBLAS has no ", symbol, ": a cuBLAS older than this build's CUDA 13?");
      return f;
    };
    CublasApi a;
    a.create = reinterpret_cast<decltype(a.create)>(load("cublasCreate_v2"));
    a.destroy = reinterpret_cast<decltype(a.destroy)>(load("cublasDestroy_v2"));
    a.set_stream = reinterpret_cast<decltype(a.set_stream)>(load("cublasSetStream_v2"));
    a.set_math_mode = reinterpret_cast<decltype(a.set_math_mode)>(load("cublasSetMathMode"));
    a.sgemm = reinterpret_cast<decltype(a.sgemm)>(load("cublasSgemm_v2"));
    a.sgemm_strided_batched = reinterpret_cast<decltype(a.sgemm_strided_batched)>(load("cublasSgemmStridedBatched"));
    a.status_name = reinterpret_cast<decltype(a.status_name)>(load("cublasGetStatusName"));
    a.status_string = reinterpret_cast<decltype(a.status_string)>(load("cublasGetStatusString"));
    return a;
  }();
  return api;
}

}  // namespace vlrt
