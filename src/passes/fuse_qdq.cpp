#include "passes/fuse_qdq.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/error.h"

namespace vlrt {

namespace {

constexpr const char* kMsDomain = "com.microsoft";

bool is_dq(const Node* n) { return n && is_op(*n, "DequantizeLinear"); }
bool is_q(const Node* n) { return n && is_op(*n, "QuantizeLinear"); }
bool is_8bit(DType t) { return t == DType::u8 || t == DType::i8; }

// The main graph with its producers and readers, kept current as groups are rewritten.
class QdqGraph {
 public:
  explicit QdqGraph(Model& model) : g_(model.graph), alive_(g_.nodes.size(), true) {
    for (size_t i = 0; i < g_.nodes.size(); i++) attach(i);
    for (auto& o : g_.outputs) pinned_.insert(o.name);
    for (auto& n : g_.nodes)
      for (auto& v : implicit_inputs(n)) pinned_.insert(v);
  }

  size_t size() const { return g_.nodes.size(); }
  bool alive(size_t i) const { return alive_[i]; }
  Node& node(size_t i) { return g_.nodes[i]; }
  Node* producer(const std::string& v) {
    auto it = producers_.find(v);
    return it == producers_.end() ? nullptr : &g_.nodes[it->second];
  }
  // The live nodes reading v, once per input slot.
  const std::vector<size_t>& readers(const std::string& v) const {
    static const std::vector<size_t> none;
    auto it = readers_.find(v);
    return it == readers_.end() ? none : it->second;
  }
  // A graph output or a value a subgraph reads: it must keep its name and producer.
  bool pinned(const std::string& v) const { return pinned_.count(v) != 0; }

  // An initializer or the value of a Constant node.
  const Tensor* constant(const std::string& v) {
    if (v.empty()) return nullptr;
    auto it = g_.initializers.find(v);
    if (it != g_.initializers.end()) return &it->second;
    Node* p = producer(v);
    return p && is_op(*p, "Constant") ? p->attr_tensor("value") : nullptr;
  }

  std::string add_zero_point(DType t) {
    std::string name = cat("vlrt_qdq_zero_point_", dtype_name(t));
    if (!g_.initializers.count(name)) g_.initializers[name] = Tensor::zeros(t, {});
    return name;
  }

  // Changes node i through `edit`, keeping the indexes current.
  template <class F>
  void edit(size_t i, F&& f) {
    detach(i);
    f(g_.nodes[i]);
    attach(i);
  }
  void remove(size_t i) {
    detach(i);
    alive_[i] = false;
  }
  void finish() {
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); i++)
      if (alive_[i]) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
  }

 private:
  void attach(size_t i) {
    for (auto& in : g_.nodes[i].inputs)
      if (!in.empty()) readers_[in].push_back(i);
    for (auto& out : g_.nodes[i].outputs)
      if (!out.empty()) producers_[out] = i;
  }
  void detach(size_t i) {
    for (auto& in : g_.nodes[i].inputs) {
      if (in.empty()) continue;
      auto& r = readers_[in];
      r.erase(std::find(r.begin(), r.end(), i));
    }
    for (auto& out : g_.nodes[i].outputs) producers_.erase(out);
  }

  Graph& g_;
  std::vector<bool> alive_;
  std::unordered_map<std::string, size_t> producers_;
  std::unordered_map<std::string, std::vector<size_t>> readers_;
  std::unordered_set<std::string> pinned_;
};

// A QuantizeLinear's or DequantizeLinear's constant parameters.
struct QuantParams {
  const Tensor* scale = nullptr;
  const Tensor* zero_point = nullptr;  // nullptr when omitted
  bool per_tensor() const { return scale->numel() == 1 && (!zero_point || zero_point->numel() == 1); }
};

