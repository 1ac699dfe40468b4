// Normalization and activation subgraphs as exporters before opset 17 write them:
// ReduceMean-Sub-Pow-ReduceMean-Add-Sqrt-Div[-Mul][-Add] as LayerNormalization, and Gelu's erf
// form (x * 0.5 * (1 + erf(x / sqrt 2))) and tanh form as com.microsoft Gelu and FastGelu.
#include <algorithm>
#include <cmath>

#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

// ---- LayerNormalization ----------------------------------------------------------------

// ReduceMean's constant axes normalized by rank; nullopt unless they are the last k axes.
std::optional<int64_t> trailing_axes(FusionGraph& g, const Node& mean, std::optional<size_t> rank) {
  if (mean.inputs.size() < 2 || mean.attr_int("keepdims", 1) != 1 || mean.attr_int("noop_with_empty_axes", 0))
    return std::nullopt;
  const Tensor* t = g.constant(mean.inputs[1]);
  if (!t || t->numel() == 0) return std::nullopt;
  std::vector<int64_t> axes = t->to_int64_vector();
  bool negative = true;
  for (int64_t a : axes) negative = negative && a < 0;
  if (!negative && !rank) return std::nullopt;
  for (int64_t& a : axes)
    if (a >= 0) a -= int64_t(*rank);
  std::sort(axes.begin(), axes.end());
  int64_t k = int64_t(axes.size());
  for (int64_t i = 0; i < k; i++)
    if (axes[size_t(i)] != i - k) return std::nullopt;
  return k;
}

// A constant broadcasting over the last k axes of x, as a tensor of exactly those axes' shape.
std::optional<Tensor> over_trailing(FusionGraph& g, const std::string& v, const Shape& trailing) {
  const Tensor* t = g.constant(v);
  if (!t || t->dtype() != DType::f32 || t->numel() != shape_numel(trailing)) return std::nullopt;
  const Shape& s = t->shape();
  for (size_t i = 0; i < s.size(); i++) {
    size_t from_end = s.size() - i;
    if (from_end > trailing.size() ? s[i] != 1 : s[i] != trailing[trailing.size() - from_end]) return std::nullopt;
  }
  return t->reshaped(trailing);
}

void fuse_layer_norm_at(FusionGraph& g, size_t index, FusionCounts& counts) {
  Node& mean = g.node(index);
  if (!is_op(&mean, "ReduceMean")) return;
  const std::string x = mean.inputs[0];
  std::optional<size_t> rank = g.facts.rank(x);
  std::optional<int64_t> k = trailing_axes(g, mean, rank);
  if (!k || !rank || g.facts.dtype(x) != DType::f32) return;
  std::vector<size_t> nodes = {index};
  size_t i;
  Node* sub = only_user(g, mean.outputs[0], "Sub", &i);
  if (!sub || sub->inputs[0] != x || sub->inputs[1] != mean.outputs[0]) return;
  nodes.push_back(i);
  const std::string d = sub->outputs[0];
  std::vector<size_t> users = g.users(d);
  if (users.size() != 2 || g.pinned(d)) return;
  Node *pow = &g.node(users[0]), *div = &g.node(users[1]);
  if (is_op(pow, "Div")) std::swap(pow, div), std::swap(users[0], users[1]);
  if (!is_op(pow, "Pow") || pow->inputs[0] != d || !near(g.scalar(pow->inputs[1]), 2.0) || !is_op(div, "Div") ||
      div->inputs[0] != d)
    return;
  nodes.push_back(users[0]);
  Node* var = only_user(g, pow->outputs[0], "ReduceMean", &i);
  if (!var || trailing_axes(g, *var, rank) != k) return;
  nodes.push_back(i);
  Node* add_eps = only_user(g, var->outputs[0], "Add", &i);
  std::optional<double> eps = add_eps ? g.scalar(other_input(*add_eps, var->outputs[0])) : std::nullopt;
  if (!eps) return;
  nodes.push_back(i);
  Node* sqrt = only_user(g, add_eps->outputs[0], "Sqrt", &i);
  if (!sqrt || !g.single_use(sqrt->outputs[0]) || div->inputs[1] != sqrt->outputs[0]) return;
  nodes.push_back(i);
  nodes.push_back(users[1]);
  // The normalized axes' sizes, the same under both probes.
  std::optional<Shape> trailing = g.facts.trailing_shape(x, size_t(*k));
  if (!trailing) return;
  std::string y = div->outputs[0], scale, bias;
  Node* mul = only_user(g, y, "Mul", &i);
  if (mul) {
    const std::string c = other_input(*mul, y);
    if (std::optional<Tensor> s = over_trailing(g, c, *trailing)) {
      scale = s->shape() == g.constant(c)->shape() ? c : g.add_constant(c + "_ln", *s);
      nodes.push_back(i);
      y = mul->outputs[0];
      Node* add = only_user(g, y, "Add", &i);
      std::optional<Tensor> b = add ? over_trailing(g, other_input(*add, y), *trailing) : std::nullopt;
      if (b) {
        std::string c2 = other_input(*add, y);
        bias = b->shape() == g.constant(c2)->shape() ? c2 : g.add_constant(c2 + "_ln", *b);
        nodes.push_back(i);
        y = add->outputs[0];
      }
    }
  }
  if (scale.empty()) {
    Tensor ones(DType::f32, *trailing);
    ones.assign_doubles(std::vector<double>(size_t(ones.numel()), 1.0));
    scale = g.add_constant(x + "_ln_scale", ones);
  }
  Node ln;
  ln.name = mean.name;
  ln.op_type = "LayerNormalization";
  ln.inputs = {x, scale};
  if (!bias.empty()) ln.inputs.push_back(bias);
  ln.outputs = {y};
  ln.attrs["axis"].kind = Attribute::Kind::i;
  ln.attrs["axis"].i = -*k;
  ln.attrs["epsilon"].kind = Attribute::Kind::f;
  ln.attrs["epsilon"].f = float(*eps);
  g.replace_all(std::move(nodes), std::move(ln));
  counts["LayerNormalization subgraph"]++;
}

