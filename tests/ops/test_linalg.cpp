// MatMul, Gemm, Conv, ConvTranspose, Einsum, MatMulInteger. The fast convolution paths
// (im2col + GEMM, depthwise, 1x1) are checked against the naive definitions below.
#include <cstdint>

#include "op_test_util.h"
#include "ops/shape_util.h"

namespace vlrt::test {
namespace {

// Small exact values; the same formula produced the expected values with numpy.
Tensor seq(Shape shape, int seed) {
  Tensor t(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); i++) t.data<float>()[i] = float((i * 37 + seed * 11) % 13 - 6) * 0.5f;
  return t;
}

template <class T>
Tensor seq_q(Shape shape, int seed) {
  Tensor t(dtype_v<T>, shape);
  for (int64_t i = 0; i < t.numel(); i++)
    t.data<T>()[i] = T((i * 37 + seed * 11) % 251 - (std::is_signed_v<T> ? 125 : 0));
  return t;
}

Tensor as_dtype(const Tensor& t, DType dt) {
  Tensor r(dt, t.shape());
  auto v = t.to_double_vector();
  for (int64_t i = 0; i < t.numel(); i++) {
    if (dt == DType::f32)
      r.data<float>()[i] = float(v[i]);
    else
      r.data<double>()[i] = v[i];
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Naive references

// Direct convolution over 1-3 spatial axes. pads: all begins, then all ends.
Tensor naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group, std::vector<int64_t> s,
                  std::vector<int64_t> d, std::vector<int64_t> pads) {
  size_t nsp = x.rank() - 2;
  Shape xs = x.shape(), ws = w.shape();
  // Pad the spatial rank to 3 with leading size-1 axes.
  while (xs.size() < 5) xs.insert(xs.begin() + 2, 1), ws.insert(ws.begin() + 2, 1);
  while (s.size() < 3) s.insert(s.begin(), 1), d.insert(d.begin(), 1);
  std::vector<int64_t> pb(pads.begin(), pads.begin() + nsp), pe(pads.begin() + nsp, pads.end());
  while (pb.size() < 3) pb.insert(pb.begin(), 0), pe.insert(pe.begin(), 0);
  Shape ys{xs[0], ws[0]};
  for (int i = 0; i < 3; i++)
    ys.push_back((xs[i + 2] + pb[i] + pe[i] - (ws[i + 2] - 1) * d[i] - 1) / s[i] + 1);
  auto xv = x.to_double_vector(), wv = w.to_double_vector();
  std::vector<double> yv(shape_numel(ys));
  int64_t cg = ws[1], mg = ws[0] / group;
  int64_t idx = 0;
  for (int64_t n = 0; n < ys[0]; n++)
    for (int64_t oc = 0; oc < ys[1]; oc++)
      for (int64_t o0 = 0; o0 < ys[2]; o0++)
        for (int64_t o1 = 0; o1 < ys[3]; o1++)
          for (int64_t o2 = 0; o2 < ys[4]; o2++) {
            double acc = b ? b->to_double_vector()[oc] : 0.0;
            for (int64_t ic = 0; ic < cg; ic++)
              for (int64_t k0 = 0; k0 < ws[2]; k0++)
                for (int64_t k1 = 0; k1 < ws[3]; k1++)
                  for (int64_t k2 = 0; k2 < ws[4]; k2++) {
                    int64_t i0 = o0 * s[0] + k0 * d[0] - pb[0], i1 = o1 * s[1] + k1 * d[1] - pb[1],
                            i2 = o2 * s[2] + k2 * d[2] - pb[2];
                    if (i0 < 0 || i0 >= xs[2] || i1 < 0 || i1 >= xs[3] || i2 < 0 || i2 >= xs[4]) continue;
                    int64_t c = oc / mg * cg + ic;
                    acc += xv[(((n * xs[1] + c) * xs[2] + i0) * xs[3] + i1) * xs[4] + i2] *
                           wv[(((oc * cg + ic) * ws[2] + k0) * ws[3] + k1) * ws[4] + k2];
                  }
            yv[idx++] = acc;
          }
  Shape out{ys[0], ys[1]};
  out.insert(out.end(), ys.end() - nsp, ys.end());
  Tensor y = Tensor::from_vector<double>(yv, out);
  return as_dtype(y, x.dtype());
}

// Transposed convolution by its definition: every input element scatters the kernel.
Tensor naive_conv_transpose(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group,
                            std::vector<int64_t> s, std::vector<int64_t> d, std::vector<int64_t> pad_begin,
                            Shape out_spatial) {
  size_t nsp = x.rank() - 2;
  Shape xs = x.shape(), ws = w.shape(), os = out_spatial;
  while (xs.size() < 5) xs.insert(xs.begin() + 2, 1), ws.insert(ws.begin() + 2, 1);
  while (os.size() < 3) os.insert(os.begin(), 1);
  while (s.size() < 3) s.insert(s.begin(), 1), d.insert(d.begin(), 1), pad_begin.insert(pad_begin.begin(), 0);
  int64_t cg = xs[1] / group, mg = ws[1], m = mg * group;
  Shape ys{xs[0], m, os[0], os[1], os[2]};
  std::vector<double> yv(shape_numel(ys), 0.0);
  auto xv = x.to_double_vector(), wv = w.to_double_vector();
  int64_t plane = os[0] * os[1] * os[2];
  for (int64_t n = 0; n < xs[0]; n++) {
    for (int64_t oc = 0; oc < m; oc++)
      for (int64_t p = 0; p < plane; p++) yv[(n * m + oc) * plane + p] = b ? b->to_double_vector()[oc] : 0.0;
    for (int64_t ic = 0; ic < xs[1]; ic++)
      for (int64_t i0 = 0; i0 < xs[2]; i0++)
        for (int64_t i1 = 0; i1 < xs[3]; i1++)
          for (int64_t i2 = 0; i2 < xs[4]; i2++)
            for (int64_t om = 0; om < mg; om++)
              for (int64_t k0 = 0; k0 < ws[2]; k0++)
                for (int64_t k1 = 0; k1 < ws[3]; k1++)
                  for (int64_t k2 = 0; k2 < ws[4]; k2++) {
                    int64_t o0 = i0 * s[0] + k0 * d[0] - pad_begin[0],
                            o1 = i1 * s[1] + k1 * d[1] - pad_begin[1],
                            o2 = i2 * s[2] + k2 * d[2] - pad_begin[2];
                    if (o0 < 0 || o0 >= os[0] || o1 < 0 || o1 >= os[1] || o2 < 0 || o2 >= os[2]) continue;
                    int64_t oc = ic / cg * mg + om;
                    yv[(((n * m + oc) * os[0] + o0) * os[1] + o1) * os[2] + o2] +=
                        xv[(((n * xs[1] + ic) * xs[2] + i0) * xs[3] + i1) * xs[4] + i2] *
                        wv[(((ic * mg + om) * ws[2] + k0) * ws[3] + k1) * ws[4] + k2];
                  }
  }
  Shape out{xs[0], m};
  out.insert(out.end(), os.end() - nsp, os.end());
  return as_dtype(Tensor::from_vector<double>(yv, out), x.dtype());
}

// y[..., m, n] for operands already shaped [batch, m, k] and [batch, k, n].
Tensor naive_matmul(const Tensor& a, const Tensor& b, int64_t batch, int64_t m, int64_t k, int64_t n,
                    bool a_shared = false, bool b_shared = false) {
  auto av = a.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> y(batch * m * n, 0.0);
  for (int64_t t = 0; t < batch; t++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        for (int64_t p = 0; p < k; p++)
          y[(t * m + i) * n + j] +=
              av[((a_shared ? 0 : t) * m + i) * k + p] * bv[((b_shared ? 0 : t) * k + p) * n + j];
  return Tensor::from_vector<double>(y, {batch * m * n});
}

// ---------------------------------------------------------------------------------------
// MatMul and Gemm

TEST(Linalg, MatMul2D) {
  Tensor y = run_op("MatMul", {f32({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 0, 0, 1, 2, -1}, {3, 2})})[0];
  expect_close(y, f32({7, -1, 16, -1}, {2, 2}));
}

TEST(Linalg, MatMulOneDimensionalOperands) {
  Tensor m = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_close(run_op("MatMul", {f32({1, 1}, {2}), m})[0], f32({5, 7, 9}, {3}));
  expect_close(run_op("MatMul", {m, f32({1, 0, -1}, {3})})[0], f32({-2, -2}, {2}));
  expect_close(run_op("MatMul", {f32({1, 2}, {2}), f32({3, 4}, {2})})[0], f32({11}, {}));
  // A 1-D operand against a batch of matrices.
  Tensor b = random_uniform({3, 2, 4}, 1);
  Tensor y = run_op("MatMul", {f32({2, -1}, {2}), b})[0];
  ASSERT_EQ(y.shape(), (Shape{3, 4}));
  expect_close(y.reshaped({12}),
               as_dtype(naive_matmul(f32({2, -1}, {1, 2}), b, 3, 1, 2, 4, true), DType::f32));
}

TEST(Linalg, MatMulBatchBroadcast) {
  Tensor a = random_uniform({2, 1, 3, 5}, 2), b = random_uniform({4, 5, 6}, 3);
  Tensor y = run_op("MatMul", {a, b})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 4, 3, 6}));
  auto yv = y.to_double_vector(), av = a.to_double_vector();
  for (int64_t i = 0; i < 2; i++) {
    Tensor ai = Tensor::from_vector<double>(
        std::vector<double>(av.begin() + i * 15, av.begin() + (i + 1) * 15), {15});
    auto expected = naive_matmul(ai, b, 4, 3, 5, 6, true).to_double_vector();
    for (size_t j = 0; j < expected.size(); j++) EXPECT_NEAR(yv[i * 72 + j], expected[j], 1e-5);
  }
}

