#include "quantize/static_int8.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>

namespace vlrt {

namespace {

// A node the rewrite quantizes: its activation input, its weight (input 1) with the axis of
// its output channels, and its bias input ("" when none is quantized).
struct Target {
  std::string activation, weight, bias;
  int channel_axis = 0;
};

std::optional<Target> target_of(const Node& n, const Graph& g, const Int8Options& options) {
  if (!n.domain.empty() || n.inputs.size() < 2 || n.inputs[0].empty()) return std::nullopt;
  auto init = [&](const std::string& name) -> const Tensor* {
    auto it = g.initializers.find(name);
    return it == g.initializers.end() || it->second.dtype() != DType::f32 ? nullptr : &it->second;
  };
  if (g.initializers.count(n.inputs[0])) return std::nullopt;  // a constant A: nothing to calibrate
  const Tensor* w = init(n.inputs[1]);
  if (!w || w->numel() < options.min_weight_elements) return std::nullopt;
  Target t{n.inputs[0], n.inputs[1], "", 0};
  const std::string bias = n.inputs.size() >= 3 ? n.inputs[2] : "";
  const Tensor* b = bias.empty() ? nullptr : init(bias);
  if (n.op_type == "MatMul") {
    if (w->rank() != 2) return std::nullopt;
    t.channel_axis = 1;
  } else if (n.op_type == "Gemm") {
    if (w->rank() != 2 || n.attr_int("transA", 0) != 0) return std::nullopt;
    t.channel_axis = n.attr_int("transB", 0) ? 0 : 1;
    if (b && b->rank() == 1 && b->dim(0) == w->dim(t.channel_axis)) t.bias = bias;
  } else if (n.op_type == "Conv") {
    if (w->rank() < 3) return std::nullopt;
    if (b && b->rank() == 1 && b->dim(0) == w->dim(0)) t.bias = bias;
  } else {
    return std::nullopt;
  }
  return t;
}

class QdqRewriter {
 public:
  QdqRewriter(Model& model, const Int8Options& options, const ActivationRanges& ranges)
      : g_(model.graph), options_(options), ranges_(ranges), excluded_(g_, options.exclude), names_(g_) {
    for (const ValueDecl& v : g_.outputs) graph_outputs_.insert(v.name);
  }

  QuantizeReport run() {
    report_.weight_bytes_before = initializer_bytes(g_);
    std::vector<Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    std::vector<std::string> replaced;
    for (Node& n : nodes) {
      std::optional<Target> t = excluded_.excludes(n) ? std::nullopt : target_of(n, g_, options_);
      for (std::string& in : n.inputs) {  // readers of a quantized output read its dequantized copy
        auto it = dequantized_.find(in);
        if (it != dequantized_.end()) in = it->second;
      }
      if (!t) {
        g_.nodes.push_back(std::move(n));
        continue;
      }
      float x_scale = quantized(t->activation).first;
      n.inputs[0] = dequantized_.at(t->activation);
      std::vector<float> w_scales;
      n.inputs[1] = weight(*t, w_scales);
      replaced.push_back(t->weight);
      if (!t->bias.empty()) {
        n.inputs[2] = bias(*t, x_scale, w_scales);
        replaced.push_back(t->bias);
      }
      report_.rewritten[n.op_type]++;
      std::string y = n.outputs[0];
      g_.nodes.push_back(std::move(n));
      if (!graph_outputs_.count(y)) quantized(y);
    }
    std::unordered_map<std::string, int> readers = count_readers(g_);
    for (const std::string& name : replaced)
      if (!readers.count(name)) g_.initializers.erase(name);
    report_.weight_bytes_after = initializer_bytes(g_);
    return report_;
  }

 private:
  std::string add_initializer(const std::string& base, Tensor t) {
    std::string name = names_.fresh(base);
    g_.initializers[name] = std::move(t);
    return name;
  }

  // The QuantizeLinear -> DequantizeLinear pair of an activation (made at its first use); its
  // scale and zero point.
  std::pair<float, uint8_t> quantized(const std::string& value) {
    auto range = ranges_.find(value);
    if (range == ranges_.end())
      fail("no calibrated range for '", value, "': calibration did not see this value (is it computed?)");
    std::pair<float, uint8_t> q = uint8_quantization(range->second);
    if (dequantized_.count(value)) return q;
    std::string scale = add_initializer(value + "_scale", Tensor::scalar<float>(q.first));
    std::string zero_point = add_initializer(value + "_zero_point", Tensor::scalar<uint8_t>(q.second));
    std::string values = names_.fresh(value + "_quantized"), restored = names_.fresh(value + "_dequantized");
    g_.nodes.push_back(make_node(names_.fresh(value + "_QuantizeLinear"), "QuantizeLinear",
                                 {value, scale, zero_point}, {values}));
    g_.nodes.push_back(make_node(names_.fresh(value + "_DequantizeLinear"), "DequantizeLinear",
                                 {values, scale, zero_point}, {restored}));
    dequantized_[value] = restored;
    return q;
  }

