#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "op_test_util.h"
#include "ops/shape_util.h"

namespace vlrt::test {
namespace {

const char* const kReduceOps[] = {"ReduceSum",       "ReduceMean",     "ReduceMax", "ReduceMin",
                                  "ReduceProd",      "ReduceL1",       "ReduceL2",  "ReduceLogSum",
                                  "ReduceLogSumExp", "ReduceSumSquare"};

double fold(const std::string& op, const std::vector<double>& v) {
  double s = 0, m = -INFINITY;
  if (op == "ReduceMax") return *std::max_element(v.begin(), v.end());
  if (op == "ReduceMin") return *std::min_element(v.begin(), v.end());
  if (op == "ReduceProd") {
    double p = 1;
    for (double x : v) p *= x;
    return p;
  }
  if (op == "ReduceLogSumExp") {
    for (double x : v) m = std::max(m, x);
    for (double x : v) s += std::exp(x - m);
    return m + std::log(s);
  }
  for (double x : v)
    s += op == "ReduceL1" ? std::abs(x) : (op == "ReduceL2" || op == "ReduceSumSquare") ? x * x : x;
  if (op == "ReduceMean") return s / double(v.size());
  if (op == "ReduceL2") return std::sqrt(s);
  if (op == "ReduceLogSum") return std::log(s);
  return s;
}

// Plain reduction: gather each output's values by index arithmetic, then fold them.
Tensor reference_reduce(const std::string& op, const Tensor& x, const std::vector<int64_t>& axes, bool keep) {
  const Shape& s = x.shape();
  std::vector<bool> red(s.size(), axes.empty());
  for (int64_t a : axes) red[size_t(a < 0 ? a + int64_t(s.size()) : a)] = true;
  Shape kept, out;
  for (size_t d = 0; d < s.size(); d++) {
    kept.push_back(red[d] ? 1 : s[d]);
    if (!red[d] || keep) out.push_back(kept.back());
  }
  std::vector<std::vector<double>> groups(size_t(shape_numel(kept)));
  std::vector<double> v = x.to_double_vector();
  std::vector<int64_t> kst = contiguous_strides(kept), idx(s.size(), 0);
  for (size_t i = 0; i < v.size(); i++) {
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); d++) o += red[d] ? 0 : idx[d] * kst[d];
    groups[size_t(o)].push_back(v[i]);
    for (size_t d = s.size(); d-- > 0;) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  std::vector<float> r;
  for (auto& g : groups) r.push_back(float(fold(op, g)));
  return f32(r, out);
}

Tensor random_tensor(Shape s, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(size_t(shape_numel(s)));
  for (float& x : v) x = dist(gen);
  return f32(v, s);
}

TEST(Reduction, AllOpsMatchPlainVersion) {
  Tensor x = random_tensor({3, 4, 5, 6}, 1, 0.5f, 1.5f);
  std::vector<std::vector<int64_t>> cases = {{},     {0},    {3},    {-1},   {1, 2},
                                             {2, 3}, {0, 2}, {0, 3}, {1, 3}, {0, 1, 3}};
  for (const char* op : kReduceOps) {
    int64_t since = std::string(op) == "ReduceSum" ? 13 : 18;
    for (auto& axes : cases) {
      for (int64_t keep : {0, 1}) {
        Tensor expected = reference_reduce(op, x, axes, keep);
        std::map<std::string, Attribute> attrs = {{"keepdims", attr_i(keep)}};
        std::vector<Tensor> inputs =
            axes.empty() ? std::vector<Tensor>{x} : std::vector<Tensor>{x, i64(axes, {int64_t(axes.size())})};
        SCOPED_TRACE(cat(op, " axes ", shape_str(axes), " keepdims ", keep));
        expect_close(run_op(op, inputs, attrs, 1, since)[0], expected);
        if (!axes.empty()) attrs["axes"] = attr_ints(axes);
        expect_close(run_op(op, {x}, attrs, 1, since - 1)[0], expected);
      }
    }
  }
}

TEST(Reduction, LargeFastPathsMatchPlainVersion) {
  // Trailing block (ReduceMean over the last axis, GlobalAveragePool-like), a middle
  // block with a partial column strip, middle blocks with short rows (the mean over H, W of
  // channel blocks of 8 and 16, and a width of neither), and the general path.
  Tensor last = random_tensor({16, 4099}, 2, -1, 3), gap = random_tensor({2, 64, 14, 14}, 3, -1, 3);
  Tensor mid = random_tensor({3, 50, 300}, 4, -1, 3);
  for (int64_t width : {8, 16, 5}) {
    Tensor blocks = random_tensor({2, 9, 14, 13, width}, 5, -1, 3);
    SCOPED_TRACE(width);
    expect_close(run_op("ReduceMean", {blocks, i64({2, 3}, {2})}, {}, 1, 18)[0],
                 reference_reduce("ReduceMean", blocks, {2, 3}, true));
    expect_close(run_op("ReduceMax", {blocks, i64({2, 3}, {2})}, {}, 1, 18)[0],
                 reference_reduce("ReduceMax", blocks, {2, 3}, true));
  }
  expect_close(run_op("ReduceMean", {last}, {{"axes", attr_ints({-1})}}, 1, 13)[0],
               reference_reduce("ReduceMean", last, {-1}, true));
  expect_close(run_op("ReduceMean", {gap}, {{"axes", attr_ints({2, 3})}}, 1, 13)[0],
               reference_reduce("ReduceMean", gap, {2, 3}, true));
  expect_close(run_op("ReduceSum", {mid, i64({1}, {1})})[0], reference_reduce("ReduceSum", mid, {1}, true),
               1e-4);
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    expect_close(run_op(op, {last}, {{"axes", attr_ints({1})}}, 1, 13)[0],
                 reference_reduce(op, last, {1}, true));
    expect_close(run_op(op, {mid}, {{"axes", attr_ints({1})}}, 1, 13)[0],
                 reference_reduce(op, mid, {1}, true));
    expect_close(run_op(op, {gap}, {{"axes", attr_ints({0, 2})}, {"keepdims", attr_i(0)}}, 1, 13)[0],
                 reference_reduce(op, gap, {0, 2}, false));
  }
}

