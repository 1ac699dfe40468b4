#include "exec/session.h"

#include <unordered_set>

#include "exec/run_node.h"

namespace vlrt {

Session::Session(Model model, SessionOptions options)
    : model_(std::move(model)), pool_(std::make_unique<ThreadPool>(options.threads)) {
  int64_t opset = model_.opset();
  if (opset > kMaxOpset)
    unsupported(model_.path, ": opset ", opset, " is newer than vlrt supports (", kMinOpset, "..", kMaxOpset,
                "); export the model with opset ", kMaxOpset, " or lower");
  for (auto& n : model_.graph.nodes) {
    if (!find_schema(n.domain, n.op_type) || !find_cpu_kernel(n.domain, n.op_type)) {
      // A schema without a kernel is fine only for pure views.
      const OpSchema* s = find_schema(n.domain, n.op_type);
      if (s && s->alias_input >= 0) continue;
      unsupported(model_.path, ": ", n.label(), ": operator '", n.op_type, "'",
                  n.domain.empty() ? "" : cat(" of domain '", n.domain, "'"), " (opset ", opset,
                  ") is not implemented by vlrt; `vlrt info` lists every unsupported op of a model");
    }
  }
  try {
    fold_constants(model_, *pool_);
  } catch (const Error& e) {
    throw Error(cat(model_.path, ": ", e.what()));
  }

  // Liveness: each intermediate value is released after the last node reading it.
  std::unordered_set<std::string> keep;
  for (auto& o : model_.graph.outputs) keep.insert(o.name);
  std::unordered_map<std::string, size_t> last_use;
  for (size_t i = 0; i < model_.graph.nodes.size(); i++)
    for (auto& in : model_.graph.nodes[i].inputs)
      if (!in.empty()) last_use[in] = i;
  release_after_.resize(model_.graph.nodes.size());
  for (auto& [name, idx] : last_use)
    if (!keep.count(name) && !model_.graph.initializers.count(name)) release_after_[idx].push_back(name);
}

void Session::check_inputs(const TensorMap& inputs) const {
  const auto& declared = model_.graph.inputs;
  std::string expected_names;
  for (auto& d : declared) expected_names += (expected_names.empty() ? "" : ", ") + d.name + ": " + d.describe();
  for (auto& [name, t] : inputs) {
    bool found = false;
    for (auto& d : declared) found = found || d.name == name;
    if (!found) fail("unknown input '", name, "'; the model's inputs are ", expected_names);
  }
  std::map<std::string, std::pair<int64_t, std::string>> symbols;
  for (auto& d : declared) {
    auto it = inputs.find(d.name);
    if (it == inputs.end()) fail("missing input '", d.name, "' (expected ", d.describe(), ")");
    const Tensor& t = it->second;
    if (d.dtype != DType::undefined && t.dtype() != d.dtype)
      fail("input '", d.name, "' is ", t.describe(), " but the model expects ", d.describe());
    if (!d.has_shape) continue;
    if (t.rank() != int(d.dims.size()))
      fail("input '", d.name, "' has shape ", shape_str(t.shape()), " (rank ", t.rank(), ") but the model expects ",
           d.describe(), " (rank ", d.dims.size(), ")");
    for (size_t i = 0; i < d.dims.size(); i++) {
      const Dim& dim = d.dims[i];
      if (dim.value >= 0 && dim.value != t.shape()[i])
        fail("input '", d.name, "' has shape ", shape_str(t.shape()), " but the model expects ", d.describe(),
             " (axis ", i, " must be ", dim.value, ")");
      if (dim.value < 0 && !dim.param.empty()) {
        auto [sit, inserted] = symbols.emplace(dim.param, std::make_pair(t.shape()[i], d.name));
        if (!inserted && sit->second.first != t.shape()[i])
          fail("dimension '", dim.param, "' is ", sit->second.first, " in input '", sit->second.second, "' but ",
               t.shape()[i], " in input '", d.name, "' (", shape_str(t.shape()), ")");
      }
    }
  }
}

const InferredGraph& Session::infer(const TensorMap& inputs) {
  std::string key;
  for (auto& [name, t] : inputs) key += name + ":" + t.describe() + ";";
  auto it = inferred_.find(key);
  if (it != inferred_.end()) return it->second;
  std::unordered_map<std::string, ValueInfo> in;
  for (auto& [name, t] : inputs) {
    ValueInfo v;
    v.dtype = t.dtype();
    v.shape = t.shape();
    v.shape_known = true;
    in[name] = v;
  }
  InferredGraph g = infer_shapes(model_, in, *pool_);
  if (inferred_.size() > 64) inferred_.clear();  // bound the cache for ever-changing shapes
  return inferred_.emplace(key, std::move(g)).first->second;
}

TensorMap Session::run(const TensorMap& inputs) {
  check_inputs(inputs);
  const InferredGraph& info = infer(inputs);
  const Graph& g = model_.graph;
  std::unordered_map<std::string, Tensor> env;
  for (auto& [name, t] : inputs) env[name] = t;
  for (auto& [name, t] : g.initializers) env[name] = t;
  int64_t opset = model_.opset();
  for (size_t ni = 0; ni < g.nodes.size(); ni++) {
    const Node& node = g.nodes[ni];
    if (info.folded[ni]) {
      for (auto& o : node.outputs)
        if (!o.empty()) env[o] = *info.values.at(o).value;
    } else {
      std::vector<const Tensor*> ins(node.inputs.size(), nullptr);
      for (size_t i = 0; i < node.inputs.size(); i++)
        if (!node.inputs[i].empty()) ins[i] = &env.at(node.inputs[i]);
      std::vector<Tensor> outs = run_node_cpu(node, opset, ins, *pool_);
      for (size_t i = 0; i < outs.size(); i++)
        if (!node.outputs[i].empty()) env[node.outputs[i]] = std::move(outs[i]);
    }
    for (auto& name : release_after_[ni]) env.erase(name);
  }
  TensorMap result;
  for (auto& o : g.outputs) {
    auto it = env.find(o.name);
    if (it == env.end()) fail("graph output '", o.name, "' was not produced");
    result[o.name] = it->second;
  }
  return result;
}

}  // namespace vlrt
