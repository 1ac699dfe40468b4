// Every backend against the CPU reference, op by op (ggml's test-backend-ops model).
// For each case of the table below (an op, its attributes and its inputs, with
// broadcasting, odd sizes and empty tensors), random inputs drawn with a fixed seed
// run through the CPU kernels (run_node_cpu) and through the backend (allocate, copy
// in, execute, copy out, with every tensor at an offset inside one buffer and guard
// bytes around it, as the executor's arenas place them). Float32 outputs must agree
// within 1e-4 of the output's scale, integers and bools exactly. A case written in an
// older opset's form is canonicalized first, as a session does: backends see one form.
//
// Adding an op to a backend: add its cases to cases(); EveryClaimedOpHasACase fails
// until you do. A backend joins by registering itself: every registered backend other
// than the CPU runs here, on its device 0, skipped where this machine has none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "backends/backend.h"
#include "op_test_util.h"
#include "ops/op_schema.h"

namespace vlrt {

namespace {

using test::attr_f;
using test::attr_i;
using test::attr_ints;
using test::attr_s;

// Device 0 of every registered backend but the CPU's.
std::vector<std::string> backends_under_test() {
  std::vector<std::string> names;
  for (auto& b : registered_backends())
    if (b.kind != "cpu") names.push_back(b.kind + ":0");
  return names;
}

// One input of a case: fixed values, random values in [lo, hi] (rounded to
// multiples of `step` when step > 0), or omitted.
struct In {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<double> values;
  double lo = -2, hi = 2, step = 0;
  bool omitted = false;
};

In f32(Shape s, double lo = -2, double hi = 2) { return In{DType::f32, std::move(s), {}, lo, hi}; }
// Values on a coarse grid, so that comparisons meet equal values.
In f32_grid(Shape s) { return In{DType::f32, std::move(s), {}, -2, 2, 0.5}; }
In ints(DType t, Shape s, double lo, double hi) { return In{t, std::move(s), {}, lo, hi, 1}; }
In i64s(std::vector<double> v) {
  Shape s{int64_t(v.size())};
  return In{DType::i64, s, std::move(v)};
}
In f32_scalar(double v) { return In{DType::f32, {}, {v}}; }
In booleans(Shape s) { return In{DType::boolean, std::move(s), {}, 0, 1, 1}; }
In omitted() {
  In in;
  in.omitted = true;
  return in;
}

struct Case {
  std::string op;
  std::vector<In> inputs;
  std::map<std::string, Attribute> attrs = {};
  int64_t opset = 17;
  size_t outputs = 1;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  // Unary math and activations.
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Neg", "Abs", "Floor", "Ceil", "Sign",
                         "Sin", "Cos", "Softplus", "HardSwish", "Gelu"})
    c.push_back({op, {f32({2, 3, 17}, -4, 4)}});
  c.push_back({"Round", {In{DType::f32, {2, 9}, {}, -4, 4, 0.25}}});  // halves round to even
  for (const char* op : {"Log", "Sqrt"}) c.push_back({op, {f32({5, 13}, 0.01, 5)}});
  c.push_back({"Reciprocal", {f32({5, 13}, 0.5, 3)}});
  c.push_back({"Relu", {f32({0, 5})}});
  c.push_back({"Exp", {f32({})}});
  c.push_back({"Sigmoid", {f32({1000}, -30, 30)}});
  c.push_back({"LeakyRelu", {f32({4, 33})}, {{"alpha", attr_f(0.1f)}}});
  c.push_back({"Elu", {f32({4, 33})}, {{"alpha", attr_f(0.5f)}}});
  c.push_back({"HardSigmoid", {f32({4, 33}, -6, 6)}, {{"alpha", attr_f(0.3f)}, {"beta", attr_f(0.4f)}}});
  c.push_back({"Gelu", {f32({4, 33}, -4, 4)}, {{"approximate", attr_s("tanh")}}});
  c.push_back({"Clip", {f32({3, 7, 5}), f32_scalar(-0.5), f32_scalar(1.25)}});
  c.push_back({"Clip", {f32({3, 7, 5}), f32_scalar(-0.5), omitted()}});
  c.push_back({"Clip", {f32({3, 7, 5}), omitted(), f32_scalar(0.25)}});
  c.push_back({"Clip", {f32({3, 7, 5})}, {{"min", attr_f(-1)}, {"max", attr_f(0.5f)}}, 6});

