#include "backends/cpu/cpu_backend.h"

#include <unistd.h>

#include <cstring>

#include "backends/cpu/kernel.h"
#include "exec/run_node.h"
#include "ops/op_schema.h"

namespace vlrt {

CpuBackend::CpuBackend(int index, int threads) : index_(index), pool_(threads) {}

size_t CpuBackend::memory_capacity() const {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

std::shared_ptr<Buffer> CpuBackend::allocate(size_t bytes) {
  auto b = host_alloc(bytes);
  b->device = device();
  return b;
}

void CpuBackend::copy_from_host(const Tensor& src, Tensor& dst) {
  VLRT_CHECK(src.nbytes() == dst.nbytes(), "copy of ", src.describe(), " into ", dst.describe());
  if (src.nbytes()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

void CpuBackend::copy_to_host(const Tensor& src, Tensor& dst) { copy_from_host(src, dst); }

bool CpuBackend::supports(const Node& node, const std::vector<DType>&, std::string* why) const {
  const OpSchema* s = find_schema(node.domain, node.op_type);
  if (s && (s->alias_input >= 0 || find_cpu_kernel(node.domain, node.op_type))) return true;
  if (why) *why = cat("no CPU kernel for ", node.op_type);
  return false;
}

void CpuBackend::execute(const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs) {
  call_cpu_kernel(node, opset, pool_, inputs, outputs);
}

}  // namespace vlrt
