#include "passes/fusion_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "passes/half_weights.h"

namespace vlrt {

namespace {

// The sizes every symbolic input dimension takes in the two probes: distinct, not 1 (which
// broadcasts), and small enough for image and sequence axes alike. When the first pair fails
// (a detector whose feature maps of strides 8 to 32 must align needs multiples of 32), the next; the
// last for a model that takes its k best of all feature-map positions (GroundingDINO's 900 queries
// need an image of more than 200 pixels a side).
constexpr int64_t kProbeSizes[][2] = {{32, 48}, {64, 128}, {224, 256}};

}  // namespace

ShapeFacts::ShapeFacts(const Model& model, Backend& host) {
  for (auto& d : model.graph.inputs)
    if (!d.has_shape || d.dtype == DType::undefined) return;
  for (const auto& sizes : kProbeSizes) {
    try {
      for (int p = 0; p < 2; p++) {
        std::unordered_map<std::string, ValueInfo> inputs;
        for (auto& d : model.graph.inputs) {
          ValueInfo v;
          v.dtype = d.dtype;
          v.shape_known = true;
          for (auto& dim : d.dims) v.shape.push_back(dim.value >= 0 ? dim.value : sizes[p]);
          inputs[d.name] = v;
        }
        probes_[p] = infer_shapes(model, inputs, host);
      }
      return;
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error&) {
      probes_[0].reset();
      probes_[1].reset();
    }
  }
}

const ValueInfo* ShapeFacts::info(int probe, const std::string& v) const {
  if (!probes_[probe]) return nullptr;
  auto it = probes_[probe]->values.find(v);
  return it == probes_[probe]->values.end() || !it->second.shape_known ? nullptr : &it->second;
}

std::optional<Shape> ShapeFacts::static_shape(const std::string& v) const {
  const ValueInfo *a = info(0, v), *b = info(1, v);
  if (!a || !b || a->shape != b->shape) return std::nullopt;
  return a->shape;
}

std::optional<Shape> ShapeFacts::trailing_shape(const std::string& v, size_t k) const {
  const ValueInfo *a = info(0, v), *b = info(1, v);
  if (!a || !b || a->shape.size() < k || b->shape.size() != a->shape.size()) return std::nullopt;
  Shape ta(a->shape.end() - long(k), a->shape.end()), tb(b->shape.end() - long(k), b->shape.end());
  if (ta != tb) return std::nullopt;
  return ta;
}

std::optional<size_t> ShapeFacts::rank(const std::string& v) const {
  const ValueInfo *a = info(0, v), *b = info(1, v);
  if (!a || !b || a->shape.size() != b->shape.size()) return std::nullopt;
  return a->shape.size();
}

DType ShapeFacts::dtype(const std::string& v) const {
  const ValueInfo* a = info(0, v);
  return a ? a->dtype : DType::undefined;
}

bool ShapeFacts::same_shape(const std::string& a, const std::string& b) const {
  for (int p = 0; p < 2; p++) {
    const ValueInfo *x = info(p, a), *y = info(p, b);
    if (!x || !y || x->shape != y->shape) return false;
  }
  return true;
}

bool ShapeFacts::same_dims(const std::string& a, const std::string& b,
                           const std::vector<size_t>& axes) const {
  for (int p = 0; p < 2; p++) {
    const ValueInfo *x = info(p, a), *y = info(p, b);
    if (!x || !y) return false;
    for (size_t axis : axes)
      if (axis >= x->shape.size() || axis >= y->shape.size() || x->shape[axis] != y->shape[axis])
        return false;
  }
  return true;
}

std::optional<int64_t> ShapeFacts::dim(const std::string& v, size_t axis) const {
  const ValueInfo *a = info(0, v), *b = info(1, v);
  if (!a || !b || axis >= a->shape.size() || axis >= b->shape.size() || a->shape[axis] != b->shape[axis])
    return std::nullopt;
  return a->shape[axis];
}

FusionGraph::FusionGraph(Model& model, const ShapeFacts& facts) : model(model), facts(facts) {
  alive_.assign(size(), true);
  for (size_t i = 0; i < size(); i++) {
    index_node(i);
    for (auto& v : implicit_inputs(node(i))) pinned_.insert(v);
  }
  for (auto& o : model.graph.outputs) pinned_.insert(o.name);
}

void FusionGraph::index_node(size_t i) {
  for (auto& in : node(i).inputs)
    if (!in.empty()) users_[in].push_back(i);
  for (auto& out : node(i).outputs)
    if (!out.empty()) producers_[out] = i;
}

Node* FusionGraph::producer(const std::string& v) {
  int i = producer_index(v);
  return i < 0 ? nullptr : &node(size_t(i));
}

int FusionGraph::producer_index(const std::string& v) const {
  auto it = producers_.find(v);
  return it == producers_.end() || !alive_[it->second] ? -1 : int(it->second);
}

std::vector<size_t> FusionGraph::users(const std::string& v) const {
  std::vector<size_t> live;
  auto it = users_.find(v);
  if (it == users_.end()) return live;
  for (size_t i : it->second)
    if (alive_[i]) {
      // a node indexed again after replace() is listed once per reading input
      size_t reads = size_t(std::count(model.graph.nodes[i].inputs.begin(), model.graph.nodes[i].inputs.end(), v));
      if (size_t(std::count(live.begin(), live.end(), i)) < reads) live.push_back(i);
    }
  return live;
}

bool FusionGraph::single_use(const std::string& v) const { return !pinned_.count(v) && users(v).size() == 1; }

const Tensor* FusionGraph::constant(const std::string& v) const {
  auto it = model.graph.initializers.find(v);
  return it == model.graph.initializers.end() ? nullptr : &it->second;
}

void FusionGraph::remove_if_unread(const std::string& v) {
  int i = producer_index(v);
  if (i >= 0 && users(v).empty() && !pinned(v)) remove(size_t(i));
}

std::string FusionGraph::half_weight_source(const std::string& v) const {
  int i = producer_index(v);
  return i >= 0 && casts_half_initializer(model.graph.nodes[size_t(i)], model.graph)
             ? model.graph.nodes[size_t(i)].inputs[0]
             : "";
}

std::optional<double> FusionGraph::scalar(const std::string& v) const {
  const Tensor* t = constant(v);
  if (!t || t->numel() != 1 || !dtype_is_float(t->dtype())) return std::nullopt;
  return t->to_double_vector()[0];
}

std::string FusionGraph::unique_name(const std::string& base) const {
  auto taken = [&](const std::string& name) {
    if (model.graph.initializers.count(name) || producers_.count(name)) return true;
    for (auto& in : model.graph.inputs)
      if (in.name == name) return true;
    return false;
  };
  std::string name = base;
  for (int k = 1; taken(name); k++) name = cat(base, "_", k);
  return name;
}

std::string FusionGraph::add_constant(const std::string& base, const Tensor& t) {
  std::string name = unique_name(base);
  model.graph.initializers[name] = t;
  return name;
}

void FusionGraph::add(Node n) {
  model.graph.nodes.push_back(std::move(n));
  alive_.push_back(true);
  index_node(size() - 1);
}

void FusionGraph::remove(size_t i) { alive_[i] = false; }

void FusionGraph::replace(size_t i, Node fused) {
  node(i) = std::move(fused);
  index_node(i);
}

void FusionGraph::replace_all(std::vector<size_t> nodes, Node fused) {
  std::sort(nodes.begin(), nodes.end());
  for (size_t i = 0; i + 1 < nodes.size(); i++) remove(nodes[i]);
  replace(nodes.back(), std::move(fused));
}

void FusionGraph::finish() {
  Graph& g = model.graph;
  std::vector<Node> kept;
  for (size_t i = 0; i < size(); i++)
    if (alive_[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  topo_sort(g);
  std::unordered_set<std::string> read(pinned_.begin(), pinned_.end());
  for (auto& n : g.nodes)
    for (auto& in : n.inputs) read.insert(in);
  for (auto it = g.initializers.begin(); it != g.initializers.end();)
    it = read.count(it->first) ? std::next(it) : g.initializers.erase(it);
  alive_.assign(size(), true);
  producers_.clear();
  users_.clear();
  for (size_t i = 0; i < size(); i++) index_node(i);
}

namespace {

// The quantized type's limits, for the integer types QuantizeLinear writes.
std::optional<std::pair<double, double>> quantized_limits(DType t) {
  switch (t) {
    case DType::u8:
      return std::pair<double, double>{0, 255};
    case DType::i8:
      return std::pair<double, double>{-128, 127};
    case DType::u16:
      return std::pair<double, double>{0, 65535};
    case DType::i16:
      return std::pair<double, double>{-32768, 32767};
    default:
      return std::nullopt;
  }
}

// QuantizeLinear node q (reading v) followed by a DequantizeLinear of the same per-tensor scale and
// zero point, its only reader, as the QuantizeDequantize activation.
std::optional<FusableActivation> quantize_dequantize_after(FusionGraph& g, size_t q_index) {
  const Node& q = g.node(q_index);
  if (q.inputs.size() < 2 || q.attr_int("saturate", 1) != 1) return std::nullopt;
  const std::string& quantized = q.outputs[0];
  std::vector<size_t> readers = g.users(quantized);
  if (readers.size() != 1 || !g.single_use(quantized)) return std::nullopt;
  const Node& dq = g.node(readers[0]);
  if (!is_op(dq, "DequantizeLinear") || dq.inputs.size() < 2 || dq.inputs[0] != quantized ||
      dq.outputs.size() != 1 || g.facts.dtype(dq.outputs[0]) != DType::f32)
    return std::nullopt;
  std::optional<std::pair<double, double>> limits = quantized_limits(g.facts.dtype(quantized));
  // A constant of one value (any type), or nothing; an absent zero point is 0.
  auto one_value = [&](const Node& n, size_t i, bool f32) -> std::optional<double> {
    if (i >= n.inputs.size() || n.inputs[i].empty()) return 0.0;
    const Tensor* t = g.constant(n.inputs[i]);
    if (!t || t->numel() != 1 || (f32 && t->dtype() != DType::f32)) return std::nullopt;
    return t->to_double_vector()[0];
  };
  std::optional<double> scale = one_value(q, 1, true), dq_scale = one_value(dq, 1, true),
                        zp = one_value(q, 2, false), dq_zp = one_value(dq, 2, false);
  if (!limits || !scale || !dq_scale || *scale != *dq_scale || !(*scale > 0) || !zp || !dq_zp ||
      *zp != *dq_zp)
    return std::nullopt;
  FusableActivation a;
  a.name = "QuantizeDequantize";
  a.params = {float(*scale), float(limits->first - *zp), float(limits->second - *zp)};
  a.nodes = {q_index, readers[0]};
  a.output = dq.outputs[0];
  return a;
}

}  // namespace

bool near(std::optional<double> v, double target) {
  return v && std::abs(*v - target) <= 1e-4 * std::abs(target);
}

std::string other_input(const Node& n, const std::string& v) {
  if (n.inputs.size() != 2) return "";
  if (n.inputs[0] == v) return n.inputs[1] == v ? "" : n.inputs[1];
  return n.inputs[1] == v ? n.inputs[0] : "";
}

Node* only_user(FusionGraph& g, const std::string& v, const char* op, size_t* index) {
  std::vector<size_t> users = g.users(v);
  if (users.size() != 1 || !g.single_use(v) || !is_op(&g.node(users[0]), op)) return nullptr;
  *index = users[0];
  return &g.node(users[0]);
}

Node* sole_producer(FusionGraph& g, const std::string& v, const char* op, size_t* index) {
  int p = g.producer_index(v);
  if (p < 0 || !g.single_use(v) || !is_op(&g.node(size_t(p)), op)) return nullptr;
  *index = size_t(p);
  return &g.node(size_t(p));
}

std::optional<std::vector<int64_t>> axes_of(FusionGraph& g, const Node& n) {
  if (n.inputs.size() >= 2 && !n.inputs[1].empty()) {
    const Tensor* t = g.constant(n.inputs[1]);
    if (!t) return std::nullopt;
    return t->to_int64_vector();
  }
  return n.attr_ints("axes", {});
}

std::vector<size_t> shape_computation(FusionGraph& g, const std::string& v, size_t reader,
                                      const std::string& stop) {
  // Every int64 node reachable backwards, then (a greatest fixed point) those read from outside dropped.
  std::vector<size_t> nodes;
  std::vector<std::string> todo = {v};
  while (!todo.empty()) {
    std::string value = todo.back();
    todo.pop_back();
    int p = g.producer_index(value);
    if (value == stop || p < 0 || g.facts.dtype(value) != DType::i64 ||
        std::count(nodes.begin(), nodes.end(), size_t(p)))
      continue;
    nodes.push_back(size_t(p));
    for (const std::string& in : g.node(size_t(p)).inputs)
      if (!in.empty()) todo.push_back(in);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < nodes.size(); i++) {
      bool outside = false;
      for (const std::string& out : g.node(nodes[i]).outputs) {
        outside = outside || g.pinned(out);
        for (size_t user : g.users(out))
          outside = outside || (user != reader && !std::count(nodes.begin(), nodes.end(), user));
      }
      if (outside) {
        nodes.erase(nodes.begin() + long(i));
        changed = true;
        break;
      }
    }
  }
  return nodes;
}

std::optional<FusableActivation> activation_after(FusionGraph& g, const std::string& v) {
  std::vector<size_t> users = g.users(v);
  if (g.facts.dtype(v) != DType::f32 && g.facts.dtype(v) != DType::undefined) return std::nullopt;
  FusableActivation a;
  // x * Sigmoid(x): v feeds the Sigmoid and the Mul.
  if (users.size() == 2) {
    for (int s = 0; s < 2; s++) {
      Node &sig = g.node(users[size_t(s)]), &mul = g.node(users[size_t(1 - s)]);
      if (sig.op_type != "Sigmoid" || !sig.domain.empty() || mul.op_type != "Mul" || !mul.domain.empty()) continue;
      const std::string& gate = sig.outputs[0];
      bool pair = (mul.inputs[0] == v && mul.inputs[1] == gate) || (mul.inputs[1] == v && mul.inputs[0] == gate);
      if (!pair || !g.single_use(gate) || g.pinned(v)) continue;
      a.name = "SiLU";
      a.nodes = {users[size_t(s)], users[size_t(1 - s)]};
      a.output = mul.outputs[0];
      return a;
    }
    return std::nullopt;
  }
  if (users.size() != 1 || !g.single_use(v)) return std::nullopt;
  Node& n = g.node(users[0]);
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] != v) return std::nullopt;
  static const char* const kPlain[] = {"Relu", "Sigmoid", "Tanh", "HardSwish"};
  if (n.domain.empty()) {
    if (std::find(std::begin(kPlain), std::end(kPlain), n.op_type) != std::end(kPlain)) {
      a.name = n.op_type;
    } else if (n.op_type == "LeakyRelu") {
      a.name = n.op_type;
      a.params = {n.attr_float("alpha", 0.01f)};
    } else if (n.op_type == "HardSigmoid") {
      a.name = n.op_type;
      a.params = {n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f)};
    } else if (n.op_type == "QuantizeLinear") {
      return quantize_dequantize_after(g, users[0]);
    } else if (n.op_type == "Clip") {
      float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
      for (size_t i = 1; i < n.inputs.size(); i++) {
        if (n.inputs[i].empty()) continue;
        std::optional<double> bound = g.scalar(n.inputs[i]);
        if (!bound) return std::nullopt;
        (i == 1 ? lo : hi) = float(*bound);
      }
      a.name = "Clip";
      a.params = {lo, hi};
    } else {
      return std::nullopt;
    }
  } else if (n.domain == "com.microsoft" && (n.op_type == "Gelu" || n.op_type == "FastGelu") &&
             n.inputs.size() == 1) {
    a.name = n.op_type;
  } else {
    return std::nullopt;
  }
  a.nodes = {users[0]};
  a.output = n.outputs[0];
  return a;
}

void set_activation(Node& n, const FusableActivation& a, const std::string& attribute) {
  Attribute name;
  name.kind = Attribute::Kind::s;
  name.s = a.name;
  n.attrs[attribute] = name;
  if (!a.params.empty()) {
    Attribute params;
    params.kind = Attribute::Kind::floats;
    params.floats = a.params;
    n.attrs[attribute + "_params"] = params;
  }
}

}  // namespace vlrt
