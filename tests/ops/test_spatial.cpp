// Tests of the spatial ops: pooling, Resize/Upsample, GridSample, Pad, DepthToSpace/SpaceToDepth,
// MaxUnpool and RoiAlign. Expected values were computed with ONNX Runtime 1.31 or, where it differs from
// the ONNX spec or lacks the case, the ONNX 1.23 reference implementation, on the same pattern() inputs.
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ops/grid_sample.h"
#include "op_test_util.h"

namespace vlrt::test {
namespace {

// Deterministic inputs: ((i * 7) % mod - mod / 2) * scale + offset, converted to T.
template <class T = float>
Tensor pattern(Shape s, int64_t mod = 13, double scale = 0.5, double offset = 0) {
  std::vector<T> v(shape_numel(s));
  for (size_t i = 0; i < v.size(); i++) v[i] = T(double((int64_t(i) * 7) % mod - mod / 2) * scale + offset);
  return Tensor::from_vector<T>(v, std::move(s));
}

template <class T>
Tensor make(std::vector<T> v, Shape s) {
  return Tensor::from_vector<T>(v, std::move(s));
}

Tensor none() { return Tensor(); }

using Attrs = std::map<std::string, Attribute>;

}  // namespace

// ---- Pooling -------------------------------------------------------------------------------

// com.microsoft NhwcMaxPool: MaxPool of the channels-first copy, moved back to channels-last, for
// uint8 and int8 values, 5 channels, padding, strides, dilations, ceil mode, SAME padding, batch 2,
// one and two spatial axes.
TEST(Spatial, NhwcMaxPoolIsMaxPoolOnChannelsLastValues) {
  std::vector<Attrs> cases = {
      {{"kernel_shape", attr_ints({3, 3})},
       {"strides", attr_ints({2, 2})},
       {"pads", attr_ints({1, 1, 1, 1})}},
      {{"kernel_shape", attr_ints({2, 3})},
       {"dilations", attr_ints({2, 1})},
       {"ceil_mode", attr_i(1)},
       {"strides", attr_ints({2, 2})}},
      {{"kernel_shape", attr_ints({3, 2})},
       {"auto_pad", attr_s("SAME_LOWER")},
       {"strides", attr_ints({1, 3})}},
      {{"kernel_shape", attr_ints({1, 1})}},
  };
  auto move = [](const Tensor& t, std::vector<int64_t> perm) {
    return run_op("Transpose", {t}, {{"perm", attr_ints(std::move(perm))}})[0];
  };
  for (DType dtype : {DType::u8, DType::i8}) {
    Tensor x = dtype == DType::u8 ? pattern<uint8_t>({2, 5, 9, 11}, 251, 1, 125)
                                  : pattern<int8_t>({2, 5, 9, 11}, 251, 1, 0);
    Tensor x_last = move(x, {0, 2, 3, 1});
    for (size_t i = 0; i < cases.size(); i++) {
      SCOPED_TRACE(i);
      Node n = make_node("NhwcMaxPool", 1, 1, cases[i]);
      n.domain = "com.microsoft";
      Tensor got = run_node_cpu(n, 1, {&x_last}, test_pool()).at(0);
      Tensor want = move(run_op("MaxPool", {x}, cases[i])[0], {0, 2, 3, 1});
      ASSERT_EQ(got.shape(), want.shape());
      EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0);
    }
  }
  Tensor x1 = pattern<uint8_t>({1, 17, 3}, 251, 1, 125);  // [N, W, C]
  Node n = make_node("NhwcMaxPool", 1, 1, {{"kernel_shape", attr_ints({3})}, {"pads", attr_ints({1, 1})}});
  n.domain = "com.microsoft";
  Tensor got = run_node_cpu(n, 1, {&x1}, test_pool()).at(0);
  Tensor want = move(run_op("MaxPool", {move(x1, {0, 2, 1})}, n.attrs)[0], {0, 2, 1});
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0);
  Tensor f = pattern({1, 4, 4, 2});
  try {
    run_node_cpu(n, 1, {&f}, test_pool());
    ADD_FAILURE() << "a float32 NhwcMaxPool ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("X must be"), std::string::npos) << e.what();
  }
}

TEST(Spatial, MaxPool2dCeilModeWithIndices) {
  auto y = run_op("MaxPool", {pattern({1, 2, 5, 6})},
                  {{"kernel_shape", attr_ints({3, 3})},
                   {"strides", attr_ints({2, 2})},
                   {"pads", attr_ints({1, 1, 1, 1})},
                   {"ceil_mode", attr_i(1)}},
                  2);
  expect_close(y[0], f32({2.0f, 2.5f, 3.0f, 3.0f, 2.0f, 2.5f, 3.0f, 3.0f, 3.0f, 2.0f, 2.5f, 1.0f,
                          3.0f, 3.0f, 2.5f, 2.5f, 3.0f, 3.0f, 2.0f, 0.5f, 2.5f, 3.0f, 2.0f, 2.0f},
                         {1, 2, 3, 4}));
  expect_close(
      y[1], i64({7, 9, 11, 11, 7, 9, 11, 11, 24, 20, 22, 29, 37, 37, 35, 35, 37, 37, 46, 53, 48, 50, 59, 59},
                {1, 2, 3, 4}));
}

TEST(Spatial, MaxPoolColumnMajorIndices) {
  auto y = run_op(
      "MaxPool", {pattern({1, 2, 5, 6})},
      {{"kernel_shape", attr_ints({2, 3})}, {"strides", attr_ints({2, 1})}, {"storage_order", attr_i(1)}}, 2);
  expect_close(y[0], f32({2.0f, 2.5f, 2.5f, 3.0f, 2.0f, 2.0f, 2.5f, 2.5f, 3.0f, 3.0f, 2.0f, 2.5f, 3.0f, 3.0f,
                          3.0f, 2.0f},
                         {1, 2, 2, 4}));
  expect_close(y[1], i64({6, 16, 16, 26, 13, 13, 23, 23, 36, 36, 45, 55, 43, 43, 43, 52}, {1, 2, 2, 4}));
}

TEST(Spatial, MaxPoolDilationsAndSameLower) {
  expect_close(run_op("MaxPool", {pattern({1, 1, 5, 5})},
                      {{"kernel_shape", attr_ints({2, 2})}, {"dilations", attr_ints({2, 2})}})[0],
               f32({0.0f, 3.0f, 0.5f, 2.0f, 1.5f, 2.5f, 2.5f, 3.0f, 3.0f}, {1, 1, 3, 3}));
  expect_close(run_op("MaxPool", {pattern({1, 1, 6, 7})},
                      {{"kernel_shape", attr_ints({3, 3})},
                       {"strides", attr_ints({2, 2})},
                       {"auto_pad", attr_s("SAME_LOWER")}})[0],
               f32({2.0f, 2.5f, 3.0f, 1.5f, 2.5f, 3.0f, 3.0f, 2.0f, 2.5f, 3.0f, 3.0f, 2.0f}, {1, 1, 3, 4}));
}

TEST(Spatial, MaxPool1dAnd3d) {
  auto y1 =
      run_op("MaxPool", {pattern({1, 2, 9})},
             {{"kernel_shape", attr_ints({3})}, {"strides", attr_ints({2})}, {"pads", attr_ints({1, 1})}}, 2);
  expect_close(y1[0], f32({0.5f, 1.0f, 1.5f, 2.0f, 2.0f, 2.5f, 3.0f, 0.5f, 1.0f, 1.0f}, {1, 2, 5}));
  expect_close(y1[1], i64({1, 3, 5, 7, 7, 9, 11, 14, 16, 16}, {1, 2, 5}));
  auto y3 = run_op("MaxPool", {pattern({1, 1, 3, 4, 4})},
                   {{"kernel_shape", attr_ints({2, 2, 2})}, {"strides", attr_ints({1, 2, 2})}}, 2);
  expect_close(y3[0], f32({2.0f, 2.5f, 3.0f, 3.0f, 3.0f, 2.5f, 3.0f, 2.0f}, {1, 1, 2, 2, 2}));
  expect_close(y3[1], i64({20, 22, 24, 11, 37, 22, 24, 46}, {1, 1, 2, 2, 2}));
}

TEST(Spatial, MaxPoolInt8AndFloat16) {
  expect_close(run_op("MaxPool", {pattern<int8_t>({1, 1, 4, 4}, 11, 7)},
                      {{"kernel_shape", attr_ints({2, 2})}, {"strides", attr_ints({2, 2})}})[0],
               make<int8_t>({14, 35, 21, 35}, {1, 1, 2, 2}));
  Tensor h(DType::f16, {1, 1, 2, 2});
  const float v[] = {1.5f, -2.f, 3.25f, 0.5f};
  for (int i = 0; i < 4; i++) static_cast<uint16_t*>(h.raw())[i] = float_to_half(v[i]);
  Tensor y = run_op("MaxPool", {h}, {{"kernel_shape", attr_ints({2, 2})}})[0];
  ASSERT_EQ(y.dtype(), DType::f16);
  EXPECT_EQ(half_to_float(static_cast<const uint16_t*>(y.raw())[0]), 3.25f);
}

