#include <cmath>
#include <limits>
#include <random>

#include "op_test_util.h"

namespace vlrt::test {
namespace {

std::vector<float> random_floats(size_t n, float scale, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Plain double-precision softmax along the last axis of a [rows, n] matrix.
std::vector<float> reference_softmax(const std::vector<float>& x, int64_t n, bool log) {
  std::vector<float> y(x.size());
  for (size_t r = 0; r < x.size() / n; r++) {
    const float* xr = x.data() + r * n;
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) m = std::max(m, double(xr[i]));
    for (int64_t i = 0; i < n; i++) s += std::exp(xr[i] - m);
    for (int64_t i = 0; i < n; i++)
      y[r * n + i] = float(log ? xr[i] - m - std::log(s) : std::exp(xr[i] - m) / s);
  }
  return y;
}

TEST(Normalization, BatchNormInference) {
  Tensor x = f32({1, 2, 3, 4, -1, 0, 5, 9}, {2, 2, 2});
  auto y = run_op("BatchNormalization",
                  {x, f32({1.5f, -2}, {2}), f32({0.5f, 1}, {2}), f32({2, 1}, {2}), f32({4, 0.25f}, {2})});
  expect_close(
      y[0], f32({-0.2499991f, 0.5f, -6.99984f, -10.99976f, -1.749997f, -0.9999982f, -14.99968f, -30.99936f},
                {2, 2, 2}));
}

TEST(Normalization, BatchNormTrainingMode) {
  Tensor x = f32({1, 2, 3, 4, -1, 0, 5, 9}, {2, 2, 2});
  auto y = run_op("BatchNormalization",
                  {x, f32({1.5f, -2}, {2}), f32({0.5f, 1}, {2}), f32({2, 1}, {2}), f32({4, 0.25f}, {2})},
                  {{"training_mode", attr_i(1)}}, 3, 15);
  expect_close(
      y[0], f32({1.170818f, 2.512453f, 2.975755f, 2.097641f, -1.512453f, -0.1708177f, 1.219528f, -2.292925f},
                {2, 2, 2}));
  expect_close(y[1], f32({1.85f, 1.425f}, {2}));
  expect_close(y[2], f32({3.725f, 0.74375f}, {2}));
}

TEST(Normalization, BatchNormErrors) {
  Tensor x = Tensor::zeros(DType::f32, {1, 3, 2});
  Tensor c3 = Tensor::zeros(DType::f32, {3}), c2 = Tensor::zeros(DType::f32, {2});
  EXPECT_THROW(run_op("BatchNormalization", {x, c2, c3, c3, c3}), Error);
  EXPECT_THROW(run_op("BatchNormalization", {Tensor::zeros(DType::f32, {3}), c3, c3, c3, c3}), Error);
  EXPECT_THROW(run_op("BatchNormalization", {x, c3, c3, c3, c3}, {}, 3, 15), Error);  // outputs need training
  EXPECT_THROW(run_op("BatchNormalization", {x, c3, c3, c3, c3}, {}, 5, 9), Unsupported);
}

TEST(Normalization, LayerNormWithStatistics) {
  Tensor x = f32({1, 2, 3, 4, 10, 10, 10, 11, -1, 5, 2, 0}, {3, 4});
  auto y = run_op("LayerNormalization", {x, f32({1, 0.5f, -1, 2}, {4}), f32({0, 1, 0, -1}, {4})}, {}, 3);
  expect_close(y[0], f32({-1.341635f, 0.7763941f, -0.4472118f, 1.683271f, -0.5773349f, 0.7113326f, 0.5773349f,
                          2.464009f, -1.091088f, 1.763762f, -0.2182177f, -2.309306f},
                         {3, 4}));
  expect_close(y[1], f32({2.5f, 10.25f, 1.5f}, {3, 1}));
  expect_close(y[2], f32({0.8944237f, 2.30934f, 0.4364354f}, {3, 1}));
}

TEST(Normalization, LayerNormScaleVaryingOverLeadingAxes) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; i++) v[i] = std::pow(float(i), 1.5f);
  auto y = run_op("LayerNormalization", {f32(v, {2, 3, 2}), f32({1, 2, 3}, {3, 1})});
  expect_close(y[0], f32({-0.99998f, 0.99998f, -1.999993f, 1.999992f, -2.999994f, 2.999994f, -0.9999989f,
                          0.9999984f, -1.999999f, 1.999997f, -3, 2.999995f},
                         {2, 3, 2}));
}