TEST(Linalg, MatMulSharedWeightAndDtypes) {
  // A batched input against one weight matrix (folded into a single GEMM), in f32 and f64.
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor a = random_uniform({3, 7, 5}, 4, -1, 1, dt), b = random_uniform({5, 9}, 5, -1, 1, dt);
    Tensor y = run_op("MatMul", {a, b})[0];
    ASSERT_EQ(y.dtype(), dt);
    expect_close(y.reshaped({189}), as_dtype(naive_matmul(a, b, 3, 7, 5, 9, false, true), dt));
  }
  Tensor ai = Tensor::from_vector<int64_t>({1, -2, 3, 4}, {2, 2});
  Tensor bi = Tensor::from_vector<int64_t>({5, 6, 7, 8}, {2, 2});
  expect_close(run_op("MatMul", {ai, bi})[0], Tensor::from_vector<int64_t>({-9, -10, 43, 50}, {2, 2}));
  Tensor au = Tensor::from_vector<uint32_t>({1, 2, 3, 4, 5, 6}, {2, 1, 3});
  Tensor bu = Tensor::from_vector<uint32_t>({1, 0, 2}, {3, 1});
  expect_close(run_op("MatMul", {au, bu})[0], Tensor::from_vector<uint32_t>({7, 16}, {2, 1, 1}));
}

