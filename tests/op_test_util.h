// Helpers for op tests: build a node, run it on the CPU, compare tensors.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/prepared_kernel.h"
#include "passes/canonicalize.h"

namespace vlrt::test {

inline Attribute attr_i(int64_t v) { Attribute a; a.kind = Attribute::Kind::i; a.i = v; return a; }
inline Attribute attr_f(float v) { Attribute a; a.kind = Attribute::Kind::f; a.f = v; return a; }
inline Attribute attr_s(std::string v) { Attribute a; a.kind = Attribute::Kind::s; a.s = std::move(v); return a; }
inline Attribute attr_ints(std::vector<int64_t> v) { Attribute a; a.kind = Attribute::Kind::ints; a.ints = std::move(v); return a; }
inline Attribute attr_floats(std::vector<float> v) { Attribute a; a.kind = Attribute::Kind::floats; a.floats = std::move(v); return a; }
inline Attribute attr_t(Tensor v) { Attribute a; a.kind = Attribute::Kind::t; a.t = std::move(v); return a; }

// A node named "n" with inputs "in0".."inK" (an undefined Tensor marks an omitted
// input) and `num_outputs` outputs.
inline Node make_node(const std::string& op, size_t num_inputs, size_t num_outputs,
                      std::map<std::string, Attribute> attrs = {}) {
  Node n;
  n.name = "n";
  n.op_type = op;
  for (size_t i = 0; i < num_inputs; i++) n.inputs.push_back("in" + std::to_string(i));
  for (size_t i = 0; i < num_outputs; i++) n.outputs.push_back("out" + std::to_string(i));
  n.attrs = std::move(attrs);
  return n;
}

inline ThreadPool& test_pool() {
  static ThreadPool pool(2);
  return pool;
}

// The model of the one node n at `opset`; its graph inputs are declared with the types and shapes of
// `inputs` (an undefined tensor marks an omitted input) unless `declare` is false.
inline Model one_node_model(const Node& n, int64_t opset, const std::vector<Tensor>& inputs,
                            bool declare = true) {
  Model m;
  m.opsets[""] = opset;
  m.graph.nodes = {n};
  for (size_t i = 0; i < inputs.size(); i++) {
    if (!inputs[i].defined()) continue;
    ValueDecl d;
    d.name = n.inputs[i];
    if (declare) {
      d.dtype = inputs[i].dtype();
      d.has_shape = true;
      for (int64_t s : inputs[i].shape()) d.dims.push_back({s, ""});
    }
    m.graph.inputs.push_back(d);
  }
  for (auto& o : n.outputs) {
    if (o.empty()) continue;
    ValueDecl d;
    d.name = o;
    m.graph.outputs.push_back(d);
  }
  return m;
}

// Runs the nodes of a model on the CPU in order; returns the values of `outputs`.
inline std::vector<Tensor> run_model_cpu(const Model& m, const std::map<std::string, Tensor>& inputs,
                                         const std::vector<std::string>& outputs) {
  std::map<std::string, Tensor> values(m.graph.initializers.begin(), m.graph.initializers.end());
  values.insert(inputs.begin(), inputs.end());
  for (const Node& node : m.graph.nodes) {
    std::vector<const Tensor*> ptrs;
    for (auto& in : node.inputs) ptrs.push_back(in.empty() ? nullptr : &values.at(in));
    std::vector<Tensor> outs = run_node_cpu(node, m.opset(), ptrs, test_pool());
    for (size_t i = 0; i < outs.size(); i++)
      if (!node.outputs[i].empty()) values[node.outputs[i]] = outs[i];
  }
  std::vector<Tensor> result;
  for (auto& o : outputs) result.push_back(o.empty() ? Tensor() : values.at(o));
  return result;
}

// Canonicalizes the one-node model of n at `opset` (older forms become the opset-18 form, as a session
// does) and runs it on the CPU; returns n's outputs.
inline std::vector<Tensor> run_canonical(const Node& n, int64_t opset, const std::vector<Tensor>& inputs) {
  Model m = one_node_model(n, opset, inputs);
  canonicalize(m);
  std::map<std::string, Tensor> values;
  for (size_t i = 0; i < inputs.size(); i++)
    if (inputs[i].defined()) values[n.inputs[i]] = inputs[i];
  return run_model_cpu(m, values, n.outputs);
}

// Runs `op` on the given inputs (undefined tensors are omitted optional inputs).
inline std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                  std::map<std::string, Attribute> attrs = {}, size_t num_outputs = 1,
                                  int64_t opset = 17) {
  Node n = make_node(op, inputs.size(), num_outputs, std::move(attrs));
  for (size_t i = 0; i < inputs.size(); i++)
    if (!inputs[i].defined()) n.inputs[i] = "";
  return run_canonical(n, opset, inputs);
}

inline Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector<float>(v, std::move(s)); }

