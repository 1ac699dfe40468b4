#include "passes/canonicalize.h"

#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace vlrt {

namespace {

// The rewrite of one node: nodes that must run before and after it, and where new values go.
struct Rewrite {
  Graph& g;
  int64_t opset;
  std::unordered_set<std::string>& taken;                    // every value name in the graph
  const std::unordered_map<std::string, Tensor>& constants;  // outputs of Constant nodes
  std::vector<Node> before, after;
  bool changed = false;

  // "<node>__<what>", made unique.
  std::string fresh(const Node& n, const std::string& what) {
    std::string base = cat(n.name.empty() ? n.outputs.at(0) : n.name, "__", what);
    std::string name = base;
    for (int i = 1; !taken.insert(name).second; i++) name = cat(base, "_", i);
    return name;
  }

  // Input i of n becomes a new initializer holding t; inputs skipped on the way are omitted.
  void set_input(Node& n, size_t i, Tensor t, const std::string& what) {
    std::string name = fresh(n, what);
    g.initializers[name] = std::move(t);
    if (n.inputs.size() <= i) n.inputs.resize(i + 1);
    n.inputs[i] = name;
    changed = true;
  }

  const ValueDecl* declared(const std::string& name) const {
    for (auto* list : {&g.inputs, &g.value_infos, &g.outputs})
      for (auto& d : *list)
        if (d.name == name) return &d;
    return nullptr;
  }

  // The value's type when the graph states it; undefined otherwise.
  DType dtype_of(const std::string& name) const {
    if (auto it = g.initializers.find(name); it != g.initializers.end()) return it->second.dtype();
    if (auto it = constants.find(name); it != constants.end()) return it->second.dtype();
    const ValueDecl* d = declared(name);
    return d ? d->dtype : DType::undefined;
  }

  // The value's rank when the graph states it; -1 otherwise.
  int64_t rank_of(const std::string& name) const {
    if (auto it = g.initializers.find(name); it != g.initializers.end()) return it->second.rank();
    const ValueDecl* d = declared(name);
    return d && d->has_shape ? int64_t(d->dims.size()) : -1;
  }