TEST(Linalg, MatMulManySmallBatches) {
  // Enough batches that they are spread over the pool with single-threaded BLAS.
  Tensor a = random_uniform({12, 4, 3}, 6), b = random_uniform({12, 3, 5}, 7);
  expect_close(run_op("MatMul", {a, b})[0].reshaped({240}),
               as_dtype(naive_matmul(a, b, 12, 4, 3, 5), DType::f32));
}

TEST(Linalg, LargeProductsSplitOverThePoolMatchNaive) {
  // Over the size where a GEMM is split into column blocks (wide C) or row blocks (tall C)
  // over the pool's threads, with sizes that are not multiples of the block.
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{37, 70, 301}, {301, 70, 37}, {130, 65, 130}}) {
    Tensor a = random_uniform({m, k}, 11), b = random_uniform({k, n}, 12);
    expect_close(run_op("MatMul", {a, b})[0].reshaped({m * n}),
                 as_dtype(naive_matmul(a, b, 1, m, k, n), DType::f32));
    // Gemm with both operands transposed and a bias row.
    Tensor at = run_op("Transpose", {a})[0], bt = run_op("Transpose", {b})[0], c = random_uniform({n}, 13);
    std::map<std::string, Attribute> attrs{
        {"transA", attr_i(1)}, {"transB", attr_i(1)}, {"beta", attr_f(2.0f)}};
    Tensor y = run_op("Gemm", {at, bt, c}, attrs)[0];
    auto ref = naive_matmul(a, b, 1, m, k, n).to_double_vector();
    auto cv = c.to_double_vector();
    for (int64_t i = 0; i < m * n; i++) ref[size_t(i)] += 2.0 * cv[size_t(i % n)];
    expect_close(y.reshaped({m * n}), as_dtype(Tensor::from_vector<double>(ref, {m * n}), DType::f32));
  }
}

TEST(Linalg, MatMulErrors) {
  EXPECT_THROW(run_op("MatMul", {random_uniform({2, 3}, 1), random_uniform({4, 2}, 1)}), Error);
  EXPECT_THROW(run_op("MatMul", {random_uniform({2, 2, 3}, 1), random_uniform({3, 3, 2}, 1)}), Error);
  EXPECT_THROW(run_op("MatMul", {f32({1}, {}), random_uniform({1, 2}, 1)}), Error);
  EXPECT_THROW(run_op("MatMul", {random_uniform({2, 2}, 1), random_uniform({2, 2}, 1, -1, 1, DType::f64)}),
               Error);
}

TEST(Linalg, GemmAttributesAndBiasShapes) {
  Tensor a = random_uniform({4, 3}, 8), b = random_uniform({5, 4}, 9);
  // transA, transB, alpha, beta with each broadcastable C shape.
  Tensor at = Tensor::from_vector<double>(
      [&] {
        std::vector<double> v(12), av = a.to_double_vector();
        for (int i = 0; i < 3; i++)
          for (int p = 0; p < 4; p++) v[i * 4 + p] = av[p * 3 + i];
        return v;
      }(),
      {12});
  Tensor bt = Tensor::from_vector<double>(
      [&] {
        std::vector<double> v(20), bv = b.to_double_vector();
        for (int p = 0; p < 4; p++)
          for (int j = 0; j < 5; j++) v[p * 5 + j] = bv[j * 4 + p];
        return v;
      }(),
      {20});
  auto ab = naive_matmul(at, bt, 1, 3, 4, 5).to_double_vector();
  std::map<std::string, Attribute> attrs{
      {"transA", attr_i(1)}, {"transB", attr_i(1)}, {"alpha", attr_f(0.25f)}, {"beta", attr_f(0.5f)}};
  for (Shape cs : {Shape{}, Shape{5}, Shape{1, 5}, Shape{3, 1}, Shape{3, 5}}) {
    Tensor c = random_uniform(cs, 10);
    auto cv = c.to_double_vector();
    std::vector<int64_t> st = broadcast_strides(cs, {3, 5});
    std::vector<float> expected(15);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 5; j++)
        expected[i * 5 + j] = float(0.25 * ab[i * 5 + j] + 0.5 * cv[i * st[0] + j * st[1]]);
    expect_close(run_op("Gemm", {a, b, c}, attrs)[0], f32(expected, {3, 5}));
  }
  // No C.
  Tensor y = run_op("Gemm", {random_uniform({2, 3}, 11), random_uniform({3, 2}, 12)})[0];
  expect_close(
      y.reshaped({4}),
      as_dtype(naive_matmul(random_uniform({2, 3}, 11), random_uniform({3, 2}, 12), 1, 2, 3, 2), DType::f32));
  // Integers.
  Tensor ai = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  Tensor ci = Tensor::from_vector<int32_t>({10, 20}, {2});
  expect_close(run_op("Gemm", {ai, ai, ci}, {{"transB", attr_i(1)}, {"alpha", attr_f(2)}})[0],
               Tensor::from_vector<int32_t>({20, 42, 32, 70}, {2, 2}));
}