// The node's parameters when its scale and zero point are constant; ONNX Runtime leaves a group
// with computed parameters as it is. Blocked quantization is never fused.
std::optional<QuantParams> constant_params(QdqGraph& g, const Node& n) {
  if (n.attr_int("block_size", 0) != 0 || n.inputs.size() < 2) return std::nullopt;
  QuantParams p;
  p.scale = g.constant(n.inputs[1]);
  if (!p.scale || p.scale->dtype() != DType::f32) return std::nullopt;
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    p.zero_point = g.constant(n.inputs[2]);
    if (!p.zero_point) return std::nullopt;
  }
  return p;
}

// The 8- or 16-bit type a QuantizeLinear produces.
DType quantized_type(QdqGraph& g, const Node& q) {
  if (q.inputs.size() > 2 && !q.inputs[2].empty())
    if (const Tensor* zp = g.constant(q.inputs[2])) return zp->dtype();
  return DType::u8;
}

// The integer type a DequantizeLinear reads; undefined when it cannot be told before running.
DType dequantized_type(QdqGraph& g, const Node& dq) {
  if (const Tensor* x = g.constant(dq.inputs[0])) return x->dtype();
  if (dq.inputs.size() > 2 && !dq.inputs[2].empty())
    if (const Tensor* zp = g.constant(dq.inputs[2])) return zp->dtype();
  Node* p = g.producer(dq.inputs[0]);
  return is_q(p) ? quantized_type(g, *p) : DType::undefined;
}

// The zero point input of a Q or DQ node, an explicit zero of `t` when omitted (the contrib ops
// take their output type from it).
std::string zero_point_of(QdqGraph& g, const Node& n, DType t) {
  return n.inputs.size() > 2 && !n.inputs[2].empty() ? n.inputs[2] : g.add_zero_point(t);
}

// ONNX Runtime's IsQDQPairSupported: one constant scale and zero point, the same in both nodes.
bool same_scalar_params(QdqGraph& g, const Node& q, const Node& dq) {
  auto qp = constant_params(g, q), dp = constant_params(g, dq);
  if (!qp || !dp || !qp->per_tensor() || !dp->per_tensor()) return false;
  if (qp->scale->data<float>()[0] != dp->scale->data<float>()[0]) return false;
  DType qt = qp->zero_point ? qp->zero_point->dtype() : DType::u8;
  DType dt = dp->zero_point ? dp->zero_point->dtype() : qt;
  if (qt != dt) return false;
  double qz = qp->zero_point ? qp->zero_point->to_double_vector()[0] : 0;
  double dz = dp->zero_point ? dp->zero_point->to_double_vector()[0] : 0;
  return qz == dz;
}

// A node of the group being fused: its index in the graph.
struct Group {
  std::vector<size_t> dqs;  // per input of the target (SIZE_MAX where the input is not a DQ)
  size_t target = 0;
  std::optional<size_t> q;  // the QuantizeLinear reading the target's only output
};

class QdqFuser {
 public:
  explicit QdqFuser(Model& model) : g_(model) {}

  QdqFusionCounts run() {
    for (size_t i = 0; i < g_.size(); i++)
      if (g_.alive(i)) remove_redundant_activation(i);
    for (size_t i = 0; i < g_.size(); i++)
      if (g_.alive(i)) fuse_group(i);
    for (size_t i = 0; i < g_.size(); i++)
      if (g_.alive(i)) remove_dq_q_pair(i);
    g_.finish();
    return counts_;
  }

 private:
  size_t index_of(const Node* n) { return size_t(n - &g_.node(0)); }

