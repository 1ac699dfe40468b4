// The exact AVX2 integer products (backends/cpu/integer_gemm.h) against the plain reference loops:
// every integer op that reaches them, at every instruction set level this machine has above plain,
// bit for bit, on awkward shapes (odd k, rows and columns off the 6 x 16 tile, k across cache
// blocks, batches, per-row and per-column zero points, extreme values, groups, padding, stride,
// dilation, 1x1 and 3-D convolutions). The weights are constants there, so above plain the
// nodes run on the packed-weight kernels (backends/cpu/packed_integer.h); the vector loops that
// quantize, dequantize, requantize and add 8-bit values are checked the same way.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "backends/cpu/integer_gemm.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/ops/quantization.h"
#include "backends/cpu/packed_integer.h"
#include "core/reference_mode.h"
#include "op_test_util.h"

namespace vlrt {
namespace {

using test::attr_i;
using test::attr_ints;

Tensor random_8bit(Shape shape, uint32_t seed, DType dt) {
  std::mt19937 rng(seed);
  Tensor t(dt, shape);
  for (int64_t i = 0; i < t.numel(); i++) {
    int v = int(rng() % 256);
    if (dt == DType::u8) t.data<uint8_t>()[i] = uint8_t(v);
    else t.data<int8_t>()[i] = int8_t(v - 128);
  }
  return t;
}

Tensor scalar_of(DType dt, int v) {
  return dt == DType::u8 ? Tensor::scalar<uint8_t>(uint8_t(v)) : Tensor::scalar<int8_t>(int8_t(v));
}

std::vector<Tensor> run_at(CpuIsa isa, const std::string& op, const std::vector<Tensor>& inputs,
                           std::map<std::string, Attribute> attrs = {}, const std::string& domain = "") {
  Node node = test::make_node(op, inputs.size(), 1, std::move(attrs));
  node.domain = domain;
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(t.defined() ? &t : nullptr);
  CpuIsa before = set_cpu_isa(isa);
  std::vector<Tensor> out = run_node_cpu(node, 18, ptrs, test::test_pool());
  set_cpu_isa(before);
  return out;
}

// Each level above plain gives the plain loops' bytes.
void expect_levels_equal(const std::string& what, const std::string& op, const std::vector<Tensor>& inputs,
                         std::map<std::string, Attribute> attrs = {}, const std::string& domain = "") {
  Tensor want = run_at(CpuIsa::plain, op, inputs, attrs, domain)[0];
  for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512}) {
    if (isa > detected_cpu_isa()) continue;
    Tensor got = run_at(isa, op, inputs, attrs, domain)[0];
    ASSERT_EQ(got.shape(), want.shape()) << what;
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0) << what << " at " << cpu_isa_name(isa);
  }
}

TEST(CpuIntegerGemm, AvailableAtAvx2) {
  if (detected_cpu_isa() < CpuIsa::avx2) GTEST_SKIP() << "no AVX2 here";
  EXPECT_EQ(integer_gemm_available(), cpu_isa() >= CpuIsa::avx2 && !reference_kernels_requested());
  CpuIsa before = set_cpu_isa(CpuIsa::plain);
  EXPECT_FALSE(integer_gemm_available());
  set_cpu_isa(before);
}