TEST(Linalg, GemmErrors) {
  EXPECT_THROW(run_op("Gemm", {random_uniform({2, 3}, 1), random_uniform({2, 3}, 1)}), Error);
  EXPECT_THROW(run_op("Gemm", {random_uniform({2, 3, 1}, 1), random_uniform({3, 2}, 1)}), Error);
  EXPECT_THROW(run_op("Gemm", {random_uniform({2, 3}, 1), random_uniform({3, 4}, 1), random_uniform({3}, 1)}),
               Error);
  EXPECT_THROW(
      run_op("Gemm", {random_uniform({2, 3}, 1), random_uniform({3, 4}, 1), random_uniform({1, 2, 4}, 1)}),
      Error);
  EXPECT_THROW(run_op("Gemm", {random_uniform({2, 3}, 1), random_uniform({3, 4}, 1)}, {}, 1, 9), Error);
}

// ---------------------------------------------------------------------------------------
// Conv

struct ConvCase {
  Shape x, w;
  int64_t group;
  std::vector<int64_t> strides, dilations, pads;
  bool bias;
};

void check_conv(const ConvCase& c, DType dt = DType::f32) {
  size_t nsp = c.x.size() - 2;
  Tensor x = random_uniform(c.x, 21, -1, 1, dt), w = random_uniform(c.w, 22, -1, 1, dt),
         b = random_uniform({c.w[0]}, 23, -1, 1, dt);
  std::vector<int64_t> s = c.strides.empty() ? std::vector<int64_t>(nsp, 1) : c.strides;
  std::vector<int64_t> d = c.dilations.empty() ? std::vector<int64_t>(nsp, 1) : c.dilations;
  std::vector<int64_t> p = c.pads.empty() ? std::vector<int64_t>(2 * nsp, 0) : c.pads;
  std::map<std::string, Attribute> attrs{{"group", attr_i(c.group)},
                                         {"strides", attr_ints(s)},
                                         {"dilations", attr_ints(d)},
                                         {"pads", attr_ints(p)}};
  std::vector<Tensor> in{x, w};
  if (c.bias) in.push_back(b);
  Tensor y = run_op("Conv", in, attrs)[0];
  SCOPED_TRACE(cat("x ", shape_str(c.x), " w ", shape_str(c.w), " group ", c.group));
  expect_close(y, naive_conv(x, w, c.bias ? &b : nullptr, c.group, s, d, p), 1e-4, 1e-4);
}

TEST(Linalg, ConvMatchesNaive) {
  std::vector<ConvCase> cases = {
      {{1, 3, 7, 9}, {4, 3, 3, 3}, 1, {}, {}, {1, 1, 1, 1}, true},
      {{2, 4, 11, 10}, {6, 2, 3, 2}, 2, {2, 3}, {2, 1}, {1, 0, 2, 1}, true},
      {{1, 2, 2, 3}, {2, 2, 4, 4}, 1, {}, {}, {2, 2, 1, 1}, false},  // kernel larger than the input
      {{1, 6, 9, 9}, {8, 6, 3, 3}, 1, {2, 2}, {}, {1, 1, 1, 1}, false},
      {{1, 8, 6, 6}, {8, 2, 3, 3}, 4, {}, {}, {1, 1, 1, 1}, true},  // grouped, spread over the pool
      {{3, 4, 5, 4}, {5, 4, 3, 1}, 1, {1, 2}, {}, {0, 1, 2, 0}, true},
      // 1x1: the plain GEMM path (also grouped and batched), and strided 1x1 through im2col.
      {{2, 6, 5, 7}, {4, 6, 1, 1}, 1, {}, {}, {}, true},
      {{2, 6, 5, 7}, {4, 3, 1, 1}, 2, {}, {}, {}, false},
      {{1, 6, 5, 7}, {4, 6, 1, 1}, 1, {2, 2}, {}, {}, true},
      {{1, 6, 5, 7}, {4, 6, 1, 1}, 1, {}, {}, {1, 0, 0, 1}, false},
      // Depthwise and channel multipliers: the direct kernel.
      {{1, 5, 9, 8}, {5, 1, 3, 3}, 5, {2, 2}, {}, {1, 1, 1, 1}, true},
      {{1, 4, 13, 12}, {4, 1, 7, 7}, 4, {}, {}, {3, 3, 3, 3}, true},
      {{2, 3, 6, 7}, {6, 1, 3, 2}, 3, {1, 3}, {1, 2}, {0, 1, 1, 2}, true},
      {{1, 1, 5, 5}, {3, 1, 3, 3}, 1, {}, {2, 2}, {2, 1, 2, 1}, false},
      {{1, 3, 10, 19}, {3, 1, 3, 3}, 3, {}, {}, {1, 1, 1, 1}, true},  // rows longer than a vector step
      // 1-D and 3-D.
      {{2, 3, 17}, {5, 3, 4}, 1, {3}, {2}, {2, 1}, true},
      {{1, 4, 9}, {4, 1, 5}, 4, {2}, {}, {2, 2}, false},
      {{1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, 1, {1, 2, 1}, {2, 1, 1}, {1, 0, 1, 0, 1, 1}, true},
      {{1, 3, 4, 5, 6}, {3, 1, 3, 3, 3}, 3, {}, {}, {1, 1, 1, 1, 1, 1}, true},
  };
  for (auto& c : cases) check_conv(c);
  check_conv(cases[1], DType::f64);
  check_conv(cases[12], DType::f64);
}

TEST(Linalg, ConvOfOneLargeImageMatchesNaive) {
  // One image: no batch to spread, so the GEMM itself is split over the pool.
  check_conv({{1, 8, 40, 50}, {24, 8, 3, 3}, 1, {}, {}, {1, 1, 1, 1}, true});
}

TEST(Linalg, ConvAutoPad) {
  Tensor x = random_uniform({1, 2, 8, 9}, 31), w = random_uniform({3, 2, 3, 4}, 32);
  std::map<std::string, Attribute> attrs{{"strides", attr_ints({2, 2})}, {"kernel_shape", attr_ints({3, 4})}};
  // Total padding is 1 on H and 3 on W; the odd one goes to the end (UPPER) or the start (LOWER).
  attrs["auto_pad"] = attr_s("SAME_UPPER");
  expect_close(run_op("Conv", {x, w}, attrs)[0], naive_conv(x, w, nullptr, 1, {2, 2}, {1, 1}, {0, 1, 1, 2}));
  attrs["auto_pad"] = attr_s("SAME_LOWER");
  expect_close(run_op("Conv", {x, w}, attrs)[0], naive_conv(x, w, nullptr, 1, {2, 2}, {1, 1}, {1, 2, 0, 1}));
  attrs["auto_pad"] = attr_s("VALID");
  attrs["pads"] = attr_ints({5, 5, 5, 5});  // ignored with auto_pad
  expect_close(run_op("Conv", {x, w}, attrs)[0], naive_conv(x, w, nullptr, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}));
  // Depthwise with SAME: the stride-1 output keeps the input size.
  Tensor xd = random_uniform({1, 3, 6, 5}, 33), wd = random_uniform({3, 1, 4, 4}, 34);
  Tensor y = run_op("Conv", {xd, wd}, {{"group", attr_i(3)}, {"auto_pad", attr_s("SAME_UPPER")}})[0];
  expect_close(y, naive_conv(xd, wd, nullptr, 3, {1, 1}, {1, 1}, {1, 1, 2, 2}));
}