TEST(Spatial, AveragePoolPadsAndCeilMode) {
  Attrs a = {{"kernel_shape", attr_ints({3, 3})},
             {"strides", attr_ints({2, 2})},
             {"pads", attr_ints({1, 1, 1, 1})},
             {"ceil_mode", attr_i(1)}};
  expect_close(run_op("AveragePool", {pattern({1, 2, 5, 6})}, a)[0],
               f32({-0.5f,         0.416666657f, 0.916666687f, 2.25f, -0.416666657f,  -0.222222224f,
                    0.277777791f,  0.166666672f, 0.75f,        -0.5f, 0.0f,           0.25f,
                    0.5f,          0.333333343f, -0.25f,       0.0f,  0.583333313f,   0.055555556f,
                    -0.888888896f, -1.0f,        0.125f,       0.5f,  -0.0833333358f, 1.25f},
                   {1, 2, 3, 4}));
  a["count_include_pad"] = attr_i(1);
  expect_close(run_op("AveragePool", {pattern({1, 2, 5, 6})}, a)[0],
               f32({-0.222222224f, 0.277777791f,  0.611111104f,  0.75f,         -0.277777791f, -0.222222224f,
                    0.277777791f,  0.0833333358f, 0.333333343f,  -0.333333343f, 0.0f,          0.0833333358f,
                    0.222222224f,  0.222222224f,  -0.166666672f, 0.0f,          0.388888896f,  0.055555556f,
                    -0.888888896f, -0.5f,         0.055555556f,  0.333333343f,  -0.055555556f, 0.416666657f},
                   {1, 2, 3, 4}));
  expect_close(run_op("AveragePool", {pattern({1, 1, 3, 3})},
                      {{"kernel_shape", attr_ints({2, 2})}, {"auto_pad", attr_s("SAME_UPPER")}})[0],
               f32({-0.875f, -0.625f, -0.5f, -0.125f, 0.125f, 0.25f, 0.25f, 0.5f, -1.0f}, {1, 1, 3, 3}));
  expect_close(
      run_op(
          "AveragePool", {pattern<double>({1, 1, 7})},
          {{"kernel_shape", attr_ints({3})}, {"strides", attr_ints({2})}, {"auto_pad", attr_s("VALID")}})[0],
      make<double>({-1.6666666666666667, -1.1666666666666667, -0.66666666666666663}, {1, 1, 3}));
}

TEST(Spatial, LpPool) {
  expect_close(run_op("LpPool", {pattern({1, 1, 4, 5})},
                      {{"kernel_shape", attr_ints({2, 2})}, {"pads", attr_ints({0, 1, 0, 1})}})[0],
               f32({3.3541019f, 3.70809913f, 3.57071424f, 3.5f, 3.5f, 3.20156217f, 1.58113885f, 3.70809913f,
                    3.9051249f, 3.7416575f, 4.06201935f, 2.54950976f, 2.54950976f, 4.06201935f, 3.7416575f,
                    3.9051249f, 3.70809913f, 1.58113885f},
                   {1, 1, 3, 6}));
  expect_close(
      run_op("LpPool", {pattern({1, 1, 4, 5})},
             {{"kernel_shape", attr_ints({2, 2})}, {"strides", attr_ints({2, 2})}, {"p", attr_i(3)}})[0],
      f32({3.23563695f, 2.94818425f, 3.52364945f, 3.37299848f}, {1, 1, 2, 2}));
}

TEST(Spatial, GlobalPools) {
  Tensor x = pattern({2, 3, 3, 4});
  expect_close(run_op("GlobalAveragePool", {x})[0],
               f32({0.0f, -0.25f, 0.0416666679f, -0.208333328f, 0.0833333358f, -0.166666672f}, {2, 3, 1, 1}));
  expect_close(run_op("GlobalMaxPool", {x})[0], f32({3.0f, 2.5f, 3.0f, 3.0f, 3.0f, 3.0f}, {2, 3, 1, 1}));
  expect_close(
      run_op("GlobalLpPool", {x}, {{"p", attr_i(2)}})[0],
      f32({6.74536896f, 6.04152298f, 6.72681189f, 6.26498222f, 6.67083216f, 6.4420495f}, {2, 3, 1, 1}));
}

TEST(Spatial, PoolErrors) {
  Attrs k = {{"kernel_shape", attr_ints({2, 2})}};
  EXPECT_THROW(run_op("MaxPool", {pattern({4, 4})}, k), Error);
  EXPECT_THROW(run_op("MaxPool", {pattern({1, 1, 4, 4})}), Error);
  EXPECT_THROW(run_op("MaxPool", {pattern({1, 1, 4, 4})}, {{"kernel_shape", attr_ints({2})}}), Error);
  EXPECT_THROW(run_op("MaxPool", {pattern({1, 1, 4, 4})},
                      {{"kernel_shape", attr_ints({2, 2})}, {"pads", attr_ints({2, 0, 0, 0})}}),
               Error);
  EXPECT_THROW(run_op("MaxPool", {pattern({1, 1, 4, 4})}, {{"kernel_shape", attr_ints({5, 1})}}), Error);
  EXPECT_THROW(run_op("AveragePool", {pattern<int32_t>({1, 1, 4, 4})}, k), Error);
  EXPECT_THROW(run_op("AveragePool", {pattern({1, 1, 4, 4})}, k, 2), Error);
  EXPECT_THROW(run_op("GlobalAveragePool", {pattern({2, 3})}), Error);
}

// ---- MaxUnpool -----------------------------------------------------------------------------