  // The value when it is an initializer or a Constant's output; nullptr otherwise.
  const Tensor* constant(const std::string& name) const {
    if (auto it = g.initializers.find(name); it != g.initializers.end()) return &it->second;
    auto it = constants.find(name);
    return it != constants.end() ? &it->second : nullptr;
  }
};

Node make_node(Rewrite& r, const Node& of, const std::string& op, std::vector<std::string> inputs,
               std::vector<std::string> outputs) {
  Node n;
  n.name = r.fresh(of, op);
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

Attribute string_attr(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::s;
  a.s = std::move(v);
  return a;
}

Tensor int64_vector(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>(v, {int64_t(v.size())});
}

// Moves the ints attribute `attr` of n to input i; false when n has no such attribute.
bool ints_to_input(Rewrite& r, Node& n, const std::string& attr, size_t i) {
  if (!n.has_attr(attr)) return false;
  r.set_input(n, i, int64_vector(n.attr_ints(attr)), attr);
  n.attrs.erase(attr);
  return true;
}

// Input i of n becomes a scalar of x's type holding v (old float attributes whatever x's type): an
// initializer when the graph states that x is float32 or float64, else a float32 one cast like x.
void scalar_to_input(Rewrite& r, Node& n, size_t i, float v, const std::string& what) {
  std::string x = n.inputs.at(0);
  DType t = r.dtype_of(x);
  if (t == DType::f32 || t == DType::f64) {
    r.set_input(n, i, t == DType::f32 ? Tensor::scalar<float>(v) : Tensor::scalar<double>(v), what);
    return;
  }
  r.set_input(n, i, Tensor::scalar<float>(v), what + "_f32");
  std::string cast = r.fresh(n, what);
  r.before.push_back(make_node(r, n, "CastLike", {n.inputs[i], x}, {cast}));
  n.inputs[i] = cast;
}

// Fails unless n has at most `count` inputs (an old form whose arguments were attributes).
void require_inputs(const Node& n, size_t count, int64_t since, const char* attrs) {
  if (n.inputs.size() > count)
    fail(n.label(), ": before opset ", since, " ", n.op_type, " takes ", attrs,
         " as attributes, not as inputs; got ", n.inputs.size(), " inputs");
}

void rewrite_clip(Rewrite& r, Node& n) {
  if (r.opset >= 11) return;
  require_inputs(n, 1, 11, "min and max");
  const char* bounds[] = {"min", "max"};
  for (size_t i = 1; i <= 2; i++) {
    const char* attr = bounds[i - 1];
    if (!n.has_attr(attr)) continue;
    scalar_to_input(r, n, i, n.attr_float(attr, 0), attr);
    n.attrs.erase(attr);
  }
}

void rewrite_pad(Rewrite& r, Node& n) {
  if (r.opset >= 11) {
    if (r.opset < 18 && n.inputs.size() > 3 && !n.inputs[3].empty())
      fail(n.label(), ": the axes input needs opset 18, the model has opset ", r.opset);
    return;
  }
  require_inputs(n, 1, 11, "pads and value");
  if (!n.has_attr("pads")) fail(n.label(), ": attribute 'pads' is required before opset 11");
  std::vector<int64_t> pads = n.attr_ints("pads");
  int64_t rank = r.rank_of(n.inputs.at(0));
  if (pads.size() % 2 != 0 || (rank >= 0 && int64_t(pads.size()) != 2 * rank))
    fail(n.label(), ": attribute 'pads' ", shape_str(pads), " has ", pads.size(), " values, expected ",
         rank >= 0 ? cat(2 * rank, " (begins then ends of each of the ", rank, " axes)")
                   : std::string("2 per axis (begins then ends)"));
  ints_to_input(r, n, "pads", 1);
  float value = n.attr_float("value", 0);
  n.attrs.erase("value");
  if (value != 0 && n.attr_string("mode", "constant") == "constant") scalar_to_input(r, n, 2, value, "value");
}

void rewrite_slice(Rewrite& r, Node& n) {
  if (r.opset >= 10) return;
  require_inputs(n, 1, 10, "starts, ends and axes");
  if (!n.has_attr("starts") || !n.has_attr("ends"))
    fail(n.label(), ": attributes 'starts' and 'ends' are required before opset 10");
  ints_to_input(r, n, "starts", 1);
  ints_to_input(r, n, "ends", 2);
  ints_to_input(r, n, "axes", 3);
}

void rewrite_split(Rewrite& r, Node& n) {
  if (r.opset >= 13) return;
  require_inputs(n, 1, 13, "split");
  ints_to_input(r, n, "split", 1);
}

void rewrite_squeeze(Rewrite& r, Node& n) {
  if (r.opset >= 13) return;
  require_inputs(n, 1, 13, "axes");
  if (!ints_to_input(r, n, "axes", 1) && n.op_type == "Unsqueeze")
    fail(n.label(), ": attribute 'axes' is required before opset 13");
}

void rewrite_reduce(Rewrite& r, Node& n) {
  int64_t since = n.op_type == "ReduceSum" ? 13 : 18;
  if (r.opset >= since) return;
  require_inputs(n, 1, since, "axes");
  ints_to_input(r, n, "axes", 1);
  r.changed |= n.attrs.erase("noop_with_empty_axes") > 0;
}

void rewrite_topk(Rewrite& r, Node& n) {
  if (r.opset >= 10) return;
  require_inputs(n, 1, 10, "k");
  if (!n.has_attr("k")) fail(n.label(), ": attribute 'k' is required before opset 10");
  r.set_input(n, 1, int64_vector({n.attr_int("k", 0)}), "k");
  n.attrs.erase("k");
}

// Before opset 13 the input is coerced to 2-D at `axis`: Flatten, the op along the last axis, Reshape back.
void rewrite_softmax(Rewrite& r, Node& n) {
  if (r.opset >= 13) return;
  int64_t axis = n.attr_int("axis", 1);
  int64_t rank = r.rank_of(n.inputs.at(0));
  n.attrs["axis"] = int_attribute(-1);
  r.changed = true;
  if (axis == -1 || (rank >= 0 && axis == rank - 1)) return;
  std::string x = n.inputs[0], y = n.outputs.at(0);
  std::string flat = r.fresh(n, "2d_in"), shape = r.fresh(n, "shape"), y2d = r.fresh(n, "2d_out");
  Node flatten = make_node(r, n, "Flatten", {x}, {flat});
  flatten.attrs["axis"] = int_attribute(axis);
  r.before.push_back(std::move(flatten));
  r.before.push_back(make_node(r, n, "Shape", {x}, {shape}));
  n.inputs[0] = flat;
  n.outputs[0] = y2d;
  r.after.push_back(make_node(r, n, "Reshape", {y2d, shape}, {y}));
}

// Legacy nearest rounds each axis down when upsampling and up when downsampling. With scales of unknown or
// mixed direction: a Resize by max(scales, 1) rounding down, then one by min(scales, 1) rounding up.
void split_legacy_nearest(Rewrite& r, Node& n) {
  std::string scales = n.inputs[2], one = r.fresh(n, "one"), up = r.fresh(n, "scales_up"),
              down = r.fresh(n, "scales_down"), mid = r.fresh(n, "upsampled"), y = n.outputs.at(0);
  r.g.initializers[one] = Tensor::scalar<float>(1);
  r.before.push_back(make_node(r, n, "Max", {scales, one}, {up}));
  r.before.push_back(make_node(r, n, "Min", {scales, one}, {down}));
  Node second = n;
  second.name = r.fresh(n, "downsample");
  second.inputs = {mid, "", down};
  second.attrs["nearest_mode"] = string_attr("ceil");
  n.inputs[2] = up;
  n.outputs = {mid};
  n.attrs["nearest_mode"] = string_attr("floor");
  r.after.push_back(std::move(second));
}

// Upsample and Resize-10 scale by (X, scales) (Upsample-7: a 'scales' attribute) with asymmetric
// coordinates; Resize (X, roi, scales) with coordinate_transformation_mode 'asymmetric' says the same.
void rewrite_legacy_resize(Rewrite& r, Node& n) {
  bool upsample = n.op_type == "Upsample";
  if (upsample && r.opset < 9) {
    require_inputs(n, 1, 9, "scales");
    if (!n.has_attr("scales")) fail(n.label(), ": attribute 'scales' is required before opset 9");
    std::vector<float> s = n.attr_floats("scales");
    r.set_input(n, 2, Tensor::from_vector<float>(s, {int64_t(s.size())}), "scales");
    n.attrs.erase("scales");
  } else {
    if (n.inputs.size() != 2 || n.inputs[1].empty())
      fail(n.label(), ": ", n.op_type, " at opset ", r.opset, " takes two inputs (X, scales), got ",
           n.inputs.size());
    n.inputs = {n.inputs[0], "", n.inputs[1]};
  }
  const Tensor* scales = r.constant(n.inputs[2]);
  bool up = false, down = false;
  std::string listed;
  for (double s : scales ? scales->to_double_vector() : std::vector<double>()) {
    up = up || s > 1;
    down = down || s < 1;
    listed += cat(listed.empty() ? "" : ",", s);
  }
  if (upsample && down) fail(n.label(), ": Upsample scales must be >= 1, got [", listed, "]");
  std::string mode = n.attr_string("mode", "nearest");
  if (mode == "bilinear") n.attrs["mode"] = string_attr("linear");
  n.attrs["coordinate_transformation_mode"] = string_attr("asymmetric");
  n.op_type = "Resize";
  r.changed = true;
  if (mode != "nearest") return;
  if (!scales || (up && down)) return split_legacy_nearest(r, n);
  n.attrs["nearest_mode"] = string_attr(down ? "ceil" : "floor");
}

void rewrite_resize(Rewrite& r, Node& n) {
  if (r.opset < 11) return rewrite_legacy_resize(r, n);
  if (r.opset >= 13 && n.attr_string("coordinate_transformation_mode", "") == "tf_half_pixel_for_nn")
    fail(n.label(), ": coordinate_transformation_mode 'tf_half_pixel_for_nn' was removed in opset 13");
}

// Inference returns the input; before opset 10 the mask has the input's type instead of bool.
void rewrite_dropout(Rewrite& r, Node& n) {
  for (const char* attr : {"ratio", "is_test"})
    if (r.opset < 12) r.changed |= n.attrs.erase(attr) > 0;
  if (r.opset >= 10 || n.outputs.size() < 2 || n.outputs[1].empty()) return;
  std::string mask = n.outputs[1], bools = r.fresh(n, "mask");
  n.outputs[1] = bools;
  r.after.push_back(make_node(r, n, "CastLike", {bools, n.inputs.at(0)}, {mask}));
  r.changed = true;
}

void rewrite_batch_norm(Rewrite& r, Node& n) {
  if (r.opset < 9) {
    if (n.attr_int("spatial", 1) == 0) unsupported(n.label(), ": spatial=0 (per-activation statistics)");
    r.changed |= n.attrs.erase("spatial") > 0;
  }
  if (r.opset >= 14) return;
  for (size_t i = 1; i < n.outputs.size(); i++)
    if (!n.outputs[i].empty())
      unsupported(n.label(), ": training outputs (mean, var, saved statistics) of opset < 14");
}

void rewrite_gemm(Rewrite& r, Node& n) {
  if (r.opset < 11 && (n.inputs.size() < 3 || n.inputs[2].empty()))
    fail(n.label(), ": input C is required before opset 11");
}

// Before opset 16 RoiAlign's only coordinates were what opset 16 calls output_half_pixel.
void rewrite_roi_align(Rewrite& r, Node& n) {
  if (r.opset >= 16) return;
  n.attrs["coordinate_transformation_mode"] = string_attr("output_half_pixel");
  r.changed = true;
}

void check_scatter_reduction(Rewrite& r, Node& n) {
  std::string red = n.attr_string("reduction", "none");
  bool ok = red == "none" || ((red == "add" || red == "mul") && r.opset >= 16) ||
            ((red == "max" || red == "min") && r.opset >= 18);
  if (!ok)
    fail(n.label(), ": reduction '", red, "' is not valid at opset ", r.opset,
         " (none; add and mul since 16; max and min since 18)");
}

// Scan-8 has a batch axis first in every input and output, sequence_lens first among its
// inputs and `directions` for its scan inputs. Without sequence_lens it is a Loop over the
// batch whose body takes entry i of every input and runs a Scan-9 on it; the Loop stacks
// each entry's results along a new axis 0, the batch axis.
void rewrite_scan(Rewrite& r, Node& n) {
  if (r.opset >= 9) return;
  if (n.inputs.size() < 2) fail(n.label(), ": Scan before opset 9 takes sequence_lens, then states and scan inputs");
  if (!n.inputs[0].empty())
    unsupported(n.label(), ": Scan before opset 9 with sequence_lens (per-batch lengths) is not supported; export "
                "with opset 9 or later");
  std::vector<std::string> inputs(n.inputs.begin() + 1, n.inputs.end());
  Node scan = n;
  scan.name = r.fresh(n, "entry_scan");
  auto dirs = scan.attrs.find("directions");
  if (dirs != scan.attrs.end()) {
    scan.attrs["scan_input_directions"] = dirs->second;
    scan.attrs.erase(dirs);
  }
  auto body = std::make_shared<Graph>();
  body->inputs = {ValueDecl{r.fresh(n, "entry"), DType::i64, true, {}}, ValueDecl{r.fresh(n, "cond"), DType::boolean, true, {}}};
  scan.inputs.clear();
  for (auto& in : inputs) {
    Node take;
    take.name = r.fresh(n, "take");
    take.op_type = "Gather";
    take.inputs = {in, body->inputs[0].name};
    take.outputs = {r.fresh(n, "entry_of_" + in)};
    body->nodes.push_back(take);
    scan.inputs.push_back(take.outputs[0]);
  }
  Node cond;
  cond.name = r.fresh(n, "keep_going");
  cond.op_type = "Identity";
  cond.inputs = {body->inputs[1].name};
  cond.outputs = {r.fresh(n, "cond_out")};
  body->outputs.push_back(ValueDecl{cond.outputs[0], DType::boolean, true, {}});
  for (auto& out : scan.outputs) {
    out = r.fresh(n, "entry_" + out);
    body->outputs.push_back(ValueDecl{out, DType::undefined, false, {}});
  }
  body->nodes.push_back(cond);
  body->nodes.push_back(std::move(scan));
  // The trip count: the batch size, axis 0 of the first input.
  Node shape;
  shape.name = r.fresh(n, "shape");
  shape.op_type = "Shape";
  shape.inputs = {inputs[0]};
  shape.outputs = {r.fresh(n, "shape")};
  std::string zero = r.fresh(n, "zero");
  r.g.initializers[zero] = Tensor::scalar<int64_t>(0);
  Node batch;
  batch.name = r.fresh(n, "batch");
  batch.op_type = "Gather";
  batch.inputs = {shape.outputs[0], zero};
  batch.outputs = {r.fresh(n, "batch")};
  r.before.push_back(std::move(shape));
  r.before.push_back(batch);
  n.op_type = "Loop";
  n.inputs = {batch.outputs[0], ""};
  n.attrs.clear();
  Attribute a;
  a.kind = Attribute::Kind::graph;
  a.graph = std::move(body);
  n.attrs["body"] = std::move(a);
  r.changed = true;
}

using RewriteFn = std::function<void(Rewrite&, Node&)>;

const std::unordered_map<std::string, RewriteFn>& rewrites() {
  static const std::unordered_map<std::string, RewriteFn> table = [] {
    std::unordered_map<std::string, RewriteFn> t = {
        {"Clip", rewrite_clip},
        {"Pad", rewrite_pad},
        {"Slice", rewrite_slice},
        {"Split", rewrite_split},
        {"Squeeze", rewrite_squeeze},
        {"Unsqueeze", rewrite_squeeze},
        {"TopK", rewrite_topk},
        {"Softmax", rewrite_softmax},
        {"LogSoftmax", rewrite_softmax},
        {"Hardmax", rewrite_softmax},
        {"Resize", rewrite_resize},
        {"Upsample", rewrite_legacy_resize},
        {"Dropout", rewrite_dropout},
        {"BatchNormalization", rewrite_batch_norm},
        {"Gemm", rewrite_gemm},
        {"RoiAlign", rewrite_roi_align},
        {"ScatterElements", check_scatter_reduction},
        {"ScatterND", check_scatter_reduction},
        {"Scan", rewrite_scan},
    };
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
      t[op] = rewrite_reduce;
    return t;
  }();
  return table;
}

// Attributes a later opset introduced: on an older node they are not part of the op, so their
// defaults apply.
struct LaterAttribute {
  const char* op;
  const char* attr;
  int64_t since;
};
constexpr LaterAttribute kLaterAttributes[] = {
    {"ArgMax", "select_last_index", 12},
    {"ArgMin", "select_last_index", 12},
    {"TopK", "largest", 11},
    {"TopK", "sorted", 11},
    {"Reshape", "allowzero", 14},
    {"Shape", "start", 15},
    {"Shape", "end", 15},
    {"BatchNormalization", "training_mode", 14},
    {"Split", "num_outputs", 18},
    {"Resize", "antialias", 18},
    {"Resize", "keep_aspect_ratio_policy", 18},
    {"Resize", "axes", 18},
};

void drop_later_attributes(Rewrite& r, Node& n) {
  for (auto& la : kLaterAttributes)
    if (r.opset < la.since && n.op_type == la.op) r.changed |= n.attrs.erase(la.attr) > 0;
}

std::unordered_set<std::string> value_names(const Graph& g) {
  std::unordered_set<std::string> names;
  for (auto& d : g.inputs) names.insert(d.name);
  for (auto& [name, t] : g.initializers) names.insert(name);
  for (auto& n : g.nodes) {
    names.insert(n.inputs.begin(), n.inputs.end());
    names.insert(n.outputs.begin(), n.outputs.end());
  }
  return names;
}

}  // namespace

namespace {

// Rewrites one graph's nodes, then those of every subgraph (each copied first: a copied
// Model shares its subgraphs until a pass changes one).
size_t canonicalize_graph(Graph& g, int64_t opset) {
  std::unordered_set<std::string> taken = value_names(g);
  std::unordered_map<std::string, Tensor> constants;
  for (auto& n : g.nodes)
    if (n.op_type == "Constant" && n.attr_tensor("value") && !n.outputs.empty())
      constants[n.outputs[0]] = *n.attr_tensor("value");
  std::vector<Node> nodes;
  size_t rewritten = 0;
  for (Node& n : g.nodes) {
    for (auto& [name, a] : n.attrs) {
      if (a.graph) {
        a.graph = std::make_shared<Graph>(*a.graph);
        rewritten += canonicalize_graph(*a.graph, opset);
      }
      for (auto& sub : a.graphs) {
        sub = std::make_shared<Graph>(*sub);
        rewritten += canonicalize_graph(*sub, opset);
      }
    }
    Rewrite r{g, opset, taken, constants, {}, {}, false};
    if (n.domain.empty() || n.domain == "ai.onnx") {
      drop_later_attributes(r, n);
      auto it = rewrites().find(n.op_type);
      if (it != rewrites().end()) it->second(r, n);
    }
    rewritten += r.changed ? 1 : 0;
    for (auto& b : r.before) nodes.push_back(std::move(b));
    nodes.push_back(std::move(n));
    for (auto& a : r.after) nodes.push_back(std::move(a));
  }
  g.nodes = std::move(nodes);
  return rewritten;
}

}  // namespace

size_t canonicalize(Model& model) {
  int64_t opset = model.opset();
  if (opset >= kCanonicalOpset) return 0;
  size_t rewritten = canonicalize_graph(model.graph, opset);
  model.opsets.erase("ai.onnx");
  model.opsets[""] = kCanonicalOpset;
  return rewritten;
}

}  // namespace vlrt
