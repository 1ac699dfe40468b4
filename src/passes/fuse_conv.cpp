// Conv fusions: BatchNormalization folded into the Conv (or ConvTranspose) before it; a Mul, Add
// or Sub by a per-channel constant folded into the Conv before it, or into an unpadded Conv
// after it; and Conv + residual Add + activation as com.microsoft FusedConv.
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

// The values of constant c per channel, for c broadcast against a [N, C, ...] value of `rank`
// axes and `channels` channels along the channel axis alone (one value, or C along axis 1);
// nullopt for anything else.
std::optional<std::vector<double>> channel_constant(FusionGraph& g, const std::string& c, int64_t channels,
                                                    int rank) {
  const Tensor* t = c.empty() ? nullptr : g.constant(c);
  if (!t || t->dtype() != DType::f32 || t->rank() > rank || t->numel() == 0) return std::nullopt;
  std::vector<double> v = t->to_double_vector();
  if (t->numel() == 1) return std::vector<double>(size_t(channels), v[0]);
  for (int i = 0; i < t->rank(); i++)
    if (t->dim(i) != (t->rank() - i == rank - 1 ? channels : 1)) return std::nullopt;
  return v;
}

// The per-channel constant that node n (Mul, Add, or Sub with it second) applies to v: the
// values, and whether it multiplies; nullopt when n is not such a node.
std::optional<std::pair<std::vector<double>, bool>> affine_of(FusionGraph& g, const Node& n,
                                                              const std::string& v, int64_t channels,
                                                              int rank) {
  bool mul = is_op(n, "Mul"), sub = is_op(n, "Sub") && n.inputs.size() == 2 && n.inputs[0] == v;
  if (!mul && !sub && !is_op(n, "Add")) return std::nullopt;
  auto k = channel_constant(g, other_input(n, v), channels, rank);
  if (!k) return std::nullopt;
  if (sub)
    for (double& x : *k) x = -x;
  return std::pair{std::move(*k), mul};
}

// The Conv's constant float32 weights (rank 3 or more) and its bias (zeros without one).
std::optional<std::pair<const Tensor*, std::vector<double>>> conv_parameters(FusionGraph& g,
                                                                             const Node& conv) {
  const Tensor* w = conv.inputs.size() > 1 ? g.constant(conv.inputs[1]) : nullptr;
  if (!w || w->dtype() != DType::f32 || w->rank() < 3) return std::nullopt;
  std::optional<std::vector<double>> bias(std::vector<double>(size_t(w->dim(0)), 0.0));
  if (conv.inputs.size() > 2 && !conv.inputs[2].empty()) bias = constant_values(g, conv, 2, w->dim(0));
  if (!bias) return std::nullopt;
  return std::pair{w, std::move(*bias)};
}

// conv with weights wv and bias bv as new constants.
void set_conv_parameters(FusionGraph& g, Node& conv, const Tensor& w, const std::vector<double>& wv,
                         const std::vector<double>& bv, const char* suffix) {
  Tensor folded_w(DType::f32, w.shape()), folded_b(DType::f32, {w.dim(0)});
  folded_w.assign_doubles(wv);
  folded_b.assign_doubles(bv);
  conv.inputs.resize(3);
  conv.inputs[1] = g.add_constant(conv.inputs[1] + suffix, folded_w);
  conv.inputs[2] =
      g.add_constant(cat(conv.name.empty() ? conv.outputs[0] : conv.name, suffix, "_bias"), folded_b);
}

// A Mul, Add or Sub by a per-channel constant that is the only reader of a Conv's output, folded
// into the Conv: y * s = conv(x, w * s) + b * s; y + t = conv(x, w) + (b + t).
bool fold_affine_after(FusionGraph& g, size_t conv_index, FusionCounts& counts) {
  Node conv = g.node(conv_index);
  if (!is_op(conv, "Conv") || conv.outputs.size() != 1) return false;
  auto params = conv_parameters(g, conv);
  const std::string y = conv.outputs[0];
  std::vector<size_t> users = g.users(y);
  if (!params || users.size() != 1 || !g.single_use(y)) return false;
  auto& [w, bias] = *params;
  const int64_t channels = w->dim(0), per_out = w->numel() / channels;
  auto affine = affine_of(g, g.node(users[0]), y, channels, w->rank());
  if (!affine) return false;
  auto& [k, mul] = *affine;
  std::vector<double> wv = w->to_double_vector();
  for (size_t o = 0; o < size_t(channels); o++) {
    if (mul) {
      for (size_t j = 0; j < size_t(per_out); j++) wv[o * size_t(per_out) + j] *= k[o];
      bias[o] *= k[o];
    } else {
      bias[o] += k[o];
    }
  }
  set_conv_parameters(g, conv, *w, wv, bias, mul ? "_scaled" : "_shifted");
  conv.outputs[0] = g.node(users[0]).outputs[0];
  g.remove(conv_index);
  g.replace(users[0], std::move(conv));
  counts[mul ? "Conv+Mul folded" : "Conv+Add folded"]++;
  return true;
}