TEST(Reduction, MaxAndMinPropagateNaN) {
  // A NaN deep inside a long row (vector path) and inside a reduced column (strip path).
  std::vector<float> v(2 * 100, 1.0f);
  v[77] = NAN;
  Tensor x = f32(v, {2, 100}), xt = f32(v, {100, 2});
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    auto rows = run_op(op, {x}, {{"axes", attr_ints({1})}}, 1, 13)[0].to_double_vector();
    EXPECT_TRUE(std::isnan(rows[0])) << op;
    EXPECT_EQ(rows[1], 1.0) << op;
    auto cols = run_op(op, {xt}, {{"axes", attr_ints({0})}}, 1, 13)[0].to_double_vector();
    EXPECT_EQ(cols[0], 1.0) << op;
    EXPECT_TRUE(std::isnan(cols[1])) << op;
  }
}

TEST(Reduction, EmptyAxes) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  Tensor none = i64({}, {0});
  expect_close(run_op("ReduceSum", {x, none})[0], f32({10}, {1, 1}));
  expect_close(run_op("ReduceSum", {x})[0], f32({10}, {1, 1}));
  // With noop_with_empty_axes only the element-wise part remains.
  std::map<std::string, Attribute> noop = {{"noop_with_empty_axes", attr_i(1)}};
  expect_close(run_op("ReduceSum", {x, none}, noop)[0], x);
  expect_close(run_op("ReduceSumSquare", {x}, noop, 1, 18)[0], f32({1, 4, 9, 16}, {2, 2}));
  expect_close(run_op("ReduceLogSum", {x}, noop, 1, 18)[0],
               f32({0, std::log(2.0f), std::log(3.0f), std::log(4.0f)}, {2, 2}));
  // Before opset 18 the attribute does not exist: no axes still means all axes.
  expect_close(run_op("ReduceMean", {x}, noop, 1, 13)[0], f32({2.5f}, {1, 1}));
  expect_close(run_op("ReduceMax", {Tensor::scalar<float>(7)}, {}, 1, 13)[0], Tensor::scalar<float>(7));
}

