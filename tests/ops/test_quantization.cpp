// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, ConvInteger, QLinearConv, QLinearMatMul and the
// com.microsoft quantized ops: hand-checked cases, error paths, and fixtures whose outputs onnxruntime
// computed (tools/make_quant_vectors.py), matched exactly where the output is an integer.
#include <cstring>

#include "io/npy.h"
#include "load/onnx_loader.h"
#include "op_test_util.h"

namespace vlrt::test {
namespace {

template <class T>
Tensor vec(std::vector<T> v, Shape s) {
  return Tensor::from_vector<T>(v, std::move(s));
}

void expect_equal(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << actual.describe() << " vs " << expected.describe();
  ASSERT_EQ(actual.shape(), expected.shape()) << actual.describe() << " vs " << expected.describe();
  EXPECT_EQ(actual.to_double_vector(), expected.to_double_vector());
}

// Runs tests/fixtures/quantization/<name>/model.onnx on the CPU with the stored inputs and compares each
// output with onnxruntime's: integers exactly, floats to a few ulps.
void expect_fixture(const std::string& name) {
  SCOPED_TRACE(name);
  std::string dir = std::string(VLRT_SOURCE_DIR) + "/tests/fixtures/quantization/" + name + "/";
  Model m = load_onnx(dir + "model.onnx");
  canonicalize(m);
  std::map<std::string, Tensor> inputs;
  for (const ValueDecl& d : m.graph.inputs) inputs[d.name] = read_npy(dir + d.name + ".npy");
  std::vector<std::string> outputs;
  for (const ValueDecl& d : m.graph.outputs) outputs.push_back(d.name);
  std::vector<Tensor> got = run_model_cpu(m, inputs, outputs);
  for (size_t i = 0; i < outputs.size(); i++) {
    Tensor want = read_npy(dir + outputs[i] + ".npy");
    if (dtype_is_float(want.dtype()))
      expect_close(got[i], want, 1e-6, 1e-6);
    else
      expect_equal(got[i], want);
  }
}

TEST(Quantization, QuantizeRoundsHalfToEvenAndSaturates) {
  Tensor x = f32({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 1000, -1000}, {7});
  expect_equal(run_op("QuantizeLinear", {x, Tensor::scalar<float>(1), Tensor::scalar<int8_t>(0)})[0],
               vec<int8_t>({0, 2, 2, 0, -2, 127, -128}, {7}));
  // No zero point: uint8 with zero point 0.
  expect_equal(run_op("QuantizeLinear", {x, Tensor::scalar<float>(1)})[0],
               vec<uint8_t>({0, 2, 2, 0, 0, 255, 0}, {7}));
}

TEST(Quantization, QuantizePerAxisAndBlocked) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  expect_equal(run_op("QuantizeLinear", {x, f32({1, 2}, {2}), vec<uint8_t>({0, 1}, {2})})[0],
               vec<uint8_t>({1, 2, 3, 3}, {2, 2}));
  expect_equal(
      run_op("QuantizeLinear", {x, f32({1, 2}, {2}), vec<uint8_t>({0, 0}, {2})}, {{"axis", attr_i(0)}})[0],
      vec<uint8_t>({1, 2, 2, 2}, {2, 2}));
  expect_equal(run_op("QuantizeLinear", {f32({1, 2, 3, 4}, {1, 4}), f32({1, 0.5f}, {1, 2})},
                      {{"axis", attr_i(1)}, {"block_size", attr_i(2)}}, 1, 21)[0],
               vec<uint8_t>({1, 2, 6, 8}, {1, 4}));
}

TEST(Quantization, Dequantize) {
  expect_close(run_op("DequantizeLinear", {vec<int8_t>({-128, 0, 127}, {3}), Tensor::scalar<float>(0.5f),
                                           Tensor::scalar<int8_t>(-1)})[0],
               f32({-63.5f, 0.5f, 64}, {3}));
  expect_close(
      run_op("DequantizeLinear",
             {vec<uint8_t>({10, 10, 10, 10}, {2, 2}), f32({1, 0.5f}, {2}), vec<uint8_t>({0, 4}, {2})},
             {{"axis", attr_i(0)}})[0],
      f32({10, 10, 3, 3}, {2, 2}));
  expect_close(run_op("DequantizeLinear", {vec<int32_t>({-7, 1 << 20}, {2}), Tensor::scalar<float>(2)})[0],
               f32({-14, 2097152}, {2}));
}

TEST(Quantization, DynamicQuantizeLinear) {
  // The example of the ONNX operator documentation.
  auto y = run_op("DynamicQuantizeLinear", {f32({0, 2, -3, -2.5f, 1.34f, 0.5f}, {6})}, {}, 3);
  expect_equal(y[0], vec<uint8_t>({153, 255, 0, 26, 221, 179}, {6}));
  expect_close(y[1], Tensor::scalar<float>(0.0196078438f), 1e-9, 1e-7);
  expect_equal(y[2], Tensor::scalar<uint8_t>(153));
}

TEST(Quantization, ConvInteger) {
  Tensor x = vec<uint8_t>({2, 3, 4, 5, 6, 7, 8, 9, 10}, {1, 1, 3, 3});
  Tensor w = vec<uint8_t>({1, 1, 1, 1}, {1, 1, 2, 2});
  expect_equal(run_op("ConvInteger", {x, w, Tensor::scalar<uint8_t>(1)})[0],
               vec<int32_t>({12, 16, 24, 28}, {1, 1, 2, 2}));
  // Padding holds the zero point: it adds nothing.
  expect_equal(
      run_op("ConvInteger", {x, w, Tensor::scalar<uint8_t>(1)}, {{"pads", attr_ints({1, 1, 0, 0})}})[0],
      vec<int32_t>({1, 3, 5, 5, 12, 16, 11, 24, 28}, {1, 1, 3, 3}));
}

TEST(Quantization, QLinearMatMulRequantizes) {
  // acc = (3-1)*(1-0) + (5-1)*(4-0) = 18; 18 * (1 * 0.5 / 2) = 4.5 rounds to 4; + 10.
  std::vector<Tensor> in = {vec<uint8_t>({3, 5}, {1, 2}), Tensor::scalar<float>(1),
                            Tensor::scalar<uint8_t>(1),   vec<uint8_t>({1, 4}, {2, 1}),
                            Tensor::scalar<float>(0.5f),  Tensor::scalar<uint8_t>(0),
                            Tensor::scalar<float>(2),     Tensor::scalar<uint8_t>(10)};
  expect_equal(run_op("QLinearMatMul", in)[0], vec<uint8_t>({14}, {1, 1}));
  in[7] = Tensor::scalar<uint8_t>(253);  // saturates
  expect_equal(run_op("QLinearMatMul", in)[0], vec<uint8_t>({255}, {1, 1}));
}

TEST(Quantization, QLinearConvAddsBias) {
  // acc = 4 * (3 - 1) * 2 + 3 = 19; 19 * (0.5 * 1 / 2) = 4.75 -> 5.
  std::vector<Tensor> in = {vec<uint8_t>({3, 3, 3, 3}, {1, 1, 2, 2}),
                            Tensor::scalar<float>(0.5f),
                            Tensor::scalar<uint8_t>(1),
                            vec<int8_t>({2, 2, 2, 2}, {1, 1, 2, 2}),
                            Tensor::scalar<float>(1),
                            Tensor::scalar<int8_t>(0),
                            Tensor::scalar<float>(2),
                            Tensor::scalar<uint8_t>(0),
                            vec<int32_t>({3}, {1})};
  expect_equal(run_op("QLinearConv", in)[0], vec<uint8_t>({5}, {1, 1, 1, 1}));
}

TEST(Quantization, ErrorsNameTheBadInput) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  auto expect_error = [](const std::function<void()>& f, const std::string& text) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << text << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  // A per-axis scale of the wrong length, a zero point not shaped like its scale, an axis out of range.
  expect_error([&] { run_op("QuantizeLinear", {x, f32({1, 2}, {2})}); }, "expected [3]");
  expect_error(
      [&] {
        run_op("QuantizeLinear", {x, f32({1, 2, 3}, {3}), Tensor::scalar<uint8_t>(0)});
      },
      "y_zero_point has shape []");
  expect_error([&] { run_op("QuantizeLinear", {x, f32({1, 2, 3}, {3})}, {{"axis", attr_i(2)}}); }, "axis");
  // Zero point of another type than x, a scale that is not float, an unsupported target type.
  expect_error(
      [&] {
        run_op("DequantizeLinear",
               {vec<uint8_t>({1}, {1}), Tensor::scalar<float>(1), Tensor::scalar<int8_t>(0)});
      },
      "x_zero_point is int8 but x is uint8");
  expect_error(
      [&] {
        run_op("DequantizeLinear", {vec<uint8_t>({1}, {1}), Tensor::scalar<int32_t>(1)});
      },
      "x_scale must be a floating-point tensor");
  expect_error(
      [&] {
        run_op("QuantizeLinear", {x, Tensor::scalar<float>(1), Tensor::scalar<int32_t>(0)});
      },
      "quantizing to int32");
  // QLinearConv: per-channel scale of the wrong length, a bias that is not int32.
  std::vector<Tensor> conv = {vec<uint8_t>({3, 3, 3, 3}, {1, 1, 2, 2}),
                              Tensor::scalar<float>(0.5f),
                              Tensor::scalar<uint8_t>(1),
                              vec<int8_t>({2, 2, 2, 2}, {1, 1, 2, 2}),
                              f32({1, 1}, {2}),
                              Tensor::scalar<int8_t>(0),
                              Tensor::scalar<float>(2),
                              Tensor::scalar<uint8_t>(0)};
  expect_error([&] { run_op("QLinearConv", conv); }, "w_scale has shape [2]; expected one value or [1]");
  conv[4] = Tensor::scalar<float>(1);
  conv.push_back(f32({3}, {1}));
  expect_error([&] { run_op("QLinearConv", conv); }, "bias B must be int32");
  // QLinearMatMul: zero point of another type than its operand.
  std::vector<Tensor> mm = {vec<uint8_t>({3, 5}, {1, 2}), Tensor::scalar<float>(1),
                            Tensor::scalar<int8_t>(1),    vec<uint8_t>({1, 4}, {2, 1}),
                            Tensor::scalar<float>(0.5f),  Tensor::scalar<uint8_t>(0),
                            Tensor::scalar<float>(2),     Tensor::scalar<uint8_t>(10)};
  expect_error([&] { run_op("QLinearMatMul", mm); }, "a_zero_point is int8 but a is uint8");
}

