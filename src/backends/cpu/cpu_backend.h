// The CPU backend: the reference kernels of src/backends/cpu/ops on host memory.
#pragma once

#include "backends/backend.h"

namespace vlrt {

class CpuBackend : public Backend {
 public:
  CpuBackend(int index, int threads);
  Device device() const override { return Device{DeviceKind::cpu, index_}; }
  bool host_visible() const override { return true; }
  size_t memory_capacity() const override;
  std::shared_ptr<Buffer> allocate(size_t bytes) override;
  void copy_from_host(const Tensor& src, Tensor& dst) override;
  void copy_to_host(const Tensor& src, Tensor& dst) override;
  bool supports(const Node& node, const std::vector<DType>& input_dtypes, std::string* why) const override;
  void execute(const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs) override;
  ThreadPool& pool() { return pool_; }

 private:
  int index_;
  ThreadPool pool_;
};

}  // namespace vlrt