TEST(Normalization, LayerNormMatchesPlainVersionOnLargeRows) {
  const int64_t rows = 37, cols = 771;
  std::vector<float> x = random_floats(rows * cols, 2.0f, 1), w = random_floats(cols, 1.0f, 2);
  for (float& e : x) e += 50.0f;  // a large mean tests the two-pass variance
  auto y = run_op("LayerNormalization", {f32(x, {rows, cols}), f32(w, {cols})}, {{"epsilon", attr_f(1e-3f)}});
  std::vector<float> expected(x.size());
  for (int64_t r = 0; r < rows; r++) {
    double m = 0, var = 0;
    for (int64_t i = 0; i < cols; i++) m += x[r * cols + i];
    m /= cols;
    for (int64_t i = 0; i < cols; i++) var += (x[r * cols + i] - m) * (x[r * cols + i] - m);
    double inv = 1 / std::sqrt(var / cols + 1e-3);
    for (int64_t i = 0; i < cols; i++) expected[r * cols + i] = float((x[r * cols + i] - m) * inv * w[i]);
  }
  expect_close(y[0], f32(expected, {rows, cols}), 1e-5, 1e-5);
}

TEST(Normalization, LayerNormErrors) {
  Tensor x = Tensor::zeros(DType::f32, {2, 4});
  EXPECT_THROW(run_op("LayerNormalization", {x, Tensor::zeros(DType::f32, {3})}), Error);
  EXPECT_THROW(run_op("LayerNormalization", {x, Tensor::zeros(DType::f32, {4})}, {{"axis", attr_i(2)}}),
               Error);
  EXPECT_THROW(run_op("LayerNormalization", {x, Tensor::zeros(DType::f32, {4})}, {{"stash_type", attr_i(7)}}),
               Error);
  EXPECT_THROW(run_op("LayerNormalization", {i64({1, 2}, {2}), i64({1, 2}, {2})}), Error);
}

TEST(Normalization, InstanceNorm) {
  auto y = run_op("InstanceNormalization",
                  {f32({1, 2, 4, 8, 3, 3, 3, 6}, {1, 2, 4}), f32({2, 1}, {2}), f32({0, 1}, {2})});
  expect_close(y[0], f32({-2.051509f, -1.305506f, 0.1865008f, 3.170514f, 0.4226515f, 0.4226515f, 0.4226515f,
                          2.732046f},
                         {1, 2, 4}));
  EXPECT_THROW(run_op("InstanceNormalization", {f32({1, 2}, {1, 2}), f32({1, 1}, {2}), f32({0, 0}, {2})}),
               Error);
}

TEST(Normalization, GroupNormPerGroupAndPerChannel) {
  Tensor x = f32({1, 2, 3, 5, 0, 0, 1, 7}, {1, 4, 2});
  Attribute groups = attr_i(2);
  auto g =
      run_op("GroupNormalization", {x, f32({2, -1}, {2}), f32({1, 0}, {2})}, {{"num_groups", groups}}, 1, 18);
  expect_close(
      g[0], f32({-1.366426f, -0.01418281f, 1.338061f, 4.042548f, 0.685994f, 0.685994f, 0.342997f, -1.714985f},
                {1, 4, 2}));
  auto c = run_op("GroupNormalization", {x, f32({1, 2, 3, 4}, {4}), f32({0, 0, 1, 1}, {4})},
                  {{"num_groups", groups}}, 1, 18);
  expect_close(c[0], f32({-1.183213f, -0.5070914f, 0.3380609f, 3.042548f, -1.057982f, -1.057982f, -0.3719879f,
                          7.85994f},
                         {1, 4, 2}));
  EXPECT_THROW(run_op("GroupNormalization", {x, f32({1, 1, 1}, {3}), f32({0, 0, 0}, {3})},
                      {{"num_groups", attr_i(3)}}, 1, 18),
               Error);
  EXPECT_THROW(run_op("GroupNormalization", {x, f32({1, 1}, {2}), f32({0, 0}, {2})}, {}, 1, 18), Error);
}

