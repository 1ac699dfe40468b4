// Loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// Both losses take (N, C, d1, ...) scores, (N, d1, ...) class indices and optional (C) weights.
void infer_loss(InferContext& ctx) {
  const char* what = ctx.node.op_type == "NegativeLogLikelihoodLoss" ? "input" : "scores";
  DType t = ctx.input_dtype(0);
  VLRT_CHECK(dtype_is_float(t), what, " must be a floating-point tensor, got ", dtype_name(t));
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() >= 2, what, " must have rank >= 2 (N x C x d1 ...), got ", shape_str(x));
  DType lt = ctx.input_dtype(1);
  VLRT_CHECK(lt == DType::i32 || lt == DType::i64, "target must be int32 or int64, got ", dtype_name(lt));
  Shape target = x;
  target.erase(target.begin() + 1);
  VLRT_CHECK(ctx.input_shape(1) == target, "target must have shape ", shape_str(target), " (", what,
             "'s shape without the class axis), got ", shape_str(ctx.input_shape(1)));
  if (ctx.has_input(2)) {
    VLRT_CHECK(dtype_is_float(ctx.input_dtype(2)), "weight must be a floating-point tensor");
    VLRT_CHECK(ctx.input_shape(2) == Shape{x[1]}, "weight must have shape [", x[1], "] (one per class), got ",
               shape_str(ctx.input_shape(2)));
  }
  std::string reduction = ctx.node.attr_string("reduction", "mean");
  VLRT_CHECK(reduction == "none" || reduction == "sum" || reduction == "mean", "reduction '", reduction,
             "' is not one of none, sum, mean");
  ctx.set_output(0, t, reduction == "none" ? target : Shape{});
  if (ctx.output_count() > 1) {
    VLRT_CHECK(ctx.node.op_type == "SoftmaxCrossEntropyLoss" && ctx.output_count() == 2, "has ",
               ctx.output_count(), " outputs, expected ",
               ctx.node.op_type == "SoftmaxCrossEntropyLoss" ? "1 or 2 (loss, log_prob)" : "1");
    ctx.set_output(1, t, x);
  }
}

}  // namespace

void register_loss_schemas(SchemaTable& t) {
  t["NegativeLogLikelihoodLoss"] = {infer_loss, 2, 3};
  t["SoftmaxCrossEntropyLoss"] = {infer_loss, 2, 3};
}

}  // namespace vlrt