// A Mul, Add or Sub by a per-input-channel constant whose output only an unpadded Conv reads (as
// X), folded into that Conv: conv(x * s) = conv(x, w * s); conv(x + t) = conv(x) + sum(w t). With
// padding the border taps would read zeros where the original read t.
bool fold_affine_before(FusionGraph& g, size_t op_index, FusionCounts& counts) {
  const Node& op = g.node(op_index);
  if (op.outputs.size() != 1 || op.inputs.size() != 2) return false;
  const std::string v = op.outputs[0];
  size_t conv_index = 0;
  Node* reader = only_user(g, v, "Conv", &conv_index);
  if (!reader || reader->inputs[0] != v || reader->attr_string("auto_pad", "NOTSET").find("SAME") == 0)
    return false;
  for (int64_t p : reader->attr_ints("pads"))
    if (p != 0) return false;
  Node conv = *reader;
  auto params = conv_parameters(g, conv);
  if (!params) return false;
  auto& [w, bias] = *params;
  const int64_t group = conv.attr_int("group", 1), per_group = w->dim(1), channels = per_group * group,
                out_per_group = w->dim(0) / group, taps = w->numel() / (w->dim(0) * per_group);
  for (int s = 0; s < 2; s++) {
    const std::string& x = op.inputs[size_t(s)];
    auto affine = affine_of(g, op, x, channels, w->rank());
    // x is float32 as the Conv's weights are; it has the Conv's rank unless the constant, of that
    // rank, broadcasts it up.
    const Tensor* c = g.constant(other_input(op, x));
    if (!affine || (c->rank() == w->rank() && g.facts.rank(x) != size_t(w->rank()))) continue;
    auto& [k, mul] = *affine;
    std::vector<double> wv = w->to_double_vector();
    for (int64_t o = 0; o < w->dim(0); o++)
      for (int64_t i = 0; i < per_group; i++) {
        double kc = k[size_t(o / out_per_group * per_group + i)];
        for (int64_t t = 0; t < taps; t++) {
          double& wt = wv[size_t((o * per_group + i) * taps + t)];
          if (mul)
            wt *= kc;
          else
            bias[size_t(o)] += wt * kc;
        }
      }
    set_conv_parameters(g, conv, *w, wv, bias, mul ? "_scaled_in" : "_shifted_in");
    conv.inputs[0] = x;
    g.remove(op_index);
    g.replace(conv_index, std::move(conv));
    counts[mul ? "Mul+Conv folded" : "Add+Conv folded"]++;
    return true;
  }
  return false;
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
  if (!is_op(conv, "Conv")) return;
  // Float32 as inferred, or as its constant weights are where the shapes are not known.
  DType dtype = g.facts.dtype(conv.outputs[0]);
  const Tensor* w = conv.inputs.size() > 1 ? g.constant(conv.inputs[1]) : nullptr;
  if (dtype == DType::undefined && w) dtype = w->dtype();
  if (dtype != DType::f32) return;
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

void fuse_conv_affine(FusionGraph& g, FusionCounts& counts) {
  // Again until nothing folds: a fold before a Conv makes the node before it the Conv's reader.
  for (bool folded = true; folded;) {
    folded = false;
    for (size_t i = 0; i < g.size(); i++)
      if (g.alive(i)) folded = fold_affine_after(g, i, counts) || fold_affine_before(g, i, counts) || folded;
  }
}

void fuse_conv_activation(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fuse_conv_chain(g, i, counts);
}

}  // namespace vlrt
