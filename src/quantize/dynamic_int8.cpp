#include "quantize/dynamic_int8.h"

#include <algorithm>
#include <cmath>

namespace vlrt {

namespace {

// A value quantized by DynamicQuantizeLinear: its uint8 values, scale and zero point.
struct QuantizedActivation {
  std::string values, scale, zero_point;
};

// A weight stored as int8 with its per-channel scales (an initializer of the channel
// shape that the products need: [N] for MatMul and Gemm, [1, M, 1, ...] for Conv).
struct QuantizedWeight {
  std::string values, scales;
};

Tensor transposed_2d(const Tensor& t) {
  int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out(DType::f32, {cols, rows});
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
  return out;
}

class Int8Rewriter {
 public:
  Int8Rewriter(Model& model, const Int8Options& options)
      : g_(model.graph),
        opset_(model.opset()),
        options_(options),
        excluded_(g_, options.exclude),
        names_(g_) {}

  QuantizeReport run() {
    report_.weight_bytes_before = initializer_bytes(g_);
    std::vector<Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    for (Node& n : nodes) {
      bool rewritten =
          !excluded_.excludes(n) &&
          ((n.op_type == "MatMul" && rewrite_matmul(n)) || (n.op_type == "Gemm" && rewrite_gemm(n)) ||
           (n.op_type == "Conv" && rewrite_conv(n)) || (n.op_type == "Gather" && rewrite_gather(n)));
      if (rewritten) report_.rewritten[n.op_type]++;
      else g_.nodes.push_back(std::move(n));
    }
    drop_unread(replaced_);
    report_.weight_bytes_after = initializer_bytes(g_);
    return report_;
  }

 private:
  // A float32 initializer of rank `rank` (any rank from 3 when 0) large enough to quantize.
  const Tensor* weight(const std::string& name, int rank) const {
    auto it = g_.initializers.find(name);
    if (it == g_.initializers.end() || it->second.dtype() != DType::f32) return nullptr;
    const Tensor& t = it->second;
    bool rank_ok = rank ? t.rank() == rank : t.rank() >= 3;
    return rank_ok && t.numel() >= options_.min_weight_elements ? &t : nullptr;
  }

  std::string add_initializer(const std::string& base, Tensor t) {
    std::string name = names_.fresh(base);
    g_.initializers[name] = std::move(t);
    return name;
  }

  const std::string& weight_zero_point() {
    if (zero_point_.empty()) zero_point_ = add_initializer("weight_zero_point", Tensor::scalar<int8_t>(0));
    return zero_point_;
  }

  const QuantizedActivation& activation(const std::string& value) {
    auto it = activations_.find(value);
    if (it != activations_.end()) return it->second;
    QuantizedActivation q{names_.fresh(value + "_quantized"), names_.fresh(value + "_scale"),
                          names_.fresh(value + "_zero_point")};
    g_.nodes.push_back(make_node(names_.fresh(value + "_DynamicQuantizeLinear"), "DynamicQuantizeLinear", {value},
                                 {q.values, q.scale, q.zero_point}));
    return activations_[value] = q;
  }

  // `key` tells apart the forms of one initializer (transposed, scaled by alpha).
  const QuantizedWeight& quantized_weight(const std::string& name, const std::string& key, const Tensor& w,
                                          int channel_axis, const Shape& scale_shape, float scale_factor) {
    auto it = weights_.find(key);
    if (it != weights_.end()) return it->second;
    ChannelQuantized q = quantize_per_channel(w, channel_axis);
    for (float& s : q.scales) s *= scale_factor;
    replaced_.push_back(name);
    QuantizedWeight qw{add_initializer(name + "_quantized", std::move(q.values)),
                       add_initializer(name + "_scale", Tensor::from_vector(q.scales, scale_shape))};
    return weights_[key] = qw;
  }

