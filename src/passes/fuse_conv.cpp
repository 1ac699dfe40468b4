// Conv fusions: BatchNormalization folded into the Conv (or ConvTranspose) before it, and
// Conv + residual Add + activation as com.microsoft FusedConv.
#include <cmath>

#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

// The constant input i of n as doubles, or nullopt when it is not a constant of `count` values.
std::optional<std::vector<double>> constant_values(FusionGraph& g, const Node& n, size_t i, int64_t count) {
  if (i >= n.inputs.size() || n.inputs[i].empty()) return std::nullopt;
  const Tensor* t = g.constant(n.inputs[i]);
  if (!t || !dtype_is_float(t->dtype()) || t->numel() != count) return std::nullopt;
  return t->to_double_vector();
}

// Folds BatchNormalization node `bn_index` into the convolution that feeds it; false when the
// pattern does not hold (non-constant weights, a second user of the conv output, training mode).
bool fold_batchnorm(FusionGraph& g, size_t bn_index, FusionCounts& counts) {
  Node& bn = g.node(bn_index);
  if (!is_op(bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.attr_int("training_mode", 0)) return false;
  for (size_t o = 1; o < bn.outputs.size(); o++)
    if (!bn.outputs[o].empty()) return false;
  int conv_index = g.producer_index(bn.inputs[0]);
  if (conv_index < 0 || !g.single_use(bn.inputs[0])) return false;
  Node conv = g.node(size_t(conv_index));
  bool transposed = is_op(conv, "ConvTranspose");
  if (!is_op(conv, "Conv") && !transposed) return false;
  const Tensor* w = conv.inputs.size() > 1 ? g.constant(conv.inputs[1]) : nullptr;
  if (!w || w->rank() < 3 || !dtype_is_float(w->dtype())) return false;
  int64_t group = conv.attr_int("group", 1);
  int64_t channels = transposed ? w->dim(1) * group : w->dim(0);
  auto scale = constant_values(g, bn, 1, channels), shift = constant_values(g, bn, 2, channels),
       mean = constant_values(g, bn, 3, channels), var = constant_values(g, bn, 4, channels);
  if (!scale || !shift || !mean || !var) return false;
  std::optional<std::vector<double>> bias(std::vector<double>(size_t(channels), 0.0));
  if (conv.inputs.size() > 2 && !conv.inputs[2].empty()) bias = constant_values(g, conv, 2, channels);
  if (!bias) return false;
  double eps = bn.attr_float("epsilon", 1e-5f);
  std::vector<double> factor(static_cast<size_t>(channels));
  for (size_t c = 0; c < factor.size(); c++) factor[c] = (*scale)[c] / std::sqrt((*var)[c] + eps);
  // Conv weights are [M, C/group, k...]; ConvTranspose's [C, M/group, k...], output channel
  // (c / (C/group)) * (M/group) + j for weight [c, j].
  std::vector<double> wv = w->to_double_vector();
  int64_t per_out = w->numel() / (w->dim(0) * w->dim(1)), in_per_group = w->dim(0) / group;
  for (int64_t a = 0; a < w->dim(0); a++)
    for (int64_t b = 0; b < w->dim(1); b++) {
      int64_t out = transposed ? (a / in_per_group) * w->dim(1) + b : a;
      for (int64_t k = 0; k < per_out; k++) wv[size_t((a * w->dim(1) + b) * per_out + k)] *= factor[size_t(out)];
    }
  Tensor folded_w(w->dtype(), w->shape()), folded_b(w->dtype(), {channels});
  folded_w.assign_doubles(wv);
  std::vector<double> bv(static_cast<size_t>(channels));
  for (size_t c = 0; c < bv.size(); c++) bv[c] = ((*bias)[c] - (*mean)[c]) * factor[c] + (*shift)[c];
  folded_b.assign_doubles(bv);
  conv.inputs.resize(3);
  conv.inputs[1] = g.add_constant(conv.inputs[1] + "_bn", folded_w);
  conv.inputs[2] = g.add_constant(cat(conv.name.empty() ? conv.outputs[0] : conv.name, "_bn_bias"), folded_b);
  conv.outputs[0] = bn.outputs[0];
  g.remove(size_t(conv_index));
  g.replace(bn_index, std::move(conv));
  counts[transposed ? "ConvTranspose+BatchNormalization" : "Conv+BatchNormalization"]++;
  return true;
}

// The Add that is y's only reader, adding a value of y's shape: its index and that value.
std::optional<std::pair<size_t, std::string>> residual_add(FusionGraph& g, const std::string& y) {
  std::vector<size_t> users = g.users(y);
  if (users.size() != 1 || !g.single_use(y)) return std::nullopt;
  const Node& add = g.node(users[0]);
  if (!is_op(add, "Add") || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) return std::nullopt;
  const std::string& other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  if (!g.facts.same_shape(other, y) || !g.facts.same_shape(add.outputs[0], y)) return std::nullopt;
  return std::pair<size_t, std::string>{users[0], other};
}

// Conv [+ QuantizeDequantize before a residual Add] [+ Add(Z) of exactly the conv output's shape]
// [+ activation] as one FusedConv. The QuantizeDequantize before the Add is a QDQ model's: both
// operands of its residual Add are fake-quantized.
void fuse_conv_chain(FusionGraph& g, size_t conv_index, FusionCounts& counts) {
  Node conv = g.node(conv_index);
  if (!is_op(conv, "Conv") || g.facts.dtype(conv.outputs[0]) != DType::f32) return;
  std::string y = conv.outputs[0], z, pattern = "Conv";
  std::vector<size_t> chain;
  std::optional<FusableActivation> pre = activation_after(g, y);
  if (pre && pre->name == "QuantizeDequantize" && residual_add(g, pre->output)) {
    pattern += "+" + pre->name;
    chain = pre->nodes;
    y = pre->output;
  } else {
    pre.reset();
  }
  if (auto add = residual_add(g, y)) {
    z = add->second;
    y = g.node(add->first).outputs[0];
    pattern += "+Add";
    chain.push_back(add->first);
  }
  std::optional<FusableActivation> act = activation_after(g, y);
  if (act) {
    pattern += "+" + act->name;
    chain.insert(chain.end(), act->nodes.begin(), act->nodes.end());
    y = act->output;
  }
  if (chain.empty()) return;
  Node fused = conv;
  fused.op_type = "FusedConv";
  fused.domain = "com.microsoft";
  fused.outputs = {y};
  if (act) set_activation(fused, *act);
  if (pre) set_activation(fused, *pre, "pre_activation");
  if (!z.empty()) {
    fused.inputs.resize(3);
    fused.inputs.push_back(z);
  }
  chain.push_back(conv_index);
  g.replace_all(chain, std::move(fused));
  counts[pattern]++;
}

}  // namespace

void fuse_conv_batchnorm(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fold_batchnorm(g, i, counts);
}

void fuse_conv_activation(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fuse_conv_chain(g, i, counts);
}

}  // namespace vlrt
