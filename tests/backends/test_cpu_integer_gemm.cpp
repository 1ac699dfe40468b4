// The exact AVX2 integer products (backends/cpu/integer_gemm.h) against the plain reference loops:
// every integer op that reaches them, at every instruction set level this machine has above plain,
// bit for bit, on awkward shapes (odd k, rows and columns off the 6 x 16 tile, k across cache
// blocks, batches, per-row and per-column zero points, extreme values, groups, padding, stride,
// dilation, 1x1 and 3-D convolutions).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/cpu/integer_gemm.h"
#include "backends/cpu/isa.h"
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

}  // namespace
}  // namespace vlrt