// Deterministic values in [lo, hi) from a seed (float32 or float64), the same on every machine.
inline Tensor random_uniform(Shape shape, uint32_t seed, float lo = -1, float hi = 1, DType dt = DType::f32) {
  std::vector<double> v(size_t(shape_numel(shape)));
  uint32_t s = seed * 2654435761u + 12345u;
  for (double& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (double(hi) - lo) * double(s >> 8) / double(1u << 24);
  }
  Tensor t(dt, std::move(shape));
  t.assign_doubles(v);
  return t;
}
// Whole multiples of `step` from lo * step to hi * step. Sums of their products with small integers
// are exact in float32 whatever the order, and a fake quantization at `step` absorbs the rounding
// of a kernel that is not exact (Winograd): tests of QuantizeDequantize epilogues compare to the bit.
inline Tensor random_multiples(Shape shape, uint32_t seed, float step, int lo, int hi) {
  Tensor t = random_uniform(std::move(shape), seed, float(lo), float(hi) + 1);
  for (int64_t i = 0; i < t.numel(); i++) t.data<float>()[i] = std::floor(t.data<float>()[i]) * step;
  return t;
}

// [N, C, H, W] in blocks of `block` channels, written out independently of the kernels.
inline Tensor channel_blocks(const Tensor& t, int64_t block) {
  int64_t n = t.dim(0), c = t.dim(1), hw = t.dim(2) * t.dim(3), blocks = (c + block - 1) / block;
  Tensor out = Tensor::zeros(DType::f32, {n, blocks, t.dim(2), t.dim(3), block});
  for (int64_t i = 0; i < n; i++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t s = 0; s < hw; s++)
        out.data<float>()[((i * blocks + ch / block) * hw + s) * block + ch % block] = t.data<float>()[(i * c + ch) * hw + s];
  return out;
}

// A vlrt.BlockedConv node reading `inputs` (an undefined tensor is an absent input).
inline Node blocked_conv(const std::vector<Tensor>& inputs, std::map<std::string, Attribute> attrs) {
  Node n = make_node("BlockedConv", inputs.size(), 1, std::move(attrs));
  n.domain = "vlrt";
  for (size_t i = 0; i < inputs.size(); i++)
    if (!inputs[i].defined()) n.inputs[i] = "";
  return n;
}

// A prepared kernel (nullptr: it did not take the node, a failure) run on the inputs, the
// weight (input 1) held by the kernel; Y starts as NaN so that every element must be written.
inline Tensor run_prepared(std::unique_ptr<PreparedKernel> k, const std::vector<Tensor>& inputs, Shape y_shape) {
  if (!k) {
    ADD_FAILURE() << "the kernel did not take the node";
    return {};
  }
  Tensor y(DType::f32, std::move(y_shape));
  for (int64_t i = 0; i < y.numel(); i++) y.data<float>()[i] = NAN;
  std::vector<const Tensor*> in;
  for (auto& t : inputs) in.push_back(t.defined() ? &t : nullptr);
  in[1] = nullptr;
  k->run(in, {&y}, test_pool());
  return y;
}

// n (opset 17) on a CPU backend with the reference kernels alone, or with the prepared fast
// kernels (oneDNN's, Winograd, the packed product) where they take it.
inline Tensor run_on_cpu(const Node& n, const std::vector<Tensor>& inputs, bool reference) {
  CpuBackend cpu(0, test_pool());
  cpu.set_reference_kernels(reference);
  std::vector<const Tensor*> ptrs;
  for (auto& t : inputs) ptrs.push_back(t.defined() ? &t : nullptr);
  return run_node(cpu, n, 17, ptrs)[0];
}

// ValueInfo views of tensors as a backend's prepare sees them (shapes known, each tensor its
// constant value); an undefined tensor is an absent input.
struct ValueInfos {
  std::vector<ValueInfo> values;
  std::vector<const ValueInfo*> ptrs;
  explicit ValueInfos(const std::vector<Tensor>& inputs) : values(inputs.size()), ptrs(inputs.size(), nullptr) {
    for (size_t i = 0; i < inputs.size(); i++) {
      if (!inputs[i].defined()) continue;
      values[i] = ValueInfo{inputs[i].dtype(), true, inputs[i].shape(), inputs[i]};
      ptrs[i] = &values[i];
    }
  }
};

inline Tensor i64(std::vector<int64_t> v, Shape s) { return Tensor::from_vector<int64_t>(v, std::move(s)); }

// Asserts same dtype, same shape and values within atol + rtol*|expected|.
inline void expect_close(const Tensor& actual, const Tensor& expected, double atol = 1e-5, double rtol = 1e-4) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << actual.describe() << " vs " << expected.describe();
  ASSERT_EQ(actual.shape(), expected.shape()) << actual.describe() << " vs " << expected.describe();
  auto a = actual.to_double_vector();
  auto e = expected.to_double_vector();
  for (size_t i = 0; i < a.size(); i++) {
    if (std::isnan(e[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << "at " << i;
      continue;
    }
    EXPECT_NEAR(a[i], e[i], atol + rtol * std::abs(e[i])) << "at flat index " << i;
  }
}

}  // namespace vlrt::test
