// If, Loop, Scan and SequenceMap: output dtypes and shapes from their subgraphs. The executor runs
// the subgraphs; shapes that depend on data (a Loop's trip count, an If on a runtime
// condition whose branches differ) are deferred to execution.
#include <unordered_map>

#include "ops/op_schema.h"

namespace vlrt {

namespace {

ValueInfo scalar_info(DType dtype) {
  ValueInfo v;
  v.dtype = dtype;
  v.shape_known = true;
  return v;
}

// What can be inferred of a subgraph's outputs from its formal inputs alone: values read
// from enclosing graphs are unknown here, and so is whatever depends on them. A dtype
// not inferred is taken from the subgraph's declaration.
std::vector<ValueInfo> infer_subgraph(const Graph& g, const std::string& what, int64_t opset,
                                      const std::vector<ValueInfo>& formal) {
  if (formal.size() != g.inputs.size())
    fail(what, " has ", g.inputs.size(), " inputs, expected ", formal.size());
  std::unordered_map<std::string, ValueInfo> values;
  for (auto& [name, t] : g.initializers) values[name] = known_info(t);
  for (size_t i = 0; i < formal.size(); i++) values[g.inputs[i].name] = formal[i];
  for (auto& node : g.nodes) {
    std::vector<const ValueInfo*> in(node.inputs.size(), nullptr);
    bool known = true;
    for (size_t i = 0; i < node.inputs.size(); i++) {
      if (node.inputs[i].empty()) continue;
      auto it = values.find(node.inputs[i]);
      if (it == values.end() || !it->second.shape_known) known = false;
      else in[i] = &it->second;
    }
    std::vector<ValueInfo> outs(node.outputs.size());
    if (known) {
      try {
        outs = infer_node(node, opset, in);
      } catch (const ShapeDeferred&) {
        outs.assign(node.outputs.size(), ValueInfo{});
      } catch (const Error& e) {
        rethrow_as(e, cat(what, ": ", e.what()));
      }
    }
    for (size_t i = 0; i < node.outputs.size(); i++)
      if (!node.outputs[i].empty()) values[node.outputs[i]] = std::move(outs[i]);
  }
  std::vector<ValueInfo> result;
  for (auto& o : g.outputs) {
    auto it = values.find(o.name);
    ValueInfo v = it == values.end() ? ValueInfo{} : it->second;
    v.value.reset();
    if (v.dtype == DType::undefined) {
      v.dtype = o.dtype;
      v.kind = o.kind;
    }
    if (!v.shape_known && o.has_shape) {
      bool fixed = true;
      for (auto& d : o.dims) fixed = fixed && d.value >= 0;
      if (fixed) {
        v.shape_known = true;
        for (auto& d : o.dims) v.shape.push_back(d.value);
      }
    }
    result.push_back(std::move(v));
  }
  return result;
}

void infer_if(InferContext& ctx) {
  const Node& n = ctx.node;
  const Graph& then_g = n.attr_graph("then_branch");
  const Graph& else_g = n.attr_graph("else_branch");
  size_t count = ctx.output_count();
  if (then_g.outputs.size() != count || else_g.outputs.size() != count)
    fail("then_branch has ", then_g.outputs.size(), " outputs and else_branch ", else_g.outputs.size(),
         " but the node has ", count, "; each branch must produce one value per output");
  if (ctx.input_dtype(0) != DType::boolean && ctx.input_dtype(0) != DType::undefined)
    fail("the condition is ", dtype_name(ctx.input_dtype(0)), ", expected a bool");
  std::vector<ValueInfo> then_out = infer_subgraph(then_g, "then_branch", ctx.opset, {});
  std::vector<ValueInfo> else_out = infer_subgraph(else_g, "else_branch", ctx.opset, {});
  // The branches may differ in shape, even in rank (exporters write such models and ONNX
  // Runtime runs them): the output's shape is then known only once the condition is.
  for (size_t i = 0; i < count; i++) {
    DType a = then_out[i].dtype, b = else_out[i].dtype;
    if (a != DType::undefined && b != DType::undefined && a != b)
      fail("output ", i, " is ", dtype_name(a), " in then_branch but ", dtype_name(b),
           " in else_branch; both branches must produce the same type");
  }
  const Tensor* cond = ctx.input_value_if_known(0);
  if (cond && cond->numel() != 1) fail("the condition has ", cond->numel(), " elements, expected one");
  const std::vector<ValueInfo>* chosen = nullptr;
  if (cond) chosen = cond->to_double_vector()[0] != 0 ? &then_out : &else_out;
  for (size_t i = 0; i < count; i++) {
    const ValueInfo& t = chosen ? (*chosen)[i] : then_out[i];
    bool same = chosen || (else_out[i].shape_known && t.shape_known && t.shape == else_out[i].shape &&
                           t.kind == else_out[i].kind);
    if (!t.shape_known || !same || t.dtype == DType::undefined) throw ShapeDeferred{};
    ctx.set_output(i, t.dtype, t.shape);
    ctx.outputs[i].kind = t.kind;
  }
}

void infer_loop(InferContext& ctx) {
  const Graph& body = ctx.node.attr_graph("body");
  size_t carried = ctx.input_count() - 2;
  if (ctx.input_count() < 2) fail("Loop takes M, cond and the loop-carried values");
  if (body.inputs.size() != carried + 2)
    fail("the body has ", body.inputs.size(), " inputs, expected ", carried + 2,
         " (iteration number, condition and ", carried, " loop-carried values)");
  if (body.outputs.size() < carried + 1)
    fail("the body has ", body.outputs.size(), " outputs, expected at least ", carried + 1,
         " (condition and ", carried, " loop-carried values)");
  size_t scans = body.outputs.size() - 1 - carried;
  if (ctx.output_count() != carried + scans)
    fail("the node has ", ctx.output_count(), " outputs but the body gives ", carried, " loop-carried values and ",
         scans, " scan outputs");
  std::vector<ValueInfo> formal = {scalar_info(DType::i64), scalar_info(DType::boolean)};
  for (size_t i = 0; i < carried; i++) {
    ValueInfo v = ctx.input_info(2 + i);
    v.value.reset();
    if (!v.shape_known) throw ShapeDeferred{};
    formal.push_back(v);
  }
  std::vector<ValueInfo> out = infer_subgraph(body, "body", ctx.opset, formal);
  for (size_t i = 0; i < carried; i++) {
    const ValueInfo& o = out[1 + i];
    if (o.dtype != DType::undefined && o.dtype != formal[2 + i].dtype)
      fail("loop-carried value ", i, " enters the body as ", dtype_name(formal[2 + i].dtype), " but leaves it as ",
           dtype_name(o.dtype));
  }
  // The trip count is data; so are the scan outputs' lengths and any carried shape that changes.
  if (scans > 0) throw ShapeDeferred{};
  // An optional carried value may leave the body as its element: its kind is then data too.
  for (size_t i = 0; i < carried; i++) {
    const ValueInfo& o = out[1 + i];
    if (!o.shape_known || o.shape != formal[2 + i].shape || o.kind != formal[2 + i].kind) throw ShapeDeferred{};
    ctx.set_output(i, formal[2 + i].dtype, o.shape);
    ctx.outputs[i].kind = o.kind;
  }
}

int64_t normalized_axis(int64_t axis, size_t rank, const char* what, size_t i) {
  int64_t r = int64_t(rank);
  if (axis < -r || axis >= r) fail(what, "[", i, "] = ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + r : axis;
}

void infer_scan(InferContext& ctx) {
  const Node& n = ctx.node;
  const Graph& body = n.attr_graph("body");
  int64_t k = n.attr_int("num_scan_inputs", -1);
  size_t inputs = ctx.input_count();
  if (k < 1 || size_t(k) > inputs) fail("num_scan_inputs is ", k, ", expected 1 to ", inputs);
  size_t states = inputs - size_t(k);
  if (body.inputs.size() != inputs)
    fail("the body has ", body.inputs.size(), " inputs, expected ", inputs, " (", states, " states and ", k,
         " scan inputs)");
  if (body.outputs.size() < states || ctx.output_count() != body.outputs.size())
    fail("the node has ", ctx.output_count(), " outputs and the body ", body.outputs.size(),
         "; both must be the states followed by the scan outputs");
  size_t scan_outs = body.outputs.size() - states;
  std::vector<int64_t> in_axes = n.attr_ints("scan_input_axes", std::vector<int64_t>(size_t(k), 0));
  std::vector<int64_t> out_axes = n.attr_ints("scan_output_axes", std::vector<int64_t>(scan_outs, 0));
  if (in_axes.size() != size_t(k)) fail("scan_input_axes has ", in_axes.size(), " entries, expected ", k);
  if (out_axes.size() != scan_outs) fail("scan_output_axes has ", out_axes.size(), " entries, expected ", scan_outs);
  std::vector<ValueInfo> formal;
  for (size_t i = 0; i < states; i++) {
    ValueInfo v = scalar_info(ctx.input_dtype(i));
    v.shape = ctx.input_shape(i);
    formal.push_back(v);
  }
  int64_t length = -1;
  for (size_t j = 0; j < size_t(k); j++) {
    Shape s = ctx.input_shape(states + j);
    int64_t axis = normalized_axis(in_axes[j], s.size(), "scan_input_axes", j);
    if (length >= 0 && s[size_t(axis)] != length)
      fail("scan input ", j, " has ", s[size_t(axis)], " entries along axis ", axis, " but scan input 0 has ", length);
    length = s[size_t(axis)];
    s.erase(s.begin() + axis);
    ValueInfo v = scalar_info(ctx.input_dtype(states + j));
    v.shape = s;
    formal.push_back(v);
  }
  std::vector<ValueInfo> out = infer_subgraph(body, "body", ctx.opset, formal);
  for (auto& o : out)
    if (!o.shape_known || o.dtype == DType::undefined) throw ShapeDeferred{};
  for (size_t i = 0; i < states; i++) {
    if (out[i].shape != formal[i].shape || out[i].dtype != formal[i].dtype)
      fail("state ", i, " enters the body as ", dtype_name(formal[i].dtype), shape_str(formal[i].shape),
           " but leaves it as ", dtype_name(out[i].dtype), shape_str(out[i].shape));
    ctx.set_output(i, out[i].dtype, out[i].shape);
  }
  for (size_t j = 0; j < scan_outs; j++) {
    Shape s = out[states + j].shape;
    int64_t axis = normalized_axis(out_axes[j], s.size() + 1, "scan_output_axes", j);
    s.insert(s.begin() + axis, length);
    ctx.set_output(states + j, out[states + j].dtype, s);
  }
}

// SequenceMap: the body runs once per element of the input sequence (and of any other
// sequence input; tensor inputs are passed whole); each body output makes a sequence.
void infer_sequence_map(InferContext& ctx) {
  const Graph& body = ctx.node.attr_graph("body");
  if (ctx.input_kind(0) != ValueKind::sequence)
    fail("input 0 is a ", value_kind_name(ctx.input_kind(0)), ", expected a sequence");
  if (body.inputs.size() != ctx.input_count())
    fail("the body has ", body.inputs.size(), " inputs, expected ", ctx.input_count(), " (one per node input)");
  if (body.outputs.size() != ctx.output_count())
    fail("the body has ", body.outputs.size(), " outputs but the node has ", ctx.output_count());
  std::vector<ValueInfo> formal;
  for (size_t i = 0; i < ctx.input_count(); i++) {
    ValueInfo v = ctx.input_info(i);
    v.value.reset();
    if (v.kind == ValueKind::sequence) v = ValueInfo{v.dtype, false, {}, std::nullopt};
    else if (v.kind != ValueKind::tensor) fail("input ", i, " is a ", value_kind_name(v.kind), "; expected a sequence or a tensor");
    formal.push_back(v);
  }
  std::vector<ValueInfo> out = infer_subgraph(body, "body", ctx.opset, formal);
  for (size_t i = 0; i < out.size(); i++) {
    if (out[i].kind != ValueKind::tensor) fail("body output ", i, " is a ", value_kind_name(out[i].kind), ", expected a tensor");
    if (out[i].dtype == DType::undefined) throw ShapeDeferred{};
    ctx.set_output_value(i, ValueKind::sequence, out[i].dtype);
  }
}

}  // namespace

void register_control_flow_schemas(SchemaTable& t) {
  t["If"] = {infer_if, 1, 1};
  t["Loop"] = {infer_loop, 2, -1};
  t["Scan"] = {infer_scan, 1, -1};
  t["SequenceMap"] = {infer_sequence_map, 1, -1};
  for (const char* op : {"If", "Loop", "Scan", "SequenceMap"}) t[op].control_flow = true;
  for (const char* op : {"If", "Loop", "SequenceMap"}) t[op].non_tensor_values = true;
}

}  // namespace vlrt
