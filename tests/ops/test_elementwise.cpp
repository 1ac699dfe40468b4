// Elementwise ops: expected values from onnxruntime/NumPy, broadcast fast paths
// against a plain index-by-index reference, and error paths.
#include <cstring>
#include <limits>
#include <random>

#include "op_test_util.h"
#include "ops/shape_util.h"

namespace vlrt::test {
namespace {

using Attrs = std::map<std::string, Attribute>;

Tensor run1(const std::string& op, const std::vector<Tensor>& in, Attrs attrs = {}, int64_t opset = 17) {
  return run_op(op, in, std::move(attrs), 1, opset)[0];
}

template <class T>
Tensor make(std::vector<T> v, Shape s) {
  return Tensor::from_vector<T>(v, std::move(s));
}

Tensor boolean(std::vector<int> v, Shape s) {
  std::vector<bool> b(v.begin(), v.end());
  Tensor t(DType::boolean, std::move(s));
  for (size_t i = 0; i < b.size(); i++) t.data<bool>()[i] = b[i];
  return t;
}

Tensor random_f32(Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 2.f);
  Tensor t(DType::f32, std::move(s));
  for (int64_t i = 0; i < t.numel(); i++) t.data<float>()[i] = dist(rng) * (i % 3 == 0 ? -1.f : 1.f);
  return t;
}

// out[i] = f(a[ia], b[ib]) by explicit index arithmetic, the reference for every fast path.
template <class F>
Tensor reference_binary(const Tensor& a, const Tensor& b, F f) {
  Shape out_shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out(DType::f32, out_shape);
  auto sa = broadcast_strides(a.shape(), out_shape), sb = broadcast_strides(b.shape(), out_shape);
  auto so = contiguous_strides(out_shape);
  for (int64_t i = 0; i < out.numel(); i++) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < out_shape.size(); d++) {
      int64_t idx = (i / so[d]) % out_shape[d];
      ia += idx * sa[d];
      ib += idx * sb[d];
    }
    out.data<float>()[i] = f(a.data<float>()[ia], b.data<float>()[ib]);
  }
  return out;
}

const std::vector<float> kX = {-2.5f, -1.f, -0.3f, 0.f, 0.4f, 1.f, 2.5f};
const std::vector<float> kUnit = {-0.9f, -0.5f, 0.f, 0.3f, 0.8f};