  // Broadcasting binary ops.
  c.push_back({"Add", {f32({1, 7, 13}), f32({13})}});
  c.push_back({"Add", {f32({0, 3}), f32({3})}});
  c.push_back({"Add", {f32({2, 1, 3, 1, 2, 1, 2}), f32({3, 1, 2, 1, 1})}});
  c.push_back({"Sub", {f32({3, 1, 5}), f32({1, 4, 1})}});
  c.push_back({"Mul", {f32({2, 3, 4, 5}), f32({2, 3, 4, 5})}});
  c.push_back({"Mul", {f32({}), f32({6, 1})}});
  c.push_back({"Div", {f32({4, 5}), f32({5, 1, 1}, 0.5, 2)}});
  c.push_back({"Pow", {f32({3, 11}, 0.1, 3), f32({11})}});
  c.push_back({"Pow", {f32({3, 11}), In{DType::f32, {}, {2}}}});
  c.push_back({"PRelu", {f32({2, 3, 4, 5}), f32({3, 1, 1})}});
  c.push_back({"Max", {f32({3, 1, 5}), f32({1, 4, 1}), f32({5})}});
  c.push_back({"Min", {f32({3, 4}), f32({4})}});
  c.push_back({"Max", {f32({3, 4})}});
  c.push_back({"Sum", {f32({2, 7}), f32({7}), f32({2, 1})}});
  c.push_back({"Mean", {f32({2, 7}), f32({2, 7}), f32({1})}});

  // Comparisons and logic (bool outputs).
  c.push_back({"Equal", {f32_grid({3, 1, 5}), f32_grid({1, 4, 1})}});
  c.push_back({"Equal", {booleans({2, 9}), booleans({9})}});
  c.push_back({"Less", {ints(DType::i64, {4, 9}, -5, 5), ints(DType::i64, {9}, -5, 5)}});
  c.push_back({"LessOrEqual", {ints(DType::i32, {4, 9}, -5, 5), ints(DType::i32, {4, 1}, -5, 5)}});
  c.push_back({"Greater", {f32_grid({2, 3, 7}), f32_grid({3, 1})}});
  c.push_back({"GreaterOrEqual", {f32_grid({17}), f32_grid({})}});
  c.push_back({"And", {booleans({3, 1, 5}), booleans({1, 4, 1})}});
  c.push_back({"Or", {booleans({3, 5}), booleans({5})}});
  c.push_back({"Xor", {booleans({3, 5}), booleans({3, 5})}});
  c.push_back({"Not", {booleans({4, 7})}});
  c.push_back({"Where", {booleans({3, 1, 5}), f32({1, 4, 1}), f32({})}});
  c.push_back(
      {"Where", {booleans({6}), ints(DType::i64, {2, 6}, -100, 100), ints(DType::i64, {2, 1}, -9, 9)}});
  c.push_back({"Where", {booleans({2, 5}), booleans({2, 5}), booleans({5})}});

  // Cast.
  c.push_back({"Cast", {f32({4, 9}, -100, 100)}, {{"to", attr_i(int64_t(DType::i64))}}});
  c.push_back({"Cast", {ints(DType::i64, {4, 9}, -1000, 1000)}, {{"to", attr_i(int64_t(DType::f32))}}});
  c.push_back({"Cast", {f32_grid({4, 9})}, {{"to", attr_i(int64_t(DType::boolean))}}});
  c.push_back({"Cast", {booleans({4, 9})}, {{"to", attr_i(int64_t(DType::f32))}}});
  c.push_back({"Cast", {ints(DType::i32, {4, 9}, -1000, 1000)}, {{"to", attr_i(int64_t(DType::i64))}}});