  // ONNX Runtime's ReluQuantFusion and ClipQuantFusion: a Relu or Clip read by a QuantizeLinear alone,
  // whose output range already holds the clipped range, changes nothing.
  void remove_redundant_activation(size_t i) {
    Node& act = g_.node(i);
    bool relu = is_op(act, "Relu"), clip = is_op(act, "Clip");
    if ((!relu && !clip) || g_.pinned(act.outputs[0])) return;
    const auto& readers = g_.readers(act.outputs[0]);
    if (readers.size() != 1 || !is_q(&g_.node(readers[0]))) return;
    size_t qi = readers[0];
    Node& q = g_.node(qi);
    auto p = constant_params(g_, q);
    if (!p || !p->per_tensor() || !is_8bit(quantized_type(g_, q))) return;
    double zp = p->zero_point ? p->zero_point->to_double_vector()[0] : 0;
    bool is_signed = quantized_type(g_, q) == DType::i8;
    double lowest = is_signed ? -128 : 0, highest = is_signed ? 127 : 255;
    if (relu && zp != lowest) return;
    if (clip && !clip_within(act, p->scale->data<float>()[0], float(lowest - zp), float(highest - zp))) return;
    std::string input = act.inputs[0];
    g_.remove(i);
    g_.edit(qi, [&](Node& n) { n.inputs[0] = input; });
    counts_[cat(act.op_type, " before QuantizeLinear removed")]++;
  }

  // Clip's bounds reach the quantized range [scale * lo, scale * hi] (ONNX Runtime's test, with its epsilon).
  bool clip_within(const Node& clip, float scale, float lo, float hi) {
    auto bound = [&](size_t k, float fallback) -> std::optional<float> {
      if (clip.inputs.size() <= k || clip.inputs[k].empty()) return fallback;
      const Tensor* t = g_.constant(clip.inputs[k]);
      if (!t || t->numel() != 1) return std::nullopt;
      return float(t->to_double_vector()[0]);
    };
    auto mn = bound(1, std::numeric_limits<float>::lowest()), mx = bound(2, std::numeric_limits<float>::max());
    constexpr float eps = std::numeric_limits<float>::epsilon();
    return mn && mx && !(eps < *mn - scale * lo) && !(eps < scale * hi - *mx);
  }

  // The group around target i: the DQ feeding each input and the Q reading its output. Per ONNX
  // Runtime's CheckQDQNodes, every output of the target must go to a Q (none to a graph output or a
  // float reader); `q_optional` allows no Q at all (MatMul, Gemm with a float output).
  std::optional<Group> group_of(size_t i, bool q_optional = false) {
    Node& t = g_.node(i);
    Group grp;
    grp.target = i;
    for (auto& in : t.inputs) {
      Node* p = in.empty() ? nullptr : g_.producer(in);
      grp.dqs.push_back(is_dq(p) && constant_params(g_, *p) ? index_of(p) : SIZE_MAX);
    }
    size_t outputs = 0;
    for (auto& o : t.outputs) outputs += !o.empty();
    if (outputs != 1 || t.outputs[0].empty()) return std::nullopt;
    const auto& readers = g_.readers(t.outputs[0]);
    size_t qs = 0;
    for (size_t r : readers) qs += is_q(&g_.node(r));
    if (qs == 0 && q_optional) return grp;
    if (qs != 1 || readers.size() != 1 || g_.pinned(t.outputs[0])) return std::nullopt;
    if (!constant_params(g_, g_.node(readers[0]))) return std::nullopt;
    grp.q = readers[0];
    return grp;
  }

  const Node& dq(const Group& grp, size_t k) { return g_.node(grp.dqs[k]); }
  bool all_dq(const Group& grp, size_t n) {
    if (grp.dqs.size() != n) return false;
    for (size_t d : grp.dqs)
      if (d == SIZE_MAX) return false;
    return true;
  }
  DType in_type(const Group& grp, size_t k) { return dequantized_type(g_, dq(grp, k)); }
  DType out_type(const Group& grp) { return quantized_type(g_, g_.node(*grp.q)); }
  QuantParams params(const Node& n) { return *constant_params(g_, n); }

  // Appends x, x_scale, x_zero_point of the DQ at input k.
  void append_dq(std::vector<std::string>& ins, const Group& grp, size_t k) {
    const Node& d = dq(grp, k);
    ins.insert(ins.end(), {d.inputs[0], d.inputs[1], zero_point_of(g_, d, in_type(grp, k))});
  }
  void append_q(std::vector<std::string>& ins, const Group& grp) {
    const Node& q = g_.node(*grp.q);
    ins.insert(ins.end(), {q.inputs[1], zero_point_of(g_, q, out_type(grp))});
  }

