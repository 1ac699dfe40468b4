#include "passes/shape_inference.h"

#include <unordered_set>


namespace vlrt {

namespace {

bool computable(Backend& host, const Node& node) { return host.supports(node, {}, nullptr); }

}  // namespace

InferredGraph infer_shapes(const Model& model, const std::unordered_map<std::string, ValueInfo>& inputs,
                           Backend& host) {
  const Graph& g = model.graph;
  InferredGraph out;
  out.folded.assign(g.nodes.size(), false);
  for (auto& [name, t] : g.initializers) out.values[name] = known_info(t);
  for (auto& [name, v] : inputs) out.values[name] = v;
  int64_t opset = model.opset();

  for (size_t ni = 0; ni < g.nodes.size(); ni++) {
    const Node& node = g.nodes[ni];
    std::vector<const ValueInfo*> in(node.inputs.size(), nullptr);
    std::vector<const Tensor*> in_values(node.inputs.size(), nullptr);
    bool all_known = true;
    for (size_t i = 0; i < node.inputs.size(); i++) {
      if (node.inputs[i].empty()) continue;
      auto it = out.values.find(node.inputs[i]);
      if (it == out.values.end()) fail(node.label(), ": input '", node.inputs[i], "' has no producer");
      in[i] = &it->second;
      if (it->second.value) in_values[i] = &*it->second.value;
      else all_known = false;
    }
    bool inputs_known = true;
    for (auto* v : in) inputs_known = inputs_known && (!v || v->shape_known);
    std::vector<ValueInfo> infos(node.outputs.size());
    // Data-dependent shapes (NonZero and what follows it) are inferred at execution.
    try {
      if (inputs_known) infos = infer_node(node, opset, in);
    } catch (const ShapeDeferred&) {
      infos.assign(node.outputs.size(), ValueInfo{});
    }
    int64_t out_elems = 0;
    bool shapes_known = true;
    for (auto& v : infos) {
      shapes_known = shapes_known && v.shape_known;
      if (v.shape_known) out_elems += shape_numel(v.shape);
    }
    bool fold = all_known && computable(host, node) && (!shapes_known || out_elems <= kFoldLimit);
    if (fold) {
      std::vector<Tensor> results = run_node(host, node, opset, in_values);
      for (size_t i = 0; i < results.size(); i++)
        if (!node.outputs[i].empty()) infos[i] = known_info(results[i]);
      out.folded[ni] = true;
    }
    // Outputs known from shapes alone (Shape, Size) need no kernel and no copy of the input.
    bool values_known = true;
    for (size_t i = 0; i < node.outputs.size(); i++)
      values_known = values_known && (node.outputs[i].empty() || infos[i].value.has_value());
    if (values_known && !node.outputs.empty()) out.folded[ni] = true;
    for (size_t i = 0; i < node.outputs.size(); i++)
      if (!node.outputs[i].empty()) out.values[node.outputs[i]] = std::move(infos[i]);
  }
  return out;
}

size_t fold_constants(Model& model, Backend& host, const std::unordered_set<std::string>& keep) {
  Graph& g = model.graph;
  std::unordered_set<std::string> constant;
  for (auto& [name, t] : g.initializers) constant.insert(name);
  std::vector<Node> kept;
  size_t removed = 0;
  for (auto& node : g.nodes) {
    bool all_const = computable(host, node) && !(node.outputs.size() == 1 && keep.count(node.outputs[0]));
    for (auto& in : node.inputs) all_const = all_const && (in.empty() || constant.count(in));
    if (!all_const) {
      kept.push_back(std::move(node));
      continue;
    }
    std::vector<const Tensor*> ins;
    for (auto& in : node.inputs) ins.push_back(in.empty() ? nullptr : &g.initializers.at(in));
    std::vector<Tensor> outs = run_node(host, node, model.opset(), ins);
    for (size_t i = 0; i < outs.size(); i++) {
      if (node.outputs[i].empty()) continue;
      g.initializers[node.outputs[i]] = outs[i];
      constant.insert(node.outputs[i]);
    }
    removed++;
  }
  g.nodes = std::move(kept);
  // Initializers that no node reads any more (folded away) are dropped, unless they are outputs.
  std::unordered_set<std::string> used;
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs) used.insert(in);
    for (auto& in : implicit_inputs(n)) used.insert(in);
  }
  for (auto& o : g.outputs) used.insert(o.name);
  for (auto it = g.initializers.begin(); it != g.initializers.end();)
    it = used.count(it->first) ? std::next(it) : g.initializers.erase(it);
  return removed;
}

}  // namespace vlrt