  // MatMul and Gemm.
  c.push_back({"MatMul", {f32({7, 13}), f32({13, 5})}});
  c.push_back({"MatMul", {f32({33, 70}), f32({70, 19})}});
  c.push_back({"MatMul", {f32({2, 3, 17, 9}), f32({9, 11})}});
  c.push_back({"MatMul", {f32({2, 1, 5, 6}), f32({3, 6, 4})}});
  c.push_back({"MatMul", {f32({6}), f32({6, 4})}});
  c.push_back({"MatMul", {f32({5, 6}), f32({6})}});
  c.push_back({"MatMul", {f32({6}), f32({6})}});
  c.push_back({"MatMul", {f32({3, 0}), f32({0, 4})}});
  c.push_back({"MatMul", {f32({2, 130, 75}), f32({2, 75, 67})}});
  c.push_back({"MatMul", {f32({3, 1, 40}), f32({40, 150})}});
  c.push_back({"Gemm", {f32({5, 7}), f32({7, 3})}});
  c.push_back({"Gemm",
               {f32({7, 5}), f32({3, 7}), f32({3})},
               {{"transA", attr_i(1)}, {"transB", attr_i(1)}, {"alpha", attr_f(0.5f)}, {"beta", attr_f(2)}}});
  c.push_back({"Gemm", {f32({5, 7}), f32({7, 3}), f32({5, 1})}});
  c.push_back({"Gemm", {f32({5, 7}), f32({7, 3}), f32({})}, {{"beta", attr_f(0)}}});
  c.push_back({"Gemm", {f32({20, 17}), f32({20, 18}), f32({17, 18})}, {{"transA", attr_i(1)}}});
  c.push_back({"Gemm", {f32({70, 130}), f32({90, 130}), f32({90})}, {{"transB", attr_i(1)}}});

  // Conv.
  c.push_back(
      {"Conv", {f32({1, 3, 9, 9}), f32({4, 3, 3, 3}), f32({4})}, {{"pads", attr_ints({1, 1, 1, 1})}}});
  c.push_back({"Conv",
               {f32({2, 3, 11, 10}), f32({5, 3, 3, 2})},
               {{"strides", attr_ints({2, 1})},
                {"dilations", attr_ints({2, 2})},
                {"pads", attr_ints({0, 1, 2, 1})}}});
  c.push_back({"Conv", {f32({2, 4, 7, 8}), f32({6, 2, 3, 3}), f32({6})}, {{"group", attr_i(2)}}});
  c.push_back({"Conv",
               {f32({1, 6, 8, 8}), f32({6, 1, 3, 3})},
               {{"group", attr_i(6)}, {"auto_pad", attr_s("SAME_UPPER")}}});
  c.push_back({"Conv",
               {f32({1, 5, 9, 9}), f32({4, 5, 4, 4})},
               {{"strides", attr_ints({2, 2})}, {"auto_pad", attr_s("SAME_LOWER")}}});
  c.push_back({"Conv", {f32({2, 3, 10}), f32({4, 3, 3}), f32({4})}, {{"pads", attr_ints({2, 0})}}});
  c.push_back({"Conv", {f32({1, 2, 4, 5, 6}), f32({3, 2, 2, 3, 2})}});
  c.push_back({"Conv", {f32({1, 8, 5, 5}), f32({16, 8, 1, 1})}});
  c.push_back(
      {"Conv", {f32({2, 20, 13, 11}), f32({70, 20, 3, 3}), f32({70})}, {{"pads", attr_ints({1, 1, 1, 1})}}});

  // Softmax and normalization.
  c.push_back({"Softmax", {f32({3, 7, 13}, -5, 5)}});
  c.push_back({"Softmax", {f32({2, 5, 3}, -5, 5)}, {{"axis", attr_i(1)}}});
  c.push_back({"Softmax", {f32({2, 5, 3}, -5, 5)}, {{"axis", attr_i(1)}}, 11});
  c.push_back({"Softmax", {f32({2, 1000}, -5, 5)}});
  c.push_back({"LogSoftmax", {f32({4, 29}, -5, 5)}});
  c.push_back({"LogSoftmax", {f32({3, 4, 5}, -5, 5)}, {{"axis", attr_i(0)}}});
  c.push_back({"LayerNormalization", {f32({2, 5, 16}), f32({16}), f32({16})}});
  c.push_back({"LayerNormalization",
               {f32({2, 5, 16}), f32({5, 16})},
               {{"axis", attr_i(-2)}, {"epsilon", attr_f(1e-3f)}}});
  c.push_back({"LayerNormalization", {f32({3, 300}), f32({1, 300}), f32({300})}});
  c.push_back({"LayerNormalization", {f32({2, 3, 8}), f32({1}), f32({3, 1})}, {{"axis", attr_i(1)}}});
  c.push_back({"LayerNormalization", {f32({4, 6}), f32({6}), f32({6})}, {}, 17, 3});