TEST(Elementwise, UnaryFloatValues) {
  struct Case {
    const char* op;
    std::vector<float> in, out;
  };
  const std::vector<Case> cases = {
      {"Abs", kX, {2.5f, 1.f, 0.3f, 0.f, 0.4f, 1.f, 2.5f}},
      {"Neg", kX, {2.5f, 1.f, 0.3f, -0.f, -0.4f, -1.f, -2.5f}},
      {"Reciprocal", {-2.5f, -1.f, -0.3f, 0.4f, 1.f, 2.5f}, {-0.4f, -1.f, -3.3333333f, 2.5f, 1.f, 0.4f}},
      {"Floor", kX, {-3.f, -1.f, -1.f, 0.f, 0.f, 1.f, 2.f}},
      {"Ceil", kX, {-2.f, -1.f, -0.f, 0.f, 1.f, 1.f, 3.f}},
      {"Round", {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.6f}, {-2.f, -2.f, -0.f, 0.f, 2.f, 2.f, 3.f}},
      {"Sqrt", {0.1f, 0.5f, 1.f, 2.f, 9.f}, {0.31622776f, 0.70710677f, 1.f, 1.4142135f, 3.f}},
      {"Exp", kX, {0.082084998f, 0.36787945f, 0.7408182f, 1.f, 1.4918247f, 2.7182817f, 12.182494f}},
      {"Log", {0.1f, 0.5f, 1.f, 2.f, 9.f}, {-2.3025851f, -0.69314718f, 0.f, 0.69314718f, 2.1972246f}},
      {"Erf", kX, {-0.99959308f, -0.84270078f, -0.32862678f, 0.f, 0.42839235f, 0.84270078f, 0.99959308f}},
      {"Tanh", kX, {-0.98661435f, -0.76159418f, -0.29131261f, 0.f, 0.379949f, 0.76159418f, 0.98661435f}},
      {"Sigmoid", kX, {0.075858176f, 0.26894143f, 0.42555749f, 0.5f, 0.59868765f, 0.7310586f, 0.92414182f}},
      {"Relu", kX, {0.f, 0.f, 0.f, 0.f, 0.4f, 1.f, 2.5f}},
      {"Sin", kX, {-0.59847218f, -0.84147096f, -0.29552022f, 0.f, 0.38941833f, 0.84147096f, 0.59847212f}},
      {"Cos", kX, {-0.80114359f, 0.54030228f, 0.95533651f, 1.f, 0.92106098f, 0.54030228f, -0.80114359f}},
      {"Tan", kX, {0.74702233f, -1.5574077f, -0.30933627f, 0.f, 0.42279324f, 1.5574077f, -0.74702233f}},
      {"Asin", kUnit, {-1.1197696f, -0.52359873f, 0.f, 0.30469269f, 0.92729521f}},
      {"Acos", kUnit, {2.6905658f, 2.0943952f, 1.5707964f, 1.2661039f, 0.6435011f}},
      {"Atan", kX, {-1.19029f, -0.78539813f, -0.29145679f, 0.f, 0.3805064f, 0.78539819f, 1.19029f}},
      {"Sinh", kX, {-6.0502048f, -1.1752012f, -0.30452031f, 0.f, 0.41075233f, 1.1752012f, 6.0502048f}},
      {"Cosh", kX, {6.1322894f, 1.5430806f, 1.0453385f, 1.f, 1.0810723f, 1.5430806f, 6.1322894f}},
      {"Asinh", kX, {-1.6472312f, -0.88137358f, -0.29567307f, 0.f, 0.39003533f, 0.88137358f, 1.6472312f}},
      {"Acosh", {1.f, 1.5f, 2.f, 10.f}, {0.f, 0.96242368f, 1.316958f, 2.993223f}},
      {"Atanh", kUnit, {-1.4722193f, -0.54930615f, 0.f, 0.30951962f, 1.0986123f}},
      {"Sign", kX, {-1.f, -1.f, -1.f, 0.f, 1.f, 1.f, 1.f}},
      {"Softplus",
       kX,
       {0.078889742f, 0.31326169f, 0.5543552f, 0.69314718f, 0.91301525f, 1.3132617f, 2.5788898f}},
      {"Softsign", kX, {-0.71428573f, -0.5f, -0.23076925f, 0.f, 0.2857143f, 0.5f, 0.71428573f}},
      {"Selu", kX, {-1.6137857f, -1.1113307f, -0.45566735f, 0.f, 0.42028043f, 1.050701f, 2.6267526f}},
      {"HardSwish",
       {-4.f, -2.5f, -1.f, 0.f, 1.f, 2.5f, 4.f},
       {0.f, -0.20833328f, -0.33333331f, 0.f, 0.66666669f, 2.2916667f, 4.f}},
      {"Mish", kX, {-0.19681619f, -0.30340144f, -0.15113318f, 0.f, 0.28903055f, 0.86509848f, 2.4713924f}},
      {"Gelu", kX, {-0.015524163f, -0.15865525f, -0.11462658f, 0.f, 0.2621687f, 0.84134475f, 2.4844758f}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    Shape s = {int64_t(c.in.size())};
    expect_close(run1(c.op, {f32(c.in, s)}), f32(c.out, s));
    // float64 runs the same code at double precision.
    Tensor d = run1(c.op, {run1("Cast", {f32(c.in, s)}, {{"to", attr_i(11)}})});
    expect_close(run1("Cast", {d}, {{"to", attr_i(1)}}), f32(c.out, s));
  }
}

// float32 Exp, Tanh, Sigmoid, Erf and Gelu run on vectors with their own polynomials;
// float64 runs libm. Compare the two over a wide range, specials and a ragged tail.
TEST(Elementwise, VectorMathMatchesLibm) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {inf,    -inf,   std::numeric_limits<float>::quiet_NaN(),
                          0.f,    -0.f,   1e-30f,
                          -1e-6f, 88.7f,  88.8f,
                          -87.f,  -95.f,  -110.f,
                          0.624f, 0.626f, -3.9f,
                          4.1f};
  for (int i = 0; i <= 100000; i++) v.push_back(-30.f + 60.f * float(i) / 100000.f);
  Tensor x = f32(v, {int64_t(v.size())});
  Tensor x64 = run1("Cast", {x}, {{"to", attr_i(11)}});
  struct Case {
    const char* op;
    Attrs attrs;
    double rtol, atol;  // atol is scaled by max(1, |x|)
  };
  const Case cases[] = {{"Exp", {}, 3e-7, 0},     {"Sigmoid", {}, 3e-7, 0},
                        {"Tanh", {}, 3e-7, 0},    {"Erf", {}, 6e-7, 0},
                        {"Gelu", {}, 6e-7, 3e-7}, {"Gelu", {{"approximate", attr_s("tanh")}}, 6e-7, 3e-7}};
  for (const Case& c : cases) {
    SCOPED_TRACE(cat(c.op, c.attrs.empty() ? "" : " tanh"));
    Tensor got = run1(c.op, {x}, c.attrs);
    Tensor want = run1(c.op, {x64}, c.attrs);
    for (size_t i = 0; i < v.size(); i++) {
      double g = got.data<float>()[i], w = want.data<double>()[i];
      if (std::isnan(w) || std::isinf(w) || std::abs(w) > 3.4e38) {
        EXPECT_EQ(std::isnan(g), std::isnan(w)) << "x=" << v[i];
        if (!std::isnan(w)) {
          EXPECT_EQ(g, float(w)) << "x=" << v[i];
        }
        continue;
      }
      double tol = c.rtol * std::abs(w) + 1e-38;
      if (c.atol > 0) tol += c.atol * std::max(1.0, std::abs(double(v[i])));
      ASSERT_NEAR(g, w, tol) << "x=" << v[i];
    }
  }
}

