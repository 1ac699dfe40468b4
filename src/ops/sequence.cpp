// Sequences and optionals: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt,
// SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence, Optional,
// OptionalHasElement, OptionalGetElement. Their values live on the host; a tensor taken
// out of a sequence has a shape known only from the sequence's contents, so it is
// inferred when the sequence is known (at execution) and deferred before.
#include "ops/op_schema.h"
#include "ops/sequence_semantics.h"

namespace vlrt {

namespace {

void expect_kind(InferContext& ctx, size_t i, ValueKind kind, const char* what) {
  if (ctx.input_kind(i) != kind)
    fail("input ", i, " (", what, ") is a ", value_kind_name(ctx.input_kind(i)), ", expected a ",
         value_kind_name(kind));
}

void infer_sequence_empty(InferContext& ctx) {
  ctx.set_output_value(0, ValueKind::sequence, dtype_from_onnx(int32_t(ctx.node.attr_int("dtype", 1))));
}

void infer_sequence_construct(InferContext& ctx) {
  DType dtype = ctx.input_dtype(0);
  for (size_t i = 1; i < ctx.input_count(); i++)
    if (ctx.input_dtype(i) != dtype)
      fail("input ", i, " is ", dtype_name(ctx.input_dtype(i)), " but input 0 is ", dtype_name(dtype),
           "; a sequence holds tensors of one type");
  ctx.set_output_value(0, ValueKind::sequence, dtype);
}

void infer_sequence_insert(InferContext& ctx) {
  expect_kind(ctx, 0, ValueKind::sequence, "input_sequence");
  if (ctx.input_dtype(1) != ctx.input_dtype(0))
    fail("the tensor is ", dtype_name(ctx.input_dtype(1)), " but the sequence holds ", dtype_name(ctx.input_dtype(0)));
  ctx.set_output_value(0, ValueKind::sequence, ctx.input_dtype(0));
}

void infer_sequence_erase(InferContext& ctx) {
  expect_kind(ctx, 0, ValueKind::sequence, "input_sequence");
  ctx.set_output_value(0, ValueKind::sequence, ctx.input_dtype(0));
}

void infer_sequence_length(InferContext& ctx) {
  expect_kind(ctx, 0, ValueKind::sequence, "input_sequence");
  ctx.set_output(0, DType::i64, {});
}

void infer_sequence_at(InferContext& ctx) {
  expect_kind(ctx, 0, ValueKind::sequence, "input_sequence");
  const Tensor& seq = ctx.input_value(0);
  size_t index = sequence_position(ctx.input_value(1), seq.elements().size(), false);
  ctx.set_output(0, seq.dtype(), seq.elements()[index].shape());
}

void infer_split_to_sequence(InferContext& ctx) {
  ctx.set_output_value(0, ValueKind::sequence, ctx.input_dtype(0));
}

void infer_concat_from_sequence(InferContext& ctx) {
  expect_kind(ctx, 0, ValueKind::sequence, "input_sequence");
  const Tensor& seq = ctx.input_value(0);
  bool new_axis = ctx.node.attr_int("new_axis", 0) != 0;
  ctx.set_output(0, seq.dtype(), concat_from_sequence_shape(seq, ctx.node.attr_int("axis", 0), new_axis));
}

void infer_optional(InferContext& ctx) {
  if (ctx.has_input(0)) {
    ValueKind k = ctx.input_kind(0);
    if (k != ValueKind::tensor && k != ValueKind::sequence)
      fail("the input is an ", value_kind_name(k), "; an optional holds a tensor or a sequence");
    ctx.set_output_value(0, k == ValueKind::tensor ? ValueKind::optional_tensor : ValueKind::optional_sequence,
                         ctx.input_dtype(0));
    return;
  }
  auto it = ctx.node.attrs.find("type");
  if (it == ctx.node.attrs.end() || it->second.kind != Attribute::Kind::type)
    fail("an Optional without an input needs the attribute 'type'");
  const ValueDecl& type = it->second.type;
  if (type.dtype == DType::undefined || is_optional(type.kind))
    unsupported("the attribute 'type' is not a tensor or a sequence of tensors of a supported type");
  ctx.set_output_value(0, type.kind == ValueKind::tensor ? ValueKind::optional_tensor : ValueKind::optional_sequence,
                       type.dtype);
}

void infer_optional_has_element(InferContext& ctx) { ctx.set_output(0, DType::boolean, {}); }

// An optional's element, or (opset 18) a tensor or a sequence given directly.
void infer_optional_get_element(InferContext& ctx) {
  ValueKind k = ctx.input_kind(0);
  if (k == ValueKind::sequence || k == ValueKind::optional_sequence) {
    ctx.set_output_value(0, ValueKind::sequence, ctx.input_dtype(0));
  } else if (k == ValueKind::tensor) {
    ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  } else {
    const Tensor& opt = ctx.input_value(0);
    if (opt.elements().empty()) fail("the optional input '", ctx.node.inputs[0], "' is empty");
    ctx.set_output(0, opt.dtype(), opt.elements()[0].shape());
  }
}

}  // namespace

void register_sequence_schemas(SchemaTable& t) {
  t["SequenceEmpty"] = {infer_sequence_empty, 0, 0};
  t["SequenceConstruct"] = {infer_sequence_construct, 1, -1};
  t["SequenceInsert"] = {infer_sequence_insert, 2, 3};
  t["SequenceErase"] = {infer_sequence_erase, 1, 2};
  t["SequenceLength"] = {infer_sequence_length, 1, 1};
  t["SequenceAt"] = {infer_sequence_at, 2, 2};
  t["SplitToSequence"] = {infer_split_to_sequence, 1, 2};
  t["ConcatFromSequence"] = {infer_concat_from_sequence, 1, 1};
  t["Optional"] = {infer_optional, 0, 1};
  t["OptionalHasElement"] = {infer_optional_has_element, 0, 1};
  t["OptionalGetElement"] = {infer_optional_get_element, 1, 1};
  for (const char* op : {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceLength",
                         "SequenceAt", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement",
                         "OptionalGetElement"})
    t[op].non_tensor_values = true;
}

}  // namespace vlrt