TEST(CpuIntegerGemm, MatMulIntegerMatchesPlain) {
  struct Shapes {
    Shape a, b;
  };
  const std::vector<Shapes> shapes = {{{1, 1}, {1, 1}},         {{5, 19}, {19, 21}},       {{7, 1}, {1, 33}},
                                      {{13, 600}, {600, 17}},    {{2, 3, 9, 31}, {31, 16}}, {{2, 6, 8}, {2, 8, 5}},
                                      {{19}, {19, 7}},           {{4, 19}, {19}},           {{48, 64}, {64, 70}}};
  uint32_t seed = 1;
  for (const Shapes& s : shapes)
    for (DType ta : {DType::u8, DType::i8})
      for (DType tb : {DType::u8, DType::i8}) {
        Tensor a = random_8bit(s.a, seed++, ta), b = random_8bit(s.b, seed++, tb);
        std::string what = shape_str(s.a) + " x " + shape_str(s.b) + " " + dtype_name(ta) + " x " + dtype_name(tb);
        expect_levels_equal(what, "MatMulInteger", {a, b});
        int n = int(s.b.size() == 1 ? 1 : s.b.back());
        Tensor column_zps = random_8bit({n}, seed++, tb);
        expect_levels_equal(what + " zero points", "MatMulInteger",
                            {a, b, scalar_of(ta, ta == DType::u8 ? 255 : -128), s.b.size() == 1 ? scalar_of(tb, 3) : column_zps});
      }
  // Per-row A zero points.
  Tensor a = random_8bit({9, 23}, 90, DType::u8), b = random_8bit({23, 18}, 91, DType::i8);
  expect_levels_equal("per-row zero points", "MatMulInteger", {a, b, random_8bit({9}, 92, DType::u8), Tensor()});
}

// Extreme values: every product at its largest magnitude, summed over k.
TEST(CpuIntegerGemm, ExtremeValuesStayExact) {
  Tensor a(DType::u8, {7, 1001}), b(DType::u8, {1001, 17});
  std::memset(a.raw(), 255, a.nbytes());
  std::memset(b.raw(), 0, b.nbytes());
  expect_levels_equal("255 - 0 against 0 - 255", "MatMulInteger", {a, b, scalar_of(DType::u8, 0), scalar_of(DType::u8, 255)});
  Tensor zeros_a = Tensor::zeros(DType::u8, {7, 1001});
  expect_levels_equal("0 - 255 against 0 - 255", "MatMulInteger",
                      {zeros_a, b, scalar_of(DType::u8, 255), scalar_of(DType::u8, 255)});
}

TEST(CpuIntegerGemm, ConvIntegerMatchesPlain) {
  struct Conv {
    Shape x, w;
    std::map<std::string, Attribute> attrs;
  };
  const std::vector<Conv> convs = {
      {{1, 3, 9, 11}, {5, 3, 3, 3}, {{"pads", attr_ints({1, 1, 1, 1})}}},
      {{2, 4, 10, 7}, {6, 2, 3, 2}, {{"group", attr_i(2)}, {"strides", attr_ints({2, 1})}}},
      {{1, 8, 13, 13}, {8, 1, 3, 3}, {{"group", attr_i(8)}, {"pads", attr_ints({1, 1, 1, 1})}}},
      {{1, 5, 9, 9}, {7, 5, 3, 3}, {{"dilations", attr_ints({2, 2})}, {"pads", attr_ints({2, 0, 1, 2})}}},
      {{2, 17, 6, 5}, {19, 17, 1, 1}, {}},
      {{1, 3, 8, 8}, {4, 3, 1, 1}, {{"strides", attr_ints({2, 2})}}},
      {{1, 2, 5, 6, 7}, {3, 2, 2, 3, 3}, {{"pads", attr_ints({1, 0, 1, 0, 1, 1})}}},
      {{1, 4, 20}, {6, 4, 5}, {{"strides", attr_ints({3})}}},
  };
  uint32_t seed = 100;
  for (const Conv& c : convs)
    for (DType tx : {DType::u8, DType::i8})
      for (DType tw : {DType::u8, DType::i8}) {
        Tensor x = random_8bit(c.x, seed++, tx), w = random_8bit(c.w, seed++, tw);
        std::string what = shape_str(c.x) + " * " + shape_str(c.w) + " " + dtype_name(tx) + " * " + dtype_name(tw);
        expect_levels_equal(what, "ConvInteger", {x, w}, c.attrs);
        expect_levels_equal(what + " zero points", "ConvInteger",
                            {x, w, scalar_of(tx, tx == DType::u8 ? 131 : -7), random_8bit({c.w[0]}, seed++, tw)}, c.attrs);
      }
}