TEST(Normalization, GroupAndBatchNormMatchPlainVersion) {
  const int64_t n = 2, c = 6, spatial = 35, groups = 3, per_group = c / groups * spatial;
  std::vector<float> x = random_floats(n * c * spatial, 3.0f, 11), scale = random_floats(c, 1.0f, 12),
                     bias = random_floats(c, 1.0f, 13), mean = random_floats(c, 1.0f, 14);
  std::vector<float> var = random_floats(c, 1.0f, 15);
  for (float& v : var) v = v * v + 0.1f;
  std::vector<float> group_expected(x.size()), batch_expected(x.size());
  for (int64_t g = 0; g < n * groups; g++) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < per_group; i++) m += x[g * per_group + i];
    m /= per_group;
    for (int64_t i = 0; i < per_group; i++) v += (x[g * per_group + i] - m) * (x[g * per_group + i] - m);
    double inv = 1 / std::sqrt(v / per_group + 1e-5);
    for (int64_t i = 0; i < per_group; i++) {
      int64_t e = g * per_group + i, ch = e / spatial % c;
      group_expected[e] = float((x[e] - m) * inv * scale[ch] + bias[ch]);
    }
  }
  for (size_t e = 0; e < x.size(); e++) {
    int64_t ch = int64_t(e) / spatial % c;
    batch_expected[e] = float((x[e] - mean[ch]) / std::sqrt(var[ch] + 1e-5) * scale[ch] + bias[ch]);
  }
  Tensor xt = f32(x, {n, c, 5, 7}), st = f32(scale, {c}), bt = f32(bias, {c});
  expect_close(run_op("GroupNormalization", {xt, st, bt}, {{"num_groups", attr_i(groups)}}, 1, 18)[0],
               f32(group_expected, {n, c, 5, 7}));
  expect_close(run_op("BatchNormalization", {xt, st, bt, f32(mean, {c}), f32(var, {c})})[0],
               f32(batch_expected, {n, c, 5, 7}));
}

TEST(Normalization, LpNormalization) {
  Tensor x = f32({3, -4, 0, 0, 0, 0}, {2, 3});
  expect_close(run_op("LpNormalization", {x}, {{"axis", attr_i(1)}})[0],
               f32({0.6f, -0.8f, 0, 0, 0, 0}, {2, 3}));
  expect_close(run_op("LpNormalization", {x}, {{"axis", attr_i(0)}, {"p", attr_i(1)}})[0],
               f32({1, -1, 0, 0, 0, 0}, {2, 3}));
  EXPECT_THROW(run_op("LpNormalization", {x}, {{"p", attr_i(3)}}), Error);
}

TEST(Normalization, MeanVarianceNormalization) {
  auto y = run_op("MeanVarianceNormalization", {f32({1, 2, 3, 4, 5, 6, 7, 9}, {2, 2, 1, 2})});
  expect_close(y[0], f32({-1.212678f, -0.7276069f, -1.153113f, -0.7337993f, 0.7276069f, 1.212678f, 0.5241424f,
                          1.36277f},
                         {2, 2, 1, 2}));
  EXPECT_THROW(run_op("MeanVarianceNormalization", {f32({1, 2}, {1, 2})}),
               Error);  // default axes need rank 4
}

TEST(Normalization, LRN) {
  Tensor x = f32({1, 2, 3}, {1, 3, 1, 1});
  // An even size spans floor((size-1)/2) = 0 channels before and ceil((size-1)/2) = 1 after.
  expect_close(run_op("LRN", {x}, {{"size", attr_i(2)}})[0],
               f32({0.9998125f, 1.999026f, 2.998988f}, {1, 3, 1, 1}));
  expect_close(
      run_op("LRN", {x},
             {{"size", attr_i(3)}, {"alpha", attr_f(0.1f)}, {"beta", attr_f(0.5f)}, {"bias", attr_f(2)}})[0],
      f32({0.6793662f, 1.273429f, 1.923182f}, {1, 3, 1, 1}));
  EXPECT_THROW(run_op("LRN", {x}), Error);  // size is required
}