TEST(Quantization, MatchesOnnxRuntime) {
  for (const char* name :
       {"quantize_per_tensor_u8", "quantize_per_axis_i8", "quantize_no_zero_point", "dequantize_per_axis_u8",
        "dequantize_int32", "dynamic_quantize", "dynamic_quantize_positive", "matmul_integer_batched",
        "conv_integer_pads_group", "qlinear_conv_per_channel", "qlinear_conv_i8", "qlinear_matmul_3d",
        "qlinear_matmul_i8_per_column"})
    expect_fixture(name);
}

// Runs the com.microsoft op `op` on the given inputs (undefined tensors are omitted optional inputs).
std::vector<Tensor> run_ms(const std::string& op, const std::vector<Tensor>& inputs,
                           std::map<std::string, Attribute> attrs = {}) {
  Node n = make_node(op, inputs.size(), 1, std::move(attrs));
  n.domain = "com.microsoft";
  std::map<std::string, Tensor> values;
  for (size_t i = 0; i < inputs.size(); i++) {
    if (!inputs[i].defined())
      n.inputs[i] = "";
    else
      values[n.inputs[i]] = inputs[i];
  }
  Model m = one_node_model(n, 17, inputs);
  m.opsets["com.microsoft"] = 1;
  return run_model_cpu(m, values, n.outputs);
}

