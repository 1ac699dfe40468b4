// The dynamically quantized product, as `vlrt quantize --int8 dynamic` and ONNX Runtime's
// quantize_dynamic write it,
//   DynamicQuantizeLinear(X) -> MatMulInteger(X_q, W, X_zp [, W_zp]) -> Cast(float)
//     -> Mul(Mul(X_scale, W_scale)) [-> Add(bias)]
// as one com.microsoft DynamicQuantizeMatMul(X, W, W_scale, W_zp, bias): its kernel quantizes X,
// runs the integer GEMM and dequantizes in one pass, without the int32 and float intermediates.
// It computes the same floats: the scale product, the conversion, the product and the sum are each
// rounded as the nodes round them.
#include <map>

#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

// A float32 constant of one value or of n values along one axis: per-tensor or per-column.
bool column_constant(FusionGraph& g, const std::string& v, int64_t n, bool allow_scalar) {
  const Tensor* t = g.constant(v);
  if (!t || t->dtype() != DType::f32 || t->rank() > 1) return false;
  return t->numel() == n || (allow_scalar && t->numel() == 1);
}

void fuse_product(FusionGraph& g, size_t index, FusionCounts& counts) {
  const Node& product = g.node(index);
  if (!is_op(product, "MatMulInteger") || product.inputs.size() < 3) return;
  std::string xq = product.inputs[0], w = product.inputs[1], x_zp = product.inputs[2];
  std::string w_zp = product.inputs.size() > 3 ? product.inputs[3] : "";
  Node* quantize = g.producer(xq);
  if (!quantize || !is_op(*quantize, "DynamicQuantizeLinear") || quantize->outputs.size() != 3 ||
      quantize->outputs[0] != xq || quantize->outputs[2] != x_zp)
    return;
  const Tensor* weights = g.constant(w);
  if (!weights || weights->rank() != 2) return;
  int64_t n = weights->dim(1);
  if (!w_zp.empty()) {
    const Tensor* zp = g.constant(w_zp);
    if (!zp || zp->rank() > 1 || (zp->numel() != 1 && zp->numel() != n)) return;
  }
  size_t cast, mul;
  const Node* as_float = only_user(g, product.outputs[0], "Cast", &cast);
  if (!as_float || dtype_from_onnx(int32_t(as_float->attr_int("to", 0))) != DType::f32) return;
  const Node* dequantize = only_user(g, as_float->outputs[0], "Mul", &mul);
  if (!dequantize) return;
  std::string scale =
      dequantize->inputs[0] == as_float->outputs[0] ? dequantize->inputs[1] : dequantize->inputs[0];
  Node* scales = g.producer(scale);
  const std::string& x_scale = quantize->outputs[1];
  if (!scales || !is_op(*scales, "Mul") || scales->inputs.size() != 2) return;
  std::string w_scale = scales->inputs[0] == x_scale ? scales->inputs[1] : scales->inputs[0];
  if ((scales->inputs[0] != x_scale && scales->inputs[1] != x_scale) || !column_constant(g, w_scale, n, true))
    return;
  Node fused;
  fused.name = product.name;
  fused.op_type = "DynamicQuantizeMatMul";
  fused.domain = "com.microsoft";
  fused.inputs = {quantize->inputs[0], w, w_scale, w_zp};
  std::vector<size_t> chain = {index, cast, mul};
  if (g.single_use(scale)) chain.insert(chain.begin(), size_t(g.producer_index(scale)));
  std::string y = dequantize->outputs[0], pattern = "DynamicQuantizeLinear+MatMulInteger+Cast+Mul";
  size_t add;
  if (const Node* a = only_user(g, y, "Add", &add)) {
    std::string bias = a->inputs[0] == y ? a->inputs[1] : a->inputs[0];
    if (a->inputs[0] != a->inputs[1] && column_constant(g, bias, n, false)) {
      fused.inputs.push_back(bias);
      chain.push_back(add);
      y = a->outputs[0];
      pattern += "+Add";
    }
  }
  while (!fused.inputs.empty() && fused.inputs.back().empty()) fused.inputs.pop_back();
  fused.outputs = {y};
  size_t quantize_index = size_t(g.producer_index(xq));
  g.replace_all(chain, std::move(fused));
  // The quantization goes once no other product reads it (a product quantizes its own X).
  bool read = false;
  for (const std::string& v : g.node(quantize_index).outputs)
    read = read || !g.users(v).empty() || g.pinned(v);
  if (!read) g.remove(quantize_index);
  counts[pattern]++;
}

}  // namespace

void fuse_dynamic_quant_matmul(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fuse_product(g, i, counts);
}

void merge_dynamic_quant_matmuls(FusionGraph& g, FusionCounts& counts) {
  std::map<std::string, std::vector<size_t>> by_a;  // the products of each A, in graph order
  for (size_t i = 0; i < g.size(); i++) {
    const Node& n = g.node(i);
    if (!g.alive(i) || n.domain != "com.microsoft" || n.op_type != "DynamicQuantizeMatMul" ||
        n.outputs.size() != 1)
      continue;
    const Tensor* w = g.constant(n.inputs[1]);
    if (w && w->rank() == 2) by_a[n.inputs[0]].push_back(i);
  }
  for (auto& [a, products] : by_a) {
    const Tensor* first = g.constant(g.node(products[0]).inputs[1]);
    auto has_bias = [&](size_t i) { return g.node(i).inputs.size() > 4 && !g.node(i).inputs[4].empty(); };
    std::vector<size_t> group;  // those whose B has the first's type and rows, with a bias as it has
    for (size_t i : products) {
      const Tensor* w = g.constant(g.node(i).inputs[1]);
      if (w->dtype() == first->dtype() && w->dim(0) == first->dim(0) && has_bias(i) == has_bias(products[0]))
        group.push_back(i);
    }
    if (group.size() < 2) continue;
    Node merged;
    merged.name = g.node(group[0]).name + "_shared_a";
    merged.op_type = "DynamicQuantizeMatMuls";
    merged.domain = "vlrt";
    merged.inputs = {a};
    for (size_t i : group) {
      const Node& n = g.node(i);
      for (size_t k = 1; k < 5; k++) merged.inputs.push_back(k < n.inputs.size() ? n.inputs[k] : "");
      merged.outputs.push_back(n.outputs[0]);
    }
    while (merged.inputs.back().empty()) merged.inputs.pop_back();
    g.replace_all(group, std::move(merged));
    counts["DynamicQuantizeMatMul sharing A"] += group.size();
  }
}

}  // namespace vlrt