// ---- Gelu --------------------------------------------------------------------------------

// The tail both Gelu forms share: from a = 1 + f(x), the product 0.5 * x * a in any of the
// orders exporters write ((x * a) * 0.5, (x * 0.5) * a, (a * 0.5) * x). Appends its nodes;
// returns the output, or "" when it does not match.
std::string half_x_times(FusionGraph& g, const std::string& a, const std::string& x, std::vector<size_t>& nodes) {
  size_t i, j;
  Node* m1 = only_user(g, a, "Mul", &i);
  if (!m1) return "";
  std::string o = other_input(*m1, a);
  if (o == x) {
    Node* m2 = only_user(g, m1->outputs[0], "Mul", &j);
    if (!m2 || !near(g.scalar(other_input(*m2, m1->outputs[0])), 0.5)) return "";
    nodes.insert(nodes.end(), {i, j});
    return m2->outputs[0];
  }
  if (near(g.scalar(o), 0.5)) {
    Node* m2 = only_user(g, m1->outputs[0], "Mul", &j);
    if (!m2 || other_input(*m2, m1->outputs[0]) != x) return "";
    nodes.insert(nodes.end(), {i, j});
    return m2->outputs[0];
  }
  int h = g.producer_index(o);
  if (h < 0 || !g.single_use(o) || !is_op(&g.node(size_t(h)), "Mul") ||
      other_input(g.node(size_t(h)), x) == "" || !near(g.scalar(other_input(g.node(size_t(h)), x)), 0.5))
    return "";
  nodes.insert(nodes.end(), {size_t(h), i});
  return m1->outputs[0];
}

// 1 + v as the only user of v: appends the Add and returns its output, or "".
std::string one_plus(FusionGraph& g, const std::string& v, std::vector<size_t>& nodes) {
  size_t i;
  Node* add = only_user(g, v, "Add", &i);
  if (!add || !near(g.scalar(other_input(*add, v)), 1.0)) return "";
  nodes.push_back(i);
  return add->outputs[0];
}

