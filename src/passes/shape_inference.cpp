#include "passes/shape_inference.h"

#include <cstring>
#include <unordered_set>

namespace vlrt {

namespace {

bool computable(Backend& host, const Node& node) { return host.supports(node, {}, nullptr); }

// Folded values from this size up are given back and computed again when read.
constexpr size_t kRecomputedBytes = 64 * 1024;

// Ops whose folded values come out the same, bit for bit, whichever CPU backend and thread count
// compute them: they move data or round each element once.
bool recomputable(const Node& node) {
  static const std::unordered_set<std::string> ops = {
      "DequantizeLinear", "Cast",  "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity",
      "Concat",           "Slice", "Gather",    "Add",     "Sub",     "Mul",       "Div",     "Neg"};
  return node.domain.empty() && ops.count(node.op_type) > 0;
}

// Lets output `index` of a folded node give its memory back (Buffer::evict) and be computed again
// from the node's inputs when it is next read, and gives it back at once: folding the
// DequantizeLinear of every weight of a quantized model would otherwise hold a float copy of all
// of them, beside the packed copies the kernels make of them. Only where each input is small or
// can be had again itself, so that keeping the inputs costs little.
void make_recomputable(Tensor& out, size_t index, const Node& node, int64_t opset,
                       const std::vector<const Tensor*>& ins) {
  if (!out.is_tensor() || !out.defined() || out.offset() != 0 || out.nbytes() < kRecomputedBytes ||
      out.buffer()->bytes != out.nbytes() || out.buffer()->device.kind != Device{}.kind ||
      !recomputable(node))
    return;
  std::vector<Tensor> kept;
  for (const Tensor* t : ins) {
    if (t && (!t->is_tensor() || t->buffer() == out.buffer() ||
              (t->nbytes() >= kRecomputedBytes && !t->buffer()->refill)))
      return;
    kept.push_back(t ? *t : Tensor{});
  }
  size_t bytes = out.nbytes();
  out.buffer()->refill = [node, index, opset, kept, bytes](void* dst) {
    std::vector<const Tensor*> args;
    std::vector<bool> was_evicted;
    for (const Tensor& t : kept) {
      args.push_back(t.defined() ? &t : nullptr);
      was_evicted.push_back(t.defined() && t.buffer() && t.buffer()->evicted());
    }
    static std::shared_ptr<Backend> cpu = create_backend(Device{}, 1);  // refills run one at a time
    std::vector<Tensor> outs = run_node(*cpu, node, opset, args);
    VLRT_CHECK(outs[index].nbytes() == bytes, node.label(), ": computed again, output ", index, " has ",
               outs[index].nbytes(), " bytes, not ", bytes);
    std::memcpy(dst, outs[index].raw(), bytes);
    for (size_t i = 0; i < kept.size(); i++)  // inputs read again for this are given back again
      if (was_evicted[i]) kept[i].buffer()->evict();
  };
  out.buffer()->evict();
}

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
      make_recomputable(outs[i], i, node, model.opset(), ins);
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
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (used.count(it->first)) {
      ++it;
      continue;
    }
    // A recomputable folded value may still hold it: it is read again when that one is.
    if (it->second.is_tensor() && it->second.defined()) it->second.buffer()->evict();
    it = g.initializers.erase(it);
  }
  return removed;
}

}  // namespace vlrt
