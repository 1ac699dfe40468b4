// Shape inference for ops of no other family: NonMaxSuppression.
#include "ops/misc_semantics.h"
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// Only the number of selected boxes matters here; the kernel selects them again.
void infer_non_max_suppression(InferContext& ctx) {
  auto optional_value = [&](size_t i) { return ctx.has_input(i) ? &ctx.input_value(i) : nullptr; };
  auto selected = non_max_suppression(ctx.node, ctx.input_value(0), ctx.input_value(1), optional_value(2),
                                      optional_value(3), optional_value(4));
  ctx.set_output(0, DType::i64, {int64_t(selected.size()), 3});
}

}  // namespace

void register_misc_schemas(SchemaTable& t) {
  t["NonMaxSuppression"] = {infer_non_max_suppression, 2, 5};
  t["NonMaxSuppression"].data_dependent_shape = true;
}

}  // namespace vlrt