  // DynamicQuantizeLinear(x) -> `integer_op`(x_q, w_q, x_zp, 0) -> Cast -> Mul(x_scale * w_scale)
  // -> `output`. Returns the integer node for its attributes.
  Node& emit_integer_product(const Node& n, const std::string& op, const std::string& x, const QuantizedWeight& w,
                             const std::string& output) {
    const QuantizedActivation& a = activation(x);
    std::string base = n.outputs[0];
    std::string integer = names_.fresh(base + "_int32"), as_float = names_.fresh(base + "_float"),
                scale = names_.fresh(base + "_scale");
    g_.nodes.push_back(make_node(names_.fresh(n.name + "_" + op), op, {a.values, w.values, a.zero_point,
                                                                       weight_zero_point()},
                                 {integer}));
    size_t integer_node = g_.nodes.size() - 1;
    g_.nodes.push_back(make_cast(names_.fresh(n.name + "_Cast"), integer, as_float, DType::f32));
    g_.nodes.push_back(make_node(names_.fresh(n.name + "_scale_Mul"), "Mul", {a.scale, w.scales}, {scale}));
    g_.nodes.push_back(make_node(names_.fresh(n.name + "_Mul"), "Mul", {as_float, scale}, {output}));
    return g_.nodes[integer_node];
  }

  bool rewrite_matmul(const Node& n) {
    const Tensor* b = n.inputs.size() == 2 ? weight(n.inputs[1], 2) : nullptr;
    if (!b) return false;
    const QuantizedWeight& w = quantized_weight(n.inputs[1], n.inputs[1], *b, 1, {b->dim(1)}, 1.f);
    emit_integer_product(n, "MatMulInteger", n.inputs[0], w, n.outputs[0]);
    return true;
  }

  bool rewrite_gemm(const Node& n) {
    const Tensor* b = n.inputs.size() >= 2 ? weight(n.inputs[1], 2) : nullptr;
    if (!b || n.attr_int("transA", 0) != 0) return false;
    float alpha = n.attr_float("alpha", 1.f), beta = n.attr_float("beta", 1.f);
    std::string c = n.inputs.size() >= 3 ? n.inputs[2] : "";
    auto c_init = g_.initializers.find(c);
    const Tensor* c_value = c_init == g_.initializers.end() ? nullptr : &c_init->second;
    if (!c.empty() && beta != 1.f && (!c_value || c_value->dtype() != DType::f32)) return false;
    bool trans_b = n.attr_int("transB", 0) != 0;
    Tensor b_kn = trans_b ? transposed_2d(*b) : *b;
    std::string key = cat(n.inputs[1], trans_b ? "^T" : "", alpha != 1.f ? cat("*", alpha) : "");
    const QuantizedWeight& w = quantized_weight(n.inputs[1], key, b_kn, 1, {b_kn.dim(1)}, alpha);
    if (c.empty() || beta == 0.f) {
      emit_integer_product(n, "MatMulInteger", n.inputs[0], w, n.outputs[0]);
      return true;
    }
    std::string product = names_.fresh(n.outputs[0] + "_product");
    emit_integer_product(n, "MatMulInteger", n.inputs[0], w, product);
    if (beta != 1.f) {
      Tensor scaled = c_value->clone();
      for (int64_t i = 0; i < scaled.numel(); i++) scaled.data<float>()[i] *= beta;
      replaced_.push_back(c);
      c = add_initializer(c + "_scaled", std::move(scaled));
    }
    g_.nodes.push_back(make_node(names_.fresh(n.name + "_bias_Add"), "Add", {product, c}, {n.outputs[0]}));
    return true;
  }

  bool rewrite_conv(const Node& n) {
    const Tensor* w = n.inputs.size() >= 2 ? weight(n.inputs[1], 0) : nullptr;
    if (!w) return false;
    std::string bias = n.inputs.size() >= 3 ? n.inputs[2] : "";
    if (!bias.empty() && (!g_.initializers.count(bias) || g_.initializers.at(bias).dtype() != DType::f32)) return false;
    Shape channel_shape(size_t(w->rank()), 1);  // [1, M, 1, ...]: broadcasts over N and the spatial axes
    channel_shape[1] = w->dim(0);
    const QuantizedWeight& qw = quantized_weight(n.inputs[1], n.inputs[1], *w, 0, channel_shape, 1.f);
    std::string out = bias.empty() ? n.outputs[0] : names_.fresh(n.outputs[0] + "_product");
    Node& conv = emit_integer_product(n, "ConvInteger", n.inputs[0], qw, out);
    conv.attrs = n.attrs;
    if (bias.empty()) return true;
    replaced_.push_back(bias);
    std::string shaped = add_initializer(bias + "_channels", g_.initializers.at(bias).reshaped(channel_shape));
    g_.nodes.push_back(make_node(names_.fresh(n.name + "_bias_Add"), "Add", {out, shaped}, {n.outputs[0]}));
    return true;
  }

