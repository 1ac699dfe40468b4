// MatMul or Gemm [+ bias Add] [+ residual Add] [+ activation] as vlrt.FusedMatMul (a MatMul with
// a bias or an activation after it): Y = act(A B + Bias + Z), Bias over the last axis, Z of
// exactly the product's shape. A weight
// stored in half precision (B = Cast(float16 or bfloat16 initializer), as `vlrt quantize --fp16`
// writes) is given to the fused node as it is stored, so that it stays half the bytes.
#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

// A constant that adds the same value to every row of a product with n columns ([n], [1, n],
// [1, 1, n] ...), as a [n] tensor; nullopt otherwise. `product_rank` bounds its rank.
std::optional<Tensor> row_bias(FusionGraph& g, const std::string& v, int64_t n, size_t product_rank) {
  const Tensor* t = g.constant(v);
  if (!t || t->dtype() != DType::f32 || t->rank() < 1 || size_t(t->rank()) > product_rank || t->shape().back() != n ||
      t->numel() != n)
    return std::nullopt;
  return t->reshaped({n});
}

// B of a Gemm with transB = 1 as a [K, N] constant, when B is a constant only this Gemm reads.
std::optional<Tensor> transposed_constant(FusionGraph& g, const std::string& v) {
  const Tensor* t = g.constant(v);
  if (!t || t->rank() != 2 || !g.single_use(v)) return std::nullopt;
  int64_t r = t->dim(0), c = t->dim(1);
  std::vector<double> src = t->to_double_vector(), dst(src.size());
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) dst[size_t(j * r + i)] = src[size_t(i * c + j)];
  Tensor out(t->dtype(), {c, r});
  out.assign_doubles(dst);
  return out;
}

// The Add that is y's only user, and its other operand; nullptr when there is none.
Node* single_add(FusionGraph& g, const std::string& y, std::string* other, size_t* index) {
  std::vector<size_t> users = g.users(y);
  if (users.size() != 1 || !g.single_use(y)) return nullptr;
  Node& add = g.node(users[0]);
  if (!is_op(add, "Add") || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) return nullptr;
  *other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  *index = users[0];
  return &add;
}

void fuse_product(FusionGraph& g, size_t index, FusionCounts& counts) {
  Node product = g.node(index);
  bool gemm = is_op(product, "Gemm");
  if ((!gemm && !is_op(product, "MatMul")) || product.inputs.size() < 2) return;
  std::string y = product.outputs[0];
  std::optional<size_t> rank = g.facts.rank(y);
  std::optional<Shape> b_shape = g.facts.static_shape(product.inputs[1]);
  if (g.facts.dtype(y) != DType::f32 || !rank || !b_shape || b_shape->size() < 2) return;
  bool trans_b = gemm && product.attr_int("transB", 0);
  int64_t n = trans_b ? (*b_shape)[b_shape->size() - 2] : b_shape->back();
  const std::string half_b = b_shape->size() == 2 ? g.half_weight_source(product.inputs[1]) : "";
  Node fused;
  fused.name = product.name;
  fused.op_type = "FusedMatMul";
  fused.domain = "vlrt";
  fused.inputs = {product.inputs[0], half_b.empty() ? product.inputs[1] : half_b, "", ""};
  std::string pattern = product.op_type;
  std::vector<size_t> chain;
  if (gemm) {
    if (product.attr_int("transA", 0) || product.attr_float("alpha", 1.f) != 1.f) return;
    if (product.inputs.size() > 2 && !product.inputs[2].empty()) {
      if (product.attr_float("beta", 1.f) != 1.f) return;
      if (auto bias = row_bias(g, product.inputs[2], n, 2)) {
        fused.inputs[2] = g.add_constant(product.inputs[2] + "_row", *bias);
      } else if (g.facts.same_shape(product.inputs[2], y)) {
        fused.inputs[3] = product.inputs[2];
      } else {
        return;
      }
    }
  } else {
    std::string other;
    size_t add_index;
    Node* add = single_add(g, y, &other, &add_index);
    std::optional<Tensor> bias = add ? row_bias(g, other, n, *rank) : std::nullopt;
    if (bias) {
      fused.inputs[2] = bias->shape() == g.constant(other)->shape() ? other : g.add_constant(other + "_row", *bias);
      pattern += "+Add";
      chain.push_back(add_index);
      y = add->outputs[0];
    } else if (half_b.empty() && !activation_after(g, y)) {
      return;  // no bias, no activation: a residual Add alone is not worth a fused node
    }
  }
  std::string other;
  size_t add_index;
  Node* residual = fused.inputs[3].empty() ? single_add(g, y, &other, &add_index) : nullptr;
  if (residual && g.facts.same_shape(other, y) && g.facts.same_shape(residual->outputs[0], y)) {
    fused.inputs[3] = other;
    pattern += "+Add";
    chain.push_back(add_index);
    y = residual->outputs[0];
  }
  std::optional<FusableActivation> act = activation_after(g, y);
  if (act) {
    set_activation(fused, *act);
    pattern += "+" + act->name;
    chain.insert(chain.end(), act->nodes.begin(), act->nodes.end());
    y = act->output;
  }
  // A product alone gains nothing from the rewrite, unless it keeps its weight in half precision.
  if (chain.empty() && half_b.empty()) return;
  if (half_b.size()) pattern += " (" + std::string(dtype_name(g.constant(half_b)->dtype())) + " weight)";
  if (trans_b) {
    auto bt = half_b.empty() ? transposed_constant(g, product.inputs[1]) : std::nullopt;
    if (bt) {
      fused.inputs[1] = g.add_constant(product.inputs[1] + "_t", *bt);
    } else {
      fused.attrs["transB"] = int_attribute(1);
    }
  }
  while (!fused.inputs.empty() && fused.inputs.back().empty()) fused.inputs.pop_back();
  fused.outputs = {y};
  chain.push_back(index);
  const std::string weight = product.inputs[1];
  g.replace_all(chain, std::move(fused));
  counts[pattern]++;
  if (!half_b.empty()) g.remove_if_unread(weight);
}

}  // namespace

void fuse_matmul(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fuse_product(g, i, counts);
}

}  // namespace vlrt