TEST(Spatial, MaxUnpool) {
  Tensor x = f32({5, 6, 7, 8}, {1, 1, 2, 2});
  Tensor ind = i64({5, 7, 13, 15}, {1, 1, 2, 2});
  Attrs a = {{"kernel_shape", attr_ints({2, 2})}, {"strides", attr_ints({2, 2})}};
  expect_close(
      run_op("MaxUnpool", {x, ind}, a, 1, 11)[0],
      f32({0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 5.0f, 0.0f, 6.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 7.0f, 0.0f, 8.0f},
          {1, 1, 4, 4}));
  expect_close(run_op("MaxUnpool", {x, ind, i64({1, 1, 5, 5}, {4})}, a, 1, 11)[0],
               f32({0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 5.0f, 0.0f, 6.0f, 0.0f, 0.0f, 0.0f, 0.0f,
                    0.0f, 0.0f, 0.0f, 7.0f, 0.0f, 8.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
                   {1, 1, 5, 5}));
  EXPECT_THROW(run_op("MaxUnpool", {x, i64({5, 7, 13, 16}, {1, 1, 2, 2})}, a, 1, 11), Error);
  EXPECT_THROW(run_op("MaxUnpool", {x, ind, i64({1, 1, 3, 3}, {4})}, a, 1, 11), Error);
}

TEST(Spatial, MaxPoolIndicesFeedMaxUnpool) {
  Tensor x = pattern({1, 2, 4, 6});
  Attrs a = {{"kernel_shape", attr_ints({2, 2})}, {"strides", attr_ints({2, 2})}};
  auto p = run_op("MaxPool", {x}, a, 2);
  Tensor u = run_op("MaxUnpool", {p[0], p[1]}, a, 1, 11)[0];
  // Every pooled maximum lands back where it came from; all else is zero.
  auto xv = x.to_double_vector(), uv = u.to_double_vector();
  auto iv = p[1].to_int64_vector();
  int64_t placed = 0;
  for (size_t i = 0; i < uv.size(); i++) {
    bool is_max = std::find(iv.begin(), iv.end(), int64_t(i)) != iv.end();
    EXPECT_EQ(uv[i], is_max ? xv[i] : 0.0) << i;
    placed += is_max;
  }
  EXPECT_EQ(placed, 12);
}

// ---- Resize / Upsample ---------------------------------------------------------------------

namespace {

Tensor scales(std::vector<float> v) { return Tensor::from_vector<float>(v, {int64_t(v.size())}); }

Tensor resize13(const Tensor& x, Tensor roi, Tensor sc, Tensor sizes, Attrs a) {
  return run_op("Resize", {x, roi, sc, sizes}, std::move(a), 1, 13)[0];
}

}  // namespace

TEST(Spatial, ResizeNearestModes) {
  Tensor x = pattern({1, 2, 4, 5});
  Tensor e = f32({}, {0});
  expect_close(resize13(x, e, scales({1, 1, 1.7f, 0.6f}), none(), {{"mode", attr_s("nearest")}}),
               f32({-3.0f, -2.5f, -2.0f, -3.0f, -2.5f, -2.0f, 1.5f,  2.0f,  2.5f,  -0.5f, 0.0f, 0.5f,
                    -0.5f, 0.0f,  0.5f,  -2.5f, -2.0f, -1.5f, 2.0f,  2.5f,  3.0f,  2.0f,  2.5f, 3.0f,
                    0.0f,  0.5f,  1.0f,  -2.0f, -1.5f, -1.0f, -2.0f, -1.5f, -1.0f, 2.5f,  3.0f, -3.0f},
                   {1, 2, 6, 3}));
  expect_close(resize13(x, e, scales({1, 1, 1.7f, 0.6f}), none(),
                        {{"mode", attr_s("nearest")},
                         {"coordinate_transformation_mode", attr_s("asymmetric")},
                         {"nearest_mode", attr_s("round_prefer_ceil")}}),
               f32({-3.0f, -2.5f, 1.0f,  1.5f,  2.0f,  -1.0f, 1.5f,  2.0f,  -1.0f, -0.5f, 0.0f, -3.0f,
                    -0.5f, 0.0f,  -3.0f, -2.5f, -2.0f, 1.5f,  2.0f,  2.5f,  -0.5f, 0.0f,  0.5f, -2.5f,
                    0.0f,  0.5f,  -2.5f, -2.0f, -1.5f, 2.0f,  -2.0f, -1.5f, 2.0f,  2.5f,  3.0f, 0.0f},
                   {1, 2, 6, 3}));
  // align_corners with fractional scales uses in * scale as the resized length (the reference's rule).
  expect_close(
      resize13(x, e, scales({1, 1, 1.7f, 1.5f}), none(),
               {{"mode", attr_s("nearest")},
                {"coordinate_transformation_mode", attr_s("align_corners")},
                {"nearest_mode", attr_s("floor")}}),
      f32({-3.0f, -3.0f, 0.5f,  0.5f,  -2.5f, 1.0f,  1.0f,  -3.0f, -3.0f, 0.5f,  0.5f,  -2.5f, 1.0f,  1.0f,
           1.5f,  1.5f,  -1.5f, -1.5f, 2.0f,  -1.0f, -1.0f, 1.5f,  1.5f,  -1.5f, -1.5f, 2.0f,  -1.0f, -1.0f,
           -0.5f, -0.5f, 3.0f,  3.0f,  0.0f,  -3.0f, -3.0f, -0.5f, -0.5f, 3.0f,  3.0f,  0.0f,  -3.0f, -3.0f,
           2.0f,  2.0f,  -1.0f, -1.0f, 2.5f,  -0.5f, -0.5f, 2.0f,  2.0f,  -1.0f, -1.0f, 2.5f,  -0.5f, -0.5f,
           0.0f,  0.0f,  -3.0f, -3.0f, 0.5f,  -2.5f, -2.5f, 0.0f,  0.0f,  -3.0f, -3.0f, 0.5f,  -2.5f, -2.5f,
           -2.0f, -2.0f, 1.5f,  1.5f,  -1.5f, 2.0f,  2.0f,  -2.0f, -2.0f, 1.5f,  1.5f,  -1.5f, 2.0f,  2.0f},
          {1, 2, 6, 7}));
  expect_close(run_op("Resize", {x, e, scales({1, 1, 1.5f, 0.6f})},
                      {{"mode", attr_s("nearest")},
                       {"coordinate_transformation_mode", attr_s("tf_half_pixel_for_nn")},
                       {"nearest_mode", attr_s("ceil")}},
                      1, 11)[0],
               f32({-1.5f, -1.0f, 2.5f,  -1.5f, -1.0f, 2.5f,  3.0f,  -3.0f, 0.5f,  1.0f,  1.5f,  -1.5f,
                    1.0f,  1.5f,  -1.5f, 1.0f,  1.5f,  -1.5f, -3.0f, -2.5f, 1.0f,  -3.0f, -2.5f, 1.0f,
                    1.5f,  2.0f,  -1.0f, -0.5f, 0.0f,  -3.0f, -0.5f, 0.0f,  -3.0f, -0.5f, 0.0f,  -3.0f},
                   {1, 2, 6, 3}));
}

TEST(Spatial, ResizeLinear) {
  Tensor x = pattern({1, 2, 4, 5});
  expect_close(
      resize13(x, none(), scales({1, 1, 2, 1.5f}), none(), {{"mode", attr_s("linear")}}),
      f32({-3.0f,   -1.25f,   1.1920929e-07f, -1.99999964f,    -0.75f,   0.499999762f,     -1.50000048f,
           -1.875f, -0.9375f, -0.229166627f,  -1.14583325f,    -0.4375f, 0.270833224f,     -0.645833552f,
           0.375f,  -0.3125f, -0.68750006f,   0.562499881f,    0.1875f,  -0.187499851f,    1.06250024f,
           1.0f,    0.3125f,  -0.0625000596f, 1.18749976f,     0.0f,     -0.916666389f,    1.41666722f,
           0.0f,    0.9375f,  1.64583325f,    0.729166746f,    -1.0f,    -1.91666639f,     0.416667223f,
           -1.0f,   0.75f,    2.0f,           2.38418579e-07f, -1.1875f, -1.56249976f,     -0.312499702f,
           -2.0f,   -0.25f,   1.0f,           -0.999999762f,   -0.5625f, 0.145833164f,     -0.770833552f,
           -2.5f,   -0.75f,   0.500000119f,   -1.49999976f,    -0.25f,   0.999999702f,     -1.00000048f,
           2.0f,    0.5f,     -0.416666806f,  1.91666627f,     1.0f,     0.0833336115f,    2.41666722f,
           1.5f,    0.0f,     -0.916666746f,  1.41666639f,     0.5f,     -0.416666359f,    1.91666734f,
           0.5f,    -1.0f,    -1.91666675f,   0.416666359f,    -0.5f,    -1.41666651f,     0.916667223f,
           -0.5f,   -1.1875f, -1.5625f,       -0.312500149f,   -0.6875f, -1.06249976f,     0.187500298f,
           -1.5f,   -0.5625f, 0.145833358f,   -0.770833194f,   -0.0625f, 0.645833254f,     -0.270833552f,
           -0.875f, 0.0625f,  0.770833373f,   -0.145833194f,   0.5625f,  0.999999702f,     -1.00000048f,
           1.375f,  0.6875f,  0.312499911f,   1.56249976f,     1.1875f,  -2.38418579e-07f, -2.00000048f,
           2.5f,    1.0f,     0.0833331943f,  2.41666651f,     1.5f,     -0.500000238f,    -2.50000048f},
          {1, 2, 8, 7}));
  expect_close(
      resize13(x, none(), none(), i64({1, 2, 3, 8}, {4}),
               {{"mode", attr_s("linear")}, {"coordinate_transformation_mode", attr_s("align_corners")}}),
      f32({-3.0f,         -0.999999881f,  0.0714284182f,   -1.64285731f,
           -1.49999964f,  0.500000238f,   -0.285714388f,   -2.0f,
           0.5f,          0.642857134f,   0.785714269f,    0.928571403f,
           0.142856836f,  -1.57142878f,   -0.499999881f,   1.5f,
           -2.5f,         -0.49999997f,   0.571428418f,    -1.14285719f,
           -0.999999583f, 1.00000024f,    0.214285612f,    -1.5f,
           2.0f,          0.285714209f,   -0.499999821f,   1.50000012f,
           1.64285684f,   -0.0714287758f, 1.00000012f,     3.0f,
           -1.0f,         -0.857142925f,  -0.714285731f,   -0.571428537f,
           -0.428571403f, -0.285714269f,  -0.142857134f,   0.0f,
           2.5f,          0.785714269f,   1.78813934e-07f, 2.0f,
           2.14285684f,   0.428571224f,   -1.28571439f,    -3.0f},
          {1, 2, 3, 8}));
  expect_close(resize13(x, none(), none(), i64({1, 2, 7, 1}, {4}),
                        {{"mode", attr_s("linear")},
                         {"coordinate_transformation_mode", attr_s("pytorch_half_pixel")}}),
               f32({-3.0f, -1.39285719f, 1.17857158f, 0.5f, -0.642857075f, -1.78571415f, -2.5f, 2.0f,
                    1.28571427f, 0.142857075f, -1.0f, -1.67857158f, 0.892856836f, 2.5f},
                   {1, 2, 7, 1}));
  expect_close(
      resize13(x, none(), scales({1, 1, 0.5f, 0.7f}), none(),
               {{"mode", attr_s("linear")}, {"coordinate_transformation_mode", attr_s("asymmetric")}}),
      f32({-3.0f, -0.785714388f, 0.500000238f, -0.5f, 1.71428561f, -2.57142878f, 2.0f, 0.500000119f,
           -0.0714287758f, -2.0f, 0.214285612f, 1.50000024f},
          {1, 2, 2, 3}));
}

TEST(Spatial, ResizeCubic) {
  Tensor x = pattern({1, 2, 4, 5});
  expect_close(
      resize13(x, none(), scales({1, 1, 1.5f, 0.8f}), none(),
               {{"mode", attr_s("cubic")}, {"cubic_coeff_a", attr_f(-0.5f)}, {"exclude_outside", attr_i(1)}}),
      f32({-2.95889449f,  -0.438296646f, -0.125796646f, -1.99570704f,   -0.762869358f, -0.568445563f,
           0.039033778f,  0.233457685f,  1.31475425f,   -0.0197067503f, -0.368861347f, 2.20360756f,
           0.134324729f,  2.15550995f,   -2.23322344f,  0.56934911f,    -1.34323788f,  1.30155671f,
           -1.04075718f,  -0.678307116f, -2.33148599f,  -0.084941715f,  0.557469487f,  -1.33123434f,
           1.86829793f,   0.253648728f,  0.566148698f,  2.83148551f,    0.880050421f,  -0.962833226f,
           -0.650333166f, 1.84323776f,   -0.597511232f, -1.70021808f,   -1.39322829f,  0.434878975f,
           -1.77794242f,  0.244895443f,  0.52984482f,   -0.468746156f,  0.299682081f,  0.739142895f,
           1.30368221f,   -1.90249991f,  2.49570823f,   0.625796676f,   1.44569147f,   -2.91349292f},
          {1, 2, 6, 4}));
  expect_close(
      resize13(x, none(), scales({1, 1, 2, 2}), none(),
               {{"mode", attr_s("cubic")}, {"coordinate_transformation_mode", attr_s("align_corners")}}),
      f32({-3.0f,         -1.22153652f,  0.375855684f,   -0.250000298f,  -2.15740633f,  -2.02229023f,
           0.0648154616f, 0.954731464f,  -0.399176955f,  -2.0f,          -0.953353167f, -0.859606564f,
           -0.733562768f, -0.632167339f, -0.571302474f,  -0.268439531f,  0.118507549f,  0.343639791f,
           0.228761062f,  0.0466470718f, 1.11297357f,    -0.344993532f,  -1.57413936f,  -0.776725411f,
           1.11835396f,   1.42121768f,   -0.0260504335f, -0.496935308f,  0.743374646f,  2.11297321f,
           1.55174863f,   0.473089963f,  -0.424786031f,  0.341986001f,   1.90236378f,   1.38202667f,
           -1.04628313f,  -1.79307365f,  0.256048262f,   2.55174875f,    0.4431476f,    1.18220997f,
           1.87184215f,   2.01752043f,   1.58751714f,    -0.0790878385f, -2.34912491f,  -2.90167546f,
           -0.852552652f, 1.4431479f,    -0.8994174f,    1.14505446f,    2.97476673f,   2.57543826f,
           0.635392547f,  -1.27040708f,  -2.41271067f,   -2.50932813f,   -1.26901639f,  0.100582391f,
           -1.81778455f,  0.226687074f,  2.05639839f,    1.49125373f,    -0.583899856f, -1.51117837f,
           -0.954377413f, -0.520792365f, -0.635670483f,  -0.817784548f,  -2.5f,         -0.721536517f,
           0.875855923f,  0.249999523f,  -1.65740633f,   -1.52229047f,   0.56481564f,   1.4547317f,
           0.100822985f,  -1.5f,         2.0f,           0.399176955f,   -0.954731584f, -0.0648145676f,
           2.02228999f,   2.15740681f,   0.249999106f,   -0.375855446f,  1.22153664f,   3.0f,
           1.31778455f,   -0.549046636f, -2.13527417f,   -1.12603879f,   1.2755028f,    1.41061962f,
           -0.811225951f, -1.55639791f,  0.273312986f,   2.31778479f,    0.399417639f,  -1.4674139f,
           -3.05364227f,  -2.04440618f,  0.357135952f,   0.492252648f,   -1.72959399f,  -2.47476602f,
           -0.645054519f, 1.3994174f,    -0.943147779f,  -1.50456977f,   -1.95071757f,  -1.52702117f,
           -0.668548226f, -0.541620135f, -1.24379146f,   -1.34571671f,   -0.522342026f, 0.341105402f,
           -2.05174875f,  -0.795449555f, 0.34591043f,    -0.0457298681f, -1.33590758f,  -1.22126269f,
           0.190125406f,  0.990099788f,  0.426586151f,   -0.341105402f,  -1.61297381f,  0.0226339474f,
           1.4952637f,    0.933484495f,  -0.805057824f,  -0.647286892f,  1.33568347f,   2.00185943f,
           0.402686179f,  -1.3994174f,   0.453352928f,   0.537247002f,   0.654687107f,  0.788926542f,
           0.88459897f,   1.1283493f,    1.52275741f,    0.886967301f,   -0.761335731f, -2.31778479f,
           2.5f,          0.899176836f,  -0.454731315f,  0.435185373f,   2.52228999f,   2.84465027f,
           1.47222185f,   -0.473253965f, -1.93415761f,   -3.0f},
          {1, 2, 8, 10}));
}

TEST(Spatial, ResizeTfCropAndResize) {
  Tensor x = pattern({1, 2, 4, 5});
  expect_close(resize13(x, f32({0, 0, 0.2f, 0.4f, 1, 1, 1.1f, 0.9f}, {8}), none(), i64({1, 2, 3, 3}, {4}),
                        {{"mode", attr_s("linear")},
                         {"coordinate_transformation_mode", attr_s("tf_crop_and_resize")},
                         {"extrapolation_value", attr_f(10)}}),
               f32({-0.159999967f, -0.0399999321f, 0.339999914f, 1.16999996f, -1.69999981f, -0.800000429f,
                    10.0f, 10.0f, 10.0f, -0.0999999642f, -0.499999732f, 0.399999678f, -0.330000043f,
                    0.504999757f, 0.170000315f, 10.0f, 10.0f, 10.0f},
                   {1, 2, 3, 3}));
  expect_close(resize13(x, f32({0, 0, -0.2f, 0.4f, 1, 1, 0.8f, 1.3f}, {8}), none(), i64({1, 2, 3, 4}, {4}),
                        {{"mode", attr_s("nearest")},
                         {"coordinate_transformation_mode", attr_s("tf_crop_and_resize")},
                         {"extrapolation_value", attr_f(-1)}}),
               f32({-1.0f, -1.0f, -1.0f, -1.0f, 2.0f, -1.0f, 2.5f, -1.0f, 0.0f,  -3.0f, 0.5f,  -1.0f,
                    -1.0f, -1.0f, -1.0f, -1.0f, 0.5f, -2.5f, 1.0f, -1.0f, -1.5f, 2.0f,  -1.0f, -1.0f},
                   {1, 2, 3, 4}));
}

TEST(Spatial, ResizeOpset18AxesPolicyAntialias) {
  Tensor x = pattern({1, 2, 4, 5});
  auto r18 = [](const Tensor& in, Tensor sc, Tensor sizes, Attrs a) {
    return run_op("Resize", {in, none(), sc, sizes}, std::move(a), 1, 18)[0];
  };
  expect_close(r18(x, none(), i64({3, 6}, {2}), {{"mode", attr_s("linear")}, {"axes", attr_ints({3, 2})}}),
               f32({-1.83333337f,  -2.5f,        -0.999999523f, -0.666666687f,   -0.25f,       0.166666627f,
                    0.527777791f,  1.66666675f,  0.999999523f,  0.638888836f,    0.333333492f, -0.333333731f,
                    -0.333333403f, -1.0f,        -0.583333373f, -1.33333349f,    -2.0f,        -0.499999523f,
                    1.0f,          2.5f,         1.83333278f,   2.98023224e-08f, 1.5f,         0.833332777f,
                    -0.972222149f, 0.166666746f, -0.138889238f, -0.861111164f,   -1.16666651f, -0.0277774334f,
                    0.333333373f,  0.75f,        -0.999999523f, 1.50000012f,     3.0f,         -1.99999952f},
                   {1, 2, 6, 3}));
  expect_close(
      r18(x, none(), i64({8, 7}, {2}),
          {{"mode", attr_s("nearest")},
           {"axes", attr_ints({2, 3})},
           {"keep_aspect_ratio_policy", attr_s("not_larger")}}),
      f32({-3.0f, 0.5f,  0.5f,  -2.5f, 1.0f,  1.0f,  -2.0f, 1.5f,  -1.5f, -1.5f, 2.0f,  -1.0f, -1.0f, 2.5f,
           1.5f,  -1.5f, -1.5f, 2.0f,  -1.0f, -1.0f, 2.5f,  -0.5f, 3.0f,  3.0f,  0.0f,  -3.0f, -3.0f, 0.5f,
           -2.5f, 1.0f,  1.0f,  -2.0f, 1.5f,  1.5f,  -1.5f, -2.5f, 1.0f,  1.0f,  -2.0f, 1.5f,  1.5f,  -1.5f,
           2.0f,  -1.0f, -1.0f, 2.5f,  -0.5f, -0.5f, 3.0f,  0.0f,  -3.0f, -3.0f, 0.5f,  -2.5f, -2.5f, 1.0f,
           0.0f,  -3.0f, -3.0f, 0.5f,  -2.5f, -2.5f, 1.0f,  -2.0f, 1.5f,  1.5f,  -1.5f, 2.0f,  2.0f,  -1.0f,
           2.5f,  -0.5f, -0.5f, 3.0f,  0.0f,  0.0f,  -3.0f, 2.5f,  -0.5f, -0.5f, 3.0f,  0.0f,  0.0f,  -3.0f},
          {1, 2, 6, 7}));
  expect_close(r18(x, none(), i64({2, 3}, {2}),
                   {{"mode", attr_s("linear")},
                    {"axes", attr_ints({2, 3})},
                    {"keep_aspect_ratio_policy", attr_s("not_smaller")}}),
               f32({-1.0555557f, -1.00000012f, -0.222222209f, 0.666666627f, 0.0f, -0.666667223f, 0.333333462f,
                    1.83333337f, 1.16666603f, -0.833333373f, -1.5f, 4.76837158e-07f},
                   {1, 2, 2, 3}));
  expect_close(r18(pattern({1, 1, 8, 9}), scales({0.5f, 0.4f}), none(),
                   {{"mode", attr_s("linear")}, {"axes", attr_ints({2, 3})}, {"antialias", attr_i(1)}}),
               f32({-0.155000001f, -0.247499987f, -0.234999985f, 0.212500006f, -0.0750000104f, 0.359999985f,
                    0.0975000039f, -0.0925000012f, -0.0474999957f, -0.0549999997f, -0.375f, -0.0374999829f},
                   {1, 1, 4, 3}));
  expect_close(r18(pattern({1, 1, 8, 9}), scales({0.6f, 0.45f}), none(),
                   {{"mode", attr_s("cubic")}, {"axes", attr_ints({2, 3})}, {"antialias", attr_i(1)}}),
               f32({-0.223141357f, -0.264233589f, -0.618276596f, -0.250063896f, 0.513651192f, 0.290390015f,
                    0.573810518f, -0.324887067f, 0.311132491f, -0.661962867f, -0.347512752f, 0.237021729f,
                    -0.350145966f, 0.462108403f, 0.72285378f, -0.362650543f},
                   {1, 1, 4, 4}));
  expect_close(
      r18(x, scales({1, 1, 0.7f, 1.3f}), none(),
          {{"mode", attr_s("linear")}, {"coordinate_transformation_mode", attr_s("half_pixel_symmetric")}}),
      f32({0.412087977f,  -0.824175715f, 0.225274667f,  0.417582363f,  -0.247252643f, 1.37362647f,
           -0.659340918f, 2.03296685f,   0.725274742f,  -1.04670334f,  -1.71153831f,  -0.0906592086f,
           0.197802439f,  -2.10988998f,  -0.417582452f, -0.225274742f, -1.53296685f,  1.15934098f,
           -0.873626471f, 0.747252643f,  0.0824176297f, 0.274725318f,  1.10988998f,   -1.19780242f},
          {1, 2, 2, 6}));
}

TEST(Spatial, ResizeIntegerAndOtherRanks) {
  // Integer linear results round half to even and saturate, like the reference.
  expect_close(resize13(pattern<uint8_t>({1, 1, 3, 4}, 17, 9, 100), none(), scales({1, 1, 1.7f, 1.3f}),
                        none(), {{"mode", attr_s("linear")}}),
               make<uint8_t>({28,  69,  118, 137, 67, 66, 69,  97, 127, 103, 124, 68, 65,
                              113, 158, 97,  94,  83, 82, 130, 73, 114, 98,  58,  107},
                             {1, 1, 5, 5}));
  expect_close(
      resize13(pattern<int32_t>({1, 1, 3, 4}, 17, 9), none(), scales({1, 1, 2, 1.5f}), none(),
               {{"mode", attr_s("nearest")}}),
      make<int32_t>({-72, -72, -9,  54, 54, -36, -72, -72, -9, 54,  54,  -36, 27,  27,  -63, 0,   0,   63,
                     27,  27,  -63, 0,  0,  63,  -27, -27, 36, -54, -54, 9,   -27, -27, 36,  -54, -54, 9},
                    {1, 1, 6, 6}));
  expect_close(
      resize13(pattern({1, 1, 2, 3, 4}), none(), scales({1, 1, 2, 1.5f, 0.5f}), none(),
               {{"mode", attr_s("linear")}}),
      f32({-1.25f,   -0.75f,   -0.75f,   -0.25f,   -0.0833334029f, 0.416666657f, 0.583333194f, 1.08333325f,
           -1.3125f, -0.8125f, -0.8125f, -0.3125f, -0.145833358f,  0.354166597f, 0.520833254f, 1.02083313f,
           -1.4375f, -0.9375f, -0.9375f, -0.4375f, -0.270833373f,  0.229166657f, 0.395833224f, 0.895833254f,
           -1.5f,    -1.0f,    -1.0f,    -0.5f,    -0.333333373f,  0.166666627f, 0.333333254f, 0.833333254f},
          {1, 1, 4, 4, 2}));
  expect_close(
      resize13(pattern({2, 3, 4}), none(), scales({1, 1.5f, 1.75f}), none(), {{"mode", attr_s("cubic")}}),
      f32({-3.43406367f,  -1.70970976f,    0.351514995f, -1.08680606f,   -2.5251267f,   -0.46390149f,
           1.26045167f,   -2.94100666f,    -1.21665359f, 0.844570279f,   -0.59375f,     -2.03207016f,
           0.029154066f,  1.75350666f,     -2.11693311f, -0.392579615f,  1.66864526f,   0.230324566f,
           -1.20799625f,  0.853228569f,    2.57758212f,  -1.47341561f,   0.2509377f,    2.31216264f,
           0.87384212f,   -0.564478815f,   1.49674594f,  3.22109962f,    0.21084322f,   -1.32427907f,
           -3.07683063f,  -1.33680606f,    0.403218865f, -1.34933221f,   -2.8844552f,   0.703898668f,
           -0.831223071f, -2.58377385f,    -0.84375f,    0.896274149f,   -0.856276274f, -2.39139843f,
           1.52797365f,   -0.00714892428f, -1.7597003f,  -0.0196755379f, 1.72034919f,   -0.0322021395f,
           -1.56732476f,  2.17149115f,     0.636368394f, -1.1161828f,    0.623842001f,  2.36386657f,
           0.611315191f,  -0.923807263f},
          {2, 4, 7}));
}

// The 2-D image path (only the last two axes resized) must match the general separable path, which
// the same data takes when its resized axes come first.
TEST(Spatial, ResizeImagePathMatchesGeneralPath) {
  Tensor x = pattern({1, 1, 6, 7}, 29, 0.3);
  for (const char* mode : {"linear", "cubic"}) {
    for (int aa = 0; aa < 2; aa++) {
      Attrs a = {{"mode", attr_s(mode)}, {"antialias", attr_i(aa)}};
      Tensor fast = run_op("Resize", {x, none(), scales({1, 1, 1.6f, 0.45f})}, a, 1, 18)[0];
      Tensor general =
          run_op("Resize", {x.reshaped({6, 7, 1, 1}), none(), scales({1.6f, 0.45f, 1, 1})}, a, 1, 18)[0];
      ASSERT_EQ(general.shape(), (Shape{9, 3, 1, 1}));
      expect_close(fast.reshaped({9, 3, 1, 1}), general, 1e-5, 1e-5);
    }
  }
}

TEST(Spatial, ResizeLegacyAndUpsample) {
  expect_close(
      run_op("Resize", {pattern({1, 1, 2, 8}), scales({1, 1, 1.5f, 0.6f})}, {{"mode", attr_s("nearest")}}, 1,
             10)[0],
      f32({-3.0f, -2.5f, -2.0f, 1.5f, -3.0f, -2.5f, -2.0f, 1.5f, -1.0f, -0.5f, 0.0f, -3.0f}, {1, 1, 3, 4}));
  expect_close(run_op("Resize", {pattern({1, 1, 2, 4}), scales({1, 1, 2, 1.5f})},
                      {{"mode", attr_s("linear")}}, 1, 10)[0],
               f32({-3.0f, -0.666666627f, -0.500000119f,   -2.5f, -0.166666389f, 1.0f,
                    -2.5f, -0.166666627f, -1.1920929e-07f, -2.0f, 0.333333611f,  1.5f,
                    -2.0f, 0.333333373f,  0.499999851f,    -1.5f, 0.833333611f,  2.0f,
                    -2.0f, 0.333333373f,  0.499999851f,    -1.5f, 0.833333611f,  2.0f},
                   {1, 1, 4, 6}));
  expect_close(run_op("Upsample", {pattern({1, 1, 2, 3}), scales({1, 1, 2, 1.5f})},
                      {{"mode", attr_s("nearest")}}, 1, 9)[0],
               f32({-3.0f, -3.0f, 0.5f, -2.5f, -3.0f, -3.0f, 0.5f, -2.5f, 1.0f, 1.0f, -2.0f, 1.5f, 1.0f, 1.0f,
                    -2.0f, 1.5f},
                   {1, 1, 4, 4}));
  expect_close(run_op("Upsample", {pattern({1, 1, 2, 3}), scales({1, 1, 2, 2.5f})},
                      {{"mode", attr_s("linear")}}, 1, 9)[0],
               f32({-3.0f, -1.60000002f,  -0.199999958f, -0.100000143f, -1.29999995f,  -2.5f, -2.5f,
                    -1.0f, -0.899999976f, -0.800000012f, -0.699999988f, -0.599999905f, -0.5f, -0.5f,
                    1.0f,  -0.199999988f, -1.4000001f,   -1.29999971f,  0.100000083f,  1.5f,  1.5f,
                    1.0f,  -0.199999988f, -1.4000001f,   -1.29999971f,  0.100000083f,  1.5f,  1.5f},
                   {1, 1, 4, 7}));
  expect_close(run_op("Upsample", {pattern({1, 1, 2, 3})},
                      {{"mode", attr_s("nearest")}, {"scales", attr_floats({1, 1, 3, 2})}}, 1, 7)[0],
               f32({-3.0f, -3.0f, 0.5f,  0.5f,  -2.5f, -2.5f, -3.0f, -3.0f, 0.5f,  0.5f,  -2.5f, -2.5f,
                    -3.0f, -3.0f, 0.5f,  0.5f,  -2.5f, -2.5f, 1.0f,  1.0f,  -2.0f, -2.0f, 1.5f,  1.5f,
                    1.0f,  1.0f,  -2.0f, -2.0f, 1.5f,  1.5f,  1.0f,  1.0f,  -2.0f, -2.0f, 1.5f,  1.5f},
                   {1, 1, 6, 6}));
}

TEST(Spatial, ResizeErrors) {
  Tensor x = pattern({1, 1, 4, 4});
  Attrs lin = {{"mode", attr_s("linear")}};
  EXPECT_THROW(resize13(x, none(), scales({1, 1, 2, 2}), i64({1, 1, 8, 8}, {4}), lin), Error);
  EXPECT_THROW(resize13(x, none(), none(), none(), lin), Error);
  EXPECT_THROW(resize13(x, none(), scales({1, 2, 2}), none(), lin), Error);
  EXPECT_THROW(resize13(x, none(), scales({1, 1, -2, 2}), none(), lin), Error);
  EXPECT_THROW(resize13(x, none(), none(), i64({1, 1, 8}, {3}), lin), Error);
  EXPECT_THROW(resize13(x, none(), scales({1, 1, 2, 2}), none(), {{"mode", attr_s("area")}}), Error);
  EXPECT_THROW(resize13(x, none(), scales({1, 1, 2, 2}), none(),
                        {{"coordinate_transformation_mode", attr_s("tf_crop_and_resize")}}),
               Error);
  EXPECT_THROW(resize13(x, f32({0, 1}, {2}), scales({1, 1, 2, 2}), none(),
                        {{"coordinate_transformation_mode", attr_s("tf_crop_and_resize")}}),
               Error);
  EXPECT_THROW(run_op("Resize", {x, none(), none(), i64({8, 8}, {2})}, {{"axes", attr_ints({2, 2})}}, 1, 18),
               Error);
  EXPECT_THROW(resize13(x, none(), scales({1, 1, 2, 2}), none(),
                        {{"coordinate_transformation_mode", attr_s("tf_half_pixel_for_nn")}}),
               Error);
  EXPECT_THROW(run_op("Upsample", {x}, {{"scales", attr_floats({1, 1, 0.5f, 2})}}, 1, 7), Error);
}

// ---- GridSample ----------------------------------------------------------------------------

TEST(Spatial, GridSampleModesAndPadding) {
  Tensor x = pattern({1, 2, 3, 4});
  Tensor grid = pattern({1, 2, 3, 2}, 21, 0.125);  // spans [-1.25, 1.25]: some points fall outside
  struct Case {
    const char* mode;
    const char* pad;
    int align;
    Tensor expected;
  };
  const Case cases[] = {
      {"bilinear", "zeros", 0,
       f32({0.0f, -0.09375f, 1.375f, 0.0f, -0.09375f, 1.375f, 0.0f, -0.125f, -0.5f, 0.0f, -0.125f, -0.5f},
           {1, 2, 2, 3})},
      {"bilinear", "zeros", 1,
       f32({-1.484375f, -1.21875f, 1.78125f, -1.484375f, -1.21875f, 1.78125f, 0.390625f, -0.1875f, -1.3125f,
            0.390625f, -0.1875f, -1.3125f},
           {1, 2, 2, 3})},
      {"bilinear", "border", 0,
       f32({-2.5625f, -0.75f, 1.375f, -2.5625f, -0.75f, 1.375f, 0.4375f, -1.0f, -0.5f, 0.4375f, -1.0f, -0.5f},
           {1, 2, 2, 3})},
      {"bilinear", "border", 1,
       f32({-2.375f, -1.625f, 1.78125f, -2.375f, -1.625f, 1.78125f, 0.625f, -0.25f, -1.3125f, 0.625f, -0.25f,
            -1.3125f},
           {1, 2, 2, 3})},
      {"bilinear", "reflection", 0,
       f32({-2.5625f, -0.75f, 1.375f, -2.5625f, -0.75f, 1.375f, 0.4375f, -1.0f, -0.5f, 0.4375f, -1.0f, -0.5f},
           {1, 2, 2, 3})},
      {"bilinear", "reflection", 1,
       f32({-1.0625f, -1.375f, 1.78125f, -1.0625f, -1.375f, 1.78125f, -0.5f, 0.0f, -1.3125f, -0.5f, 0.0f,
            -1.3125f},
           {1, 2, 2, 3})},
      {"nearest", "zeros", 0,
       f32({0.0f, 0.0f, 2.5f, 0.0f, 0.0f, 2.5f, 0.0f, 0.0f, -1.0f, 0.0f, 0.0f, -1.0f}, {1, 2, 2, 3})},
      {"nearest", "zeros", 1,
       f32({-2.0f, -2.5f, 2.5f, -2.0f, -2.5f, 2.5f, 1.0f, 0.5f, -1.0f, 1.0f, 0.5f, -1.0f}, {1, 2, 2, 3})},
      {"nearest", "border", 0,
       f32({-3.0f, -2.5f, 2.5f, -3.0f, -2.5f, 2.5f, 0.0f, 0.5f, -1.0f, 0.0f, 0.5f, -1.0f}, {1, 2, 2, 3})},
      {"nearest", "border", 1,
       f32({-2.0f, -2.5f, 2.5f, -2.0f, -2.5f, 2.5f, 1.0f, 0.5f, -1.0f, 1.0f, 0.5f, -1.0f}, {1, 2, 2, 3})},
      {"nearest", "reflection", 0,
       f32({-3.0f, -2.5f, 2.5f, -3.0f, -2.5f, 2.5f, 0.0f, 0.5f, -1.0f, 0.0f, 0.5f, -1.0f}, {1, 2, 2, 3})},
      {"nearest", "reflection", 1,
       f32({-2.0f, -2.5f, 2.5f, -2.0f, -2.5f, 2.5f, 1.0f, 0.5f, -1.0f, 1.0f, 0.5f, -1.0f}, {1, 2, 2, 3})},
      {"bicubic", "zeros", 0,
       f32({0.0f, -0.109176636f, 1.99984741f, 0.0f, -0.109176636f, 1.99984741f, 0.0f, -0.105911255f,
            -0.882575989f, 0.0f, -0.105911255f, -0.882575989f},
           {1, 2, 2, 3})},
      {"bicubic", "zeros", 1,
       f32({-2.11643028f, -1.64698792f, 2.26899719f, -2.11643028f, -1.64698792f, 2.26899719f, 0.690191984f,
            -0.0306243896f, -1.48980045f, 0.690191984f, -0.0306243896f, -1.48980045f},
           {1, 2, 2, 3})},
      {"bicubic", "border", 0,
       f32({-2.65093994f, -1.04150391f, 1.83203125f, -2.65093994f, -1.04150391f, 1.83203125f, 0.349060059f,
            -0.682128906f, -0.880859375f, 0.349060059f, -0.682128906f, -0.880859375f},
           {1, 2, 2, 3})},
      {"bicubic", "border", 1,
       f32({-2.85473633f, -2.12890625f, 2.04345703f, -2.85473633f, -2.12890625f, 2.04345703f, 0.859375f,
            0.083984375f, -1.40139771f, 0.859375f, 0.083984375f, -1.40139771f},
           {1, 2, 2, 3})},
      {"bicubic", "reflection", 0,
       f32({-2.65093994f, -1.11328125f, 1.83203125f, -2.65093994f, -1.11328125f, 1.83203125f, 0.349060059f,
            -0.75390625f, -0.880859375f, 0.349060059f, -0.75390625f, -0.880859375f},
           {1, 2, 2, 3})},
      {"bicubic", "reflection", 1,
       f32({-1.46166992f, -1.81445312f, 2.12759399f, -1.46166992f, -1.81445312f, 2.12759399f, -0.518310547f,
            0.169921875f, -1.29940796f, -0.518310547f, 0.169921875f, -1.29940796f},
           {1, 2, 2, 3})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(cat(c.mode, " ", c.pad, " align_corners=", c.align));
    Attrs a = {{"mode", attr_s(c.mode)}, {"padding_mode", attr_s(c.pad)}, {"align_corners", attr_i(c.align)}};
    expect_close(run_op("GridSample", {x, grid}, a, 1, 16)[0], c.expected);
  }
}

TEST(Spatial, GridSampleManyChannelsAndDoubleGrid) {
  // More points than one block and more channels than threads: every channel must equal channel 0 scaled.
  Tensor x(DType::f32, {2, 5, 7, 9});
  for (int64_t i = 0; i < x.numel(); i++) x.data<float>()[i] = float((i % 63) * 0.5 * (1 + (i / 63) % 5));
  Tensor grid = pattern({2, 10, 13, 2}, 37, 0.06);
  Tensor y = run_op("GridSample", {x, grid}, {}, 1, 16)[0];
  auto g64 = Tensor::from_vector<double>(std::vector<double>(grid.to_double_vector()), grid.shape());
  expect_close(run_op("GridSample", {x, g64}, {}, 1, 16)[0], y, 1e-5, 1e-5);
  auto v = y.to_double_vector();
  for (int64_t n = 0; n < 2; n++)
    for (int64_t c = 0; c < 5; c++)
      for (int64_t p = 0; p < 130; p++)
        ASSERT_NEAR(v[(n * 5 + c) * 130 + p], v[(n * 5) * 130 + p] * (1 + c), 1e-4)
            << n << " " << c << " " << p;
}

TEST(Spatial, GridSampleNonFiniteGrid) {
  Tensor x = pattern({1, 1, 3, 4});
  Tensor grid = f32({NAN, 0, INFINITY, 0, -INFINITY, 0, 1e30f, -1e30f, 0.2f, NAN, 0, 0}, {1, 1, 6, 2});
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* pad : {"zeros", "border", "reflection"}) {
      Tensor y =
          run_op("GridSample", {x, grid}, {{"mode", attr_s(mode)}, {"padding_mode", attr_s(pad)}}, 1, 16)[0];
      auto v = y.to_double_vector();
      // The last point is regular: the image centre row, between columns 1 and 2.
      EXPECT_FALSE(std::isnan(v[5])) << mode << " " << pad;
      if (std::string(pad) == "zeros") {
        EXPECT_EQ(v[3], 0.0) << mode;
      }
    }
  }
}

