// A CPU kernel made for one node at load (oneDNN's primitives, the Winograd convolution): it
// holds what it prepared then, such as weights packed in the layout it reads, in place of the
// initializer, and runs the node on the session's thread pool.
#pragma once

#include <vector>

#include "backends/backend.h"
#include "core/thread_pool.h"

namespace vlrt {

class PreparedKernel : public KernelState {
 public:
  // Runs the node; inputs that its PrepareInfo listed as replaced may be nullptr.
  virtual void run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   ThreadPool& pool) = 0;
};

}  // namespace vlrt