  // Reductions and global pools.
  c.push_back({"ReduceMean", {f32({3, 5, 7})}, {{"axes", attr_ints({1})}}});
  c.push_back({"ReduceMean", {f32({3, 5, 7}), i64s({-1})}, {{"keepdims", attr_i(0)}}, 18});
  c.push_back({"ReduceSum", {f32({3, 5, 7}), i64s({0, 2})}});
  c.push_back({"ReduceSum", {f32({3, 5, 7})}, {{"keepdims", attr_i(0)}}});
  c.push_back({"ReduceSum", {f32({3, 5}), i64s({})}, {{"noop_with_empty_axes", attr_i(1)}}});
  c.push_back({"ReduceSum", {f32({2, 3000})}, {{"axes", attr_ints({1})}}, 11});
  c.push_back({"ReduceSum", {f32({4, 0, 3}), i64s({1})}});
  c.push_back({"ReduceMax", {f32({4, 6, 5})}, {{"axes", attr_ints({0, 2})}}});
  c.push_back({"ReduceMin", {f32({4, 6, 5})}, {{"keepdims", attr_i(0)}}});
  c.push_back({"ReduceProd", {f32({4, 6}, 0.5, 1.5)}, {{"axes", attr_ints({1})}}});
  c.push_back({"ReduceL1", {f32({4, 6})}, {{"axes", attr_ints({1})}}});
  c.push_back({"ReduceL2", {f32({4, 6})}, {{"axes", attr_ints({0})}}});
  c.push_back({"ReduceSumSquare", {f32({4, 6, 2})}, {{"axes", attr_ints({1, 2})}}});
  c.push_back({"ReduceLogSum", {f32({4, 6}, 0.1, 2)}, {{"axes", attr_ints({1})}}});
  c.push_back({"GlobalAveragePool", {f32({2, 3, 7, 9})}});
  c.push_back({"GlobalAveragePool", {f32({1, 5, 6})}});
  c.push_back({"GlobalMaxPool", {f32({2, 3, 4, 5, 3})}});

  // Pooling.
  c.push_back({"MaxPool",
               {f32({1, 2, 9, 9})},
               {{"kernel_shape", attr_ints({3, 3})},
                {"strides", attr_ints({2, 2})},
                {"pads", attr_ints({1, 1, 1, 1})}}});
  c.push_back({"MaxPool",
               {f32({2, 3, 10, 7})},
               {{"kernel_shape", attr_ints({3, 2})},
                {"strides", attr_ints({2, 2})},
                {"ceil_mode", attr_i(1)},
                {"dilations", attr_ints({1, 2})}}});
  c.push_back(
      {"MaxPool", {f32({2, 3, 11})}, {{"kernel_shape", attr_ints({4})}, {"auto_pad", attr_s("SAME_UPPER")}}});
  c.push_back({"AveragePool",
               {f32({1, 2, 9, 9})},
               {{"kernel_shape", attr_ints({3, 3})},
                {"strides", attr_ints({2, 2})},
                {"pads", attr_ints({1, 1, 1, 1})}}});
  c.push_back({"AveragePool",
               {f32({1, 2, 9, 9})},
               {{"kernel_shape", attr_ints({3, 3})},
                {"pads", attr_ints({1, 2, 1, 0})},
                {"count_include_pad", attr_i(1)}}});
  c.push_back(
      {"AveragePool",
       {f32({2, 2, 8, 7})},
       {{"kernel_shape", attr_ints({2, 3})}, {"strides", attr_ints({2, 2})}, {"ceil_mode", attr_i(1)}}});