TEST(QuantizationContrib, QLinearAddAndMul) {
  // A = 0.5 * ([4, 6] - 2) = [1, 2], B = 0.25 * (6 - 0) = 1.5; sums [2.5, 3.5] / 1 round to [2, 4].
  std::vector<Tensor> in = {vec<uint8_t>({4, 6}, {2}),    Tensor::scalar<float>(0.5f),
                            Tensor::scalar<uint8_t>(2),   vec<uint8_t>({6}, {1}),
                            Tensor::scalar<float>(0.25f), Tensor(),
                            Tensor::scalar<float>(1),     Tensor::scalar<uint8_t>(10)};
  expect_equal(run_ms("QLinearAdd", in)[0], vec<uint8_t>({12, 14}, {2}));
  // Products [1.5, 3] round to [2, 3].
  expect_equal(run_ms("QLinearMul", in)[0], vec<uint8_t>({12, 13}, {2}));
}

TEST(QuantizationContrib, LookupOpsAndConcat) {
  std::vector<Tensor> in = {vec<int8_t>({-10, 0, 10}, {3}), Tensor::scalar<float>(0.1f),
                            Tensor::scalar<int8_t>(0), Tensor::scalar<float>(0.1f),
                            Tensor::scalar<int8_t>(0)};
  expect_equal(run_ms("QLinearLeakyRelu", in, {{"alpha", attr_f(0.25f)}})[0], vec<int8_t>({-2, 0, 10}, {3}));
  in[3] = Tensor::scalar<float>(1.0f / 128);
  expect_equal(run_ms("QLinearSigmoid", in)[0], vec<int8_t>({34, 64, 94}, {3}));
  // The second input is requantized from scale 2 to 1: (3 - 1) * 2 = 4.
  expect_equal(run_ms("QLinearConcat",
                      {Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0), vec<uint8_t>({7}, {1, 1}),
                       Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0), vec<uint8_t>({3}, {1, 1}),
                       Tensor::scalar<float>(2), Tensor::scalar<uint8_t>(1)},
                      {{"axis", attr_i(1)}})[0],
               vec<uint8_t>({7, 4}, {1, 2}));
}