TEST(Linalg, ConvConformanceValues) {
  // onnx test_conv_with_strides_and_asymmetric_padding: x = 0..34, w = ones.
  std::vector<float> xv(35);
  for (int i = 0; i < 35; i++) xv[i] = float(i);
  Tensor y = run_op("Conv", {f32(xv, {1, 1, 7, 5}), f32(std::vector<float>(9, 1.0f), {1, 1, 3, 3})},
                    {{"kernel_shape", attr_ints({3, 3})},
                     {"pads", attr_ints({1, 0, 1, 0})},
                     {"strides", attr_ints({2, 2})}})[0];
  expect_close(y, f32({21, 33, 99, 117, 189, 207, 171, 183}, {1, 1, 4, 2}));
}

TEST(Linalg, ConvErrors) {
  Tensor x = random_uniform({1, 4, 5, 5}, 1);
  EXPECT_THROW(run_op("Conv", {x, random_uniform({2, 3, 3, 3}, 1)}), Error);  // C mismatch
  EXPECT_THROW(run_op("Conv", {x, random_uniform({3, 2, 3, 3}, 1)}, {{"group", attr_i(2)}}),
               Error);                                                     // M % group
  EXPECT_THROW(run_op("Conv", {x, random_uniform({2, 4, 3}, 1)}), Error);  // rank
  EXPECT_THROW(run_op("Conv", {x, random_uniform({2, 4, 3, 3}, 1), random_uniform({3}, 1)}), Error);  // bias
  EXPECT_THROW(run_op("Conv", {x, random_uniform({2, 4, 3, 3}, 1)}, {{"kernel_shape", attr_ints({2, 2})}}),
               Error);
  EXPECT_THROW(run_op("Conv", {x, random_uniform({2, 4, 3, 3}, 1)}, {{"strides", attr_ints({0, 1})}}), Error);
  EXPECT_THROW(run_op("Conv", {x, random_uniform({2, 4, 3, 3}, 1)}, {{"pads", attr_ints({1, 1})}}), Error);
  EXPECT_THROW(run_op("Conv", {x, random_uniform({2, 4, 3, 3}, 1)}, {{"auto_pad", attr_s("SAME")}}), Error);
  EXPECT_THROW(run_op("Conv", {x, random_uniform({2, 4, 7, 7}, 1)}), Error);  // kernel larger than the input
  EXPECT_THROW(run_op("Conv", {Tensor::from_vector<int32_t>({1, 2, 3}, {1, 1, 3}),
                               Tensor::from_vector<int32_t>({1}, {1, 1, 1})}),
               Error);
}

// ---------------------------------------------------------------------------------------
// ConvTranspose

struct ConvTransposeCase {
  Shape x, w;
  int64_t group;
  std::vector<int64_t> strides, dilations, pads, output_padding;
  bool bias;
};

