// CPU kernels for ops of no other family: NonMaxSuppression.
#include "backends/cpu/kernel.h"
#include "ops/misc_semantics.h"

namespace vlrt {

namespace {

void non_max_suppression_kernel(KernelContext& ctx) {
  auto optional_input = [&](size_t i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  auto selected = non_max_suppression(ctx.node, ctx.input(0), ctx.input(1), optional_input(2),
                                      optional_input(3), optional_input(4));
  int64_t* y = ctx.output(0).data<int64_t>();
  for (size_t i = 0; i < selected.size(); i++)
    for (int j = 0; j < 3; j++) y[i * 3 + j] = selected[i][j];
}

}  // namespace

void register_misc_kernels(CpuKernelTable& t) { t["NonMaxSuppression"] = {non_max_suppression_kernel}; }

}  // namespace vlrt
