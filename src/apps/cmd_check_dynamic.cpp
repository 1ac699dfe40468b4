// vlrt check-dynamic MODEL [--dim NAME=A,B]: runs a model at two sizes of one dynamic dimension,
// the larger input being the smaller one with more random items, and compares the first items'
// outputs. An export that baked the dimension's size gives other answers (or fails) at the other size.
#include <cstring>
#include <iostream>

#include "apps/commands.h"
#include "exec/compare_runs.h"
#include "exec/session.h"
#include "integrity/load_model.h"

namespace vlrt {

namespace {

struct CheckDynamicArgs {
  std::string model;
  std::string dim;                  // NAME=A,B; empty: the first axis of inputs, at 1 and 2
  std::vector<std::string> sizes;   // SYMBOL=N for the other dynamic dimensions
  Tolerance tol;
  int threads = 0;
};

struct VariedDimension {
  std::string name;  // empty: the first axis of every input whose first axis is dynamic
  int64_t small = 1, large = 2;
  // The axis of a declaration that carries the dimension, or -1.
  int axis_of(const ValueDecl& d) const {
    for (size_t k = 0; k < d.dims.size(); k++)
      if (d.dims[k].value < 0 && (name.empty() ? k == 0 : d.dims[k].param == name)) return int(k);
    return -1;
  }
  std::string label() const { return name.empty() ? std::string("the first axis") : "'" + name + "'"; }
};

VariedDimension parse_dim(const std::string& arg) {
  VariedDimension v;
  if (arg.empty()) return v;
  auto eq = arg.find('='), comma = arg.find(',');
  if (eq == std::string::npos || eq == 0 || comma == std::string::npos || comma < eq)
    fail("--dim '", arg, "': give the dimension and two sizes, e.g. --dim batch=1,2");
  v.name = arg.substr(0, eq);
  try {
    v.small = std::stoll(arg.substr(eq + 1, comma - eq - 1));
    v.large = std::stoll(arg.substr(comma + 1));
  } catch (const std::exception&) {
    fail("--dim '", arg, "': the sizes must be integers, e.g. --dim batch=1,2");
  }
  if (v.small < 1 || v.large <= v.small)
    fail("--dim '", arg, "': give two sizes A < B, both at least 1, e.g. --dim ", v.name, "=1,2");
  return v;
}

// The first n items of t along axis.
Tensor first_items(const Tensor& t, int axis, int64_t n) {
  Shape shape = t.shape();
  int64_t outer = 1, inner = int64_t(dtype_size(t.dtype()));
  for (int k = 0; k < axis; k++) outer *= shape[size_t(k)];
  for (size_t k = size_t(axis) + 1; k < shape.size(); k++) inner *= shape[k];
  int64_t total = shape[size_t(axis)];
  shape[size_t(axis)] = n;
  Tensor out(t.dtype(), shape);
  auto src = static_cast<const char*>(t.raw());
  auto dst = static_cast<char*>(out.raw());
  for (int64_t o = 0; o < outer; o++) std::memcpy(dst + o * n * inner, src + o * total * inner, size_t(n * inner));
  return out;
}

// The inputs at the large size (random, seeded) and the same cut to the small size.
std::pair<TensorMap, TensorMap> make_inputs(const Model& model, const VariedDimension& dim,
                                            const std::vector<std::string>& size_args) {
  std::map<std::string, int64_t> sizes;
  for (auto& s : size_args) {
    auto [name, value] = parse_name_value(s, "--size");
    try {
      sizes[name] = std::stoll(value);
    } catch (const std::exception&) {
      fail("--size '", s, "': give SYMBOL=N, e.g. --size seq=16");
    }
  }
  bool varied = false;
  for (auto& d : model.graph.inputs) varied = varied || dim.axis_of(d) >= 0;
  if (!varied)
    fail("no input of the model has ", dim.label(), " as a dynamic axis; name one with --dim NAME=A,B");
  std::vector<std::string> shape_args;
  for (auto& d : model.graph.inputs) {
    if (!d.has_shape) fail("input '", d.name, "' declares no shape: vlrt check-dynamic needs every input's shape");
    int axis = dim.axis_of(d);
    std::string spec;
    for (size_t k = 0; k < d.dims.size(); k++) {
      int64_t v = d.dims[k].value;
      if (int(k) == axis) v = dim.large;
      else if (v < 0 && sizes.count(d.dims[k].param)) v = sizes[d.dims[k].param];
      else if (v < 0)
        fail("input '", d.name, "' axis ", k, " is dynamic",
             d.dims[k].param.empty() ? "" : cat(" ('", d.dims[k].param, "')"), "; give its size with --size ",
             d.dims[k].param.empty() ? "SYMBOL" : d.dims[k].param, "=N, or vary it with --dim");
      spec += cat(spec.empty() ? "" : "x", v);
    }
    if (!spec.empty()) shape_args.push_back(d.name + "=" + spec);
  }
  TensorMap large;
  add_random_inputs(model, shape_args, large);
  TensorMap small;
  for (auto& d : model.graph.inputs) {
    int axis = dim.axis_of(d);
    small[d.name] = axis < 0 ? large[d.name] : first_items(large[d.name], axis, dim.small);
  }
  return {small, large};
}

// The output's axis that carries the dimension: declared, or the one axis of the small size in the
// small run and of the large size in the large run.
int output_axis(const ValueDecl* decl, const VariedDimension& dim, const Tensor& small, const Tensor& large) {
  if (decl && decl->has_shape) {
    int axis = dim.axis_of(*decl);
    if (axis >= 0) return axis;
  }
  if (small.shape().size() != large.shape().size()) return -1;
  for (size_t k = 0; k < small.shape().size(); k++)
    if (small.shape()[k] == dim.small && large.shape()[k] == dim.large) return int(k);
  return -1;
}

// 0: the first items' outputs agree; 1: some output differs, or the large size fails.
int check_dynamic(const CheckDynamicArgs& a) {
  VariedDimension dim = parse_dim(a.dim);
  Model model = load_model(a.model);
  auto [small_inputs, large_inputs] = make_inputs(model, dim, a.sizes);
  std::vector<ValueDecl> outputs = model.graph.outputs;
  SessionOptions options;
  options.threads = a.threads;
  Session session(std::move(model), options);
  std::cout << "model: " << a.model << "\ndimension: " << dim.label() << " at " << dim.small << " and "
            << dim.large << " (the larger input is the smaller one with " << dim.large - dim.small
            << " more random items)\ntolerance: max|a-b| <= " << a.tol.atol << " + " << a.tol.rtol << " * max|a|\n\n";
  TensorMap small = session.run(small_inputs);
  TensorMap large;
  try {
    large = session.run(large_inputs);
  } catch (const Error& e) {
    std::cout << "FAILS at " << dim.label() << " = " << dim.large << " (it runs at " << dim.small << "): " << e.what()
              << "\nThe export probably baked the size of " << dim.label()
              << " into a shape constant (vlrt info names it); re-export with the dimension dynamic.\n";
    return 1;
  }
  std::vector<std::string> differing;
  for (auto& decl : outputs) {
    const Tensor &s = small.at(decl.name), &l = large.at(decl.name);
    int axis = output_axis(&decl, dim, s, l);
    if (axis < 0 || size_t(axis) >= l.shape().size() || l.shape()[size_t(axis)] < dim.small) {
      std::cout << "  " << decl.name << ": DIFFERS, shape " << shape_str(s.shape()) << " at " << dim.small << " but "
                << shape_str(l.shape()) << " at " << dim.large << " (no axis follows the dimension)\n";
      differing.push_back(decl.name);
      continue;
    }
    ValueDiff d = compare_values(s, first_items(l, axis, dim.small));
    bool ok = within(d, a.tol);
    std::cout << "  " << decl.name << ": " << (ok ? "same" : "DIFFERS");
    if (d.comparable) std::cout << ", max abs " << d.max_abs << ", max rel " << d.max_rel;
    else std::cout << ", first items shaped " << shape_str(d.shape_b) << " instead of " << shape_str(d.shape_a);
    std::cout << "\n";
    if (!ok) differing.push_back(decl.name);
  }
  if (differing.empty()) {
    std::cout << "\nthe first items agree at both sizes\n";
    return 0;
  }
  std::cout << "\n" << differing.size() << " of " << outputs.size() << " outputs differ at " << dim.label()
            << " = " << dim.large << ":";
  for (auto& name : differing) std::cout << " " << name;
  std::cout << "\nThe items of a batch are mixed or dropped: the export probably baked the size of " << dim.label()
            << " into a shape constant (vlrt info names it); re-export with the dimension dynamic.\n";
  return 1;
}

}  // namespace

void add_check_dynamic_command(CLI::App& app) {
  static CheckDynamicArgs a;
  auto* cmd = app.add_subcommand(
      "check-dynamic",
      "Run a model at two sizes of one dynamic dimension (batch 1 and 2 by default) on random inputs, the "
      "larger input being the smaller one with more random items, and compare each output's first items "
      "(max abs and max relative error). An export that baked the size into a shape constant gives other "
      "answers, or fails, at the other size.\n"
      "Exit code: 0 every output agrees within tolerance, 1 some output differs or the second size fails, "
      "2 a usage or model error.");
  cmd->add_option("model", a.model, "ONNX model file")->required();
  cmd->add_option("--dim", a.dim,
                  "NAME=A,B: the dynamic dimension (its symbol) and two sizes A < B; default: the first axis of "
                  "every input whose first axis is dynamic, at 1 and 2");
  cmd->add_option("--size", a.sizes, "SYMBOL=N for the model's other dynamic dimensions");
  cmd->add_option("--atol", a.tol.atol, "absolute tolerance")->capture_default_str();
  cmd->add_option("--rtol", a.tol.rtol, "relative tolerance (times max |a| of the output)")->capture_default_str();
  cmd->add_option("-t,--threads", a.threads, "worker threads (default: all cores)");
  cmd->callback(comparing_command([] { return check_dynamic(a); }));
}

}  // namespace vlrt