TEST(Linalg, ConvTransposeMatchesNaive) {
  std::vector<ConvTransposeCase> cases = {
      {{1, 2, 3, 4}, {2, 3, 3, 3}, 1, {2, 2}, {}, {1, 0, 0, 1}, {1, 0}, true},
      {{2, 4, 3, 3}, {4, 1, 2, 3}, 2, {1, 2}, {2, 1}, {}, {}, false},
      {{1, 3, 4, 4}, {3, 1, 3, 3}, 3, {2, 2}, {}, {1, 1, 1, 1}, {1, 1}, true},
      {{1, 3, 5}, {3, 2, 4}, 1, {3}, {}, {1, 2}, {}, true},
      {{1, 2, 2, 3, 2}, {2, 2, 2, 2, 3}, 1, {2, 1, 2}, {1, 1, 2}, {}, {}, false},
      {{3, 2, 3, 3}, {2, 2, 2, 2}, 1, {}, {}, {}, {}, true},  // batch 3: spread over the pool
      {{1, 2, 4, 19}, {2, 3, 3, 3}, 1, {}, {}, {0, 1, 1, 0}, {}, false},
  };
  for (auto& c : cases) {
    size_t nsp = c.x.size() - 2;
    Tensor x = random_uniform(c.x, 41), w = random_uniform(c.w, 42),
           b = random_uniform({c.w[1] * c.group}, 43);
    std::vector<int64_t> s = c.strides.empty() ? std::vector<int64_t>(nsp, 1) : c.strides;
    std::vector<int64_t> d = c.dilations.empty() ? std::vector<int64_t>(nsp, 1) : c.dilations;
    std::vector<int64_t> p = c.pads.empty() ? std::vector<int64_t>(2 * nsp, 0) : c.pads;
    std::vector<int64_t> op = c.output_padding.empty() ? std::vector<int64_t>(nsp, 0) : c.output_padding;
    Shape out;
    for (size_t i = 0; i < nsp; i++)
      out.push_back(s[i] * (c.x[i + 2] - 1) + op[i] + (c.w[i + 2] - 1) * d[i] + 1 - p[i] - p[i + nsp]);
    std::map<std::string, Attribute> attrs{{"group", attr_i(c.group)},
                                           {"strides", attr_ints(s)},
                                           {"dilations", attr_ints(d)},
                                           {"pads", attr_ints(p)},
                                           {"output_padding", attr_ints(op)}};
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(b);
    SCOPED_TRACE(cat("x ", shape_str(c.x), " w ", shape_str(c.w)));
    expect_close(run_op("ConvTranspose", in, attrs)[0],
                 naive_conv_transpose(x, w, c.bias ? &b : nullptr, c.group, s, d,
                                      std::vector<int64_t>(p.begin(), p.begin() + nsp), out),
                 1e-4, 1e-4);
  }
}

TEST(Linalg, ConvTransposeOutputShapeAndAutoPad) {
  Tensor x = random_uniform({1, 1, 3, 3}, 51), w = random_uniform({1, 2, 3, 3}, 52);
  // The full output is 9x7; these pad starts match onnxruntime.
  auto check = [&](std::map<std::string, Attribute> attrs, Shape out, std::vector<int64_t> pad_begin) {
    attrs["strides"] = attr_ints({3, 2});
    expect_close(run_op("ConvTranspose", {x, w}, attrs)[0],
                 naive_conv_transpose(x, w, nullptr, 1, {3, 2}, {1, 1}, pad_begin, out));
  };
  check({{"output_shape", attr_ints({10, 8})}}, {10, 8}, {0, 0});
  check({{"output_shape", attr_ints({8, 6})}}, {8, 6}, {1, 1});
  check({{"output_shape", attr_ints({8, 6})}, {"auto_pad", attr_s("SAME_UPPER")}}, {8, 6}, {0, 0});
  check({{"output_shape", attr_ints({8, 6})}, {"auto_pad", attr_s("SAME_LOWER")}}, {8, 6}, {1, 1});
  check({{"auto_pad", attr_s("SAME_UPPER")}}, {9, 6}, {0, 0});
  check({{"auto_pad", attr_s("SAME_LOWER")}}, {9, 6}, {0, 1});
  check({{"auto_pad", attr_s("VALID")}, {"pads", attr_ints({1, 1, 1, 1})}}, {9, 7}, {0, 0});
  check({{"output_padding", attr_ints({1, 1})}, {"kernel_shape", attr_ints({3, 3})}}, {10, 8}, {0, 0});
}

TEST(Linalg, ConvTransposeErrors) {
  Tensor x = random_uniform({1, 2, 3, 3}, 1);
  EXPECT_THROW(run_op("ConvTranspose", {x, random_uniform({3, 2, 3, 3}, 1)}), Error);  // W[0] != C
  EXPECT_THROW(run_op("ConvTranspose", {x, random_uniform({2, 2, 3, 3}, 1)}, {{"group", attr_i(3)}}), Error);
  EXPECT_THROW(run_op("ConvTranspose", {x, random_uniform({2, 2, 3, 3}, 1), random_uniform({3}, 1)}),
               Error);  // bias
  EXPECT_THROW(
      run_op("ConvTranspose", {x, random_uniform({2, 2, 3, 3}, 1)}, {{"output_padding", attr_ints({1, 1})}}),
      Error);  // not below stride or dilation
  EXPECT_THROW(
      run_op("ConvTranspose", {x, random_uniform({2, 2, 3, 3}, 1)}, {{"output_shape", attr_ints({5})}}),
      Error);
  EXPECT_THROW(
      run_op("ConvTranspose", {x, random_uniform({2, 2, 3, 3}, 1)}, {{"output_shape", attr_ints({9, 9})}}),
      Error);  // larger than the input can cover
  EXPECT_THROW(
      run_op("ConvTranspose", {x, random_uniform({2, 2, 3, 3}, 1)}, {{"pads", attr_ints({3, 3, 3, 3})}}),
      Error);  // nothing left
}