TEST(Elementwise, ActivationAttributes) {
  Shape s = {7};
  expect_close(run1("LeakyRelu", {f32(kX, s)}, {{"alpha", attr_f(0.1f)}}),
               f32({-0.25f, -0.1f, -0.03f, 0.f, 0.4f, 1.f, 2.5f}, s));
  expect_close(run1("Elu", {f32(kX, s)}, {{"alpha", attr_f(0.5f)}}),
               f32({-0.45895749f, -0.31606027f, -0.1295909f, 0.f, 0.4f, 1.f, 2.5f}, s));
  expect_close(run1("Celu", {f32(kX, s)}, {{"alpha", attr_f(2.f)}}),
               f32({-1.4269904f, -0.78693867f, -0.278584f, 0.f, 0.4f, 1.f, 2.5f}, s));
  expect_close(run1("HardSigmoid", {f32(kX, s)}, {{"alpha", attr_f(0.3f)}, {"beta", attr_f(0.4f)}}),
               f32({0.f, 0.1f, 0.31f, 0.4f, 0.52f, 0.7f, 1.f}, s));
  expect_close(run1("ThresholdedRelu", {f32(kX, s)}, {{"alpha", attr_f(0.5f)}}),
               f32({0.f, 0.f, 0.f, 0.f, 0.f, 1.f, 2.5f}, s));
  expect_close(run1("Shrink", {f32(kX, s)}, {{"bias", attr_f(0.5f)}, {"lambd", attr_f(0.8f)}}),
               f32({-2.f, -0.5f, 0.f, 0.f, 0.f, 0.5f, 2.f}, s));
  expect_close(run1("Shrink", {make<int32_t>({-5, -1, 0, 1, 5}, {5})},
                    {{"bias", attr_f(2.f)}, {"lambd", attr_f(1.5f)}}),
               make<int32_t>({-3, 0, 0, 0, 3}, {5}));
  expect_close(
      run1("Gelu", {f32(kX, s)}, {{"approximate", attr_s("tanh")}}),
      f32({-0.015084266f, -0.15880801f, -0.11462908f, 0.f, 0.26216117f, 0.84119199f, 2.4849157f}, s));
  Tensor x = f32({-1.f, 2.f, -3.f, 4.f, -5.f, 6.f}, {2, 3});
  expect_close(run1("PRelu", {x, f32({0.5f, 0.1f, 2.f}, {3})}),
               f32({-0.5f, 2.f, -6.f, 4.f, -0.5f, 6.f}, {2, 3}));
  expect_close(run1("PRelu", {x, f32({0.5f, 2.f}, {2, 1})}),
               f32({-0.5f, 2.f, -1.5f, 4.f, -10.f, 6.f}, {2, 3}));
  expect_close(run1("PRelu", {make<int64_t>({-4, 3}, {2}), make<int64_t>({3}, {1})}),
               make<int64_t>({-12, 3}, {2}));
}

TEST(Elementwise, IntegerUnary) {
  Tensor x = make<int32_t>({std::numeric_limits<int32_t>::min(), -7, 0, 5}, {4});
  expect_close(run1("Abs", {x}), make<int32_t>({std::numeric_limits<int32_t>::min(), 7, 0, 5}, {4}));
  expect_close(run1("Neg", {make<int8_t>({-128, -3, 0, 9}, {4})}), make<int8_t>({-128, 3, 0, -9}, {4}));
  expect_close(run1("Sign", {x}), make<int32_t>({-1, -1, 0, 1}, {4}));
  expect_close(run1("Relu", {make<int64_t>({-3, 0, 4}, {3})}), make<int64_t>({0, 0, 4}, {3}));
  expect_close(run1("Abs", {make<uint8_t>({0, 200}, {2})}), make<uint8_t>({0, 200}, {2}));
  expect_close(run1("Erf", {make<int32_t>({-2, 0, 3}, {3})}), make<int32_t>({0, 0, 0}, {3}));
}

