#include "backends/cpu/kernel.h"
#include "core/dispatch.h"
#include "ops/shape_util.h"

namespace vlrt {

void register_normalization_kernels(CpuKernelTable& t) { (void)t; }

}  // namespace vlrt