  // Pad in every mode, with negative pads (crops) and axes.
  c.push_back({"Pad", {f32({2, 3, 5}), i64s({0, 1, 2, 1, 0, 3}), f32_scalar(1.5)}});
  c.push_back({"Pad", {f32({3, 5}), i64s({1, -1, 2, 2})}, {{"mode", attr_s("reflect")}}});
  c.push_back({"Pad", {f32({3, 5}), i64s({2, 0, 1, 3})}, {{"mode", attr_s("edge")}}});
  c.push_back({"Pad", {ints(DType::i64, {3, 4}, -9, 9), i64s({4, 5, 0, 6})}, {{"mode", attr_s("wrap")}}, 18});
  c.push_back({"Pad", {f32({1, 2, 4, 4}), i64s({1, 1, 2, 0}), omitted(), i64s({2, -1})}, {}, 18});
  c.push_back({"Pad", {f32({2, 3})}, {{"pads", attr_ints({0, 1, 1, 0})}, {"value", attr_f(-2)}}, 7});

  // Data movement.
  c.push_back({"Transpose", {f32({3, 4, 5})}, {{"perm", attr_ints({2, 0, 1})}}});
  c.push_back({"Transpose", {f32({7, 13})}});
  c.push_back({"Transpose",
               {ints(DType::i64, {2, 3, 1, 4, 2, 3}, -50, 50)},
               {{"perm", attr_ints({5, 3, 1, 0, 2, 4})}}});
  c.push_back({"Transpose", {booleans({3, 5})}});
  c.push_back({"Transpose", {f32({0, 5})}});
  c.push_back({"Slice", {f32({5, 7, 9}), i64s({1, -6}), i64s({4, 100}), i64s({0, 2}), i64s({2, 3})}, {}, 13});
  c.push_back({"Slice", {f32({5, 7}), i64s({-1, 5}), i64s({-100, 0}), i64s({0, 1}), i64s({-2, -2})}, {}, 13});
  c.push_back({"Slice", {ints(DType::i64, {6, 4}, -9, 9), i64s({1}), i64s({3})}, {}, 13});
  c.push_back({"Slice",
               {f32({5, 7})},
               {{"starts", attr_ints({1})}, {"ends", attr_ints({3})}, {"axes", attr_ints({1})}},
               9});
  c.push_back({"Slice", {f32({5, 7}), i64s({3}), i64s({3}), i64s({0})}, {}, 13});
  c.push_back({"Concat", {f32({2, 3, 4}), f32({2, 1, 4}), f32({2, 0, 4})}, {{"axis", attr_i(1)}}});
  c.push_back(
      {"Concat", {ints(DType::i64, {2}, -5, 5), ints(DType::i64, {3}, -5, 5)}, {{"axis", attr_i(0)}}});
  c.push_back({"Concat", {f32({2, 3}), f32({2, 5})}, {{"axis", attr_i(-1)}}});
  c.push_back({"Split", {f32({4, 5, 3}), i64s({2, 3})}, {{"axis", attr_i(1)}}, 13, 2});
  c.push_back({"Split", {ints(DType::i32, {6, 2}, -9, 9)}, {}, 17, 3});
  c.push_back({"Gather", {f32({5, 4}), i64s({0, -1, 3, 3, 1, -5})}});
  c.push_back({"Gather", {f32({3, 7, 2}), In{DType::i32, {2, 2}, {6, 0, -2, 3}}}, {{"axis", attr_i(1)}}});
  c.push_back({"Gather", {ints(DType::i64, {6, 3}, -9, 9), In{DType::i64, {}, {4}}}});
  c.push_back({"Gather", {f32({4, 3}), In{DType::i64, {0}, {}}}});
  c.push_back({"Expand", {f32({3, 1}), i64s({2, 3, 4})}});
  c.push_back({"Expand", {booleans({1, 5}), i64s({3, 1})}});
  c.push_back({"Tile", {f32({2, 3}), i64s({2, 3})}});
  c.push_back({"Dropout", {f32({3, 4}), f32_scalar(0.5)}, {}, 17, 2});
  c.push_back({"Dropout", {f32({3, 4})}, {}, 7, 2});
  return c;
}