TEST(CpuIntegerGemm, QuantizedLinearOpsMatchPlain) {
  Tensor a = random_8bit({2, 5, 19}, 1, DType::u8), b = random_8bit({19, 21}, 2, DType::i8);
  Tensor b_scales = test::random_uniform({21}, 4, 0.001f, 0.01f);
  expect_levels_equal("QLinearMatMul", "QLinearMatMul",
                      {a, test::f32({0.03f}, {}), scalar_of(DType::u8, 77), b, b_scales, Tensor::zeros(DType::i8, {21}),
                       test::f32({0.11f}, {}), scalar_of(DType::u8, 128)});
  Tensor x = random_8bit({1, 6, 9, 9}, 5, DType::u8), w = random_8bit({7, 6, 3, 3}, 6, DType::i8);
  expect_levels_equal("QLinearConv", "QLinearConv",
                      {x, test::f32({0.02f}, {}), scalar_of(DType::u8, 120), w, test::random_uniform({7}, 7, 0.001f, 0.01f),
                       Tensor::zeros(DType::i8, {7}), test::f32({0.37f}, {}), scalar_of(DType::u8, 128),
                       Tensor::from_vector<int32_t>({5, -9, 100, 0, 3, -4000, 8}, {7})},
                      {{"pads", attr_ints({1, 1, 1, 1})}});
  Tensor f = test::random_uniform({3, 37}, 8, -4.f, 6.f);
  expect_levels_equal("DynamicQuantizeMatMul", "DynamicQuantizeMatMul",
                      {f, random_8bit({37, 11}, 9, DType::i8), test::random_uniform({11}, 10, 0.01f, 0.02f), Tensor(),
                       test::random_uniform({11}, 11)},
                      {}, "com.microsoft");
}

TEST(CpuIntegerGemm, QGemmMatchesPlain) {
  Tensor a = random_8bit({5, 37}, 20, DType::u8), b = random_8bit({37, 21}, 21, DType::i8);
  Tensor bt = random_8bit({21, 37}, 22, DType::i8),
         c = Tensor::from_vector<int32_t>(std::vector<int32_t>(21, -77), {21});
  std::vector<Tensor> common = {a, test::f32({0.02f}, {}), scalar_of(DType::u8, 130)};
  for (bool transposed : {false, true}) {
    std::vector<Tensor> in = common;
    for (const Tensor& t : {transposed ? bt : b, test::random_uniform({21}, 23, 0.001f, 0.01f),
                            Tensor::zeros(DType::i8, {21}), c})
      in.push_back(t);
    std::map<std::string, Attribute> attrs = {{"transB", attr_i(transposed ? 1 : 0)}};
    expect_levels_equal(transposed ? "QGemm, B transposed, float out" : "QGemm, float out", "QGemm", in,
                        attrs, "com.microsoft");
    in.push_back(test::f32({0.5f}, {}));
    in.push_back(scalar_of(DType::u8, 100));
    expect_levels_equal(transposed ? "QGemm, B transposed" : "QGemm", "QGemm", in, attrs, "com.microsoft");
  }
}

// Which nodes the packed-weight kernel takes: a constant 8-bit weight with a constant zero point.
TEST(CpuIntegerGemm, PackedWeightKernelTakesConstantWeights) {
  if (!integer_gemm_available()) GTEST_SKIP() << "the packed integer kernels need AVX2";
  auto taken = [](const std::string& op, const std::vector<Tensor>& inputs, const std::string& domain = "") {
    Node n = test::make_node(op, inputs.size(), 1, {});
    n.domain = domain;
    test::ValueInfos infos(inputs);
    return packed_integer_prepare_info(n, infos.ptrs).bytes;
  };
  Tensor a = random_8bit({4, 40}, 1, DType::u8), b = random_8bit({40, 17}, 2, DType::i8);
  // (17 columns: 2 panels of 16) x (20 pairs of k) x 32 int16
  EXPECT_EQ(taken("MatMulInteger", {a, b}), size_t(2 * 20 * 32 * 2));
  EXPECT_GT(taken("DynamicQuantizeMatMul", {test::random_uniform({4, 40}, 3), b, test::f32({0.1f}, {})},
                  "com.microsoft"),
            0u);
  EXPECT_GT(taken("ConvInteger",
                  {random_8bit({1, 3, 5, 5}, 4, DType::u8), random_8bit({2, 3, 3, 3}, 5, DType::i8)}),
            0u);
  // A weight that is a computed value (no constant) or 3-D is left to the kernel itself.
  test::ValueInfos infos(std::vector<Tensor>{a, b});
  infos.values[1].value.reset();
  EXPECT_EQ(packed_integer_prepare_info(test::make_node("MatMulInteger", 2, 1, {}), infos.ptrs).bytes, 0u);
  EXPECT_EQ(
      taken("MatMulInteger", {random_8bit({2, 4, 40}, 6, DType::u8), random_8bit({2, 40, 17}, 7, DType::i8)}),
      0u);
}