// The bilinear zeros-padding taps written out for speed are grid_taps' to the bit: the same taps,
// order and weights, on points inside, on the edges of, outside and far outside the image, and NaN.
TEST(Spatial, BilinearZerosTapsAreGridTaps) {
  std::vector<float> coords = {-1,       1,   0,        -1.5f,     1.5f,  0.999f,
                               -0.9999f, NAN, INFINITY, -INFINITY, 1e30f, -1e30f};
  for (int i = 0; i < 200; i++) coords.push_back(float((i * 37) % 201 - 100) / 70.f);
  for (auto [h, w] : {std::pair<int64_t, int64_t>{7, 9}, {1, 1}, {3, 4}})
    for (bool align : {false, true})
      for (size_t i = 0; i < coords.size(); i++) {
        float gx = coords[i], gy = coords[(i * 7 + 3) % coords.size()];
        GridTaps<float> fast, general;
        bilinear_zeros_taps(gx, gy, h, w, align, fast);
        grid_taps<float>(gx, gy, h, w, 1, GridPad::zeros, align, general);
        ASSERT_EQ(fast.count, general.count) << gx << " " << gy << " " << h << "x" << w << " " << align;
        for (int t = 0; t < fast.count; t++) {
          EXPECT_EQ(fast.idx[t], general.idx[t]) << gx << " " << gy;
          EXPECT_EQ(std::memcmp(&fast.w[t], &general.w[t], sizeof(float)), 0) << gx << " " << gy;
        }
      }
}