  // Puts `fused` in the target's place, reading `inputs` and writing the Q's output (or the target's);
  // the group's DQ nodes go once nothing else reads them, the Q goes.
  void replace(const Group& grp, const std::string& domain, const std::string& op, std::vector<std::string> inputs,
               std::map<std::string, Attribute> attrs) {
    std::vector<std::string> outputs = grp.q ? g_.node(*grp.q).outputs : g_.node(grp.target).outputs;
    if (grp.q) g_.remove(*grp.q);
    g_.edit(grp.target, [&](Node& n) {
      n.domain = domain;
      n.op_type = op;
      n.inputs = std::move(inputs);
      n.outputs = std::move(outputs);
      n.attrs = std::move(attrs);
    });
    drop_unread(grp);
    counts_[op]++;
  }
  void drop_unread(const Group& grp) {
    for (size_t d : std::set<size_t>(grp.dqs.begin(), grp.dqs.end()))
      if (d != SIZE_MAX && g_.alive(d) && g_.readers(g_.node(d).outputs[0]).empty() &&
          !g_.pinned(g_.node(d).outputs[0]))
        g_.remove(d);
  }

  void fuse_group(size_t i) {
    const Node& t = g_.node(i);
    if (!t.domain.empty()) return;
    const std::string& op = t.op_type;
    if (op == "Conv") fuse_conv(i);
    else if (op == "MatMul") fuse_matmul(i);
    else if (op == "Gemm") fuse_gemm(i);
    else if (op == "Add" || op == "Mul") fuse_binary(i);
    else if (op == "AveragePool" || op == "GlobalAveragePool" || op == "LeakyRelu" || op == "Sigmoid")
      fuse_unary(i);
    else if (op == "Concat") fuse_concat(i);
    else if (kDropOps.count(op)) drop_qdq(i);
  }

  void fuse_conv(size_t i) {
    auto grp = group_of(i);
    if (!grp || !grp->q || !(all_dq(*grp, 2) || all_dq(*grp, 3))) return;
    DType x = in_type(*grp, 0), w = in_type(*grp, 1);
    if (x != DType::u8 || out_type(*grp) != x || !is_8bit(w)) return;
    if (grp->dqs.size() == 3 && in_type(*grp, 2) != DType::i32) return;
    if (!params(dq(*grp, 0)).per_tensor() || !params(g_.node(*grp->q)).per_tensor()) return;
    // Per channel only on the output channels, as QLinearConv takes them.
    const Node& wdq = dq(*grp, 1);
    if (!params(wdq).per_tensor() && wdq.attr_int("axis", 1) != 0) return;
    std::vector<std::string> ins;
    append_dq(ins, *grp, 0);
    append_dq(ins, *grp, 1);
    append_q(ins, *grp);
    // ONNX Runtime takes the int32 bias as it is: its scale is x_scale * w_scale by construction.
    if (grp->dqs.size() == 3) ins.push_back(dq(*grp, 2).inputs[0]);
    replace(*grp, "", "QLinearConv", ins, g_.node(i).attrs);
  }

  // B per tensor, or per column of a 2-D B (DequantizeLinear's axis 1).
  bool column_params(const Node& bdq) {
    if (params(bdq).per_tensor()) return true;
    const Tensor* b = g_.constant(bdq.inputs[0]);
    return b && b->rank() == 2 && bdq.attr_int("axis", 1) == 1;
  }