// The packed-weight kernels of the dynamically quantized products against the plain loops, on
// sizes that split the product into several tasks (each dequantizing its part as it finishes),
// an odd k over two cache blocks, and a last strip of 2 rows (BERT's 32 tokens).
TEST(CpuIntegerGemm, PackedDynamicProductsMatchPlain) {
  if (!integer_gemm_available()) GTEST_SKIP() << "the packed integer kernels need AVX2";
  struct Size {
    int64_t m, k, n;
  };
  // The last: more than 4 MiB of sums, which the kernel does not keep between products.
  for (Size sz : {Size{32, 601, 200}, Size{50, 601, 200}, Size{3, 601, 200}, Size{1100, 9, 1000}})
    for (bool bias : {false, true}) {
      SCOPED_TRACE(cat(sz.m, "x", sz.k, "x", sz.n, bias ? ", bias" : ""));
      Tensor f = test::random_uniform({sz.m, sz.k}, uint32_t(sz.m), -4.f, 6.f),
             w = random_8bit({sz.k, sz.n}, 2, DType::i8);
      std::vector<Tensor> in = {f, w, test::random_uniform({sz.n}, 3, 0.01f, 0.02f), Tensor(),
                                bias ? test::random_uniform({sz.n}, 4) : Tensor()};
      Node n = test::make_node("DynamicQuantizeMatMul", in.size(), 1, {});
      n.domain = "com.microsoft";
      for (size_t i = 0; i < in.size(); i++)
        if (!in[i].defined()) n.inputs[i] = "";
      test::ValueInfos infos(in);
      std::unique_ptr<PreparedKernel> k = make_packed_integer(n, 1, infos.ptrs, test::test_pool());
      ASSERT_TRUE(k);
      Tensor got(DType::f32, {sz.m, sz.n});
      std::vector<const Tensor*> ptrs;
      for (const Tensor& t : in) ptrs.push_back(t.defined() ? &t : nullptr);
      k->run(ptrs, {&got}, test::test_pool());
      Tensor want = run_at(CpuIsa::plain, "DynamicQuantizeMatMul", in, {}, "com.microsoft")[0];
      EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
    }
}

// Values that probe the rounding: exact halves either side of even, the saturation limits, far
// out of range, infinities and NaN.
Tensor probing_floats(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  const float specials[] = {0.5f,   1.5f, 2.5f,  -0.5f,    -1.5f,     127.5f, 128.5f, -128.5f, 254.5f,
                            255.5f, 1e9f, -1e9f, INFINITY, -INFINITY, NAN,    0.f,    -0.f};
  Tensor t(DType::f32, {n});
  for (int64_t i = 0; i < n; i++) {
    size_t pick = rng() % 40;
    t.data<float>()[i] = pick < std::size(specials) ? specials[pick] * scale
                                                    : (float(int(rng() % 2000)) / 4.f - 250.f) * scale;
  }
  return t;
}