TEST(Elementwise, PredicatesAndNot) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({-inf, -1.f, nan, 0.f, inf}, {5});
  expect_close(run1("IsNaN", {x}), boolean({0, 0, 1, 0, 0}, {5}));
  expect_close(run1("IsInf", {x}), boolean({1, 0, 0, 0, 1}, {5}));
  expect_close(run1("IsInf", {x}, {{"detect_negative", attr_i(0)}}), boolean({0, 0, 0, 0, 1}, {5}));
  expect_close(run1("IsInf", {x}, {{"detect_positive", attr_i(0)}}), boolean({1, 0, 0, 0, 0}, {5}));
  expect_close(run1("Not", {boolean({1, 0, 1}, {3})}), boolean({0, 1, 0}, {3}));
}

// Every broadcast pattern, float32 Add/Sub/Mul/Div, against the index-by-index reference.
// The large shapes cross the parallel threshold so chunks start mid-row.
TEST(Elementwise, BinaryBroadcastPathsMatchReference) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4}, {2, 3, 4}},        // same shape
      {{2, 3, 4}, {}},               // scalar right
      {{}, {2, 3, 4}},               // scalar left
      {{2, 3, 5}, {5}},              // inner (bias) broadcast
      {{5}, {2, 3, 5}},              // inner broadcast, operands swapped
      {{2, 3, 4}, {3, 1}},           // per-channel
      {{3, 1}, {1, 4}},              // both broadcast
      {{2, 1, 4, 1}, {3, 1, 5}},     // general strided
      {{1, 1, 7}, {1, 3, 1}},        // size-1 leading axes
      {{1, 0, 3}, {3}},              // empty
      {{4, 300, 129}, {129}},        // large inner broadcast, rows cut by chunks
      {{2, 64, 300}, {2, 64, 1}},    // large per-row scalar
      {{70000}, {70000}},            // large same shape
      {{70001}, {1}},                // large scalar with a ragged tail
      {{3, 1, 9000}, {1, 5, 9000}},  // large general
      // A gate over channel blocks: a short vector repeated along the rows, either side, with
      // rows that fill the tiled vector unevenly, and across the parallel threshold.
      {{2, 3, 9, 7, 8}, {2, 3, 1, 1, 8}},
      {{1, 2, 1, 1, 16}, {1, 2, 5, 3, 16}},
      {{1, 40, 28, 28, 8}, {1, 40, 1, 1, 8}},
      {{2, 3, 4, 6}, {2, 3, 1, 6}},  // a row width that does not divide the tile
      // Short rows with one operand laid out like the output: the other gathered into a tile, the
      // same for every block or block by block, on either side, across the parallel threshold;
      // a block that does not divide the tile, and one too large for it.
      {{1, 37, 3, 4, 4, 2}, {1, 1, 1, 4, 1, 2}},
      {{1, 1, 1, 4, 1, 2}, {1, 37, 3, 4, 4, 2}},
      {{1, 37, 1, 4, 1, 2}, {1, 37, 3, 4, 4, 2}},
      {{1, 2000, 8, 4, 4, 2}, {1, 2000, 1, 4, 1, 2}},
      {{600, 3, 5}, {600, 1, 5}},
      {{2, 70, 70, 3}, {2, 1, 70, 3}},
  };
  struct Op {
    const char* name;
    float (*f)(float, float);
  };
  const Op ops[] = {{"Add", [](float a, float b) { return a + b; }},
                    {"Sub", [](float a, float b) { return a - b; }},
                    {"Mul", [](float a, float b) { return a * b; }},
                    {"Div", [](float a, float b) { return a / b; }}};
  uint32_t seed = 1;
  for (auto& [sa, sb] : shapes) {
    Tensor a = random_f32(sa, seed++), b = random_f32(sb, seed++);
    for (const Op& op : ops) {
      SCOPED_TRACE(cat(op.name, " ", shape_str(sa), " ", shape_str(sb)));
      expect_close(run1(op.name, {a, b}), reference_binary(a, b, op.f), 0, 0);
    }
  }
}

TEST(Elementwise, BinaryOtherTypes) {
  Tensor a64 = make<double>({1.5, -2, 3}, {3});
  expect_close(run1("Mul", {a64, make<double>({2}, {1})}), make<double>({3, -4, 6}, {3}));
  expect_close(run1("Div", {a64, make<double>({2, 4, -1}, {3})}), make<double>({0.75, -0.5, -3}, {3}));
  // Integers wrap on overflow and divide toward zero.
  expect_close(
      run1("Add", {make<int32_t>({std::numeric_limits<int32_t>::max(), 1}, {2}), make<int32_t>({1}, {})}),
      make<int32_t>({std::numeric_limits<int32_t>::min(), 2}, {2}));
  expect_close(run1("Mul", {make<uint16_t>({65535, 3}, {2}), make<uint16_t>({65535, 4}, {2})}),
               make<uint16_t>({1, 12}, {2}));
  expect_close(run1("Sub", {make<uint8_t>({1, 200}, {2}), make<uint8_t>({2, 100}, {2})}),
               make<uint8_t>({255, 100}, {2}));
  expect_close(run1("Div", {make<int32_t>({7, -7, 7, -7}, {4}), make<int32_t>({2, 2, -2, -2}, {4})}),
               make<int32_t>({3, -3, -3, 3}, {4}));
  expect_close(
      run1("Div", {make<int64_t>({std::numeric_limits<int64_t>::min()}, {1}), make<int64_t>({-1}, {1})}),
      make<int64_t>({std::numeric_limits<int64_t>::min()}, {1}));
  // float16 goes through float32.
  Tensor h = run1("Cast", {f32({1.f, 2.5f}, {2})}, {{"to", attr_i(10)}});
  Tensor sum = run1("Add", {h, h});
  EXPECT_EQ(sum.dtype(), DType::f16);
  expect_close(run1("Cast", {sum}, {{"to", attr_i(1)}}), f32({2.f, 5.f}, {2}));
}