  // An embedding table [V, D] read by Gather along axis 0 (a text encoder's word embeddings): stored
  // as int8 with a symmetric scale per column, the gathered rows dequantized by DequantizeLinear
  // along their last axis (per-axis scales need opset 13), as onnxruntime's quantize_dynamic
  // stores such tables (per tensor, it).
  bool rewrite_gather(const Node& n) {
    const Tensor* table = n.inputs.size() == 2 ? weight(n.inputs[0], 2) : nullptr;
    if (!table || n.attr_int("axis", 0) != 0 || opset_ < 13) return false;
    const QuantizedWeight& q = quantized_weight(n.inputs[0], n.inputs[0], *table, 1, {table->dim(1)}, 1.f);
    std::string rows = names_.fresh(n.outputs[0] + "_quantized");
    g_.nodes.push_back(
        make_node(names_.fresh(n.name + "_Gather"), "Gather", {q.values, n.inputs[1]}, {rows}));
    Node dq = make_node(names_.fresh(n.name + "_DequantizeLinear"), "DequantizeLinear", {rows, q.scales},
                        {n.outputs[0]});
    dq.attrs["axis"] = int_attribute(-1);
    g_.nodes.push_back(std::move(dq));
    return true;
  }

  // Float weights that no node reads any more.
  void drop_unread(const std::vector<std::string>& candidates) {
    std::unordered_map<std::string, int> readers = count_readers(g_);
    for (const std::string& name : candidates)
      if (!readers.count(name)) g_.initializers.erase(name);
  }

  Graph& g_;
  int64_t opset_;
  const Int8Options& options_;
  Exclusions excluded_;
  NameGenerator names_;
  QuantizeReport report_;
  std::string zero_point_;
  std::unordered_map<std::string, QuantizedActivation> activations_;
  std::unordered_map<std::string, QuantizedWeight> weights_;
  std::vector<std::string> replaced_;
};

}  // namespace

ChannelQuantized quantize_per_channel(const Tensor& weight, int channel_axis) {
  VLRT_CHECK(weight.dtype() == DType::f32 && weight.rank() >= 2 && (channel_axis == 0 || channel_axis == 1),
             "quantize_per_channel: expected a float32 weight of rank 2 or more, got ", weight.describe());
  // Element i of the weight is in channel (i / inner) % channels.
  int64_t channels = weight.dim(channel_axis);
  int64_t inner = 1;
  for (int d = channel_axis + 1; d < weight.rank(); d++) inner *= weight.dim(d);
  const float* w = weight.data<float>();
  ChannelQuantized q{Tensor(DType::i8, weight.shape()), std::vector<float>(size_t(channels), 0.f)};
  for (int64_t i = 0; i < weight.numel(); i++) {
    float& m = q.scales[size_t((i / inner) % channels)];
    m = std::max(m, std::fabs(w[i]));
  }
  for (float& s : q.scales) s = s > 0 ? s / 127.f : 1.f;
  int8_t* out = q.values.data<int8_t>();
  for (int64_t i = 0; i < weight.numel(); i++) {
    float v = std::nearbyint(w[i] / q.scales[size_t((i / inner) % channels)]);
    out[i] = int8_t(std::clamp(v, -127.f, 127.f));
  }
  return q;
}

QuantizeReport quantize_dynamic_int8(Model& model, const Int8Options& options) {
  refuse_quantized(model.graph, "int8");
  if (model.opset() < 11)
    fail("the model uses opset ", model.opset(), "; DynamicQuantizeLinear needs opset 11 or later: export it again ",
         "with a newer opset");
  return Int8Rewriter(model, options).run();
}

}  // namespace vlrt