  void fuse_matmul(size_t i) {
    auto grp = group_of(i, true);
    if (!grp || !all_dq(*grp, 2)) return;
    DType a = in_type(*grp, 0);
    if (a != DType::u8 || !is_8bit(in_type(*grp, 1))) return;
    if (!params(dq(*grp, 0)).per_tensor() || !column_params(dq(*grp, 1))) return;
    std::vector<std::string> ins;
    if (!grp->q) {
      const Node &ad = dq(*grp, 0), &bd = dq(*grp, 1);
      ins = {ad.inputs[0], bd.inputs[0], ad.inputs[1], bd.inputs[1], zero_point_of(g_, ad, a),
             zero_point_of(g_, bd, in_type(*grp, 1))};
      replace(*grp, kMsDomain, "MatMulIntegerToFloat", ins, {});
      return;
    }
    if (out_type(*grp) != a || !params(g_.node(*grp->q)).per_tensor()) return;
    append_dq(ins, *grp, 0);
    append_dq(ins, *grp, 1);
    append_q(ins, *grp);
    replace(*grp, "", "QLinearMatMul", ins, {});
  }

  void fuse_gemm(size_t i) {
    auto grp = group_of(i, true);
    if (!grp || !(all_dq(*grp, 2) || all_dq(*grp, 3))) return;
    const Node& t = g_.node(i);
    DType a = in_type(*grp, 0);
    if (a != DType::u8 || !is_8bit(in_type(*grp, 1))) return;
    if (grp->q && (out_type(*grp) != a || !params(g_.node(*grp->q)).per_tensor())) return;
    if (grp->dqs.size() == 3 && (t.attr_float("beta", 1.0f) != 1.0f || in_type(*grp, 2) != DType::i32)) return;
    const Node& bdq = dq(*grp, 1);
    const Tensor* b = g_.constant(bdq.inputs[0]);
    int64_t column_axis = t.attr_int("transB", 0) ? 0 : 1;
    if (!params(dq(*grp, 0)).per_tensor() ||
        !(params(bdq).per_tensor() || (b && b->rank() == 2 && bdq.attr_int("axis", 1) == column_axis)))
      return;
    std::vector<std::string> ins;
    append_dq(ins, *grp, 0);
    append_dq(ins, *grp, 1);
    ins.push_back(grp->dqs.size() == 3 ? dq(*grp, 2).inputs[0] : "");
    if (grp->q) append_q(ins, *grp);
    std::map<std::string, Attribute> attrs = t.attrs;
    attrs.erase("beta");
    replace(*grp, kMsDomain, "QGemm", ins, attrs);
  }

  void fuse_binary(size_t i) {
    auto grp = group_of(i);
    if (!grp || !grp->q || !all_dq(*grp, 2)) return;
    DType a = in_type(*grp, 0);
    if (!is_8bit(a) || in_type(*grp, 1) != a || out_type(*grp) != a) return;
    if (!params(dq(*grp, 0)).per_tensor() || !params(dq(*grp, 1)).per_tensor() ||
        !params(g_.node(*grp->q)).per_tensor())
      return;
    std::vector<std::string> ins;
    append_dq(ins, *grp, 0);
    append_dq(ins, *grp, 1);
    append_q(ins, *grp);
    replace(*grp, kMsDomain, "QLinear" + g_.node(i).op_type, ins, {});
  }

  void fuse_unary(size_t i) {
    auto grp = group_of(i);
    if (!grp || !grp->q || !all_dq(*grp, 1)) return;
    DType x = in_type(*grp, 0);
    if (!is_8bit(x) || out_type(*grp) != x) return;
    if (!params(dq(*grp, 0)).per_tensor() || !params(g_.node(*grp->q)).per_tensor()) return;
    std::vector<std::string> ins;
    append_dq(ins, *grp, 0);
    append_q(ins, *grp);
    replace(*grp, kMsDomain, "QLinear" + g_.node(i).op_type, ins, g_.node(i).attrs);
  }