// A short name for messages: "Add(float32[3,1,5], float32[1,4,1])".
std::string case_name(const Case& c) {
  std::string s = c.op + "(";
  for (size_t i = 0; i < c.inputs.size(); i++) {
    s += i ? ", " : "";
    s += c.inputs[i].omitted ? "none" : cat(dtype_name(c.inputs[i].dtype), shape_str(c.inputs[i].shape));
  }
  s += ")";
  for (auto& [name, a] : c.attrs) {
    s += " " + name + "=";
    if (a.kind == Attribute::Kind::i) s += std::to_string(a.i);
    if (a.kind == Attribute::Kind::f) s += cat(a.f);
    if (a.kind == Attribute::Kind::s) s += a.s;
    if (a.kind == Attribute::Kind::ints) s += shape_str(a.ints);
  }
  if (c.opset != 17) s += cat(" opset ", c.opset);
  return s;
}

Tensor make_input(const In& in, std::mt19937& rng) {
  Tensor t(in.dtype, in.shape);
  std::uniform_real_distribution<double> u(in.lo, in.hi);
  for (int64_t i = 0; i < t.numel(); i++) {
    double v = in.values.empty() ? u(rng) : in.values[size_t(i)];
    if (in.values.empty() && in.step > 0) v = std::round(v / in.step) * in.step;
    switch (in.dtype) {
      case DType::f32:
        t.data<float>()[i] = float(v);
        break;
      case DType::i32:
        t.data<int32_t>()[i] = int32_t(v);
        break;
      case DType::i64:
        t.data<int64_t>()[i] = int64_t(v);
        break;
      case DType::boolean:
        t.data<bool>()[i] = v != 0;
        break;
      default:
        ADD_FAILURE() << "no generator for " << dtype_name(in.dtype);
    }
  }
  return t;
}

Node node_of(const Case& c) {
  Node n = test::make_node(c.op, c.inputs.size(), c.outputs, c.attrs);
  for (size_t i = 0; i < c.inputs.size(); i++)
    if (c.inputs[i].omitted) n.inputs[i] = "";
  return n;
}

// The case's node in its canonical (opset-18) form with its inputs: former attributes become inputs, and
// nodes the pass puts before it (Flatten and Shape for an old Softmax) run on the CPU.
std::pair<Node, std::vector<Tensor>> canonical_case(const Case& c, const std::vector<Tensor>& inputs) {
  Node n = node_of(c);
  Model m = test::one_node_model(n, c.opset, inputs);
  canonicalize(m);
  auto it = std::find_if(m.graph.nodes.begin(), m.graph.nodes.end(),
                         [&](const Node& x) { return x.op_type == c.op; });
  std::map<std::string, Tensor> given;
  for (size_t i = 0; i < inputs.size(); i++)
    if (inputs[i].defined()) given[n.inputs[i]] = inputs[i];
  return {*it, test::run_model_cpu(m, given, it->inputs)};
}

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xA5;