TEST(Spatial, GridSampleErrors) {
  Tensor x = pattern({1, 2, 3, 4});
  EXPECT_THROW(run_op("GridSample", {x, pattern({1, 2, 3, 3})}, {}, 1, 16), Error);
  EXPECT_THROW(run_op("GridSample", {x, pattern({2, 2, 3, 2})}, {}, 1, 16), Error);
  EXPECT_THROW(run_op("GridSample", {x, pattern({1, 2, 3, 2})}, {{"mode", attr_s("area")}}, 1, 16), Error);
  EXPECT_THROW(run_op("GridSample", {pattern({1, 1, 2, 3, 4}), pattern({1, 2, 3, 4, 3})}, {}, 1, 16),
               Unsupported);
}

// ---- Pad -----------------------------------------------------------------------------------

TEST(Spatial, PadModes) {
  Tensor x = pattern({2, 3, 4});
  auto pad13 = [&](std::vector<int64_t> pads, const char* mode, Tensor value = Tensor()) {
    return run_op("Pad", {x, i64(pads, {6}), value}, {{"mode", attr_s(mode)}}, 1, 13)[0];
  };
  expect_close(
      pad13({0, 1, 2, 1, 0, 1}, "constant", f32({1.5f}, {})),
      f32({1.5f, 1.5f, 1.5f,  1.5f,  1.5f,  1.5f,  1.5f, 1.5f, 1.5f, -3.0f, 0.5f,  -2.5f, 1.0f,  1.5f,
           1.5f, 1.5f, -2.0f, 1.5f,  -1.5f, 2.0f,  1.5f, 1.5f, 1.5f, -1.0f, 2.5f,  -0.5f, 3.0f,  1.5f,
           1.5f, 1.5f, 1.5f,  1.5f,  1.5f,  1.5f,  1.5f, 1.5f, 1.5f, 0.0f,  -3.0f, 0.5f,  -2.5f, 1.5f,
           1.5f, 1.5f, 1.0f,  -2.0f, 1.5f,  -1.5f, 1.5f, 1.5f, 1.5f, 2.0f,  -1.0f, 2.5f,  -0.5f, 1.5f,
           1.5f, 1.5f, 1.5f,  1.5f,  1.5f,  1.5f,  1.5f, 1.5f, 1.5f, 1.5f,  1.5f,  1.5f,  1.5f,  1.5f,
           1.5f, 1.5f, 1.5f,  1.5f,  1.5f,  1.5f,  1.5f, 1.5f, 1.5f, 1.5f,  1.5f,  1.5f,  1.5f,  1.5f},
          {3, 4, 7}));
  expect_close(pad13({0, -1, 2, 1, 1, -3}, "constant", f32({1.5f}, {})),
               f32({1.5f, 1.5f, -2.0f, 1.5f, 1.5f, -1.0f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.0f, 1.5f, 1.5f,
                    2.0f, 1.5f, 1.5f,  1.5f, 1.5f, 1.5f,  1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f},
                   {3, 3, 3}));
  expect_close(
      pad13({0, 2, 3, 0, 2, 3}, "reflect"),
      f32({3.0f,  -0.5f, 2.5f,  -1.0f, 2.5f,  -0.5f, 3.0f,  -0.5f, 2.5f,  -1.0f, 2.0f,  -1.5f, 1.5f,  -2.0f,
           1.5f,  -1.5f, 2.0f,  -1.5f, 1.5f,  -2.0f, 1.0f,  -2.5f, 0.5f,  -3.0f, 0.5f,  -2.5f, 1.0f,  -2.5f,
           0.5f,  -3.0f, 2.0f,  -1.5f, 1.5f,  -2.0f, 1.5f,  -1.5f, 2.0f,  -1.5f, 1.5f,  -2.0f, 3.0f,  -0.5f,
           2.5f,  -1.0f, 2.5f,  -0.5f, 3.0f,  -0.5f, 2.5f,  -1.0f, 2.0f,  -1.5f, 1.5f,  -2.0f, 1.5f,  -1.5f,
           2.0f,  -1.5f, 1.5f,  -2.0f, 1.0f,  -2.5f, 0.5f,  -3.0f, 0.5f,  -2.5f, 1.0f,  -2.5f, 0.5f,  -3.0f,
           -0.5f, 2.5f,  -1.0f, 2.0f,  -1.0f, 2.5f,  -0.5f, 2.5f,  -1.0f, 2.0f,  -1.5f, 1.5f,  -2.0f, 1.0f,
           -2.0f, 1.5f,  -1.5f, 1.5f,  -2.0f, 1.0f,  -2.5f, 0.5f,  -3.0f, 0.0f,  -3.0f, 0.5f,  -2.5f, 0.5f,
           -3.0f, 0.0f,  -1.5f, 1.5f,  -2.0f, 1.0f,  -2.0f, 1.5f,  -1.5f, 1.5f,  -2.0f, 1.0f,  -0.5f, 2.5f,
           -1.0f, 2.0f,  -1.0f, 2.5f,  -0.5f, 2.5f,  -1.0f, 2.0f,  -1.5f, 1.5f,  -2.0f, 1.0f,  -2.0f, 1.5f,
           -1.5f, 1.5f,  -2.0f, 1.0f,  -2.5f, 0.5f,  -3.0f, 0.0f,  -3.0f, 0.5f,  -2.5f, 0.5f,  -3.0f, 0.0f},
          {2, 7, 10}));
  expect_close(pad13({0, -1, 2, 0, 1, -1}, "reflect"),
               f32({-1.5f, 1.5f,  -2.0f, 1.5f,  -1.5f, -0.5f, 2.5f,  -1.0f, 2.5f,  -0.5f,
                    -1.5f, 1.5f,  -2.0f, 1.5f,  -1.5f, 1.5f,  -2.0f, 1.0f,  -2.0f, 1.5f,
                    2.5f,  -1.0f, 2.0f,  -1.0f, 2.5f,  1.5f,  -2.0f, 1.0f,  -2.0f, 1.5f},
                   {2, 3, 5}));
  expect_close(
      pad13({1, 0, 2, 0, 2, 1}, "edge"),
      f32({-3.0f, -3.0f, -3.0f, 0.5f,  -2.5f, 1.0f,  1.0f,  -2.0f, -2.0f, -2.0f, 1.5f,  -1.5f, 2.0f,  2.0f,
           -1.0f, -1.0f, -1.0f, 2.5f,  -0.5f, 3.0f,  3.0f,  -1.0f, -1.0f, -1.0f, 2.5f,  -0.5f, 3.0f,  3.0f,
           -1.0f, -1.0f, -1.0f, 2.5f,  -0.5f, 3.0f,  3.0f,  -3.0f, -3.0f, -3.0f, 0.5f,  -2.5f, 1.0f,  1.0f,
           -2.0f, -2.0f, -2.0f, 1.5f,  -1.5f, 2.0f,  2.0f,  -1.0f, -1.0f, -1.0f, 2.5f,  -0.5f, 3.0f,  3.0f,
           -1.0f, -1.0f, -1.0f, 2.5f,  -0.5f, 3.0f,  3.0f,  -1.0f, -1.0f, -1.0f, 2.5f,  -0.5f, 3.0f,  3.0f,
           0.0f,  0.0f,  0.0f,  -3.0f, 0.5f,  -2.5f, -2.5f, 1.0f,  1.0f,  1.0f,  -2.0f, 1.5f,  -1.5f, -1.5f,
           2.0f,  2.0f,  2.0f,  -1.0f, 2.5f,  -0.5f, -0.5f, 2.0f,  2.0f,  2.0f,  -1.0f, 2.5f,  -0.5f, -0.5f,
           2.0f,  2.0f,  2.0f,  -1.0f, 2.5f,  -0.5f, -0.5f},
          {3, 5, 7}));
  expect_close(
      pad13({0, 2, 5, 1, 1, 1}, "wrap"),
      f32({2.0f,  -2.0f, 1.5f,  -1.5f, 2.0f,  -2.0f, 1.5f,  -1.5f, 2.0f,  -2.0f, 3.0f,  -1.0f, 2.5f,  -0.5f,
           3.0f,  -1.0f, 2.5f,  -0.5f, 3.0f,  -1.0f, 1.0f,  -3.0f, 0.5f,  -2.5f, 1.0f,  -3.0f, 0.5f,  -2.5f,
           1.0f,  -3.0f, 2.0f,  -2.0f, 1.5f,  -1.5f, 2.0f,  -2.0f, 1.5f,  -1.5f, 2.0f,  -2.0f, 3.0f,  -1.0f,
           2.5f,  -0.5f, 3.0f,  -1.0f, 2.5f,  -0.5f, 3.0f,  -1.0f, 1.0f,  -3.0f, 0.5f,  -2.5f, 1.0f,  -3.0f,
           0.5f,  -2.5f, 1.0f,  -3.0f, -1.5f, 1.0f,  -2.0f, 1.5f,  -1.5f, 1.0f,  -2.0f, 1.5f,  -1.5f, 1.0f,
           -0.5f, 2.0f,  -1.0f, 2.5f,  -0.5f, 2.0f,  -1.0f, 2.5f,  -0.5f, 2.0f,  -2.5f, 0.0f,  -3.0f, 0.5f,
           -2.5f, 0.0f,  -3.0f, 0.5f,  -2.5f, 0.0f,  -1.5f, 1.0f,  -2.0f, 1.5f,  -1.5f, 1.0f,  -2.0f, 1.5f,
           -1.5f, 1.0f,  -0.5f, 2.0f,  -1.0f, 2.5f,  -0.5f, 2.0f,  -1.0f, 2.5f,  -0.5f, 2.0f,  -2.5f, 0.0f,
           -3.0f, 0.5f,  -2.5f, 0.0f,  -3.0f, 0.5f,  -2.5f, 0.0f,  2.0f,  -2.0f, 1.5f,  -1.5f, 2.0f,  -2.0f,
           1.5f,  -1.5f, 2.0f,  -2.0f, 3.0f,  -1.0f, 2.5f,  -0.5f, 3.0f,  -1.0f, 2.5f,  -0.5f, 3.0f,  -1.0f,
           1.0f,  -3.0f, 0.5f,  -2.5f, 1.0f,  -3.0f, 0.5f,  -2.5f, 1.0f,  -3.0f, 2.0f,  -2.0f, 1.5f,  -1.5f,
           2.0f,  -2.0f, 1.5f,  -1.5f, 2.0f,  -2.0f, 3.0f,  -1.0f, 2.5f,  -0.5f, 3.0f,  -1.0f, 2.5f,  -0.5f,
           3.0f,  -1.0f, 1.0f,  -3.0f, 0.5f,  -2.5f, 1.0f,  -3.0f, 0.5f,  -2.5f, 1.0f,  -3.0f},
          {3, 6, 10}));
}