TEST(Elementwise, IntegerDivisionByZeroFails) {
  EXPECT_THROW(run1("Div", {make<int32_t>({1, 2}, {2}), make<int32_t>({1, 0}, {2})}), Error);
  EXPECT_THROW(run1("Mod", {make<int32_t>({1, 2}, {2}), make<int32_t>({0}, {})}), Error);
  // Floats follow IEEE.
  Tensor q = run1("Div", {f32({1.f, -1.f, 0.f}, {3}), f32({0.f}, {})});
  EXPECT_EQ(q.data<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(q.data<float>()[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(q.data<float>()[2]));
}

TEST(Elementwise, Mod) {
  Tensor a = make<int32_t>({-4, 7, 5, 4, -7, 8}, {6}), b = make<int32_t>({2, -3, 8, -2, 3, 5}, {6});
  expect_close(run1("Mod", {a, b}), make<int32_t>({0, -2, 5, 0, 2, 3}, {6}));
  expect_close(run1("Mod", {a, b}, {{"fmod", attr_i(1)}}), make<int32_t>({0, 1, 5, 0, -1, 3}, {6}));
  expect_close(run1("Mod", {make<int8_t>({-128, 9}, {2}), make<int8_t>({-1, 4}, {2})}),
               make<int8_t>({0, 1}, {2}));
  expect_close(run1("Mod", {make<uint8_t>({250, 9}, {2}), make<uint8_t>({7}, {1})}),
               make<uint8_t>({5, 2}, {2}));
  expect_close(
      run1("Mod", {f32({-4.5f, 7.f, 5.5f}, {3}), f32({2.f, -3.f, 2.5f}, {3})}, {{"fmod", attr_i(1)}}),
      f32({-0.5f, 1.f, 0.5f}, {3}));
}

TEST(Elementwise, Pow) {
  expect_close(run1("Pow", {f32({2.f, 4.f, 9.f}, {3}), f32({0.5f, -1.f, 0.5f}, {3})}),
               f32({1.4142135f, 0.25f, 3.f}, {3}));
  expect_close(run1("Pow", {f32({-3.f, 1.5f}, {2}), f32({2.f}, {})}), f32({9.f, 2.25f}, {2}));
  expect_close(run1("Pow", {f32({2.f, 3.f}, {2}), make<int64_t>({3, -1}, {2})}),
               f32({8.f, 0.33333334f}, {2}));
  expect_close(run1("Pow", {make<int32_t>({2, 3, -2, 5}, {4}), make<int64_t>({3, 2, 3, 0}, {4})}),
               make<int32_t>({8, 9, -8, 1}, {4}));
  expect_close(run1("Pow", {make<int64_t>({2, 3}, {2}), f32({1.5f, 2.f}, {2})}), make<int64_t>({2, 9}, {2}));
  expect_close(run1("Pow", {make<int32_t>({1, -1, -1, 2}, {4}), make<int32_t>({-2, -3, -2, -1}, {4})}),
               make<int32_t>({1, -1, 1, 0}, {4}));
  // 3^40 wraps around 2^64.
  expect_close(run1("Pow", {make<int64_t>({3}, {1}), make<uint8_t>({40}, {1})}),
               make<int64_t>({int64_t(12157665459056928801ull)}, {1}));
}

TEST(Elementwise, BitShift) {
  Tensor a = make<uint8_t>({16, 4, 1, 255}, {4}), s = make<uint8_t>({1, 2, 3, 8}, {4});
  expect_close(run1("BitShift", {a, s}, {{"direction", attr_s("LEFT")}}), make<uint8_t>({32, 16, 8, 0}, {4}));
  expect_close(run1("BitShift", {a, s}, {{"direction", attr_s("RIGHT")}}), make<uint8_t>({8, 1, 0, 0}, {4}));
  expect_close(run1("BitShift", {make<uint16_t>({65535}, {1}), make<uint16_t>({15}, {1})},
                    {{"direction", attr_s("LEFT")}}),
               make<uint16_t>({32768}, {1}));
  expect_close(run1("BitShift", {make<uint64_t>({1}, {1}), make<uint64_t>({63}, {1})},
                    {{"direction", attr_s("LEFT")}}),
               make<uint64_t>({uint64_t(1) << 63}, {1}));
}

TEST(Elementwise, ComparisonsAndLogic) {
  Tensor a = f32({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}), b = f32({2.f, 2.f, 5.f}, {3});
  expect_close(run1("Equal", {a, b}), boolean({0, 1, 0, 0, 0, 0}, {2, 3}));
  expect_close(run1("Less", {a, b}), boolean({1, 0, 1, 0, 0, 0}, {2, 3}));
  expect_close(run1("LessOrEqual", {a, b}), boolean({1, 1, 1, 0, 0, 0}, {2, 3}));
  expect_close(run1("Greater", {a, b}), boolean({0, 0, 0, 1, 1, 1}, {2, 3}));
  expect_close(run1("GreaterOrEqual", {a, b}), boolean({0, 1, 0, 1, 1, 1}, {2, 3}));
  expect_close(run1("Equal", {make<int64_t>({3, 4}, {2}), make<int64_t>({4}, {})}), boolean({0, 1}, {2}));
  expect_close(run1("Equal", {boolean({1, 0}, {2}), boolean({1}, {1})}), boolean({1, 0}, {2}));
  Tensor p = boolean({0, 0, 1, 1}, {2, 2}), q = boolean({0, 1}, {2});
  expect_close(run1("And", {p, q}), boolean({0, 0, 0, 1}, {2, 2}));
  expect_close(run1("Or", {p, q}), boolean({0, 1, 1, 1}, {2, 2}));
  expect_close(run1("Xor", {p, q}), boolean({0, 1, 1, 0}, {2, 2}));
}

TEST(Elementwise, Variadic) {
  Tensor a = f32({1.f, 5.f, 3.f}, {3, 1}), b = f32({4.f, 2.f}, {1, 2}), c = f32({0.f}, {});
  expect_close(run_op("Max", {a, b, c})[0], f32({4.f, 2.f, 5.f, 5.f, 4.f, 3.f}, {3, 2}));
  expect_close(run_op("Min", {a, b, c})[0], f32({0.f, 0.f, 0.f, 0.f, 0.f, 0.f}, {3, 2}));
  expect_close(run_op("Sum", {a, b, c})[0], f32({5.f, 3.f, 9.f, 7.f, 7.f, 5.f}, {3, 2}));
  expect_close(run_op("Mean", {a, b})[0], f32({2.5f, 1.5f, 4.5f, 3.5f, 3.5f, 2.5f}, {3, 2}));
  expect_close(run_op("Max", {a})[0], a);
  expect_close(run_op("Min", {make<int32_t>({3, -1}, {2}), make<int32_t>({0, 0}, {2})})[0],
               make<int32_t>({0, -1}, {2}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor m = run_op("Max", {f32({nan, 1.f}, {2}), f32({1.f, nan}, {2})})[0];
  EXPECT_TRUE(std::isnan(m.data<float>()[0]) && std::isnan(m.data<float>()[1]));
}

TEST(Elementwise, Where) {
  Tensor cond = boolean({1, 0, 1}, {3});
  expect_close(run1("Where", {cond, f32({1.f, 2.f}, {2, 1}), f32({-1.f, -2.f, -3.f}, {3})}),
               f32({1.f, -2.f, 1.f, 2.f, -2.f, 2.f}, {2, 3}));
  expect_close(
      run1("Where", {boolean({1, 0}, {2, 1}), make<int64_t>({7}, {}), make<int64_t>({1, 2, 3}, {3})}),
      make<int64_t>({7, 7, 7, 1, 2, 3}, {2, 3}));
  expect_close(run1("Where", {cond, boolean({1}, {}), boolean({0, 0, 1}, {3})}), boolean({1, 0, 1}, {3}));
  Tensor h = run1("Cast", {f32({1.5f, 2.5f, 3.5f}, {3})}, {{"to", attr_i(10)}});
  Tensor hw = run1("Where", {cond, h, run1("Neg", {h})});
  EXPECT_EQ(hw.dtype(), DType::f16);
  expect_close(run1("Cast", {hw}, {{"to", attr_i(1)}}), f32({1.5f, -2.5f, 3.5f}, {3}));
  // Large enough to run in parallel chunks.
  Tensor big_cond(DType::boolean, {300, 200});
  for (int64_t i = 0; i < big_cond.numel(); i++) big_cond.data<bool>()[i] = (i % 7) < 3;
  Tensor x = random_f32({200}, 5), y = f32({-100.f}, {});
  Tensor w = run1("Where", {big_cond, x, y});
  for (int64_t i = 0; i < w.numel(); i++)
    ASSERT_EQ(w.data<float>()[i], (i % 7) < 3 ? x.data<float>()[i % 200] : -100.f) << i;
}

TEST(Elementwise, Clip) {
  Tensor x = f32({-3.f, -1.f, 0.5f, 2.f, 7.f}, {5});
  expect_close(run1("Clip", {x, f32({-1.5f}, {}), f32({2.5f}, {})}),
               f32({-1.5f, -1.f, 0.5f, 2.f, 2.5f}, {5}));
  expect_close(run1("Clip", {x, Tensor(), f32({1.f}, {})}), f32({-3.f, -1.f, 0.5f, 1.f, 1.f}, {5}));
  expect_close(run1("Clip", {x, f32({0.f}, {1})}), f32({0.f, 0.f, 0.5f, 2.f, 7.f}, {5}));
  expect_close(run1("Clip", {x}), x);
  expect_close(run1("Clip", {x}, {{"min", attr_f(-2.f)}, {"max", attr_f(1.f)}}, 6),
               f32({-2.f, -1.f, 0.5f, 1.f, 1.f}, {5}));
  expect_close(
      run1("Clip", {make<int8_t>({-128, 0, 127}, {3}), make<int8_t>({-5}, {}), make<int8_t>({5}, {})}),
      make<int8_t>({-5, 0, 5}, {3}));
  // min > max: max wins, as in NumPy.
  expect_close(run1("Clip", {x, f32({3.f}, {}), f32({1.f}, {})}), f32({1.f, 1.f, 1.f, 1.f, 1.f}, {5}));
  const float inf = std::numeric_limits<float>::infinity();
  Tensor unbounded = run1("Clip", {f32({-inf, inf}, {2}), Tensor(), Tensor()});
  EXPECT_EQ(unbounded.data<float>()[0], -inf);
  EXPECT_EQ(unbounded.data<float>()[1], inf);
}

TEST(Elementwise, Cast) {
  Tensor x = f32({-2.7f, -0.5f, 0.5f, 2.7f, 300.f}, {5});
  expect_close(run1("Cast", {x}, {{"to", attr_i(6)}}), make<int32_t>({-2, 0, 0, 2, 300}, {5}));
  expect_close(run1("Cast", {f32({0.f, 2.7f, 300.f}, {3})}, {{"to", attr_i(2)}}),
               make<uint8_t>({0, 2, 44}, {3}));
  expect_close(run1("Cast", {x}, {{"to", attr_i(9)}}), boolean({1, 1, 1, 1, 1}, {5}));
  // Out of range float to integer wraps like NumPy on x86 (implementation-defined in the spec).
  const float inf = std::numeric_limits<float>::infinity();
  Tensor odd = f32({-2.7f, 300.f, -1.f, 1e10f, std::numeric_limits<float>::quiet_NaN(), -inf, 3e9f}, {7});
  expect_close(run1("Cast", {odd}, {{"to", attr_i(3)}}), make<int8_t>({-2, 44, -1, 0, 0, 0, 0}, {7}));
  expect_close(run1("Cast", {odd}, {{"to", attr_i(2)}}), make<uint8_t>({254, 44, 255, 0, 0, 0, 0}, {7}));
  expect_close(run1("Cast", {odd}, {{"to", attr_i(4)}}),
               make<uint16_t>({65534, 300, 65535, 0, 0, 0, 0}, {7}));
  const int32_t i32_min = std::numeric_limits<int32_t>::min();
  expect_close(run1("Cast", {odd}, {{"to", attr_i(6)}}),
               make<int32_t>({-2, 300, -1, i32_min, i32_min, i32_min, i32_min}, {7}));
  const int64_t i64_min = std::numeric_limits<int64_t>::min();
  expect_close(run1("Cast", {odd}, {{"to", attr_i(7)}}),
               make<int64_t>({-2, 300, -1, 10000000000, i64_min, i64_min, 3000000000}, {7}));
  expect_close(run1("Cast", {f32({-2.7f, 3e9f}, {2})}, {{"to", attr_i(12)}}),
               make<uint32_t>({4294967294u, 3000000000u}, {2}));
  expect_close(run1("Cast", {f32({-1.f, 1e10f}, {2})}, {{"to", attr_i(13)}}),
               make<uint64_t>({18446744073709551615ull, 10000000000ull}, {2}));
  expect_close(run1("Cast", {boolean({1, 0}, {2})}, {{"to", attr_i(1)}}), f32({1.f, 0.f}, {2}));
  expect_close(run1("Cast", {make<int64_t>({-3, 1ll << 40}, {2})}, {{"to", attr_i(11)}}),
               make<double>({-3, double(1ll << 40)}, {2}));
  // float16 bits as NumPy's astype(float16) gives them (round to nearest even, overflow to inf).
  Tensor h = run1("Cast", {f32({0.1f, 1.f / 3, 65504.f, 1e5f, -2.5f}, {5})}, {{"to", attr_i(10)}});
  const uint16_t want_h[] = {11878, 13653, 31743, 31744, 49408};
  for (int i = 0; i < 5; i++) EXPECT_EQ(static_cast<const uint16_t*>(h.raw())[i], want_h[i]) << i;
  // bfloat16 truncates like the ONNX 1.12 reference.
  Tensor bf = run1("Cast", {f32({0.47892547f, 0.48033667f, -1.f}, {3})}, {{"to", attr_i(16)}});
  const uint16_t want_bf[] = {16117, 16117, 49024};
  for (int i = 0; i < 3; i++) EXPECT_EQ(static_cast<const uint16_t*>(bf.raw())[i], want_bf[i]) << i;
  expect_close(run1("Cast", {bf}, {{"to", attr_i(11)}}), make<double>({0.478515625, 0.478515625, -1}, {3}));
  Tensor h3 = run1("Cast", {f32({0.1f, 65504.f, -2.5f}, {3})}, {{"to", attr_i(10)}});
  expect_close(run1("Cast", {h3}, {{"to", attr_i(7)}}), make<int64_t>({0, 65504, -2}, {3}));
  expect_close(run1("CastLike", {make<int32_t>({1, -2}, {2}), make<double>({0}, {1})}),
               make<double>({1, -2}, {2}));
  // Large enough to run in parallel chunks.
  Tensor big = random_f32({100000}, 9);
  Tensor round_trip = run1("Cast", {run1("Cast", {big}, {{"to", attr_i(11)}})}, {{"to", attr_i(1)}});
  ASSERT_EQ(std::memcmp(round_trip.raw(), big.raw(), big.nbytes()), 0);
}

TEST(Elementwise, InferErrors) {
  Tensor x = f32({1.f, 2.f, 3.f}, {3});
  EXPECT_THROW(run1("Add", {x, f32({1.f, 2.f}, {2})}), Error);
  EXPECT_THROW(run1("Add", {x, make<int32_t>({1, 2, 3}, {3})}), Error);
  EXPECT_THROW(run1("Sqrt", {make<int32_t>({4}, {1})}), Error);
  EXPECT_THROW(run1("Mod", {x, x}), Error);  // float Mod needs fmod=1
  EXPECT_THROW(
      run1("BitShift", {make<uint8_t>({1}, {1}), make<uint8_t>({1}, {1})}, {{"direction", attr_s("UP")}}),
      Error);
  EXPECT_THROW(
      run1("BitShift", {make<int8_t>({1}, {1}), make<int8_t>({1}, {1})}, {{"direction", attr_s("LEFT")}}),
      Error);
  EXPECT_THROW(run1("Gelu", {x}, {{"approximate", attr_s("fast")}}), Error);
  EXPECT_THROW(run1("Celu", {x}, {{"alpha", attr_f(0.f)}}), Error);
  EXPECT_THROW(run1("PRelu", {x, f32({1.f, 2.f}, {2})}), Error);
  EXPECT_THROW(run1("PRelu", {x, f32({1.f, 2.f, 3.f}, {1, 3})}), Error);  // slope may not grow the output
  EXPECT_THROW(run1("Clip", {x, f32({0.f, 1.f}, {2})}), Error);
  EXPECT_THROW(run1("Clip", {x, make<int32_t>({0}, {})}), Error);
  EXPECT_THROW(run1("Clip", {x, f32({0.f}, {})}, {}, 6), Error);  // inputs need opset 11
  EXPECT_THROW(run1("Cast", {x}), Error);
  EXPECT_THROW(run1("Cast", {x}, {{"to", attr_i(8)}}), Unsupported);  // string
  EXPECT_THROW(run1("Cast", {x}, {{"to", attr_i(99)}}), Error);
  EXPECT_THROW(run1("Where", {x, x, x}), Error);
  EXPECT_THROW(run1("Where", {boolean({1}, {1}), x, make<double>({1}, {1})}), Error);
  EXPECT_THROW(run1("And", {x, x}), Error);
  EXPECT_THROW(run1("Pow", {make<int8_t>({1}, {1}), make<int8_t>({1}, {1})}), Error);
  EXPECT_THROW(run_op("Sum", {x, make<double>({1}, {1})}), Error);
  EXPECT_THROW(run_op("Max", {x, f32({1.f, 2.f}, {2})}), Error);
  EXPECT_THROW(run1("Not", {x}), Error);
  EXPECT_THROW(run1("IsNaN", {make<int32_t>({1}, {1})}), Error);
}

}  // namespace
}  // namespace vlrt::test
