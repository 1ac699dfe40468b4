// The interface every backend implements. A backend owns its memory: tensors on
// its device live in buffers it allocated, and cross to another device only
// through copy_from_host / copy_to_host, called by explicit transfer steps of a plan.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "graph/graph.h"

namespace vlrt {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // True when the device's memory is the host's (a plain pointer the CPU can read).
  virtual bool host_visible() const = 0;
  // Total memory the device offers (0: unknown).
  virtual size_t memory_capacity() const = 0;

  virtual std::shared_ptr<Buffer> allocate(size_t bytes) = 0;
  // `dst` lives on this device, `src` on the host (or the reverse); same dtype and shape.
  virtual void copy_from_host(const Tensor& src, Tensor& dst) = 0;
  virtual void copy_to_host(const Tensor& src, Tensor& dst) = 0;

  // Whether a kernel exists for this node with these input dtypes; `why` says why not.
  virtual bool supports(const Node& node, const std::vector<DType>& input_dtypes, std::string* why) const = 0;
  // Runs one node. Inputs and outputs are on this device, outputs allocated with their final shapes.
  virtual void execute(const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor*>& outputs) = 0;
  // Blocks until queued work is done (asynchronous devices).
  virtual void synchronize() {}
};

// Parses "cpu", "cpu:1", "opencl:0"; fails on anything else.
Device parse_device(const std::string& s);

// The backends compiled into this build ("cpu", "opencl").
std::vector<std::string> built_backends();

// A new backend for a device. "cpu:N" (N >= 1) is a simulated second CPU device
// with its own memory, for testing placement, splits and transfers on a machine
// with one CPU. Fails naming the device when it is not available.
std::shared_ptr<Backend> create_backend(const Device& d, int threads = 0);

}  // namespace vlrt
