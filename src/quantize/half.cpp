#include "quantize/half.h"

#include <cmath>
#include <set>

namespace vlrt {

namespace {

// The largest finite float16.
constexpr float kHalfMax = 65504.f;

bool fits_half(const Tensor& t) {
  const float* v = t.data<float>();
  for (int64_t i = 0; i < t.numel(); i++)
    if (std::isfinite(v[i]) && std::fabs(v[i]) > kHalfMax) return false;
  return true;
}

Tensor to_half(const Tensor& t, DType dtype) {
  Tensor h(dtype, t.shape());
  const float* src = t.data<float>();
  uint16_t* dst = static_cast<uint16_t*>(h.raw());
  for (int64_t i = 0; i < t.numel(); i++) dst[i] = dtype == DType::f16 ? float_to_half(src[i]) : float_to_bf16(src[i]);
  return h;
}

// The top-level nodes that read each initializer.
std::unordered_map<std::string, std::vector<const Node*>> initializer_readers(const Graph& g) {
  std::unordered_map<std::string, std::vector<const Node*>> readers;
  for (const Node& n : g.nodes)
    for (const std::string& in : n.inputs)
      if (g.initializers.count(in)) readers[in].push_back(&n);
  return readers;
}

}  // namespace

bool is_precision_fragile(const Node& n) {
  static const std::set<std::string> ops = {"LayerNormalization",  "SkipLayerNormalization",
                                            "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization",
                                            "BatchNormalization",  "InstanceNormalization",
                                            "GroupNormalization",  "Softmax", "LogSoftmax"};
  return ops.count(n.op_type) || n.op_type.rfind("Reduce", 0) == 0;
}

QuantizeReport convert_weights_to_half(Model& model, const HalfOptions& options) {
  VLRT_CHECK(options.dtype == DType::f16 || options.dtype == DType::bf16, "half precision is float16 or bfloat16, not ",
             dtype_name(options.dtype));
  Graph& g = model.graph;
  std::string mode = options.dtype == DType::f16 ? "fp16" : "bf16";
  refuse_quantized(g, mode);
  for (const auto& [name, t] : g.initializers)
    if (t.dtype() == DType::f16 || t.dtype() == DType::bf16)
      fail("the model already holds ", dtype_name(t.dtype()), " weights (initializer '", name,
           "'): it was converted before; start from the float32 model");
  Exclusions excluded(g, options.exclude);
  std::set<std::string> graph_outputs;
  for (const ValueDecl& v : g.outputs) graph_outputs.insert(v.name);
  auto makes_output = [&](const Node& n) {
    for (const std::string& out : n.outputs)
      if (graph_outputs.count(out)) return true;
    return false;
  };
  auto readers = initializer_readers(g);
  std::unordered_map<std::string, int> all_readers = count_readers(g);

  QuantizeReport report;
  report.weight_bytes_before = initializer_bytes(g);
  NameGenerator names(g);
  std::vector<Node> casts;
  std::vector<std::string> names_sorted;
  for (const auto& [name, t] : g.initializers) names_sorted.push_back(name);
  std::sort(names_sorted.begin(), names_sorted.end());
  for (const std::string& name : names_sorted) {
    const Tensor& t = g.initializers.at(name);
    if (t.dtype() != DType::f32 || t.numel() < options.min_elements) continue;
    auto it = readers.find(name);
    // Read by nothing, by a subgraph or as a graph output: left as it is.
    if (it == readers.end() || all_readers[name] != int(it->second.size())) continue;
    bool eligible = true;
    for (const Node* n : it->second)
      eligible = eligible && !excluded.excludes(*n) && (options.all || (!is_precision_fragile(*n) && !makes_output(*n)));
    if (!eligible || (options.dtype == DType::f16 && !fits_half(t))) continue;
    std::string stored = names.fresh(name + "_" + mode);
    g.initializers[stored] = to_half(t, options.dtype);
    casts.push_back(make_cast(names.fresh(name + "_cast"), stored, name, DType::f32));
    for (const Node* n : it->second) report.rewritten[n->op_type]++;
    g.initializers.erase(name);
  }
  g.nodes.insert(g.nodes.begin(), casts.begin(), casts.end());
  report.weight_bytes_after = initializer_bytes(g);
  return report;
}

}  // namespace vlrt
