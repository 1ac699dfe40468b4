// HardSwish as exporters write it without the op (paddle2onnx, torch before opset 14):
// x * Clip(x + 3, 0, 6) / 6, the division a Mul by 1/6 or applied to the Clip before the
// product, and x * HardSigmoid(x) with alpha 1/6 and beta 1/2, each as one HardSwish node, which
// the convolution fusion then takes into its epilogue.
#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

// v divided by 6 (Div by 6 or Mul by 1/6) as v's only reader: that node's index, or -1.
int sixth_of(FusionGraph& g, const std::string& v) {
  std::vector<size_t> users = g.users(v);
  if (users.size() != 1 || !g.single_use(v)) return -1;
  const Node& n = g.node(users[0]);
  bool sixth =
      (is_op(n, "Div") && n.inputs.size() == 2 && n.inputs[0] == v && near(g.scalar(n.inputs[1]), 6.0)) ||
      (is_op(n, "Mul") && near(g.scalar(other_input(n, v)), 1.0 / 6));
  return sixth ? int(users[0]) : -1;
}

// The Mul reading both x and v, v's only reader: its index, or -1.
int product_with(FusionGraph& g, const std::string& v, const std::string& x) {
  size_t i = 0;
  Node* mul = only_user(g, v, "Mul", &i);
  return mul && other_input(*mul, v) == x ? int(i) : -1;
}

// The gate at node `index` (a Clip of x + 3 to [0, 6], or a HardSigmoid of x with alpha 1/6 and
// beta 1/2) and the nodes around it that make x * gate / 6 (x * gate for HardSigmoid): fused.
void fuse_at(FusionGraph& g, size_t index, FusionCounts& counts) {
  const Node& gate = g.node(index);
  std::vector<size_t> nodes;
  std::string x, y, gated = gate.outputs.empty() ? "" : gate.outputs[0];
  if (is_op(gate, "HardSigmoid") && gate.inputs.size() == 1) {
    if (!near(double(gate.attr_float("alpha", 0.2f)), 1.0 / 6) ||
        !near(double(gate.attr_float("beta", 0.5f)), 0.5))
      return;
    x = gate.inputs[0];
    int mul = product_with(g, gated, x);
    if (mul < 0) return;
    nodes = {index, size_t(mul)};
  } else if (is_op(gate, "Clip") && gate.inputs.size() == 3) {
    if (g.scalar(gate.inputs[1]) != 0.0 || !near(g.scalar(gate.inputs[2]), 6.0)) return;
    size_t add = 0;
    const Node* sum = sole_producer(g, gate.inputs[0], "Add", &add);
    for (int s = 0; sum && s < 2 && x.empty(); s++)
      if (sum->inputs.size() == 2 && near(g.scalar(sum->inputs[size_t(1 - s)]), 3.0))
        x = sum->inputs[size_t(s)];
    if (x.empty()) return;
    // x * Clip(..) / 6, or x * (Clip(..) / 6).
    if (int mul = product_with(g, gated, x); mul >= 0) {
      int div = sixth_of(g, g.node(size_t(mul)).outputs[0]);
      if (div < 0) return;
      nodes = {add, index, size_t(mul), size_t(div)};
    } else if (int div = sixth_of(g, gated); div >= 0) {
      int product = product_with(g, g.node(size_t(div)).outputs[0], x);
      if (product < 0) return;
      nodes = {add, index, size_t(div), size_t(product)};
    } else {
      return;
    }
  } else {
    return;
  }
  // Float32 as inferred, or as the constant 3 added to x is.
  DType dtype = g.facts.dtype(x);
  const Tensor* three = is_op(gate, "Clip") ? g.constant(other_input(g.node(nodes[0]), x)) : nullptr;
  if (dtype == DType::undefined && three) dtype = three->dtype();
  if (dtype != DType::f32) return;
  Node hard_swish;
  hard_swish.name = gate.name;
  hard_swish.op_type = "HardSwish";
  hard_swish.inputs = {x};
  hard_swish.outputs = {g.node(nodes.back()).outputs[0]};
  g.replace_all(std::move(nodes), std::move(hard_swish));
  counts["HardSwish subgraph"]++;
}

}  // namespace

void fuse_hard_swish(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fuse_at(g, i, counts);
}

}  // namespace vlrt
