// The CPU kernels' vector row loops at every instruction set level this machine has
// (row_kernels.h), each against the plain level (the scalar reference code) on the
// same inputs: awkward lengths (0, 1, 15, 17, 33, 1001, and one long enough to be
// split across threads), broadcast shapes, and special values.
//
// Error: |level - plain| / max(1, |plain|), the largest over the outputs; NaN must meet
// NaN and infinities must be equal. The largest errors against plain (libm) measured
// on this suite, at avx2 and avx512 alike: Exp, Sigmoid, Tanh, Gelu(tanh) 1.2e-7;
// Erf 3.6e-7; Gelu 1.0e-6; Softmax 3e-8. Relu, LeakyRelu, Clip, HardSigmoid, HardSwish,
// Add, Sub, Mul, Div, LayerNormalization and the reductions came out bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backends/cpu/isa.h"
#include "backends/cpu/row_kernels.h"
#include "op_test_util.h"

namespace vlrt {
namespace {

using test::attr_f;
using test::attr_i;
using test::attr_s;

struct In {
  Shape shape;
  std::vector<float> values = {};  // empty: random in [-9, 9]
};

struct Case {
  std::string op;
  std::vector<In> inputs;
  double tol = 0;
  std::map<std::string, Attribute> attrs = {};
  std::vector<int64_t> axes = {};  // Reduce*: the axes input
};

const std::vector<Shape> kLengths = {{0}, {1}, {15}, {17}, {33}, {1001}, {3, 70001}};

std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  return {nan,    inf, -inf, 0.f, -0.f, 100.f,  -100.f, 88.5f, -87.5f,
          -103.f, 9.f, -9.f, 3.f, -3.f, 0.625f, 1e-8f,  5.f};
}

std::vector<Case> cases() {
  std::vector<Case> c;
  struct Unary {
    std::string op;
    double tol;
    std::map<std::string, Attribute> attrs;
  };
  const std::vector<Unary> unary = {
      {"Relu", 0, {}},
      {"LeakyRelu", 0, {{"alpha", attr_f(0.1f)}}},
      {"HardSigmoid", 1e-7, {{"alpha", attr_f(0.3f)}, {"beta", attr_f(0.4f)}}},
      {"HardSwish", 1e-7, {}},
      {"Exp", 2e-7, {}},
      {"Sigmoid", 2e-7, {}},
      {"Tanh", 2e-7, {}},
      {"Erf", 5e-7, {}},
      {"Gelu", 1.5e-6, {}},
      {"Gelu", 2e-7, {{"approximate", attr_s("tanh")}}},
  };
  for (const Unary& u : unary) {
    for (const Shape& s : kLengths) c.push_back({u.op, {{s}}, u.tol, u.attrs});
    c.push_back({u.op, {{{17}, special_values()}}, u.tol, u.attrs});
  }
  for (const Shape& s : kLengths) c.push_back({"Clip", {{s}, {{}, {-0.5f}}, {{}, {0.75f}}}});
  c.push_back({"Clip", {{{17}, special_values()}, {{}, {-1.f}}, {{}, {2.f}}}});

  // Binary ops: equal shapes, scalars both sides, and broadcasting rows.
  const std::vector<std::pair<Shape, Shape>> pairs = {
      {{0}, {0}},
      {{1}, {1}},
      {{15}, {15}},
      {{33}, {33}},
      {{3, 70001}, {3, 70001}},
      {{1001}, {}},
      {{}, {1001}},
      {{2, 3, 17}, {17}},
      {{2, 3, 17}, {2, 1, 17}},
      {{5, 33}, {5, 1}},
      {{4, 1, 15}, {1, 3, 1}},
      {{1, 17}, {33, 1}},
      {{0, 17}, {17}},
  };
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    for (auto& [a, b] : pairs) c.push_back({op, {{a}, {b}}});
  c.push_back({"Div", {{{17}, special_values()}, {{17}, special_values()}}});

  // Rows of Softmax, LayerNormalization and the reductions.
  for (int64_t n : {1, 15, 17, 33, 1001}) {
    c.push_back({"Softmax", {{{3, n}}}, 1e-7});
    c.push_back({"LayerNormalization", {{{3, n}}, {{n}}, {{n}}}, 1e-6});
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) {
      c.push_back({op, {{{3, n}}}, 1e-7, {{"keepdims", attr_i(0)}}, {-1}});
      c.push_back({op, {{{2, n, 17}}}, 1e-7, {{"keepdims", attr_i(1)}}, {1}});
    }
  }
  c.push_back({"Softmax", {{{0, 17}}}, 1e-7});
  c.push_back({"Softmax", {{{2, 17}, special_values()}}, 1e-7});
  c.push_back({"ReduceSum", {{{4, 0}}}, 0, {{"keepdims", attr_i(0)}}, {-1}});
  for (const char* op : {"ReduceMax", "ReduceMin"})
    c.push_back({op, {{{1, 17}, special_values()}}, 0, {}, {-1}});
  return c;
}