TEST(Normalization, SoftmaxOpsetSemantics) {
  Tensor x = f32({1, 2, 3, 4, 0, 0, -1, 5}, {2, 2, 2});
  // Before opset 13 the input is flattened to 2-D at axis 1.
  expect_close(run_op("Softmax", {x}, {{"axis", attr_i(1)}}, 1, 11)[0],
               f32({0.0320586f, 0.08714432f, 0.2368828f, 0.6439143f, 0.006632133f, 0.006632133f, 0.002439826f,
                    0.984296f},
                   {2, 2, 2}));
  expect_close(
      run_op("Softmax", {x}, {{"axis", attr_i(1)}}, 1, 13)[0],
      f32({0.1192029f, 0.1192029f, 0.880797f, 0.880797f, 0.7310586f, 0.00669285f, 0.2689414f, 0.9933072f},
          {2, 2, 2}));
  expect_close(run_op("LogSoftmax", {x}, {}, 1, 13)[0],
               f32({-1.313262f, -0.3132617f, -1.313262f, -0.3132617f, -0.6931472f, -0.6931472f, -6.002476f,
                    -0.002475641f},
                   {2, 2, 2}));
}

TEST(Normalization, SoftmaxMatchesPlainVersion) {
  // Wide value range exercises the polynomial exp, odd lengths the vector tails.
  for (int64_t n : {1, 3, 4, 7, 577, 1031}) {
    std::vector<float> x = random_floats(5 * n, 30.0f, uint32_t(n));
    for (bool log : {false, true}) {
      x[0] = log ? -1e30f : -std::numeric_limits<float>::infinity();
      auto y = run_op(log ? "LogSoftmax" : "Softmax", {f32(x, {5, n})});
      expect_close(y[0], f32(reference_softmax(x, n, log), {5, n}), 1e-6, 1e-5);
    }
  }
}

TEST(Normalization, SoftmaxStridedAxisMatchesLastAxis) {
  // [2, 70, 3] along axis 1 against the same data transposed to put that axis last.
  const int64_t a = 2, n = 70, b = 3;
  std::vector<float> x = random_floats(a * n * b, 5.0f, 7), xt(x.size());
  for (int64_t i = 0; i < a; i++)
    for (int64_t j = 0; j < n; j++)
      for (int64_t k = 0; k < b; k++) xt[(i * b + k) * n + j] = x[(i * n + j) * b + k];
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    auto strided = run_op(op, {f32(x, {a, n, b})}, {{"axis", attr_i(1)}})[0].to_double_vector();
    auto last = run_op(op, {f32(xt, {a, b, n})})[0].to_double_vector();
    for (int64_t i = 0; i < a; i++)
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < b; k++)
          EXPECT_NEAR(strided[(i * n + j) * b + k], last[(i * b + k) * n + j], 1e-6) << op;
  }
}

TEST(Normalization, SoftmaxMaskedRow) {
  float inf = std::numeric_limits<float>::infinity();
  auto y = run_op("Softmax", {f32({-inf, 0, -inf, 0, 1e-30f, -1e30f}, {2, 3})});
  expect_close(y[0], f32({0, 1, 0, 0.5f, 0.5f, 0}, {2, 3}));
}

TEST(Normalization, HardmaxFirstMaximumWins) {
  auto y = run_op("Hardmax", {f32({1, 3, 3, 2, 5, 5, 5, 5}, {2, 4})});
  expect_close(y[0], f32({0, 1, 0, 0, 1, 0, 0, 0}, {2, 4}));
}

TEST(Normalization, SoftmaxErrors) {
  EXPECT_THROW(run_op("Softmax", {Tensor::scalar<float>(1)}), Error);
  EXPECT_THROW(run_op("Softmax", {f32({1, 2}, {1, 2})}, {{"axis", attr_i(2)}}), Error);
  EXPECT_THROW(run_op("LogSoftmax", {i64({1, 2}, {2})}), Error);
}

}  // namespace
}  // namespace vlrt::test