// Runs the node on `b`: every tensor at its own offset inside one buffer, guard bytes
// between them; fails the test when a kernel writes outside its outputs.
std::vector<Tensor> run_on_backend(Backend& b, const Node& node, int64_t opset,
                                   const std::vector<Tensor>& in) {
  std::vector<ValueInfo> vi(in.size());
  std::vector<const ValueInfo*> vp(in.size(), nullptr);
  for (size_t i = 0; i < in.size(); i++) {
    if (!in[i].defined()) continue;
    vi[i] = ValueInfo{in[i].dtype(), true, in[i].shape(), in[i]};
    vp[i] = &vi[i];
  }
  std::vector<ValueInfo> out_info = infer_node(node, opset, vp);
  // Inputs are known here, as constants are at planning: the backend may pack them.
  PrepareInfo prepare_info = b.prepare_info(node, opset, vp);
  std::unique_ptr<KernelState> state = b.prepare(node, opset, vp);
  EXPECT_EQ(state ? state->bytes() : 0, prepare_info.bytes) << "prepared state differs from what prepare_info said";
  size_t align = b.alignment();

  std::vector<std::pair<DType, Shape>> layout;
  for (auto& t : in)
    if (t.defined()) layout.push_back({t.dtype(), t.shape()});
  for (auto& o : out_info) layout.push_back({o.dtype, o.shape});
  std::vector<size_t> offsets;
  size_t total = align;  // guard bytes before each tensor
  for (auto& [dtype, shape] : layout) {
    offsets.push_back(total);
    total += (size_t(shape_numel(shape)) * dtype_size(dtype) + align - 1) / align * align + align;
  }
  auto buffer = b.allocate(total);
  Tensor whole(DType::u8, {int64_t(total)}, buffer, 0);
  Tensor fill(DType::u8, {int64_t(total)});
  std::memset(fill.raw(), kGuardByte, total);
  b.copy_from_host(fill, whole);

  std::vector<Tensor> dev_in(in.size()), dev_out(out_info.size());
  std::vector<const Tensor*> in_ptrs(in.size(), nullptr);
  std::vector<Tensor*> out_ptrs(out_info.size(), nullptr);
  size_t slot = 0;
  for (size_t i = 0; i < in.size(); i++) {
    if (!in[i].defined()) continue;
    dev_in[i] = Tensor(in[i].dtype(), in[i].shape(), buffer, offsets[slot++]);
    b.copy_from_host(in[i], dev_in[i]);
    in_ptrs[i] = &dev_in[i];
  }
  const OpSchema* schema = find_schema(node.domain, node.op_type);
  for (size_t i = 0; i < out_info.size(); i++) {
    dev_out[i] = Tensor(out_info[i].dtype, out_info[i].shape, buffer, offsets[slot++]);
    out_ptrs[i] = &dev_out[i];
  }
  // A view's output 0 is made by the executor, not by the backend.
  if (schema->alias_input >= 0) {
    dev_out[0] = dev_in[size_t(schema->alias_input)].reshaped(out_info[0].shape);
    out_ptrs[0] = nullptr;
  }
  for (size_t k : prepare_info.replaced_inputs) in_ptrs[k] = nullptr;
  b.execute(node, opset, state.get(), in_ptrs, out_ptrs);
  b.synchronize();

  std::vector<Tensor> result;
  for (auto& t : dev_out) {
    result.emplace_back(t.dtype(), t.shape());
    b.copy_to_host(t, result.back());
  }
  b.copy_to_host(whole, fill);
  const uint8_t* bytes = static_cast<const uint8_t*>(fill.raw());
  std::vector<bool> owned(total, false);
  for (size_t s = 0; s < layout.size(); s++)
    for (size_t k = 0; k < size_t(shape_numel(layout[s].second)) * dtype_size(layout[s].first); k++)
      owned[offsets[s] + k] = true;
  for (size_t k = 0; k < total; k++)
    if (!owned[k] && bytes[k] != kGuardByte) {
      ADD_FAILURE() << "the kernel wrote outside its output (byte " << k << " of the buffer)";
      break;
    }
  for (size_t i = 0, s = 0; i < in.size(); i++) {
    if (!in[i].defined()) continue;
    if (std::memcmp(bytes + offsets[s++], in[i].raw(), in[i].nbytes()) != 0)
      ADD_FAILURE() << "the kernel changed input " << i;
  }
  return result;
}

// "" when `got` matches `want`; else what differs.
std::string compare(const Tensor& got, const Tensor& want, double* max_err) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return cat("got ", got.describe(), ", expected ", want.describe());
  auto g = got.to_double_vector(), w = want.to_double_vector();
  double scale = 1, err = 0;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); i++) {
    if (std::isnan(w[i]) || std::isnan(g[i])) {
      if (std::isnan(w[i]) != std::isnan(g[i])) return cat("at ", i, ": got ", g[i], ", expected ", w[i]);
      continue;
    }
    if (std::isinf(w[i]) || std::isinf(g[i])) {
      if (g[i] != w[i]) return cat("at ", i, ": got ", g[i], ", expected ", w[i]);
      continue;
    }
    double e = std::abs(g[i] - w[i]);
    err = std::max(err, e);
    bool ok = dtype_is_float(want.dtype()) ? e <= 1e-4 * scale : e == 0;
    if (!ok) return cat("at flat index ", i, ": got ", g[i], ", expected ", w[i], " (scale ", scale, ")");
  }
  *max_err = std::max(*max_err, err / scale);
  return "";
}