std::string case_name(const Case& c) {
  std::string s = c.op + "(";
  for (size_t i = 0; i < c.inputs.size(); i++) {
    s += i ? ", " : "";
    s += shape_str(c.inputs[i].shape);
    if (!c.inputs[i].values.empty()) s += " given";
  }
  s += ")";
  for (auto& [k, a] : c.attrs) s += " " + k;
  return s;
}

std::vector<Tensor> make_inputs(const Case& c, std::mt19937& rng) {
  // Transcendental ops saturate beyond |x| = 9, so most values land before that.
  std::uniform_real_distribution<float> u(-9.f, 9.f);
  std::vector<Tensor> t;
  for (const In& in : c.inputs) {
    Tensor x(DType::f32, in.shape);
    for (int64_t i = 0; i < x.numel(); i++)
      x.data<float>()[i] = in.values.empty() ? u(rng) : in.values[size_t(i)];
    t.push_back(x);
  }
  if (!c.axes.empty()) {
    Tensor axes(DType::i64, {int64_t(c.axes.size())});
    for (size_t i = 0; i < c.axes.size(); i++) axes.data<int64_t>()[i] = c.axes[i];
    t.push_back(axes);
  }
  return t;
}

std::vector<Tensor> run_at(CpuIsa isa, const Case& c, const std::vector<Tensor>& inputs) {
  Node node = test::make_node(c.op, inputs.size(), 1, c.attrs);
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  CpuIsa before = set_cpu_isa(isa);
  std::vector<Tensor> out = run_node_cpu(node, 18, ptrs, test::test_pool());
  set_cpu_isa(before);
  return out;
}

// The largest error of got against want, or -1 where NaN or infinities disagree.
double max_error(const Tensor& got, const Tensor& want) {
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); i++) {
    double g = got.data<float>()[i], w = want.data<float>()[i];
    if (std::isnan(w) || std::isnan(g) || std::isinf(w) || std::isinf(g)) {
      if (!(std::isnan(w) && std::isnan(g)) && g != w) return -1;
      continue;
    }
    worst = std::max(worst, std::abs(g - w) / std::max(1.0, std::abs(w)));
  }
  return worst;
}

class CpuIsaTest : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(CpuIsaTest, MatchesPlain) {
  const CpuIsa isa = GetParam();
  if (isa > detected_cpu_isa())
    GTEST_SKIP() << "this CPU has no " << cpu_isa_name(isa) << " (detected "
                 << cpu_isa_name(detected_cpu_isa()) << ")";
  std::mt19937 rng(7);
  for (const Case& c : cases()) {
    SCOPED_TRACE(case_name(c));
    std::vector<Tensor> inputs = make_inputs(c, rng);
    Tensor want = run_at(CpuIsa::plain, c, inputs)[0];
    Tensor got = run_at(isa, c, inputs)[0];
    ASSERT_EQ(got.shape(), want.shape());
    double err = max_error(got, want);
    EXPECT_GE(err, 0) << "NaN or infinity differs from the plain level";
    EXPECT_LE(err, c.tol);
  }
}

std::string isa_test_name(const ::testing::TestParamInfo<CpuIsa>& info) { return cpu_isa_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Levels, CpuIsaTest, ::testing::Values(CpuIsa::avx2, CpuIsa::avx512), isa_test_name);

TEST(CpuIsa, LevelsAreNamedAndCappedByTheCpu) {
  for (CpuIsa isa : {CpuIsa::plain, CpuIsa::avx2, CpuIsa::avx512})
    EXPECT_EQ(parse_cpu_isa(cpu_isa_name(isa)), isa);
  EXPECT_EQ(parse_cpu_isa("avx512f"), std::nullopt);
  CpuIsa before = set_cpu_isa(CpuIsa::avx512);
  EXPECT_EQ(cpu_isa(), detected_cpu_isa());
  EXPECT_EQ(row_kernels_f32() != nullptr, detected_cpu_isa() != CpuIsa::plain);
  set_cpu_isa(CpuIsa::plain);
  EXPECT_EQ(row_kernels_f32(), nullptr);
  set_cpu_isa(before);
}

}  // namespace
}  // namespace vlrt