// Erf(x / sqrt 2) or Erf(x * (1 / sqrt 2)), anchored on the Erf node.
void fuse_erf_gelu(FusionGraph& g, size_t index, FusionCounts& counts) {
  Node& erf = g.node(index);
  int p = g.producer_index(erf.inputs[0]);
  if (p < 0 || !g.single_use(erf.inputs[0])) return;
  Node& scaled = g.node(size_t(p));
  std::string x;
  bool matched = false;
  if (is_op(&scaled, "Div") && scaled.inputs.size() == 2 && near(g.scalar(scaled.inputs[1]), M_SQRT2)) {
    x = scaled.inputs[0];
    matched = true;
  } else if (is_op(&scaled, "Mul") && scaled.inputs.size() == 2) {
    for (int s = 0; s < 2; s++)
      if (near(g.scalar(scaled.inputs[size_t(s)]), M_SQRT1_2)) {
        x = scaled.inputs[size_t(1 - s)];
        matched = true;
      }
  }
  if (!matched || g.facts.dtype(x) != DType::f32) return;
  std::vector<size_t> nodes = {size_t(p), index};
  std::string a = one_plus(g, erf.outputs[0], nodes);
  std::string y = a.empty() ? "" : half_x_times(g, a, x, nodes);
  if (y.empty()) return;
  Node gelu;
  gelu.name = erf.name;
  gelu.op_type = "Gelu";
  gelu.domain = "com.microsoft";
  gelu.inputs = {x};
  gelu.outputs = {y};
  g.replace_all(std::move(nodes), std::move(gelu));
  counts["Gelu subgraph (erf)"]++;
}

// Whether v is a product of x's and scalar constants through Muls read by nothing else (and Pow(x,
// 3)): adds the number of x factors to `xs`, multiplies the constants into `scale` and appends the
// nodes. Exporters write 0.044715 x^3 as 0.044715 * Pow(x, 3), 0.044715 * (x * x * x) or
// x * (x * (0.044715 * x)).
bool product_of_x(FusionGraph& g, const std::string& v, const std::string& x, int& xs, double& scale,
                  std::vector<size_t>& nodes) {
  if (v == x) return ++xs, true;
  if (std::optional<double> c = g.scalar(v)) return scale *= *c, true;
  int p = g.producer_index(v);
  if (p < 0 || !g.single_use(v) || nodes.size() > 8) return false;
  Node& n = g.node(size_t(p));
  if (is_op(&n, "Pow") && n.inputs[0] == x && near(g.scalar(n.inputs[1]), 3.0)) {
    nodes.push_back(size_t(p));
    return xs += 3, true;
  }
  if (!is_op(&n, "Mul") || n.inputs.size() != 2) return false;
  nodes.push_back(size_t(p));
  return product_of_x(g, n.inputs[0], x, xs, scale, nodes) &&
         product_of_x(g, n.inputs[1], x, xs, scale, nodes);
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), anchored on the Tanh node; x^3 in any of
// product_of_x's spellings.
void fuse_tanh_gelu(FusionGraph& g, size_t index, FusionCounts& counts) {
  Node& tanh = g.node(index);
  size_t p = 0, q = 0;
  Node* outer = sole_producer(g, tanh.inputs[0], "Mul", &p);
  if (!outer) return;
  std::string inner;
  for (int s = 0; s < 2; s++)
    if (near(g.scalar(outer->inputs[size_t(s)]), 0.7978845608028654)) inner = outer->inputs[size_t(1 - s)];
  Node* sum = inner.empty() ? nullptr : sole_producer(g, inner, "Add", &q);
  if (!sum) return;
  std::vector<size_t> nodes = {p, index, q};
  // One operand is x, the other 0.044715 * x^3.
  for (int s = 0; s < 2; s++) {
    std::string x = sum->inputs[size_t(s)], cubic = sum->inputs[size_t(1 - s)];
    std::vector<size_t> all = nodes;
    int xs = 0;
    double scale = 1;
    if (g.facts.dtype(x) != DType::f32 || g.scalar(x) || !product_of_x(g, cubic, x, xs, scale, all) ||
        xs != 3 || !near(scale, 0.044715) || all.size() == nodes.size())
      continue;
    std::string a = one_plus(g, tanh.outputs[0], all);
    std::string y = a.empty() ? "" : half_x_times(g, a, x, all);
    if (y.empty()) return;
    Node gelu;
    gelu.name = tanh.name;
    gelu.op_type = "FastGelu";
    gelu.domain = "com.microsoft";
    gelu.inputs = {x};
    gelu.outputs = {y};
    g.replace_all(std::move(all), std::move(gelu));
    counts["FastGelu subgraph (tanh)"]++;
    return;
  }
}

}  // namespace

void fuse_layer_norm(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fuse_layer_norm_at(g, i, counts);
}

void fuse_gelu(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++) {
    if (!g.alive(i) || !g.node(i).domain.empty()) continue;
    if (g.node(i).op_type == "Erf") fuse_erf_gelu(g, i, counts);
    else if (g.node(i).op_type == "Tanh") fuse_tanh_gelu(g, i, counts);
  }
}

}  // namespace vlrt