TEST(CpuIntegerGemm, QuantizingLoopsMatchPlain) {
  for (int64_t n : {1, 7, 8, 33, 1000}) {
    SCOPED_TRACE(cat("n ", n));
    Tensor x = probing_floats(n, 0.25f, uint32_t(n));
    for (DType t : {DType::u8, DType::i8}) {
      expect_levels_equal("QuantizeLinear", "QuantizeLinear",
                          {x, test::f32({0.25f}, {}), scalar_of(t, t == DType::u8 ? 3 : -2)});
      expect_levels_equal("DequantizeLinear", "DequantizeLinear",
                          {random_8bit({n}, 9, t), test::f32({0.37f}, {}), scalar_of(t, 5)});
    }
    Tensor finite = test::random_uniform({n}, uint32_t(n) + 1, -3.f, 7.f);
    expect_levels_equal("DynamicQuantizeLinear", "DynamicQuantizeLinear", {finite});
    Tensor with_nan = finite;  // the range passes over NaN at every level
    with_nan.data<float>()[n / 2] = std::numeric_limits<float>::quiet_NaN();
    expect_levels_equal("DynamicQuantizeLinear with NaN", "DynamicQuantizeLinear", {with_nan});
  }
  // Per axis: one scale and zero point per channel.
  Tensor x = probing_floats(3 * 4 * 5, 0.1f, 77);
  expect_levels_equal("QuantizeLinear per axis", "QuantizeLinear",
                      {x.reshaped({3, 4, 5}), test::f32({0.1f, 0.2f, 0.05f, 1.f}, {4}),
                       Tensor::from_vector<uint8_t>({0, 128, 255, 7}, {4})});
  expect_levels_equal("DequantizeLinear per axis", "DequantizeLinear",
                      {random_8bit({3, 4, 5}, 78, DType::i8), test::f32({0.1f, 0.2f, 0.05f, 1.f}, {4}),
                       Tensor::from_vector<int8_t>({0, -128, 127, 7}, {4})});
}

// DynamicQuantizeLinear on the pool's threads (its kernel, and A of a DynamicQuantizeMatMul), in chunks of
// 64K values: the range and the bytes are those of the one-thread loops, with the extremes in two
// other chunks than the first and a NaN in the first, which the range passes over.
TEST(CpuIntegerGemm, DynamicQuantizationOnThePoolMatchesOneThread) {
  const int64_t n = 3 * 65536 + 5;
  Tensor x = test::random_uniform({n}, 5, -2.f, 3.f);
  float* v = x.data<float>();
  v[70000] = -11.5f;
  v[n - 2] = 17.25f;
  v[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint8_t> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  DynamicQuant one = dynamic_quant_params(v, n),
               pooled = dynamic_quantize(v, n, got.data(), test::test_pool());
  EXPECT_EQ(pooled.scale, one.scale);
  EXPECT_EQ(pooled.zero_point, one.zero_point);
  EXPECT_EQ(one.scale, (17.25f + 11.5f) / 255.0f);
  quantize_floats(v, n, one.scale, one.zero_point, want.data());
  EXPECT_EQ(got, want);
}

TEST(CpuIntegerGemm, QLinearAddAndRequantizationMatchPlain) {
  for (DType t : {DType::u8, DType::i8})
    for (int64_t n : {5, 64, 1001}) {
      SCOPED_TRACE(cat(dtype_name(t), " n ", n));
      Tensor a = random_8bit({n}, 30, t), b = random_8bit({n}, 31, t);
      expect_levels_equal("QLinearAdd", "QLinearAdd",
                          {a, test::f32({0.05f}, {}), scalar_of(t, 10), b, test::f32({0.11f}, {}),
                           scalar_of(t, -3 + 3 * (t == DType::u8)), test::f32({0.07f}, {}),
                           scalar_of(t, t == DType::u8 ? 128 : 0)},
                          {}, "com.microsoft");
    }
  // A requantization that saturates both ways (a small output scale), per channel.
  Tensor x = random_8bit({1, 6, 9, 9}, 40, DType::u8), w = random_8bit({7, 6, 3, 3}, 41, DType::i8);
  expect_levels_equal(
      "QLinearConv saturating", "QLinearConv",
      {x, test::f32({0.2f}, {}), scalar_of(DType::u8, 120), w, test::random_uniform({7}, 42, 0.01f, 0.05f),
       Tensor::zeros(DType::i8, {7}), test::f32({0.01f}, {}), scalar_of(DType::u8, 128)},
      {{"pads", attr_ints({1, 1, 1, 1})}});
}

}  // namespace
}  // namespace vlrt