  // The weight as int8 per output channel, read through a DequantizeLinear along that axis.
  std::string weight(const Target& t, std::vector<float>& scales) {
    auto known = weights_.find(t.weight + "@" + std::to_string(t.channel_axis));
    if (known != weights_.end()) {
      scales = known->second.second;
      return known->second.first;
    }
    ChannelQuantized q = quantize_per_channel(g_.initializers.at(t.weight), t.channel_axis);
    scales = q.scales;
    int64_t channels = int64_t(q.scales.size());
    std::string values = add_initializer(t.weight + "_quantized", std::move(q.values));
    std::string scale = add_initializer(t.weight + "_scale", Tensor::from_vector(scales, {channels}));
    std::string zero_point = add_initializer(t.weight + "_zero_point", Tensor::zeros(DType::i8, {channels}));
    std::string restored = names_.fresh(t.weight + "_dequantized");
    Node dq = make_node(names_.fresh(t.weight + "_DequantizeLinear"), "DequantizeLinear",
                        {values, scale, zero_point}, {restored});
    dq.attrs["axis"] = int_attribute(t.channel_axis);
    g_.nodes.push_back(std::move(dq));
    weights_[t.weight + "@" + std::to_string(t.channel_axis)] = {restored, scales};
    return restored;
  }

  // The bias as int32 in units of x_scale * W_scale[c], as onnxruntime quantizes it.
  std::string bias(const Target& t, float x_scale, const std::vector<float>& w_scales) {
    const Tensor& b = g_.initializers.at(t.bias);
    Tensor values(DType::i32, b.shape()), scales(DType::f32, b.shape());
    for (int64_t c = 0; c < b.numel(); c++) {
      float s = x_scale * w_scales[size_t(c)];
      if (s == 0) s = 1;
      double q = std::nearbyint(double(b.data<float>()[c]) / s);
      q = std::clamp(q, double(std::numeric_limits<int32_t>::min()), double(std::numeric_limits<int32_t>::max()));
      values.data<int32_t>()[c] = int32_t(q);
      scales.data<float>()[c] = s;
    }
    std::string v = add_initializer(t.bias + "_quantized", std::move(values));
    std::string s = add_initializer(t.bias + "_scale", std::move(scales));
    std::string restored = names_.fresh(t.bias + "_dequantized");
    Node dq = make_node(names_.fresh(t.bias + "_DequantizeLinear"), "DequantizeLinear", {v, s}, {restored});
    dq.attrs["axis"] = int_attribute(0);
    g_.nodes.push_back(std::move(dq));
    return restored;
  }

  Graph& g_;
  const Int8Options& options_;
  const ActivationRanges& ranges_;
  Exclusions excluded_;
  NameGenerator names_;
  QuantizeReport report_;
  std::set<std::string> graph_outputs_;
  std::unordered_map<std::string, std::string> dequantized_;  // activation -> its DequantizeLinear output
  std::unordered_map<std::string, std::pair<std::string, std::vector<float>>> weights_;
};

}  // namespace

std::vector<std::string> static_int8_activations(const Model& model, const Int8Options& options) {
  const Graph& g = model.graph;
  Exclusions excluded(g, options.exclude);
  std::set<std::string> outputs, seen;
  for (const ValueDecl& v : g.outputs) outputs.insert(v.name);
  std::vector<std::string> values;
  auto add = [&](const std::string& v) {
    if (seen.insert(v).second) values.push_back(v);
  };
  for (const Node& n : g.nodes) {
    if (excluded.excludes(n)) continue;
    std::optional<Target> t = target_of(n, g, options);
    if (!t) continue;
    add(t->activation);
    if (!outputs.count(n.outputs[0])) add(n.outputs[0]);
  }
  return values;
}

std::pair<float, uint8_t> uint8_quantization(ActivationRange r) {
  float lo = std::min(r.lo, 0.f), hi = std::max(r.hi, 0.f);
  float scale = (hi - lo) / 255.f;
  if (!(scale > 0) || !std::isfinite(scale)) return {1.f, 0};
  float zero_point = std::nearbyint(-lo / scale);
  return {scale, uint8_t(std::clamp(zero_point, 0.f, 255.f))};
}

QuantizeReport quantize_static_int8(Model& model, const Int8Options& options, const ActivationRanges& ranges) {
  refuse_quantized(model.graph, "int8");
  if (model.opset() < 13)
    fail("the model uses opset ", model.opset(), "; per-channel DequantizeLinear needs opset 13 or later: ",
         "export it again with a newer opset, or use --int8 dynamic");
  return QdqRewriter(model, options, ranges).run();
}

}  // namespace vlrt
