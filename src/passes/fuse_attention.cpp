// Scaled dot-product attention as one vlrt.Attention node:
//   [Transpose] Q [* or / scale] ; [Transpose] K^T ; MatMul ; [* or / scale] ; [+ mask] ; Softmax(-1)
//   [; Dropout] ; MatMul with [Transpose] V ; [Transpose]
// The head transposes around it become the op's permutations, so they are never materialized.
// Swin's shifted windows (a Reshape between the mask Add and the Softmax) are left as written.
#include <numeric>

#include "ops/tensor_semantics.h"
#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

// v = x * c or x / c with a constant scalar c: multiplies scale by c (or 1 / c), returns x.
std::string strip_scale(FusionGraph& g, const std::string& v, double& scale, std::vector<size_t>& nodes) {
  int p = g.producer_index(v);
  if (p < 0 || !g.single_use(v)) return v;
  Node& n = g.node(size_t(p));
  if (n.inputs.size() != 2 || !n.domain.empty()) return v;
  if (n.op_type == "Div") {
    std::optional<double> c = g.scalar(n.inputs[1]);
    if (!c || *c == 0) return v;
    scale /= *c;
  } else if (n.op_type == "Mul") {
    std::optional<double> c0 = g.scalar(n.inputs[0]), c1 = g.scalar(n.inputs[1]);
    if (c1) {
      scale *= *c1;
    } else if (c0) {
      scale *= *c0;
      nodes.push_back(size_t(p));
      return n.inputs[1];
    } else {
      return v;
    }
  } else {
    return v;
  }
  nodes.push_back(size_t(p));
  return n.inputs[0];
}

// v = Transpose(x, perm) with v read only here: returns x and the permutation composed with
// `after` (the logical operand is Transpose(v, after)); otherwise v itself.
std::string strip_transpose(FusionGraph& g, const std::string& v, size_t rank, std::vector<int64_t>& perm,
                            std::vector<size_t>& nodes) {
  size_t i;
  Node* t = sole_producer(g, v, "Transpose", &i);
  if (!t) return v;
  std::vector<int64_t> inner = transpose_perm(*t, rank), composed(rank);
  for (size_t a = 0; a < rank; a++) composed[a] = inner[size_t(perm[a])];
  perm = composed;
  nodes.push_back(i);
  return t->inputs[0];
}

void fuse_attention_at(FusionGraph& g, size_t softmax_index, FusionCounts& counts) {
  Node& softmax = g.node(softmax_index);
  if (!is_op(&softmax, "Softmax")) return;
  const std::string scores = softmax.inputs[0];
  std::optional<size_t> rank_opt = g.facts.rank(scores);
  if (!rank_opt || (*rank_opt != 3 && *rank_opt != 4) || g.facts.dtype(scores) != DType::f32) return;
  size_t rank = *rank_opt;
  int64_t axis = softmax.attr_int("axis", -1);
  if (axis != -1 && axis != int64_t(rank) - 1) return;
  std::vector<size_t> nodes = {softmax_index};
  std::string s = scores, mask;
  size_t i;
  if (Node* add = sole_producer(g, s, "Add", &i)) {
    for (int side = 0; side < 2 && mask.empty(); side++) {
      int p = g.producer_index(add->inputs[size_t(side)]);
      if (p >= 0 && g.single_use(add->inputs[size_t(side)]) &&
          (is_op(&g.node(size_t(p)), "MatMul") || is_op(&g.node(size_t(p)), "Div") || is_op(&g.node(size_t(p)), "Mul")) &&
          g.facts.same_shape(add->inputs[size_t(side)], s)) {
        mask = add->inputs[size_t(1 - side)];
        s = add->inputs[size_t(side)];
      }
    }
    if (mask.empty()) return;
    nodes.push_back(i);
  }
  double scale = 1;
  s = strip_scale(g, s, scale, nodes);
  Node* qk = sole_producer(g, s, "MatMul", &i);
  if (!qk) return;
  nodes.push_back(i);
  std::vector<int64_t> identity(rank);
  std::iota(identity.begin(), identity.end(), 0);
  std::vector<int64_t> q_perm = identity, k_perm = identity, v_perm = identity, out_perm = identity;
  std::string q = strip_scale(g, qk->inputs[0], scale, nodes);
  q = strip_transpose(g, q, rank, q_perm, nodes);
  // The second operand is k^T: the logical k is it with the last two axes swapped.
  std::swap(k_perm[rank - 1], k_perm[rank - 2]);
  std::string k = strip_transpose(g, qk->inputs[1], rank, k_perm, nodes);
  // The probabilities, through an inference-mode Dropout, feed the second MatMul as its A.
  std::string p = softmax.outputs[0];
  std::vector<size_t> users = g.users(p);
  if (users.size() == 1 && g.single_use(p) && is_op(&g.node(users[0]), "Dropout")) {
    Node& drop = g.node(users[0]);
    bool inference = drop.inputs.size() < 3 || drop.inputs[2].empty() ||
                     (g.constant(drop.inputs[2]) && g.constant(drop.inputs[2])->to_double_vector()[0] == 0);
    if (!inference || (drop.outputs.size() > 1 && !drop.outputs[1].empty() && !g.users(drop.outputs[1]).empty()) ||
        g.pinned(drop.outputs.size() > 1 ? drop.outputs[1] : ""))
      return;
    nodes.push_back(users[0]);
    p = drop.outputs[0];
    users = g.users(p);
  }
  if (users.size() != 1 || !g.single_use(p) || !is_op(&g.node(users[0]), "MatMul") || g.node(users[0]).inputs[0] != p)
    return;
  size_t pv_index = users[0];
  nodes.push_back(pv_index);
  std::string v = strip_transpose(g, g.node(pv_index).inputs[1], rank, v_perm, nodes);
  std::string y = g.node(pv_index).outputs[0];
  users = g.users(y);
  if (users.size() == 1 && g.single_use(y) && is_op(&g.node(users[0]), "Transpose")) {
    out_perm = transpose_perm(g.node(users[0]), rank);
    nodes.push_back(users[0]);
    y = g.node(users[0]).outputs[0];
  }
  for (auto& operand : {q, k, v})
    if (g.facts.rank(operand) != rank || g.facts.dtype(operand) != DType::f32) return;
  if (!mask.empty() && g.facts.dtype(mask) != DType::f32) return;
  Node fused;
  fused.name = qk->name;
  fused.op_type = "Attention";
  fused.domain = "vlrt";
  fused.inputs = {q, k, v};
  if (!mask.empty()) fused.inputs.push_back(mask);
  fused.outputs = {y};
  fused.attrs["scale"].kind = Attribute::Kind::f;
  fused.attrs["scale"].f = float(scale);
  if (q_perm != identity) fused.attrs["q_perm"] = ints_attribute(q_perm);
  if (k_perm != identity) fused.attrs["k_perm"] = ints_attribute(k_perm);
  if (v_perm != identity) fused.attrs["v_perm"] = ints_attribute(v_perm);
  if (out_perm != identity) fused.attrs["out_perm"] = ints_attribute(out_perm);
  g.replace_all(std::move(nodes), std::move(fused));
  counts[mask.empty() ? "Attention" : "Attention+mask"]++;
}

}  // namespace

void fuse_attention(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fuse_attention_at(g, i, counts);
}

}  // namespace vlrt
