// The OpenCL backend: the OpenCL 1.2 C kernels of src/backends/opencl/ops on device
// buffers (a Buffer's data is its cl_mem). `opencl:N` is the N-th device when the
// GPUs of all platforms come first, in platform order, and then every other device.
// One executor drives a backend: kernels and their arguments are not shared across threads.
#pragma once

#include <map>
#include <string>

#include "backends/backend.h"
#include "backends/opencl/kernel.h"

namespace vlrt {

// The device kind "opencl".
DeviceKind opencl_kind();

class OpenClBackend : public Backend {
 public:
  explicit OpenClBackend(int index);
  ~OpenClBackend() override;
  OpenClBackend(const OpenClBackend&) = delete;
  OpenClBackend& operator=(const OpenClBackend&) = delete;

  Device device() const override { return Device{opencl_kind(), index_}; }
  bool host_visible() const override { return false; }
  size_t memory_capacity() const override { return memory_; }
  std::shared_ptr<Buffer> allocate(size_t bytes) override;
  void copy_from_host(const Tensor& src, Tensor& dst) override;
  void copy_to_host(const Tensor& src, Tensor& dst) override;
  bool supports(const Node& node, const std::vector<DType>& input_dtypes, std::string* why) const override;
  void execute(const Node& node, int64_t opset, KernelState* state, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs) override;
  void synchronize() override;

  // "opencl:0 (pthread-skylake ..., Portable Computing Language)" for messages.
  const std::string& description() const { return description_; }
  cl_command_queue queue() const { return queue_; }
  // Edge of the square work-groups of the MatMul, Gemm and Conv kernels (TILE in the programs).
  size_t tile() const { return tile_; }
  // Largest work-group the row kernels (Softmax, LayerNorm, reductions) use: a power of two.
  size_t max_group() const { return max_group_; }
  // The kernel `name` of `program`, which is built on first use; kernels are cached.
  cl_kernel kernel(const ClProgram& program, const char* name);

 private:
  cl_program build(const ClProgram& program);

  int index_;
  std::string description_;
  size_t memory_ = 0;
  size_t max_alloc_ = 0;
  size_t tile_ = 16;
  size_t max_group_ = 256;
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  std::map<std::string, cl_program> programs_;
  std::map<std::string, cl_kernel> kernels_;  // "program/kernel"
};

// Fails with the OpenCL call and its error code's name.
void cl_check(cl_int rc, const char* what);

}  // namespace vlrt