// ---------------------------------------------------------------------------------------
// Einsum

struct EinsumCase {
  std::string eq;
  std::vector<Shape> inputs;
  Shape out;
  std::vector<float> expected;
};

TEST(Linalg, EinsumMatchesNumpy) {
  // Inputs are seq(shape, input index); expected values from numpy.einsum.
  std::vector<EinsumCase> cases = {
      {"bhqd,bhkd->bhqk",
       {{1, 2, 3, 4}, {1, 2, 2, 4}},
       {1, 2, 3, 2},
       {-3.25, 3.75, -6.25, 3.0, 7.0, -7.5, -7.5, 3.0, 7.0, -6.25, 2.0, -2.5}},
      {"bhqk,bhkd->bhqd",
       {{1, 2, 3, 2}, {1, 2, 2, 4}},
       {1, 2, 3, 4},
       {-11.25, -10.75, 6.0, 6.5, 3.0,  1.0, 2.25, 0.25, 1.0, 3.0,  -4.75, -2.75,
        -11.5,  7.5,    7.0, 6.5, -1.0, 2.5, -0.5, -3.5, 3.0, -2.5, -1.5,  -0.5}},
      {"bij,bjk->kib", {{2, 2, 3}, {2, 3, 2}}, {2, 2, 2}, {-8.5, -6.5, 3.25, 4.0, -9.5, -9.0, 4.75, 4.0}},
      {"...ij,...jk->...ik",
       {{2, 1, 2, 3}, {3, 3, 2}},
       {2, 3, 2, 2},
       {-8.5,  -9.5,   3.25, 4.75, -8.0, -9.0, 2.5, 4.0, 12.0, -8.5,  -1.5, 3.25,
        -7.75, -10.25, 4.0,  4.0,  -6.5, -9.0, 4.0, 4.0, 11.0, -7.75, -2.5, 4.0}},
      {"ij,ij->ij", {{1, 3}, {2, 3}}, {2, 3}, {-7.5, 3.75, 0.75, 1.5, -3.75, -3.75}},
      {"ii->i", {{3, 3}}, {3}, {-3.0, -0.5, 2.0}},
      {"...ii->...i", {{2, 3, 3}}, {2, 3}, {-3.0, -0.5, 2.0, 1.0, -3.0, -0.5}},
      {"ij,jk,kl->il", {{2, 3}, {3, 2}, {2, 2}}, {2, 2}, {-8.0, 10.0, 2.5, -5.5}},
      {"ij->", {{2, 3}}, {}, {-0.5}},
      {"ji", {{2, 3}}, {3, 2}, {-3.0, 0.5, 2.5, -0.5, 1.5, -1.5}},
      {"i,j", {{2}, {3}}, {2, 3}, {-7.5, -4.5, -1.5, 6.25, 3.75, 1.25}},
      {"ij,jk", {{2, 3}, {3, 2}}, {2, 2}, {-8.5, -9.5, 3.25, 4.75}},
      {"i,i", {{4}, {4}}, {}, {-3.25}},
      {"ij,k->ik", {{2, 3}, {2}}, {2, 2}, {2.5, 1.5, -3.75, -2.25}},
      {"Ab,bA->A", {{2, 3}, {3, 2}}, {2}, {-8.5, 4.75}},
      {" bij , bjk -> bik ",
       {{2, 2, 3}, {2, 3, 2}},
       {2, 2, 2},
       {-8.5, -9.5, 3.25, 4.75, -6.5, -9.0, 4.0, 4.0}},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.eq);
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.inputs.size(); i++) in.push_back(seq(c.inputs[i], int(i)));
    expect_close(run_op("Einsum", in, {{"equation", attr_s(c.eq)}})[0], f32(c.expected, c.out));
    // float64 takes the same paths.
    std::vector<Tensor> in64;
    for (auto& t : in) in64.push_back(as_dtype(t, DType::f64));
    expect_close(run_op("Einsum", in64, {{"equation", attr_s(c.eq)}})[0],
                 as_dtype(f32(c.expected, c.out), DType::f64));
  }
}

TEST(Linalg, EinsumAttentionAndIntegers) {
  // Larger attention-shaped contraction against MatMul of the transposed keys.
  Tensor q = random_uniform({2, 3, 5, 4}, 61), k = random_uniform({2, 3, 6, 4}, 62);
  Tensor y = run_op("Einsum", {q, k}, {{"equation", attr_s("bhqd,bhkd->bhqk")}})[0];
  Tensor kt(DType::f32, {2, 3, 4, 6});
  for (int64_t b = 0; b < 6; b++)
    for (int64_t i = 0; i < 6; i++)
      for (int64_t d = 0; d < 4; d++)
        kt.data<float>()[(b * 4 + d) * 6 + i] = k.data<float>()[(b * 6 + i) * 4 + d];
  expect_close(y, run_op("MatMul", {q, kt})[0]);
  Tensor a = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_close(run_op("Einsum", {a, a}, {{"equation", attr_s("ij,kj->ik")}})[0],
               Tensor::from_vector<int64_t>({14, 32, 32, 77}, {2, 2}));
  expect_close(run_op("Einsum", {a}, {{"equation", attr_s("ij->j")}})[0],
               Tensor::from_vector<int64_t>({5, 7, 9}, {3}));
}

