#include "exec/control_flow.h"

#include <algorithm>
#include <cstring>

#include "exec/session.h"

namespace vlrt {

namespace {

// Entry `index` of axis `axis`: the tensor without that axis.
Tensor take(const Tensor& t, int64_t axis, int64_t index) {
  Shape shape = t.shape();
  int64_t n = shape[size_t(axis)];
  size_t outer = 1, inner = dtype_size(t.dtype());
  for (int64_t a = 0; a < axis; a++) outer *= size_t(shape[size_t(a)]);
  for (size_t a = size_t(axis) + 1; a < shape.size(); a++) inner *= size_t(shape[a]);
  shape.erase(shape.begin() + axis);
  Tensor out(t.dtype(), shape);
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(out.raw());
  for (size_t o = 0; o < outer; o++)
    std::memcpy(dst + o * inner, src + (o * size_t(n) + size_t(index)) * inner, inner);
  return out;
}

// Stacks equally shaped parts along a new axis `axis`.
Tensor stack(const std::vector<Tensor>& parts, int64_t axis, const std::string& what) {
  const Tensor& first = parts.at(0);
  for (auto& p : parts)
    if (p.shape() != first.shape() || p.dtype() != first.dtype())
      fail(what, " is ", p.describe(), " in one iteration but ", first.describe(),
           " in another; every iteration must give the same type and shape");
  Shape shape = first.shape();
  size_t outer = 1, inner = dtype_size(first.dtype());
  for (int64_t a = 0; a < axis; a++) outer *= size_t(shape[size_t(a)]);
  for (size_t a = size_t(axis); a < shape.size(); a++) inner *= size_t(shape[a]);
  shape.insert(shape.begin() + axis, int64_t(parts.size()));
  Tensor out(first.dtype(), shape);
  char* dst = static_cast<char*>(out.raw());
  for (size_t o = 0; o < outer; o++)
    for (size_t t = 0; t < parts.size(); t++)
      std::memcpy(dst + (o * parts.size() + t) * inner, static_cast<const char*>(parts[t].raw()) + o * inner, inner);
  return out;
}

// A scan output of no iterations: length 0 along `axis`, the other dimensions as declared.
Tensor empty_stack(const ValueDecl& decl, int64_t axis, const std::string& what) {
  if (decl.dtype == DType::undefined || !decl.has_shape)
    unsupported(what, " has no iterations and the body does not declare its type and shape");
  Shape shape;
  for (auto& d : decl.dims) {
    if (d.value < 0) unsupported(what, " has no iterations and the body declares a dynamic shape ", decl.describe());
    shape.push_back(d.value);
  }
  shape.insert(shape.begin() + axis, 0);
  return Tensor(decl.dtype, shape);
}

bool truth(const Tensor& t, const char* what) {
  if (t.numel() != 1) fail(what, " has ", t.numel(), " elements, expected one");
  return t.to_double_vector()[0] != 0;
}

int64_t normalized(int64_t axis, size_t rank, const char* what) {
  int64_t r = int64_t(rank);
  if (axis < -r || axis >= r) fail(what, " ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + r : axis;
}

}  // namespace

ControlFlowRunner::ControlFlowRunner(const Model& parent, const Node& node, int threads,
                                     int64_t max_loop_iterations, std::shared_ptr<Backend> host)
    : parent_(parent),
      node_(node),
      threads_(threads),
      max_loop_iterations_(max_loop_iterations),
      host_(std::move(host)),
      implicit_(implicit_inputs(node)) {}

ControlFlowRunner::~ControlFlowRunner() = default;

ControlFlowRunner::Body& ControlFlowRunner::body(const std::string& attr) {
  auto it = bodies_.find(attr);
  if (it != bodies_.end()) return it->second;
  const Graph& sub = node_.attr_graph(attr);
  Model child;
  child.path = cat(parent_.path, ": ", node_.label(), ", subgraph '", attr, "'");
  child.ir_version = parent_.ir_version;
  child.opsets = parent_.opsets;
  child.graph = sub;
  Body b;
  for (auto& in : sub.inputs) b.formal.push_back(in.name);
  // The enclosing graph's weights are the body's too: constants it folds and prepares (packed
  // weights) once, not inputs of every call. Other enclosing values are inputs.
  for (auto& name : outer_scope_reads(sub)) {
    auto weight = parent_.graph.initializers.find(name);
    if (weight != parent_.graph.initializers.end() && weight->second.is_tensor() &&
        weight->second.defined()) {
      child.graph.initializers[name] = weight->second;
      continue;
    }
    b.outer.push_back(name);
    child.graph.inputs.push_back(ValueDecl{name, DType::undefined, false, {}});
  }
  b.outputs = sub.outputs;
  SessionOptions options;
  options.threads = threads_;
  options.max_loop_iterations = max_loop_iterations_;
  options.check_declared_shapes = false;  // loop-carried values may change shape
  options.host_backend = host_;
  b.session = std::make_unique<Session>(std::move(child), options);
  return bodies_[attr] = std::move(b);
}

std::vector<Tensor> ControlFlowRunner::call(Body& b, const std::vector<Tensor>& formal) {
  TensorMap in;
  for (size_t i = 0; i < b.formal.size(); i++) in[b.formal[i]] = formal.at(i);
  for (auto& name : b.outer) {
    auto it = outer_values_.find(name);
    if (it == outer_values_.end() || !it->second)
      fail("internal error: the outer-scope value '", name, "' was not passed to the subgraph");
    in[name] = *it->second;
  }
  TensorMap out = b.session->run(in);
  std::vector<Tensor> result;
  for (auto& o : b.outputs) result.push_back(std::move(out.at(o.name)));
  return result;
}

std::vector<Tensor> ControlFlowRunner::run(const std::vector<const Tensor*>& inputs) {
  size_t explicit_count = node_.inputs.size();
  VLRT_CHECK(inputs.size() == explicit_count + implicit_.size(), "internal error: ", node_.label(), " got ",
             inputs.size(), " inputs, expected ", explicit_count + implicit_.size());
  inputs_.assign(inputs.begin(), inputs.begin() + std::ptrdiff_t(explicit_count));
  outer_values_.clear();
  for (size_t i = 0; i < implicit_.size(); i++) outer_values_[implicit_[i]] = inputs[explicit_count + i];
  if (node_.op_type == "If") return run_if();
  if (node_.op_type == "Loop") return run_loop();
  if (node_.op_type == "Scan") return run_scan();
  if (node_.op_type == "SequenceMap") return run_sequence_map();
  unsupported(node_.label(), ": not a control-flow op");
}

std::vector<Tensor> ControlFlowRunner::run_if() {
  VLRT_CHECK(inputs_.size() == 1 && inputs_[0], "If takes one input, the condition");
  bool taken = truth(*inputs_[0], "the condition");
  std::vector<Tensor> out = call(body(taken ? "then_branch" : "else_branch"), {});
  VLRT_CHECK(out.size() == node_.outputs.size(), taken ? "then_branch" : "else_branch", " gives ", out.size(),
             " outputs but the node has ", node_.outputs.size());
  return out;
}

std::vector<Tensor> ControlFlowRunner::run_loop() {
  Body& b = body("body");
  VLRT_CHECK(inputs_.size() >= 2, "Loop takes M, cond and the loop-carried values");
  size_t carried = inputs_.size() - 2;
  VLRT_CHECK(b.formal.size() == carried + 2 && b.outputs.size() >= carried + 1, "the body has ", b.formal.size(),
             " inputs and ", b.outputs.size(), " outputs; expected ", carried + 2, " inputs and at least ",
             carried + 1, " outputs");
  size_t scans = b.outputs.size() - 1 - carried;
  bool bounded = inputs_[0] != nullptr, conditional = inputs_[1] != nullptr;
  int64_t max_trips = bounded ? inputs_[0]->to_int64_vector().at(0) : 0;
  bool limited = max_loop_iterations_ > 0;
  if (limited && bounded && !conditional && max_trips > max_loop_iterations_)
    fail("its trip count M is ", max_trips, ", more than the ", max_loop_iterations_,
         " iterations a Loop may run; refused before running (raise --max-loop-iterations, or 0 for no limit, ",
         "if the model really loops that long)");
  bool cond = conditional ? truth(*inputs_[1], "the condition") : true;
  std::vector<Tensor> state;
  for (size_t i = 0; i < carried; i++) {
    VLRT_CHECK(inputs_[2 + i], "loop-carried value ", i, " has no initial value");
    state.push_back(*inputs_[2 + i]);
  }
  std::vector<std::vector<Tensor>> scanned(scans);
  for (int64_t i = 0; (!bounded || i < max_trips) && cond; i++) {
    if (limited && i == max_loop_iterations_)
      fail("its condition still holds after ", max_loop_iterations_,
           " iterations, the most a Loop may run; stopped (raise --max-loop-iterations, or 0 for no limit, ",
           "if the model really loops that long)");
    std::vector<Tensor> formal = {Tensor::scalar<int64_t>(i), Tensor::scalar<bool>(cond)};
    formal.insert(formal.end(), state.begin(), state.end());
    std::vector<Tensor> out = call(b, formal);
    if (conditional) cond = truth(out[0], "the body's condition output");
    for (size_t k = 0; k < carried; k++) state[k] = std::move(out[1 + k]);
    for (size_t k = 0; k < scans; k++) scanned[k].push_back(std::move(out[1 + carried + k]));
  }
  std::vector<Tensor> result = std::move(state);
  for (size_t k = 0; k < scans; k++) {
    std::string what = cat("scan output ", k, " ('", b.outputs[1 + carried + k].name, "')");
    result.push_back(scanned[k].empty() ? empty_stack(b.outputs[1 + carried + k], 0, what)
                                        : stack(scanned[k], 0, what));
  }
  return result;
}

std::vector<Tensor> ControlFlowRunner::run_scan() {
  Body& b = body("body");
  int64_t k = node_.attr_int("num_scan_inputs", -1);
  size_t n_in = inputs_.size();
  VLRT_CHECK(k >= 1 && size_t(k) <= n_in, "num_scan_inputs is ", k, ", expected 1 to ", n_in);
  size_t states = n_in - size_t(k);
  VLRT_CHECK(b.formal.size() == n_in && b.outputs.size() >= states, "the body has ", b.formal.size(),
             " inputs and ", b.outputs.size(), " outputs; expected ", n_in, " inputs and at least ", states,
             " outputs");
  size_t scan_outs = b.outputs.size() - states;
  auto in_axes = node_.attr_ints("scan_input_axes", std::vector<int64_t>(size_t(k), 0));
  auto in_dirs = node_.attr_ints("scan_input_directions", std::vector<int64_t>(size_t(k), 0));
  auto out_axes = node_.attr_ints("scan_output_axes", std::vector<int64_t>(scan_outs, 0));
  auto out_dirs = node_.attr_ints("scan_output_directions", std::vector<int64_t>(scan_outs, 0));
  VLRT_CHECK(in_axes.size() == size_t(k) && in_dirs.size() == size_t(k), "scan_input_axes and scan_input_directions need ",
             k, " entries");
  VLRT_CHECK(out_axes.size() == scan_outs && out_dirs.size() == scan_outs,
             "scan_output_axes and scan_output_directions need ", scan_outs, " entries");
  std::vector<Tensor> state;
  for (size_t i = 0; i < states; i++) {
    VLRT_CHECK(inputs_[i], "state ", i, " has no initial value");
    state.push_back(*inputs_[i]);
  }
  int64_t length = -1;
  std::vector<int64_t> axes(static_cast<size_t>(k));
  for (size_t j = 0; j < size_t(k); j++) {
    const Tensor* t = inputs_[states + j];
    VLRT_CHECK(t, "scan input ", j, " is missing");
    axes[j] = normalized(in_axes[j], t->shape().size(), "scan_input_axes entry");
    int64_t n = t->shape()[size_t(axes[j])];
    if (length >= 0 && n != length)
      fail("scan input ", j, " has ", n, " entries along axis ", axes[j], " but scan input 0 has ", length);
    length = n;
  }
  std::vector<std::vector<Tensor>> scanned(scan_outs);
  for (int64_t it = 0; it < length; it++) {
    std::vector<Tensor> formal = state;
    for (size_t j = 0; j < size_t(k); j++)
      formal.push_back(take(*inputs_[states + j], axes[j], in_dirs[j] == 1 ? length - 1 - it : it));
    std::vector<Tensor> out = call(b, formal);
    for (size_t i = 0; i < states; i++) state[i] = std::move(out[i]);
    for (size_t j = 0; j < scan_outs; j++) scanned[j].push_back(std::move(out[states + j]));
  }
  std::vector<Tensor> result = std::move(state);
  for (size_t j = 0; j < scan_outs; j++) {
    std::string what = cat("scan output ", j, " ('", b.outputs[states + j].name, "')");
    const ValueDecl& decl = b.outputs[states + j];
    size_t rank = scanned[j].empty() ? decl.dims.size() : scanned[j][0].shape().size();
    int64_t axis = normalized(out_axes[j], rank + 1, "scan_output_axes entry");
    if (out_dirs[j] == 1) std::reverse(scanned[j].begin(), scanned[j].end());
    result.push_back(scanned[j].empty() ? empty_stack(decl, axis, what) : stack(scanned[j], axis, what));
  }
  return result;
}

std::vector<Tensor> ControlFlowRunner::run_sequence_map() {
  Body& b = body("body");
  VLRT_CHECK(inputs_.size() == b.formal.size() && b.outputs.size() == node_.outputs.size(), "the body has ",
             b.formal.size(), " inputs and ", b.outputs.size(), " outputs; expected ", inputs_.size(), " and ",
             node_.outputs.size());
  for (size_t j = 0; j < inputs_.size(); j++) VLRT_CHECK(inputs_[j], "input ", j, " is missing");
  size_t length = inputs_[0]->elements().size();
  for (size_t j = 1; j < inputs_.size(); j++)
    if (inputs_[j]->kind() == ValueKind::sequence && inputs_[j]->elements().size() != length)
      fail("input ", j, " ('", node_.inputs[j], "') is a sequence of ", inputs_[j]->elements().size(),
           " tensors but input 0 has ", length, "; every sequence input must have the same length");
  std::vector<std::vector<Tensor>> made(b.outputs.size());
  for (size_t i = 0; i < length; i++) {
    std::vector<Tensor> formal;
    for (auto* in : inputs_) formal.push_back(in->kind() == ValueKind::sequence ? in->elements()[i] : *in);
    std::vector<Tensor> out = call(b, formal);
    for (size_t k = 0; k < out.size(); k++) made[k].push_back(std::move(out[k]));
  }
  std::vector<Tensor> result;
  for (size_t k = 0; k < made.size(); k++) {
    DType dtype = made[k].empty() ? b.outputs[k].dtype : made[k][0].dtype();
    if (dtype == DType::undefined)
      unsupported("output ", k, " is an empty sequence and the body does not declare its type");
    result.push_back(Tensor::sequence(dtype, std::move(made[k])));
  }
  return result;
}

}  // namespace vlrt