TEST(Reduction, EmptySetIdentities) {
  Tensor x = Tensor::zeros(DType::f32, {2, 0, 3});
  Tensor axis = i64({1}, {1});
  float inf = std::numeric_limits<float>::infinity();
  std::map<std::string, float> expected = {
      {"ReduceSum", 0},       {"ReduceProd", 1},      {"ReduceMax", -inf},
      {"ReduceMin", inf},     {"ReduceL1", 0},        {"ReduceL2", 0},
      {"ReduceSumSquare", 0}, {"ReduceLogSum", -inf}, {"ReduceLogSumExp", -inf}};
  for (auto& [op, v] : expected) {
    std::vector<double> y = run_op(op, {x, axis}, {}, 1, 18)[0].to_double_vector();
    ASSERT_EQ(y.size(), 6u) << op;
    for (double e : y) EXPECT_EQ(e, v) << op;
  }
  EXPECT_TRUE(std::isnan(run_op("ReduceMean", {x, axis}, {}, 1, 18)[0].to_double_vector()[0]));
  auto imax = run_op("ReduceMax", {Tensor::zeros(DType::i32, {0, 2}), i64({0}, {1})}, {}, 1, 18)[0];
  EXPECT_EQ(imax.data<int32_t>()[0], std::numeric_limits<int32_t>::lowest());
}

TEST(Reduction, IntegerTypes) {
  int64_t big = int64_t(1) << 60;
  auto s = run_op("ReduceSum", {i64({big, big, -5, 1}, {2, 2}), i64({1}, {1})})[0];
  EXPECT_EQ(s.to_int64_vector(), (std::vector<int64_t>{2 * big, -4}));
  auto p = run_op("ReduceProd", {i64({big + 1, 3}, {2})}, {{"keepdims", attr_i(0)}}, 1, 13)[0];
  EXPECT_EQ(p.to_int64_vector(), (std::vector<int64_t>{3 * big + 3}));
  // Integer means truncate toward zero like the reference's cast.
  auto m = run_op("ReduceMean", {Tensor::from_vector<int32_t>({1, 2, -1, -2}, {2, 2})},
                  {{"axes", attr_ints({1})}}, 1, 13)[0];
  EXPECT_EQ(m.to_int64_vector(), (std::vector<int64_t>{1, -1}));
  auto mx = run_op("ReduceMax", {Tensor::from_vector<uint8_t>({3, 250, 7, 1}, {4})}, {}, 1, 13)[0];
  EXPECT_EQ(mx.data<uint8_t>()[0], 250);
  auto l1 = run_op("ReduceL1", {Tensor::from_vector<int32_t>({-3, 4, -5}, {3})}, {}, 1, 13)[0];
  EXPECT_EQ(l1.data<int32_t>()[0], 12);
}

TEST(Reduction, ReduceErrors) {
  Tensor x = Tensor::zeros(DType::f32, {2, 3});
  EXPECT_THROW(run_op("ReduceSum", {x, i64({1, -1}, {2})}), Error);  // the same axis twice
  EXPECT_THROW(run_op("ReduceSum", {x, i64({2}, {1})}), Error);
  EXPECT_THROW(run_op("ReduceMean", {x}, {{"axes", attr_ints({0})}}, 1, 18), Error);  // an input since 18
  EXPECT_THROW(run_op("ReduceMean", {x, i64({0}, {1})}, {}, 1, 13), Error);  // an attribute before 18
  EXPECT_THROW(run_op("ReduceMax", {Tensor::zeros(DType::boolean, {2})}, {}, 1, 13), Error);
  EXPECT_THROW(run_op("ReduceSum", {Tensor::zeros(DType::u8, {2})}), Error);  // 8-bit only for Max/Min
  EXPECT_THROW(run_op("ReduceMin", {Tensor::zeros(DType::i16, {2})}, {}, 1, 13), Error);
}

