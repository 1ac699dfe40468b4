#include "passes/half_weights.h"

#include <unordered_map>

namespace vlrt {

namespace {

// A value name made from `base` that no node output or initializer of g has.
std::string fresh_name(const Graph& g, const std::unordered_set<std::string>& taken,
                       const std::string& base) {
  std::string name = base;
  for (int i = 1; taken.count(name) || g.initializers.count(name); i++) name = cat(base, "_", i);
  return name;
}

// Gather(Cast(T), I) -> Cast(Gather(T, I)) for every half-precision table T; a Cast left without
// readers is removed.
void gather_before_widening(Graph& g) {
  std::unordered_map<std::string, std::string> tables;  // Cast output -> the half-precision table
  std::unordered_set<std::string> names;
  for (auto& n : g.nodes) {
    if (casts_half_initializer(n, g)) tables[n.outputs[0]] = n.inputs[0];
    names.insert(n.outputs.begin(), n.outputs.end());
  }
  if (tables.empty()) return;
  std::vector<Node> nodes;
  for (auto& n : g.nodes) {
    auto table = is_op(n, "Gather") && !n.inputs.empty() ? tables.find(n.inputs[0]) : tables.end();
    if (table == tables.end() || n.outputs.size() != 1) {
      nodes.push_back(std::move(n));
      continue;
    }
    std::string rows = fresh_name(g, names, n.outputs[0] + "_half");
    Node widen = make_node(fresh_name(g, names, n.name + "_widen"), "Cast", {rows}, {n.outputs[0]});
    widen.attrs["to"] = int_attribute(int64_t(DType::f32));
    n.inputs[0] = table->second;
    n.outputs[0] = rows;
    names.insert(rows);
    names.insert(widen.name);
    nodes.push_back(std::move(n));
    nodes.push_back(std::move(widen));
  }
  // The Casts of tables that nothing reads any more.
  std::unordered_set<std::string> read;
  for (auto& n : nodes) {
    read.insert(n.inputs.begin(), n.inputs.end());
    for (auto& v : implicit_inputs(n)) read.insert(v);
  }
  for (auto& o : g.outputs) read.insert(o.name);
  g.nodes.clear();
  for (auto& n : nodes)
    if (!(n.outputs.size() == 1 && tables.count(n.outputs[0]) && !read.count(n.outputs[0])))
      g.nodes.push_back(std::move(n));
}

}  // namespace

bool casts_half_initializer(const Node& n, const Graph& g) {
  if (!is_op(n, "Cast") || n.inputs.size() != 1 || n.outputs.size() != 1 ||
      n.attr_int("to", 0) != int64_t(DType::f32))
    return false;
  auto it = g.initializers.find(n.inputs[0]);
  return it != g.initializers.end() && dtype_is_half(it->second.dtype());
}

std::unordered_set<std::string> keep_half_weights(Model& model, const FusionOptions& options,
                                                  const Backend& host) {
  std::unordered_set<std::string> kept;
  if (!options.half_weights) return kept;
  Graph& g = model.graph;
  if (host.reads_half_product_weights()) gather_before_widening(g);
  const bool products = options.matmul && host.reads_half_product_weights(),
             convs = options.conv_layout && host.reads_half_conv_weights();
  // The outputs of convolutions that a BatchNormalization reads: their weights are folded with
  // it in float32.
  std::unordered_set<std::string> normalized;
  for (auto& n : g.nodes)
    if (is_op(n, "BatchNormalization") && !n.inputs.empty()) normalized.insert(n.inputs[0]);
  // Per value: read only as the weight of a MatMul or Gemm (B), or of a Conv whose blocked form
  // (passes/conv_layout.cpp) reads it as stored.
  std::unordered_map<std::string, bool> weight_only;
  for (auto& n : g.nodes) {
    bool product = products && (is_op(n, "MatMul") || (is_op(n, "Gemm") && !n.attr_int("transA", 0)));
    bool conv = convs && is_op(n, "Conv") && n.outputs.size() == 1 && !normalized.count(n.outputs[0]);
    for (size_t i = 0; i < n.inputs.size(); i++) {
      auto [it, fresh] = weight_only.emplace(n.inputs[i], true);
      it->second = it->second && (product || conv) && i == 1;
    }
    for (auto& v : implicit_inputs(n)) weight_only[v] = false;
  }
  for (auto& o : g.outputs) weight_only[o.name] = false;
  for (auto& n : g.nodes) {
    if (!casts_half_initializer(n, g)) continue;
    auto it = weight_only.find(n.outputs[0]);
    if (it != weight_only.end() && it->second) kept.insert(n.outputs[0]);
  }
  return kept;
}

}  // namespace vlrt