TEST(Spatial, PadAxesTypesAndOldOpset) {
  Tensor x = pattern({2, 3, 4});
  expect_close(run_op("Pad", {x, i64({1, 2, 0, 1}, {4}), f32({-2}, {}), i64({2, -2}, {2})}, {}, 1, 18)[0],
               f32({-2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -3.0f,
                    0.5f,  -2.5f, 1.0f,  -2.0f, -2.0f, 1.5f,  -1.5f, 2.0f,  -2.0f, -1.0f, 2.5f,  -0.5f,
                    3.0f,  -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f,
                    -2.0f, -2.0f, -2.0f, -2.0f, -2.0f, 0.0f,  -3.0f, 0.5f,  -2.5f, -2.0f, 1.0f,  -2.0f,
                    1.5f,  -1.5f, -2.0f, 2.0f,  -1.0f, 2.5f,  -0.5f, -2.0f, -2.0f, -2.0f, -2.0f, -2.0f},
                   {2, 6, 5}));
  expect_close(
      run_op("Pad", {pattern<int32_t>({2, 3}, 11, 3), i64({1, 0, 0, 2}, {4}), make<int32_t>({7}, {1})}, {}, 1,
             13)[0],
      make<int32_t>({7, 7, 7, 7, 7, -15, 6, -6, 7, 7, 15, 3, -9, 7, 7}, {3, 5}));
  expect_close(
      run_op("Pad", {x}, {{"pads", attr_ints({0, 0, 1, 0, 1, 1})}, {"value", attr_f(2.5f)}}, 1, 2)[0],
      f32({2.5f, -3.0f, 0.5f,  -2.5f, 1.0f,  2.5f, 2.5f, -2.0f, 1.5f,  -1.5f, 2.0f,  2.5f,
           2.5f, -1.0f, 2.5f,  -0.5f, 3.0f,  2.5f, 2.5f, 2.5f,  2.5f,  2.5f,  2.5f,  2.5f,
           2.5f, 0.0f,  -3.0f, 0.5f,  -2.5f, 2.5f, 2.5f, 1.0f,  -2.0f, 1.5f,  -1.5f, 2.5f,
           2.5f, 2.0f,  -1.0f, 2.5f,  -0.5f, 2.5f, 2.5f, 2.5f,  2.5f,  2.5f,  2.5f,  2.5f},
          {2, 4, 6}));
  // float16 moves as bits, the pad value included.
  Tensor h(DType::f16, {1, 2});
  static_cast<uint16_t*>(h.raw())[0] = float_to_half(1.0f);
  static_cast<uint16_t*>(h.raw())[1] = float_to_half(-3.0f);
  Tensor hv(DType::f16, {});
  *static_cast<uint16_t*>(hv.raw()) = float_to_half(0.5f);
  Tensor y = run_op("Pad", {h, i64({0, 1, 0, 2}, {4}), hv}, {}, 1, 13)[0];
  ASSERT_EQ(y.dtype(), DType::f16);
  const float want[] = {0.5f, 1.0f, -3.0f, 0.5f, 0.5f};
  for (int i = 0; i < 5; i++)
    EXPECT_EQ(half_to_float(static_cast<const uint16_t*>(y.raw())[i]), want[i]) << i;
  Tensor hy = run_op("Pad", {h}, {{"pads", attr_ints({0, 1, 0, 0})}, {"value", attr_f(2.0f)}}, 1, 2)[0];
  EXPECT_EQ(half_to_float(static_cast<const uint16_t*>(hy.raw())[0]), 2.0f);
}