TEST(Linalg, EinsumErrors) {
  auto bad = [](std::string eq, std::vector<Tensor> in) {
    EXPECT_THROW(run_op("Einsum", in, {{"equation", attr_s(eq)}}), Error) << eq;
  };
  Tensor m = random_uniform({2, 3}, 1);
  bad("ij,jk->ik", {m});                       // terms vs inputs
  bad("ij->ik", {m});                          // output label not in the inputs
  bad("ij->ii", {m});                          // repeated output label
  bad("ijk->i", {m});                          // term rank
  bad("i1->i", {m});                           // invalid character
  bad("ij,jk", {m, random_uniform({4, 2}, 2)});       // j is 3 and 4
  bad("...ij->ij", {random_uniform({2, 2, 3}, 3)});   // ellipsis dims dropped
  bad("...i...->i", {random_uniform({2, 2, 3}, 3)});  // two ellipses
  EXPECT_THROW(run_op("Einsum", {m}), Error);  // no equation
}

// ---------------------------------------------------------------------------------------
// MatMulInteger

TEST(Linalg, MatMulIntegerZeroPoints) {
  // Expected values from numpy on seq_q inputs.
  Tensor a = seq_q<uint8_t>({3, 4}, 0), b = seq_q<uint8_t>({4, 2}, 1);
  Tensor y = run_op("MatMulInteger", {a, b, Tensor::from_vector<uint8_t>({3, 200, 17}, {3}),
                                      Tensor::from_vector<uint8_t>({250, 9}, {2})})[0];
  expect_close(y, Tensor::from_vector<int32_t>({-13190, 18082, 16165, -1529, -29062, 28901}, {3, 2}));
  // int8, batched A with per-row zero points [2,3,1] and a scalar zero point for B.
  Tensor a8 = seq_q<int8_t>({2, 3, 4}, 2), b8 = seq_q<int8_t>({4, 2}, 3);
  Tensor azp = Tensor::from_vector<int8_t>({-81, -44, -7, 30, 67, 104}, {2, 3, 1});
  expect_close(run_op("MatMulInteger", {a8, b8, azp, Tensor::from_vector<int8_t>({-3}, {})})[0],
               Tensor::from_vector<int32_t>(
                   {-5701, -743, 5824, 17923, -974, -308, -493, -11260, 3753, 127, 26573, 2227}, {2, 3, 2}));
  // uint8 A without zero point, int8 batched B with per-column zero points [2,1,2].
  Tensor bzp = Tensor::from_vector<int8_t>({-48, -11, 26, 63}, {2, 1, 2});
  expect_close(
      run_op("MatMulInteger", {seq_q<uint8_t>({2, 3}, 5), seq_q<int8_t>({2, 3, 2}, 6), Tensor(), bzp})[0],
      Tensor::from_vector<int32_t>({22864, -9515, 43843, -16397, -5564, -5564, -18884, -18884}, {2, 2, 2}));
  // onnx test_matmulinteger.
  Tensor ca = Tensor::from_vector<uint8_t>({11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0}, {4, 3});
  Tensor cb = Tensor::from_vector<uint8_t>({1, 4, 2, 5, 3, 6}, {3, 2});
  expect_close(run_op("MatMulInteger", {ca, cb, Tensor::from_vector<uint8_t>({12}, {1}),
                                        Tensor::from_vector<uint8_t>({0}, {1})})[0],
               Tensor::from_vector<int32_t>({-38, -83, -44, -98, -50, -113, -56, -128}, {4, 2}));
}

TEST(Linalg, MatMulIntegerErrors) {
  Tensor a = seq_q<uint8_t>({3, 4}, 0), b = seq_q<uint8_t>({4, 2}, 1);
  EXPECT_THROW(run_op("MatMulInteger", {random_uniform({3, 4}, 1), b}), Error);  // float A
  EXPECT_THROW(run_op("MatMulInteger", {a, b, Tensor::from_vector<uint8_t>({1, 2}, {2})}),
               Error);                                                                         // [M] is 3
  EXPECT_THROW(run_op("MatMulInteger", {a, b, Tensor::from_vector<int8_t>({1}, {})}), Error);  // zp dtype
  EXPECT_THROW(run_op("MatMulInteger", {a, seq_q<uint8_t>({3, 2}, 1)}), Error);
}

}  // namespace
}  // namespace vlrt::test

namespace vlrt::test {
namespace {

TEST(Det, BatchedSquareMatricesWithPivotingAndSingular) {
  Tensor x = f32({0, 2, 1, 3,             // needs a row swap: -2
                  1, 2, 2, 4,             // singular: 0
                  2, 0, 0, 0.5f},         // 1
                 {3, 2, 2});
  expect_close(run_op("Det", {x})[0], f32({-2, 0, 1}, {3}));
  Tensor m3 = Tensor::from_vector<double>({2, -3, 1, 2, 0, -1, 1, 4, 5}, {3, 3});
  expect_close(run_op("Det", {m3})[0], Tensor::from_vector<double>({49}, {}), 1e-12);
  EXPECT_THROW(run_op("Det", {f32({1, 2, 3, 4, 5, 6}, {2, 3})}), Error);
  EXPECT_THROW(run_op("Det", {i64({1, 2, 3, 4}, {2, 2})}), Error);
}

}  // namespace
}  // namespace vlrt::test
