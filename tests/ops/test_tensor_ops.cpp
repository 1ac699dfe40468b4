// Data movement and tensor creation ops. Expected values come from the ONNX spec examples or numpy;
// the strided fast paths (Transpose, Slice, Expand, Tile) are checked against plain index arithmetic.
#include <array>
#include <climits>
#include <cstring>
#include <numeric>

#include "op_test_util.h"
#include "ops/shape_util.h"

namespace vlrt {
namespace {

using test::attr_f;
using test::attr_i;
using test::attr_ints;
using test::attr_s;
using test::attr_t;
using test::expect_close;
using test::f32;
using test::i64;
using test::run_op;

Tensor iota_f32(Shape s) {
  Tensor t(DType::f32, s);
  std::iota(t.data<float>(), t.data<float>() + t.numel(), 0.f);
  return t;
}

Tensor f16(const std::vector<float>& v, Shape s) {
  Tensor t(DType::f16, s);
  auto* p = static_cast<uint16_t*>(t.raw());
  for (size_t i = 0; i < v.size(); i++) p[i] = float_to_half(v[i]);
  return t;
}

Tensor boolean(const std::vector<bool>& v, Shape s) {
  Tensor t(DType::boolean, s);
  for (size_t i = 0; i < v.size(); i++) t.data<bool>()[i] = v[i];
  return t;
}

Tensor run1(const std::string& op, const std::vector<Tensor>& in, std::map<std::string, Attribute> attrs = {},
            int64_t opset = 17) {
  return run_op(op, in, std::move(attrs), 1, opset)[0];
}

// The message of the Error that running `op` throws, or "" when it succeeds.
std::string error_of(const std::string& op, const std::vector<Tensor>& in,
                     std::map<std::string, Attribute> attrs = {}, int64_t opset = 17) {
  try {
    run_op(op, in, std::move(attrs), 1, opset);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// out[i] = in[offset + sum(index_d * strides_d)]: the plain reference for every strided view.
Tensor ref_view(const Tensor& in, const Shape& shape, const std::vector<int64_t>& strides, int64_t offset) {
  Tensor out(in.dtype(), shape);
  size_t es = dtype_size(in.dtype());
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < out.numel(); i++) {
    int64_t off = offset;
    for (size_t d = 0; d < shape.size(); d++) off += idx[d] * strides[d];
    std::memcpy(static_cast<char*>(out.raw()) + i * es, static_cast<const char*>(in.raw()) + off * es, es);
    for (size_t d = shape.size(); d-- > 0;)
      if (++idx[d] < shape[d])
        break;
      else
        idx[d] = 0;
  }
  return out;
}

void expect_bytes_equal(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << a.describe();
}

TEST(TensorOps, ReshapeCopiesZeroInfersMinusOneAndAliases) {
  Tensor x = iota_f32({2, 3, 4});
  Tensor y = run1("Reshape", {x, i64({0, -1}, {2})});
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(y.raw(), x.raw());  // a view: no copy
  EXPECT_EQ(run1("Reshape", {x, i64({4, 0, 2}, {3})}).shape(), (Shape{4, 3, 2}));
  // allowzero=1: 0 is a real zero-sized dimension.
  Tensor e(DType::f32, {0, 3});
  EXPECT_EQ(run1("Reshape", {e, i64({3, 0}, {2})}, {{"allowzero", attr_i(1)}}, 14).shape(), (Shape{3, 0}));
  EXPECT_NE(error_of("Reshape", {x, i64({-1, -1}, {2})}).find("more than one -1"), std::string::npos);
  EXPECT_NE(error_of("Reshape", {x, i64({5, -1}, {2})}).find("not a multiple"), std::string::npos);
  EXPECT_THROW(run1("Reshape", {x, i64({2, 3, 5}, {3})}), Error);
  EXPECT_THROW(run1("Reshape", {x, i64({0, 0, 0, 0}, {4})}), Error);
}

TEST(TensorOps, FlattenSqueezeUnsqueezeIdentity) {
  Tensor x = iota_f32({2, 3, 4});
  EXPECT_EQ(run1("Flatten", {x}, {{"axis", attr_i(2)}}).shape(), (Shape{6, 4}));
  EXPECT_EQ(run1("Flatten", {x}, {{"axis", attr_i(-3)}}).shape(), (Shape{1, 24}));
  EXPECT_EQ(run1("Flatten", {x}, {{"axis", attr_i(3)}}).shape(), (Shape{24, 1}));
  EXPECT_THROW(run1("Flatten", {x}, {{"axis", attr_i(4)}}), Error);

  Tensor s = iota_f32({1, 3, 1, 2});
  EXPECT_EQ(run1("Squeeze", {s}).shape(), (Shape{3, 2}));
  EXPECT_EQ(run1("Squeeze", {s, i64({-2}, {1})}).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(run1("Squeeze", {s}, {{"axes", attr_ints({0})}}, 11).shape(), (Shape{3, 1, 2}));
  EXPECT_NE(error_of("Squeeze", {s, i64({1}, {1})}).find("not 1"), std::string::npos);

  Tensor u = iota_f32({3, 4});
  EXPECT_EQ(run1("Unsqueeze", {u, i64({2, 0}, {2})}).shape(), (Shape{1, 3, 1, 4}));
  EXPECT_EQ(run1("Unsqueeze", {u, i64({-1}, {1})}).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(run1("Unsqueeze", {u}, {{"axes", attr_ints({1})}}, 11).shape(), (Shape{3, 1, 4}));
  EXPECT_THROW(run1("Unsqueeze", {u, i64({1, 1}, {2})}), Error);
  EXPECT_THROW(run1("Unsqueeze", {u}), Error);

  Tensor id = run1("Identity", {u});
  EXPECT_EQ(id.raw(), u.raw());
  expect_close(id, u);
}

TEST(TensorOps, DropoutIsIdentityWithTrueMask) {
  Tensor x = f32({1, -2, 3}, {3});
  auto out = run_op("Dropout", {x, Tensor::scalar<float>(0.5f), Tensor::scalar<bool>(false)}, {}, 2, 13);
  expect_close(out[0], x);
  expect_close(out[1], boolean({true, true, true}, {3}));
  // Before opset 10 the mask has the input's type.
  auto old = run_op("Dropout", {f16({1, 2}, {2})}, {{"ratio", attr_f(0.3f)}}, 2, 7);
  expect_close(old[1], f16({1, 1}, {2}));
  EXPECT_THROW(run_op("Dropout", {x, Tensor::scalar<float>(0.5f), Tensor::scalar<bool>(true)}, {}, 2, 13),
               Unsupported);
  // Training with ratio 0 drops nothing.
  out = run_op("Dropout", {x, Tensor::scalar<float>(0.f), Tensor::scalar<bool>(true)}, {}, 2, 13);
  expect_close(out[1], boolean({true, true, true}, {3}));
}

TEST(TensorOps, TransposeMatchesPlainIndexingForAllPathsAndTypes) {
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
  };
  std::vector<Case> cases = {
      {{2, 5, 3, 8}, {0, 2, 1, 3}},        // [B,L,H,D] -> [B,H,L,D]: contiguous rows
      {{2, 3, 37, 40}, {0, 1, 3, 2}},      // [B,H,L,D] -> [B,H,D,L]: tiled
      {{1, 3, 7, 9}, {0, 2, 3, 1}},        // NCHW -> NHWC
      {{4, 1, 6}, {2, 1, 0}},              // size-1 axis
      {{3, 4, 5, 6, 2}, {4, 2, 0, 3, 1}},  // generic
      {{70, 65}, {1, 0}},
      {{5}, {0}},
      {{0, 3}, {1, 0}},
      {{2, 8, 64, 64}, {0, 1, 3, 2}},  // large enough to run in parallel
      {{2, 64, 8, 64}, {0, 2, 1, 3}},
      {{2, 24, 20, 19}, {0, 2, 3, 1}},  // NCHW -> NHWC in whole 8x8 blocks and edges
      {{1, 20, 19, 24}, {0, 3, 1, 2}},  // and back
  };
  for (DType t : {DType::f32, DType::i32, DType::f16, DType::i8, DType::i64, DType::boolean}) {
    for (const Case& c : cases) {
      Tensor x(t, c.shape);
      auto* b = static_cast<uint8_t*>(x.raw());
      for (size_t i = 0; i < x.nbytes(); i++) b[i] = t == DType::boolean ? i % 3 == 0 : uint8_t(i * 7 + 1);
      std::vector<int64_t> st = contiguous_strides(c.shape), ost;
      Shape oshape;
      for (int64_t p : c.perm) {
        oshape.push_back(c.shape[p]);
        ost.push_back(st[p]);
      }
      Tensor y = run1("Transpose", {x}, {{"perm", attr_ints(c.perm)}});
      expect_bytes_equal(y, ref_view(x, oshape, ost, 0));
    }
  }
  expect_close(run1("Transpose", {iota_f32({2, 3})}), f32({0, 3, 1, 4, 2, 5}, {3, 2}));
  EXPECT_THROW(run1("Transpose", {iota_f32({2, 3})}, {{"perm", attr_ints({0, 0})}}), Error);
}

TEST(TensorOps, ConcatAndSplit) {
  Tensor a = f32({1, 2, 3, 4}, {2, 2}), b = f32({5, 6}, {2, 1}), e(DType::f32, {2, 0});
  expect_close(run1("Concat", {a, e, b}, {{"axis", attr_i(-1)}}), f32({1, 2, 5, 3, 4, 6}, {2, 3}));
  expect_close(run1("Concat", {a, a}, {{"axis", attr_i(0)}}), f32({1, 2, 3, 4, 1, 2, 3, 4}, {4, 2}));
  expect_close(run1("Concat", {f16({1}, {1}), f16({2, 3}, {2})}, {{"axis", attr_i(0)}}), f16({1, 2, 3}, {3}));
  EXPECT_THROW(run1("Concat", {a, b}, {{"axis", attr_i(0)}}), Error);
  EXPECT_THROW(run1("Concat", {a, b}), Error);  // axis is required

  Tensor x = iota_f32({2, 6});
  auto parts = run_op("Split", {x, i64({1, 3, 2}, {3})}, {{"axis", attr_i(1)}}, 3, 13);
  expect_close(parts[0], f32({0, 6}, {2, 1}));
  expect_close(parts[1], f32({1, 2, 3, 7, 8, 9}, {2, 3}));
  expect_close(parts[2], f32({4, 5, 10, 11}, {2, 2}));
  parts = run_op("Split", {x}, {{"axis", attr_i(1)}, {"split", attr_ints({4, 2})}}, 2, 11);
  expect_close(parts[1], f32({4, 5, 10, 11}, {2, 2}));
  parts = run_op("Split", {x}, {{"axis", attr_i(0)}}, 2, 13);
  expect_close(parts[1], f32({6, 7, 8, 9, 10, 11}, {1, 6}));
  // num_outputs (opset 18): 7 into 3 parts is 3, 3, 1.
  parts = run_op("Split", {iota_f32({7})}, {{"num_outputs", attr_i(3)}}, 3, 18);
  expect_close(parts[2], f32({6}, {1}));
  Node n = test::make_node("Split", 1, 3, {{"axis", attr_i(1)}});
  n.outputs[1] = "";  // an unused output
  auto skip = run_node_cpu(n, 17, {&x}, test::test_pool());
  expect_close(skip[2], f32({4, 5, 10, 11}, {2, 2}));
  EXPECT_THROW(run_op("Split", {x, i64({1, 2}, {2})}, {{"axis", attr_i(1)}}, 2, 13), Error);
}

// Parts of a few bytes a row over enough rows to run in several chunks, against plain indexing:
// equal widths of 4 to 32 bytes (whole rows written with fixed-size moves), other equal widths
// and unequal ones (a memcpy per part and row).
TEST(TensorOps, ConcatOfSmallPartsMatchesPlainIndexing) {
  const int64_t rows = 3001;
  for (DType dt : {DType::f32, DType::f16, DType::i64})
    for (const std::vector<int64_t>& widths : std::vector<std::vector<int64_t>>{
             {1, 2, 4, 3, 1}, {2, 1, 3}, {4, 4, 4, 4}, {1, 1, 1}, {2, 2}, {8, 8, 8}}) {
      SCOPED_TRACE(cat(dtype_name(dt), " widths ", shape_str(widths)));
      std::vector<Tensor> parts;
      int64_t total = 0;
      for (int64_t width : widths) {
        parts.push_back(
            test::random_uniform({rows, 1, width}, uint32_t(width + parts.size()), -9, 9).converted(dt));
        total += width;
      }
      Tensor y = run1("Concat", parts, {{"axis", attr_i(2)}});
      ASSERT_EQ(y.shape(), (Shape{rows, 1, total}));
      const int64_t es = int64_t(dtype_size(dt));
      int64_t off = 0;
      for (const Tensor& p : parts) {
        const int64_t w = p.dim(2);
        for (int64_t r = 0; r < rows; r++)
          ASSERT_EQ(std::memcmp(static_cast<const char*>(y.raw()) + (r * total + off) * es,
                                static_cast<const char*>(p.raw()) + r * w * es, size_t(w * es)),
                    0)
              << "row " << r << " part at " << off;
        off += w;
      }
    }
}

TEST(TensorOps, SliceMatchesPlainIndexing) {
  Tensor x = iota_f32({5, 6, 7});
  std::vector<int64_t> st = contiguous_strides(x.shape());
  // Each case: starts, ends, axes, steps; expected per-axis (first, count, step) computed by hand.
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
    std::vector<std::array<int64_t, 3>> view;
  };
  std::vector<Case> cases = {
      {{1, 0}, {3, INT64_MAX}, {0, 2}, {1, 2}, {{1, 2, 1}, {0, 6, 1}, {0, 4, 2}}},
      {{-1}, {-10}, {1}, {-2}, {{0, 5, 1}, {5, 3, -2}, {0, 7, 1}}},
      {{4, 10}, {INT64_MIN, -100}, {-3, -1}, {-1, -3}, {{4, 5, -1}, {0, 6, 1}, {6, 3, -3}}},
      {{2}, {2}, {0}, {1}, {{2, 0, 1}, {0, 6, 1}, {0, 7, 1}}},
      {{-100}, {100}, {2}, {3}, {{0, 5, 1}, {0, 6, 1}, {0, 3, 3}}},
      {{2, -1}, {INT64_MAX, INT64_MIN}, {1, 2}, {INT64_MAX, INT64_MIN}, {{0, 5, 1}, {2, 1, 1}, {6, 1, 1}}},
  };
  for (const Case& c : cases) {
    int64_t n = int64_t(c.starts.size());
    Tensor y = run1("Slice", {x, i64(c.starts, {n}), i64(c.ends, {n}), i64(c.axes, {n}), i64(c.steps, {n})});
    Shape shape;
    std::vector<int64_t> strides;
    int64_t off = 0;
    for (int d = 0; d < 3; d++) {
      shape.push_back(c.view[d][1]);
      strides.push_back(st[d] * c.view[d][2]);
      off += c.view[d][0] * st[d];
    }
    expect_close(y, ref_view(x, shape, strides, off));
  }
  // Opset 9: attributes; default axes.
  expect_close(
      run1("Slice", {f32({1, 2, 3, 4}, {4})}, {{"starts", attr_ints({1})}, {"ends", attr_ints({3})}}, 9),
      f32({2, 3}, {2}));
  Tensor b = boolean({true, false, true, false}, {4});
  expect_close(run1("Slice", {b, i64({3}, {1}), i64({-5}, {1}), Tensor(), i64({-2}, {1})}),
               boolean({false, false}, {2}));
  EXPECT_THROW(run1("Slice", {x, i64({0}, {1}), i64({1}, {1}), i64({0}, {1}), i64({0}, {1})}), Error);
  EXPECT_THROW(run1("Slice", {x, i64({0, 0}, {2}), i64({1, 1}, {2}), i64({1, -2}, {2})}), Error);
}

TEST(TensorOps, GatherFamily) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  expect_close(run1("Gather", {x, i64({2, -3, 1}, {3})}), f32({5, 6, 1, 2, 3, 4}, {3, 2}));
  expect_close(run1("Gather", {x, i64({1, 0}, {1, 2})}, {{"axis", attr_i(1)}}),
               f32({2, 1, 4, 3, 6, 5}, {3, 1, 2}));
  expect_close(run1("Gather", {x, Tensor::scalar<int32_t>(-1)}), f32({5, 6}, {2}));
  expect_close(run1("Gather", {boolean({true, false}, {2}), i64({1, 1, 0}, {3})}),
               boolean({false, false, true}, {3}));
  std::string err = error_of("Gather", {x, i64({0, 3}, {2})});
  EXPECT_NE(err.find("index 3"), std::string::npos) << err;
  EXPECT_NE(err.find("size 3"), std::string::npos) << err;
  EXPECT_THROW(run1("Gather", {x, f32({0}, {1})}), Error);

  // GatherElements: the spec's example, plus a negative index.
  Tensor d = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  expect_close(run1("GatherElements", {d, i64({1, 2, 0, 2, 0, -3}, {2, 3})}),
               f32({4, 8, 3, 7, 2, 3}, {2, 3}));
  expect_close(run1("GatherElements", {d, i64({0, 0, 1, 0}, {2, 2})}, {{"axis", attr_i(1)}}),
               f32({1, 1, 5, 4}, {2, 2}));
  EXPECT_NE(error_of("GatherElements", {d, i64({3}, {1, 1})}).find("index 3"), std::string::npos);

  // GatherND: batch_dims=1 example of the spec.
  Tensor nd = f32({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  expect_close(run1("GatherND", {nd, i64({1, 0}, {2, 1})}, {{"batch_dims", attr_i(1)}}),
               f32({2, 3, 4, 5}, {2, 2}));
  expect_close(run1("GatherND", {nd, i64({0, 1, 1, -1, 0, 1}, {2, 3})}), f32({3, 5}, {2}));
  EXPECT_NE(error_of("GatherND", {nd, i64({0, 2}, {1, 2})}).find("index 2"), std::string::npos);
  EXPECT_THROW(run1("GatherND", {nd, i64({0, 0, 0, 0}, {1, 4})}), Error);
}

TEST(TensorOps, ScatterFamilyWithReductions) {
  Tensor data = f32({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  Tensor idx = i64({4, 3, 1, 7}, {4, 1});
  Tensor upd = f32({9, 10, 11, 12}, {4});
  expect_close(run1("ScatterND", {data, idx, upd}), f32({1, 11, 3, 10, 9, 6, 7, 12}, {8}));
  Tensor dup = i64({0, 0, -1}, {3, 1});
  Tensor u3 = f32({2, 3, 5}, {3});
  expect_close(run1("ScatterND", {data, dup, u3}, {{"reduction", attr_s("add")}}, 16),
               f32({6, 2, 3, 4, 5, 6, 7, 13}, {8}));
  expect_close(run1("ScatterND", {data, dup, u3}, {{"reduction", attr_s("mul")}}, 16),
               f32({6, 2, 3, 4, 5, 6, 7, 40}, {8}));
  expect_close(run1("ScatterND", {data, dup, u3}, {{"reduction", attr_s("max")}}, 18),
               f32({3, 2, 3, 4, 5, 6, 7, 8}, {8}));
  expect_close(run1("ScatterND", {data, dup, u3}, {{"reduction", attr_s("min")}}, 18),
               f32({1, 2, 3, 4, 5, 6, 7, 5}, {8}));
  expect_close(run1("ScatterND", {f16({1, 2}, {2}), i64({1}, {1, 1}), f16({0.5f}, {1})},
                    {{"reduction", attr_s("add")}}),
               f16({1, 2.5f}, {2}));
  // Slices: indices address whole rows.
  expect_close(run1("ScatterND", {iota_f32({2, 2}), i64({1}, {1, 1}), f32({7, 8}, {1, 2})}),
               f32({0, 1, 7, 8}, {2, 2}));
  EXPECT_NE(error_of("ScatterND", {data, i64({8}, {1, 1}), f32({0}, {1})}).find("index 8"),
            std::string::npos);
  EXPECT_THROW(run1("ScatterND", {data, dup, u3}, {{"reduction", attr_s("max")}}, 16), Error);

  Tensor d = Tensor::zeros(DType::f32, {3, 3});
  Tensor ei = i64({1, 0, 2, 0, 2, 1}, {2, 3});
  Tensor eu = f32({1, 1.1f, 1.2f, 2, 2.1f, 2.2f}, {2, 3});
  expect_close(run1("ScatterElements", {d, ei, eu}), f32({2, 1.1f, 0, 1, 0, 2.2f, 0, 2.1f, 1.2f}, {3, 3}));
  Tensor row = f32({1, 2, 3, 4, 5}, {1, 5});
  expect_close(run1("ScatterElements", {row, i64({1, 1, -1}, {1, 3}), f32({1.1f, 2.1f, 3}, {1, 3})},
                    {{"axis", attr_i(1)}, {"reduction", attr_s("add")}}, 16),
               f32({1, 5.2f, 3, 4, 8}, {1, 5}));
  expect_close(
      run1("Scatter", {row, i64({1, 3}, {1, 2}), f32({1.1f, 2.1f}, {1, 2})}, {{"axis", attr_i(1)}}, 10),
      f32({1, 1.1f, 3, 2.1f, 5}, {1, 5}));
  EXPECT_NE(error_of("ScatterElements", {row, i64({5}, {1, 1}), f32({0}, {1, 1})}, {{"axis", attr_i(1)}})
                .find("index 5"),
            std::string::npos);
  EXPECT_THROW(run1("ScatterElements", {row, i64({0}, {1, 1}), f32({0, 1}, {1, 2})}), Error);
}

TEST(TensorOps, ExpandAndTileMatchPlainIndexing) {
  Tensor x = iota_f32({3, 1});
  Tensor y = run1("Expand", {x, i64({2, 1, 4}, {3})});
  expect_close(y, ref_view(x, {2, 3, 4}, {0, 1, 0}, 0));
  Tensor row = iota_f32({1, 5});
  expect_close(run1("Expand", {row, i64({3, 1}, {2})}), ref_view(row, {3, 5}, {0, 1}, 0));
  expect_close(run1("Expand", {Tensor::scalar<float>(2.f), i64({2}, {1})}), f32({2, 2}, {2}));
  EXPECT_THROW(run1("Expand", {row, i64({3, 4}, {2})}), Error);

  Tensor t = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_close(run1("Tile", {t, i64({2, 2}, {2})}),
               f32({1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}, {4, 6}));
  expect_close(run1("Tile", {f32({7}, {1, 1}), i64({1, 3}, {2})}), f32({7, 7, 7}, {1, 3}));
  EXPECT_EQ(run1("Tile", {t, i64({0, 1}, {2})}).shape(), (Shape{0, 3}));
  EXPECT_THROW(run1("Tile", {t, i64({2}, {1})}), Error);
}

TEST(TensorOps, ShapeSizeConstantOfShapeConstant) {
  Tensor x(DType::f16, {2, 3, 4, 5});
  expect_close(run1("Shape", {x}), i64({2, 3, 4, 5}, {4}));
  expect_close(run1("Shape", {x}, {{"start", attr_i(1)}, {"end", attr_i(-1)}}, 15), i64({3, 4}, {2}));
  expect_close(run1("Shape", {x}, {{"start", attr_i(-10)}, {"end", attr_i(2)}}, 15), i64({2, 3}, {2}));
  expect_close(run1("Shape", {x}, {{"start", attr_i(3)}, {"end", attr_i(1)}}, 15), i64({}, {0}));
  expect_close(run1("Size", {x}), Tensor::scalar<int64_t>(120));

  expect_close(run1("ConstantOfShape", {i64({2, 2}, {2})}), f32({0, 0, 0, 0}, {2, 2}));
  expect_close(
      run1("ConstantOfShape", {i64({3}, {1})}, {{"value", attr_t(Tensor::from_vector<int32_t>({7}, {1}))}}),
      Tensor::from_vector<int32_t>({7, 7, 7}, {3}));
  expect_close(run1("ConstantOfShape", {i64({}, {0})}, {{"value", attr_t(f16({1.5f}, {1}))}}),
               f16({1.5f}, {}));
  EXPECT_THROW(run1("ConstantOfShape", {i64({-1}, {1})}), Error);

  expect_close(run1("Constant", {}, {{"value_floats", test::attr_floats({1.5f, 2})}}), f32({1.5f, 2}, {2}));
  expect_close(run1("Constant", {}, {{"value_int", attr_i(4)}}), Tensor::scalar<int64_t>(4));
  expect_close(run1("Constant", {}, {{"value", attr_t(i64({1, 2}, {2}))}}), i64({1, 2}, {2}));
  EXPECT_THROW(run1("Constant", {}), Error);
}

TEST(TensorOps, RangeNonZeroUnique) {
  expect_close(
      run1("Range", {Tensor::scalar<float>(1), Tensor::scalar<float>(2), Tensor::scalar<float>(0.3f)}),
      f32({1, 1.3f, 1.6f, 1.9f}, {4}));
  expect_close(
      run1("Range", {Tensor::scalar<int32_t>(10), Tensor::scalar<int32_t>(6), Tensor::scalar<int32_t>(-3)}),
      Tensor::from_vector<int32_t>({10, 7}, {2}));
  EXPECT_EQ(run1("Range", {i64({5}, {}), i64({1}, {}), i64({1}, {})}).shape(), (Shape{0}));
  EXPECT_THROW(run1("Range", {i64({0}, {}), i64({4}, {}), i64({0}, {})}), Error);

  expect_close(run1("NonZero", {f32({1, 0, 0, 3, 2, 0}, {2, 3})}), i64({0, 1, 1, 0, 0, 1}, {2, 3}));
  expect_close(run1("NonZero", {f16({0, -1, 0}, {3})}), i64({1}, {1, 1}));

  Tensor x = f32({2, 1, 1, 3, 4, 3}, {6});
  auto u = run_op("Unique", {x}, {{"sorted", attr_i(0)}}, 4);
  expect_close(u[0], f32({2, 1, 3, 4}, {4}));
  expect_close(u[1], i64({0, 1, 3, 4}, {4}));
  expect_close(u[2], i64({0, 1, 1, 2, 3, 2}, {6}));
  expect_close(u[3], i64({1, 2, 2, 1}, {4}));
  u = run_op("Unique", {x}, {}, 4);
  expect_close(u[0], f32({1, 2, 3, 4}, {4}));
  expect_close(u[1], i64({1, 0, 3, 4}, {4}));
  expect_close(u[2], i64({1, 0, 0, 2, 3, 2}, {6}));
  // With an axis, whole slices are compared (numpy.unique(axis=1)).
  Tensor m = f32({1, 0, 0, 1, 1, 0, 2, 2, 3, 3, 2, 2}, {2, 3, 2});
  u = run_op("Unique", {m}, {{"axis", attr_i(1)}}, 4);
  expect_close(u[0], f32({0, 1, 1, 0, 3, 3, 2, 2}, {2, 2, 2}));
  expect_close(u[1], i64({1, 0}, {2}));
  expect_close(u[2], i64({1, 0, 1}, {3}));
  expect_close(u[3], i64({1, 2}, {2}));
  u = run_op("Unique", {f32({1, 2, 1, 1, 1, 2}, {3, 2})}, {{"axis", attr_i(0)}}, 3);
  expect_close(u[0], f32({1, 1, 1, 2}, {2, 2}));
  expect_close(u[2], i64({1, 0, 1}, {3}));
}

TEST(TensorOps, TriluEyeLikeOneHot) {
  Tensor x = iota_f32({2, 3, 4});
  expect_close(
      run1("Trilu", {x}),
      f32({0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11, 12, 13, 14, 15, 0, 17, 18, 19, 0, 0, 22, 23}, {2, 3, 4}));
  expect_close(run1("Trilu", {iota_f32({3, 3}), i64({-1}, {})}, {{"upper", attr_i(0)}}),
               f32({0, 0, 0, 3, 0, 0, 6, 7, 0}, {3, 3}));
  expect_close(run1("Trilu", {iota_f32({2, 2}), i64({INT64_MAX}, {})}), f32({0, 0, 0, 0}, {2, 2}));
  expect_close(
      run1("Trilu", {boolean({true, true, true, true}, {2, 2}), i64({1}, {})}, {{"upper", attr_i(0)}}),
      boolean({true, true, true, true}, {2, 2}));
  EXPECT_THROW(run1("Trilu", {f32({1}, {1})}), Error);

  expect_close(run1("EyeLike", {Tensor(DType::i32, {2, 3})}, {{"k", attr_i(1)}}),
               Tensor::from_vector<int32_t>({0, 1, 0, 0, 0, 1}, {2, 3}));
  expect_close(run1("EyeLike", {Tensor(DType::f32, {3, 2})}, {{"k", attr_i(-1)}, {"dtype", attr_i(10)}}),
               f16({0, 0, 1, 0, 0, 1}, {3, 2}));
  EXPECT_THROW(run1("EyeLike", {Tensor(DType::f32, {3})}), Error);

  // Out-of-range indices give rows of off_value; negative ones count from depth.
  expect_close(run1("OneHot", {i64({0, -1, 5}, {3}), Tensor::scalar<float>(3), f32({0, 2}, {2})}),
               f32({2, 0, 0, 0, 0, 2, 0, 0, 0}, {3, 3}));
  expect_close(run1("OneHot", {f32({1, 0}, {2}), i64({2}, {1}), i64({-1, 1}, {2})}, {{"axis", attr_i(0)}}),
               i64({-1, 1, 1, -1}, {2, 2}));
  expect_close(run1("OneHot", {i64({1}, {1}), i64({2}, {1}), f16({0, 1}, {2})}), f16({0, 1}, {1, 2}));
  EXPECT_THROW(run1("OneHot", {i64({1}, {1}), i64({2}, {1}), f32({0, 1, 2}, {3})}), Error);
}

TEST(TensorOps, CompressAndReverseSequence) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  expect_close(run1("Compress", {x, boolean({false, true, true}, {3})}, {{"axis", attr_i(0)}}),
               f32({3, 4, 5, 6}, {2, 2}));
  expect_close(run1("Compress", {x, boolean({true, false}, {2})}, {{"axis", attr_i(-1)}}),
               f32({1, 3, 5}, {3, 1}));
  expect_close(run1("Compress", {x, boolean({false, true, false, false, true}, {5})}), f32({2, 5}, {2}));
  EXPECT_THROW(run1("Compress", {x, boolean({true, true, true, true}, {4})}, {{"axis", attr_i(0)}}), Error);

  Tensor s = iota_f32({4, 4});
  // time_axis=0, batch_axis=1: column b reverses its first lens[b] entries.
  expect_close(run1("ReverseSequence", {s, i64({4, 3, 2, 1}, {4})}),
               f32({12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15}, {4, 4}));
  expect_close(run1("ReverseSequence", {s, i64({1, 2, 3, 4}, {4})},
                    {{"time_axis", attr_i(1)}, {"batch_axis", attr_i(0)}}),
               f32({0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12}, {4, 4}));
  EXPECT_NE(error_of("ReverseSequence", {s, i64({5, 1, 1, 1}, {4})}).find("sequence_lens[0] is 5"),
            std::string::npos);
}

}  // namespace
}  // namespace vlrt

namespace vlrt::test {
namespace {

TEST(Range, EveryNumericType) {
  auto range = [](Tensor a, Tensor b, Tensor c) { return run_op("Range", {a, b, c})[0]; };
  auto s = []<class T>(T v) { return Tensor::scalar<T>(v); };
  Tensor i8 = range(s(int8_t(5)), s(int8_t(-4)), s(int8_t(-3)));
  EXPECT_EQ(i8.dtype(), DType::i8);
  EXPECT_EQ(i8.to_double_vector(), (std::vector<double>{5, 2, -1}));
  Tensor u8 = range(s(uint8_t(250)), s(uint8_t(255)), s(uint8_t(2)));
  EXPECT_EQ(u8.to_double_vector(), (std::vector<double>{250, 252, 254}));
  Tensor u64 = range(s(uint64_t(1)), s(uint64_t(4)), s(uint64_t(1)));
  EXPECT_EQ(u64.to_double_vector(), (std::vector<double>{1, 2, 3}));
  Tensor f64 = range(s(0.5), s(2.0), s(0.5));
  EXPECT_EQ(f64.to_double_vector(), (std::vector<double>{0.5, 1.0, 1.5}));
  Tensor half = range(Tensor::zeros(DType::f16, {}), run_op("Cast", {f32({2}, {})}, {{"to", attr_i(10)}})[0],
                      run_op("Cast", {f32({0.5f}, {})}, {{"to", attr_i(10)}})[0]);
  EXPECT_EQ(half.dtype(), DType::f16);
  EXPECT_EQ(half.to_double_vector(), (std::vector<double>{0, 0.5, 1, 1.5}));
  EXPECT_THROW(range(s(int8_t(0)), s(int8_t(4)), s(int8_t(0))), Error);
}

}  // namespace
}  // namespace vlrt::test