TEST(Spatial, PadErrors) {
  Tensor x = pattern({2, 3});
  EXPECT_THROW(run_op("Pad", {x, i64({1, 1}, {2})}, {}, 1, 13), Error);
  EXPECT_THROW(run_op("Pad", {x, i64({0, -4, 0, 0}, {4})}, {}, 1, 13), Error);
  EXPECT_THROW(run_op("Pad", {x, i64({0, 0, 0, 1}, {4}), make<double>({1}, {})}, {}, 1, 13), Error);
  EXPECT_THROW(run_op("Pad", {x, i64({0, 0, 0, 1}, {4})}, {{"mode", attr_s("mirror")}}, 1, 13), Error);
  EXPECT_THROW(run_op("Pad", {x, i64({0, -3, 0, 1}, {4})}, {{"mode", attr_s("edge")}}, 1, 13), Error);
  EXPECT_THROW(run_op("Pad", {x, i64({0, 1}, {2}), none(), i64({1, 1}, {2})}, {}, 1, 18), Error);
  EXPECT_THROW(run_op("Pad", {x}, {}, 1, 2), Error);
}

// ---- DepthToSpace, SpaceToDepth ------------------------------------------------------------

TEST(Spatial, DepthToSpaceAndBack) {
  Tensor x = pattern({1, 8, 2, 3});
  Tensor dcr = run_op("DepthToSpace", {x}, {{"blocksize", attr_i(2)}, {"mode", attr_s("DCR")}}, 1, 13)[0];
  expect_close(dcr, f32({-3.0f, 0.0f,  0.5f,  -3.0f, -2.5f, 0.5f,  3.0f,  -0.5f, 0.0f,  3.0f,  -3.0f, 0.0f,
                         1.0f,  -2.5f, -2.0f, 1.0f,  1.5f,  -2.0f, 0.5f,  -3.0f, -2.5f, 0.5f,  1.0f,  -2.5f,
                         -1.5f, 1.5f,  2.0f,  -1.5f, -1.0f, 2.0f,  -2.0f, 1.0f,  1.5f,  -2.0f, -1.5f, 1.5f,
                         2.5f,  -1.0f, -0.5f, 2.5f,  3.0f,  -0.5f, 2.0f,  -1.5f, -1.0f, 2.0f,  2.5f,  -1.0f},
                        {1, 2, 4, 6}));
  expect_close(run_op("DepthToSpace", {x}, {{"blocksize", attr_i(2)}, {"mode", attr_s("CRD")}}, 1, 13)[0],
               f32({-3.0f, -1.5f, 0.5f,  2.0f,  -2.5f, -1.0f, 0.0f,  1.5f,  -3.0f, -1.5f, 0.5f,  2.0f,
                    1.0f,  2.5f,  -2.0f, -0.5f, 1.5f,  3.0f,  -2.5f, -1.0f, 1.0f,  2.5f,  -2.0f, -0.5f,
                    3.0f,  -2.0f, 0.0f,  1.5f,  -3.0f, -1.5f, -0.5f, 1.0f,  3.0f,  -2.0f, 0.0f,  1.5f,
                    0.5f,  2.0f,  -2.5f, -1.0f, 1.0f,  2.5f,  -3.0f, -1.5f, 0.5f,  2.0f,  -2.5f, -1.0f},
                   {1, 2, 4, 6}));
  expect_close(run_op("SpaceToDepth", {pattern({1, 2, 4, 6})}, {{"blocksize", attr_i(2)}}, 1, 13)[0],
               f32({-3.0f, -2.5f, -2.0f, 0.0f,  0.5f,  1.0f,  3.0f,  -3.0f, -2.5f, -0.5f, 0.0f,  0.5f,
                    0.5f,  1.0f,  1.5f,  -3.0f, -2.5f, -2.0f, 0.0f,  0.5f,  1.0f,  3.0f,  -3.0f, -2.5f,
                    -1.5f, -1.0f, -0.5f, 1.5f,  2.0f,  2.5f,  -2.0f, -1.5f, -1.0f, 1.0f,  1.5f,  2.0f,
                    2.0f,  2.5f,  3.0f,  -1.5f, -1.0f, -0.5f, 1.5f,  2.0f,  2.5f,  -2.0f, -1.5f, -1.0f},
                   {1, 8, 2, 3}));
  // SpaceToDepth inverts DCR DepthToSpace, also for 1-byte types.
  expect_close(run_op("SpaceToDepth", {dcr}, {{"blocksize", attr_i(2)}}, 1, 13)[0], x);
  Tensor b = pattern<uint8_t>({2, 9, 2, 2}, 251, 1, 125);
  Tensor d = run_op("DepthToSpace", {b}, {{"blocksize", attr_i(3)}, {"mode", attr_s("CRD")}}, 1, 13)[0];
  expect_close(run_op("SpaceToDepth", {d}, {{"blocksize", attr_i(3)}, {"mode", attr_s("CRD")}}, 1, 13)[0], b);
}

