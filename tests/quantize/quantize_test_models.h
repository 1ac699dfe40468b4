// Small float32 models built in the tests of the precision rewrites, and the helpers to run them.
#pragma once

#include <gtest/gtest.h>

#include "cli_util.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "exec/session.h"
#include "graph/graph.h"
#include "op_test_util.h"

namespace vlrt::test {

inline Tensor random_tensor(Shape shape, uint32_t seed, float scale = 1.f) {
  Tensor t(DType::f32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); i++) t.data<float>()[i] = u(rng);
  return t;
}

inline ValueDecl decl(const std::string& name, Shape shape) {
  ValueDecl v{name, DType::f32, true, {}, ValueKind::tensor};
  for (int64_t d : shape) v.dims.push_back(Dim{d, ""});
  return v;
}

inline Model empty_model(int64_t opset = 17) {
  Model m;
  m.ir_version = 8;
  m.opsets[""] = opset;
  return m;
}

// x[2,64] -> fc1: MatMul [64,48] -> Add -> Relu -> fc2: Gemm(transB, [40,48], C[40], alpha 0.5, beta 2) -> y[2,40]
inline Model mlp_model() {
  Model m = empty_model();
  Graph& g = m.graph;
  g.inputs.push_back(decl("x", {2, 64}));
  g.outputs.push_back(decl("y", {2, 40}));
  g.initializers["w1"] = random_tensor({64, 48}, 1, 0.3f);
  g.initializers["b1"] = random_tensor({48}, 2, 0.1f);
  g.initializers["w2"] = random_tensor({40, 48}, 3, 0.3f);
  g.initializers["c2"] = random_tensor({40}, 4, 0.1f);
  g.nodes.push_back(vlrt::make_node("fc1", "MatMul", {"x", "w1"}, {"h1"}));
  g.nodes.push_back(vlrt::make_node("bias1", "Add", {"h1", "b1"}, {"h2"}));
  g.nodes.push_back(vlrt::make_node("relu1", "Relu", {"h2"}, {"h3"}));
  Node gemm = vlrt::make_node("fc2", "Gemm", {"h3", "w2", "c2"}, {"y"});
  gemm.attrs["transB"] = attr_i(1);
  gemm.attrs["alpha"] = attr_f(0.5f);
  gemm.attrs["beta"] = attr_f(2.f);
  g.nodes.push_back(gemm);
  return m;
}

// x[1,3,17,13] -> conv1 (13 channels, 3x3, pads 1, bias) -> Relu -> conv2 (5 channels, 3x3, stride 2) -> y
inline Model conv_model() {
  Model m = empty_model();
  Graph& g = m.graph;
  g.inputs.push_back(decl("x", {1, 3, 17, 13}));
  g.outputs.push_back(decl("y", {1, 5, 8, 6}));
  g.initializers["w1"] = random_tensor({13, 3, 3, 3}, 5, 0.4f);
  g.initializers["b1"] = random_tensor({13}, 6, 0.1f);
  g.initializers["w2"] = random_tensor({5, 13, 3, 3}, 7, 0.2f);
  Node conv1 = vlrt::make_node("conv1", "Conv", {"x", "w1", "b1"}, {"c1"});
  conv1.attrs["pads"] = attr_ints({1, 1, 1, 1});
  g.nodes.push_back(conv1);
  g.nodes.push_back(vlrt::make_node("relu1", "Relu", {"c1"}, {"r1"}));
  Node conv2 = vlrt::make_node("conv2", "Conv", {"r1", "w2"}, {"y"});
  conv2.attrs["strides"] = attr_ints({2, 2});
  g.nodes.push_back(conv2);
  return m;
}

inline Tensor run_model(Model m, const Tensor& x) {
  SessionOptions options;
  options.threads = 2;
  return Session(std::move(m), options).run({{"x", x}}).at("y");
}

// The largest |got - want| over the largest |want|.
inline double relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  auto g = got.to_double_vector(), w = want.to_double_vector();
  double err = 0, peak = 0;
  for (size_t i = 0; i < w.size() && i < g.size(); i++) {
    err = std::max(err, std::fabs(g[i] - w[i]));
    peak = std::max(peak, std::fabs(w[i]));
  }
  return err / peak;
}

inline size_t count_op(const Graph& g, const std::string& op) {
  return size_t(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op_type == op; }));
}

}  // namespace vlrt::test