// The backend for a device name, or nullptr (with the reason) when it is not available here.
// Created once per process and never destroyed: OpenCL drivers must not be torn down by
// static destructors.
Backend* backend_or_skip(const std::string& name, std::string* reason) {
  static auto* made = new std::map<std::string, std::pair<std::shared_ptr<Backend>, std::string>>;
  auto it = made->find(name);
  if (it == made->end()) {
    std::pair<std::shared_ptr<Backend>, std::string> entry;
    try {
      entry.first = create_backend(parse_device(name), 1);
    } catch (const Error& e) {
      entry.second = e.what();
    }
    it = made->emplace(name, entry).first;
  }
  *reason = it->second.second;
  return it->second.first.get();
}

class BackendOpsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendOpsTest, MatchesCpu) {
  std::string reason;
  Backend* b = backend_or_skip(GetParam(), &reason);
  if (!b) GTEST_SKIP() << GetParam() << " is not available: " << reason;
  ThreadPool& pool = test::test_pool();
  std::vector<Case> all = cases();
  int passed = 0, skipped = 0;
  for (size_t ci = 0; ci < all.size(); ci++) {
    const Case& c = all[ci];
    std::string name = case_name(c);
    SCOPED_TRACE(name);
    std::mt19937 rng(uint32_t(1234 + ci));
    std::vector<Tensor> given;
    for (auto& in : c.inputs) given.push_back(in.omitted ? Tensor() : make_input(in, rng));
    auto [node, inputs] = canonical_case(c, given);
    std::vector<const Tensor*> ptrs;
    std::vector<DType> dtypes;
    for (auto& t : inputs) {
      ptrs.push_back(t.defined() ? &t : nullptr);
      dtypes.push_back(t.defined() ? t.dtype() : DType::undefined);
    }
    std::string why;
    if (!b->supports(node, dtypes, &why)) {
      std::cout << "  " << name << ": not supported (" << why << ")\n";
      skipped++;
      continue;
    }
    std::vector<Tensor> want, got;
    try {
      want = run_node_cpu(node, kCanonicalOpset, ptrs, pool);
      got = run_on_backend(*b, node, kCanonicalOpset, inputs);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    double err = 0;
    std::string diff;
    for (size_t i = 0; i < want.size() && diff.empty(); i++) {
      diff = compare(got[i], want[i], &err);
      if (!diff.empty() && want.size() > 1) diff = cat("output ", i, ": ", diff);
    }
    if (!diff.empty()) {
      std::cout << "  " << name << ": FAIL\n";
      ADD_FAILURE() << diff;
      continue;
    }
    std::cout << "  " << name << ": OK (max error " << err << " of the output's scale)\n";
    passed++;
  }
  std::cout << GetParam() << ": " << passed << " of " << all.size() << " cases match the CPU, " << skipped
            << " not supported\n";
}

// Every op the backend says it runs (for some common dtypes) has at least one case.
TEST_P(BackendOpsTest, EveryClaimedOpHasACase) {
  std::string reason;
  Backend* b = backend_or_skip(GetParam(), &reason);
  if (!b) GTEST_SKIP() << GetParam() << " is not available: " << reason;
  std::set<std::string> covered;
  for (auto& c : cases()) covered.insert(c.op);
  for (auto& [op, schema] : op_schemas()) {
    if (schema.alias_input >= 0) continue;  // views never reach a backend
    Node n = test::make_node(op, size_t(std::max(schema.min_inputs, 1)), 1);
    size_t k = n.inputs.size();
    std::vector<std::vector<DType>> tries = {std::vector<DType>(k, DType::f32),
                                             std::vector<DType>(k, DType::i64),
                                             std::vector<DType>(k, DType::boolean)};
    tries.push_back(std::vector<DType>(k, DType::i64));
    tries.back()[0] = DType::f32;
    tries.push_back(std::vector<DType>(k, DType::f32));
    tries.back()[0] = DType::boolean;
    bool claimed = false;
    for (auto& dtypes : tries) claimed = claimed || b->supports(n, dtypes, nullptr);
    if (claimed) {
      EXPECT_TRUE(covered.count(op)) << GetParam() << " runs " << op << " but no case tests it";
    }
  }
}

std::string device_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s;
  for (char ch : info.param)
    if (std::isalnum(static_cast<unsigned char>(ch))) s += ch;
  return s;
}

INSTANTIATE_TEST_SUITE_P(BackendOps, BackendOpsTest, ::testing::ValuesIn(backends_under_test()), device_test_name);

}  // namespace

}  // namespace vlrt