TEST(Spatial, DepthToSpaceErrors) {
  EXPECT_THROW(run_op("DepthToSpace", {pattern({1, 6, 2, 2})}, {{"blocksize", attr_i(2)}}, 1, 13), Error);
  EXPECT_THROW(run_op("DepthToSpace", {pattern({6, 2, 2})}, {{"blocksize", attr_i(1)}}, 1, 13), Error);
  EXPECT_THROW(run_op("DepthToSpace", {pattern({1, 4, 2, 2})}, {}, 1, 13), Error);
  EXPECT_THROW(run_op("SpaceToDepth", {pattern({1, 2, 4, 5})}, {{"blocksize", attr_i(2)}}, 1, 13), Error);
}

// ---- RoiAlign ------------------------------------------------------------------------------

TEST(Spatial, RoiAlign) {
  Tensor x = pattern({2, 2, 5, 6}, 23, 0.25);
  Tensor rois = f32({0.5f, 0.5f, 3.2f, 2.9f, 1.1f, 0.2f, 5.9f, 4.6f, -1, -0.5f, 2, 1.5f}, {3, 4});
  Tensor bi = i64({0, 1, 1}, {3});
  expect_close(
      run_op("RoiAlign", {x, rois, bi},
             {{"output_height", attr_i(2)}, {"output_width", attr_i(3)}, {"sampling_ratio", attr_i(2)}}, 1,
             16)[0],
      f32({-0.665000021f, -0.987500012f, 0.587500215f, 1.34062481f,   0.615624845f, -0.612499893f,
           0.0850000381f, -0.237499982f, 0.762499988f, 0.279375046f,  -1.25062478f, 0.137500152f,
           0.399999976f,  -0.796249986f, 0.250000179f, -0.851249814f, 0.683750033f, -0.282500446f,
           0.287499964f,  -0.477499843f, 1.00000024f,  -1.05000007f,  0.91624999f,  -0.567499876f,
           -0.625f,       -1.03125f,     0.5f,         -0.875f,       -1.53125f,    0.0f,
           -0.25f,        -0.28125f,     0.53125f,     -0.5f,         -0.78125f,    0.390625f},
          {3, 2, 2, 3}));
  expect_close(
      run_op("RoiAlign", {x, rois, bi},
             {{"output_height", attr_i(2)},
              {"output_width", attr_i(2)},
              {"coordinate_transformation_mode", attr_s("output_half_pixel")},
              {"spatial_scale", attr_f(0.8f)}},
             1, 16)[0],
      f32({-1.15009999f, -0.0950001031f, 1.52965045f,    -0.451250106f,  -0.400099993f, 0.554949999f,
           -1.24625015f, -0.305000186f,  0.230799884f,   -0.963199794f,  -0.609199762f, 0.883199751f,
           0.382799923f, -0.213199794f,  -0.0799995661f, -0.0412004292f, -1.16250002f,  0.500000119f,
           -1.96249986f, -0.299999893f,  -0.412499964f,  0.387499899f,   -1.21249998f,  0.277500063f},
          {3, 2, 2, 2}));
  expect_close(
      run_op("RoiAlign", {x, rois, bi},
             {{"output_height", attr_i(3)}, {"output_width", attr_i(2)}, {"mode", attr_s("max")}}, 1, 16)[0],
      f32({0.530000031f, 0.543750286f, 1.05999994f,  0.435000211f, 2.71562481f, 0.859375f,
           0.72875005f,  0.618750036f, 1.45749998f,  0.652500331f, 1.15937507f, 0.453125238f,
           1.68000019f,  1.63333333f,  0.879999578f, 0.879999578f, 1.65000057f, 2.20000052f,
           1.28000009f,  2.33333325f,  1.20999944f,  1.20999944f,  1.04999983f, 1.46666753f,
           -0.0f,        0.4375f,      -0.0f,        0.4375f,      -0.0f,       0.145833299f,
           -0.0f,        1.09375f,     -0.0f,        1.09375f,     -0.0f,       0.364583254f},
          {3, 2, 3, 2}));
  // Rois that are not finite sample nothing instead of reading out of bounds.
  Tensor odd = f32({NAN, 0, 2, 2, 0, -INFINITY, 3, INFINITY, 1e30f, 1e30f, 2e30f, 2e30f}, {3, 4});
  Tensor z = run_op("RoiAlign", {x, odd, bi}, {{"sampling_ratio", attr_i(2)}}, 1, 16)[0];
  for (double v : z.to_double_vector()) EXPECT_FALSE(std::isinf(v));
  EXPECT_THROW(run_op("RoiAlign", {x, f32({0, 0, 1e30f, 1e30f}, {1, 4}), i64({0}, {1})}, {}, 1, 16), Error);
  EXPECT_THROW(run_op("RoiAlign", {x, rois, i64({0, 2, 1}, {3})}, {}, 1, 16), Error);
  EXPECT_THROW(run_op("RoiAlign", {x, rois, i64({0, 1}, {2})}, {}, 1, 16), Error);
  EXPECT_THROW(run_op("RoiAlign", {x, f32({0, 0, 1}, {1, 3}), i64({0}, {1})}, {}, 1, 16), Error);
}

}  // namespace vlrt::test