TEST(QuantizationContrib, Errors) {
  auto x = vec<uint8_t>({1, 2}, {2});
  EXPECT_THROW(run_ms("QLinearAdd", {x, Tensor::scalar<float>(1), Tensor::scalar<int8_t>(0), x,
                                     Tensor::scalar<float>(1), Tensor(), Tensor::scalar<float>(1)}),
               Error);  // zero point type
  EXPECT_THROW(run_ms("QLinearSigmoid", {x, f32({1, 1}, {2}), Tensor(), Tensor::scalar<float>(1)}), Error);
  EXPECT_THROW(run_ms("QLinearConcat",
                      {Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0), x, Tensor::scalar<float>(1),
                       Tensor::scalar<uint8_t>(0)},
                      {{"axis", attr_i(3)}}),
               Error);  // axis out of range
  EXPECT_THROW(run_ms("MatMulIntegerToFloat", {vec<uint8_t>({1, 2}, {1, 2}), vec<uint8_t>({1, 2}, {2, 1}),
                                               Tensor::scalar<float>(1), f32({1, 2}, {2})}),
               Error);  // b_scale not per column
}

TEST(QuantizationContrib, MatchesOnnxRuntime) {
  for (const char* name :
       {"qlinearadd_uint8", "qlinearadd_int8", "qlinearmul_uint8", "qlinearmul_int8", "qlinear_sigmoid_u8",
        "qlinear_sigmoid_i8", "qlinear_leaky_relu_u8", "qlinear_leaky_relu_i8", "qlinear_concat",
        "qlinear_global_average_pool_nchw", "qlinear_global_average_pool_nhwc", "qgemm_float",
        "qgemm_quantized", "dynamic_quantize_matmul", "matmul_integer_to_float", "qlinear_average_pool_pads",
        "qlinear_average_pool_include_pad", "qlinear_average_pool_nhwc_ceil"})
    expect_fixture(name);
}

}  // namespace
}  // namespace vlrt::test