  void fuse_concat(size_t i) {
    auto grp = group_of(i);
    if (!grp || !grp->q || !all_dq(*grp, g_.node(i).inputs.size())) return;
    DType y = out_type(*grp);
    if (!is_8bit(y) || !params(g_.node(*grp->q)).per_tensor()) return;
    for (size_t k = 0; k < grp->dqs.size(); k++)
      if (in_type(*grp, k) != y || !params(dq(*grp, k)).per_tensor()) return;
    std::vector<std::string> ins;
    append_q(ins, *grp);
    for (size_t k = 0; k < grp->dqs.size(); k++) append_dq(ins, *grp, k);
    replace(*grp, kMsDomain, "QLinearConcat", ins, g_.node(i).attrs);
  }

  // Ops that move or select values without computing new ones run on the 8-bit values when the DQ
  // before and the Q after share their parameters (ONNX Runtime's DropQDQNodesRules).
  inline static const std::set<std::string> kDropOps = {
      "Expand", "Flatten", "Gather",  "GatherElements", "Reshape",   "Slice",     "Squeeze",
      "Tile",   "Transpose", "Unsqueeze", "MaxPool",   "ReduceMax", "ReduceMin", "Resize"};

  void drop_qdq(size_t i) {
    auto grp = group_of(i);
    if (!grp || !grp->q || grp->dqs.empty() || grp->dqs[0] == SIZE_MAX) return;
    for (size_t k = 1; k < grp->dqs.size(); k++)
      if (grp->dqs[k] != SIZE_MAX) return;
    const std::string& op = g_.node(i).op_type;
    DType x = in_type(*grp, 0);
    bool no_16bit = op == "MaxPool" || op == "ReduceMax" || op == "ReduceMin" || op == "Resize";
    if (x == DType::undefined || out_type(*grp) != x || (no_16bit && !is_8bit(x))) return;
    const Node &d = dq(*grp, 0), &q = g_.node(*grp->q);
    if (!same_scalar_params(g_, q, d)) return;
    // A negative scale would reverse the order a max or min sees.
    if ((op == "MaxPool" || op == "ReduceMax" || op == "ReduceMin") && !(params(q).scale->data<float>()[0] > 0))
      return;
    std::string input = d.inputs[0], output = q.outputs[0];
    g_.remove(*grp->q);
    g_.edit(i, [&](Node& n) {
      n.inputs[0] = input;
      n.outputs[0] = output;
    });
    drop_unread(*grp);
    counts_[cat(dtype_name(x), " ", op)]++;
  }

  // ONNX Runtime's QDQFinalCleanup: a DQ read only by a Q with the same parameters is the identity.
  void remove_dq_q_pair(size_t i) {
    Node& d = g_.node(i);
    if (!is_dq(&d) || g_.pinned(d.outputs[0])) return;
    const auto& readers = g_.readers(d.outputs[0]);
    if (readers.size() != 1 || !is_q(&g_.node(readers[0]))) return;
    size_t qi = readers[0];
    const Node& q = g_.node(qi);
    if (g_.pinned(q.outputs[0]) || !same_scalar_params(g_, q, d)) return;
    std::string input = d.inputs[0], output = q.outputs[0];
    std::vector<size_t> downstream = g_.readers(output);
    g_.remove(i);
    g_.remove(qi);
    for (size_t r : std::set<size_t>(downstream.begin(), downstream.end()))
      g_.edit(r, [&](Node& n) { std::replace(n.inputs.begin(), n.inputs.end(), output, input); });
    counts_["DequantizeLinear+QuantizeLinear removed"]++;
  }

  QdqGraph g_;
  QdqFusionCounts counts_;
};

}  // namespace

std::optional<bool> qdq_fusion_requested() {
  const char* v = std::getenv("VLRT_FUSE_QDQ");
  if (!v || !*v) return std::nullopt;
  return std::string(v) != "0";
}

QdqFusionCounts fuse_qdq(Model& model) { return QdqFuser(model).run(); }

std::string describe(const QdqFusionCounts& counts) {
  std::string s;
  for (auto& [what, n] : counts) s += cat(s.empty() ? "" : ", ", n, " ", what);
  return s.empty() ? "nothing" : s;
}

}  // namespace vlrt
