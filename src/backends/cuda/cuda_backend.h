// The CUDA backend: device memory from cudaMalloc (the plan sizes one arena per device; nothing
// grows behind its back), one stream per device on which copies and kernels queue in order,
// cuBLAS for products. Its ops are those of src/backends/cuda/ops; a node it does not take runs
// where the plan puts it instead (the CPU), with the transfers the plan lists.
//
// Built when the CUDA toolkit is found; usable where an NVIDIA driver is: `cuda:N` is the N-th
// device the runtime lists, and without a driver (or with one too old for the runtime this build
// links) the backend reports no devices, saying why.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "backends/backend.h"

typedef struct cublasContext* cublasHandle_t;

namespace vlrt {

// The device kind "cuda".
DeviceKind cuda_kind();

// Fails naming `what` and the CUDA error.
void cuda_check(cudaError_t rc, const std::string& what);

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int index);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device{cuda_kind(), index_}; }
  bool host_visible() const override { return false; }
  size_t memory_capacity() const override { return memory_; }
  size_t alignment() const override { return 256; }
  std::shared_ptr<Buffer> allocate(size_t bytes) override;
  void copy_from_host(const Tensor& src, Tensor& dst) override;
  void copy_to_host(const Tensor& src, Tensor& dst) override;
  bool copy_on_device(const Tensor& src, Tensor& dst) override;
  bool supports(const Node& node, const std::vector<DType>& input_dtypes, std::string* why) const override;
  void execute(const Node& node, int64_t opset, KernelState* state, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs) override;
  void synchronize() override;

  // "cuda:0 (NVIDIA H100 80GB HBM3, compute capability 9.0)" for messages.
  const std::string& description() const { return description_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  // Makes this backend's device the calling thread's current one.
  void activate() const;

 private:
  int index_;
  std::string description_;
  size_t memory_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
};

}  // namespace vlrt