TEST(Reduction, ArgMaxArgMin) {
  Tensor x = f32({1, 5, 5, 2, 7, 0, 7, 7}, {2, 4});
  std::map<std::string, Attribute> row = {{"axis", attr_i(1)}};
  EXPECT_EQ(run_op("ArgMax", {x}, row)[0].to_int64_vector(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(run_op("ArgMax", {x}, row)[0].shape(), (Shape{2, 1}));
  row["select_last_index"] = attr_i(1);
  EXPECT_EQ(run_op("ArgMax", {x}, row)[0].to_int64_vector(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(run_op("ArgMin", {x}, row)[0].to_int64_vector(), (std::vector<int64_t>{0, 1}));
  auto cols = run_op("ArgMax", {x}, {{"keepdims", attr_i(0)}})[0];
  EXPECT_EQ(cols.shape(), (Shape{4}));
  EXPECT_EQ(cols.to_int64_vector(), (std::vector<int64_t>{1, 0, 1, 1}));
  auto ints = run_op("ArgMin", {Tensor::from_vector<int32_t>({4, -2, 9}, {3})})[0];
  EXPECT_EQ(ints.to_int64_vector(), (std::vector<int64_t>{1}));
  EXPECT_THROW(run_op("ArgMax", {Tensor::zeros(DType::f32, {2, 0})}, {{"axis", attr_i(1)}}), Error);
  EXPECT_THROW(run_op("ArgMax", {x}, {{"axis", attr_i(2)}}), Error);
}

TEST(Reduction, TopKTiesTakeLowerIndexFirst) {
  Tensor x = f32({1, 3, 3, 2, 0, 4, 4, 4, 1, 5}, {2, 5});
  auto big = run_op("TopK", {x, i64({3}, {1})}, {}, 2);
  expect_close(big[0], f32({3, 3, 2, 5, 4, 4}, {2, 3}));
  EXPECT_EQ(big[1].to_int64_vector(), (std::vector<int64_t>{1, 2, 3, 4, 0, 1}));
  auto small = run_op("TopK", {x, i64({3}, {1})}, {{"largest", attr_i(0)}}, 2);
  expect_close(small[0], f32({0, 1, 2, 1, 4, 4}, {2, 3}));
  EXPECT_EQ(small[1].to_int64_vector(), (std::vector<int64_t>{4, 0, 3, 3, 0, 1}));
  auto col = run_op("TopK", {x, i64({1}, {1})}, {{"axis", attr_i(0)}}, 2);
  expect_close(col[0], f32({4, 4, 4, 2, 5}, {1, 5}));
  EXPECT_EQ(col[1].to_int64_vector(), (std::vector<int64_t>{1, 1, 1, 0, 1}));
  auto legacy = run_op("TopK", {x}, {{"k", attr_i(1)}}, 2, 9);
  EXPECT_EQ(legacy[1].to_int64_vector(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(run_op("TopK", {x, i64({0}, {1})}, {}, 2)[0].shape(), (Shape{2, 0}));
}

TEST(Reduction, TopKErrors) {
  Tensor x = Tensor::zeros(DType::f32, {2, 5});
  EXPECT_THROW(run_op("TopK", {x, i64({6}, {1})}, {}, 2), Error);
  EXPECT_THROW(run_op("TopK", {x, i64({-1}, {1})}, {}, 2), Error);
  EXPECT_THROW(run_op("TopK", {x, i64({1, 2}, {2})}, {}, 2), Error);
  EXPECT_THROW(run_op("TopK", {x, i64({1}, {1})}, {{"axis", attr_i(2)}}, 2), Error);
}

TEST(Reduction, CumSum) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_close(run_op("CumSum", {x, Tensor::scalar<int32_t>(1)})[0], f32({1, 3, 6, 4, 9, 15}, {2, 3}));
  expect_close(run_op("CumSum", {x, i64({-2}, {1})}, {{"exclusive", attr_i(1)}, {"reverse", attr_i(1)}})[0],
               f32({4, 5, 6, 0, 0, 0}, {2, 3}));
  auto ints =
      run_op("CumSum", {i64({5, -1, 2}, {3}), Tensor::scalar<int64_t>(0)}, {{"reverse", attr_i(1)}})[0];
  EXPECT_EQ(ints.to_int64_vector(), (std::vector<int64_t>{6, 1, 2}));
  EXPECT_THROW(run_op("CumSum", {x, Tensor::scalar<int64_t>(2)}), Error);
  EXPECT_THROW(run_op("CumSum", {x, Tensor::scalar<float>(0)}), Error);
}

}  // namespace
}  // namespace vlrt::test
