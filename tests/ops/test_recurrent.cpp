// RNN, GRU, LSTM and com.microsoft.DynamicQuantizeLSTM: small cases computed by hand, onnxruntime's
// outputs (tests/fixtures/recurrent, made by tools/make_recurrent_vectors.py), and bad inputs.
#include <cmath>
#include <filesystem>

#include "core/reference_mode.h"
#include "exec/session.h"
#include "io/npy.h"
#include "load/onnx_loader.h"
#include "op_test_util.h"
// after op_test_util.h, which brings googletest
#include "cli_util.h"

namespace vlrt {

namespace {

using test::attr_f;
using test::attr_i;
using test::attr_s;
using test::expect_close;
using test::f32;
using test::run_op;

Attribute attr_strings(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::strings;
  a.strings = std::move(v);
  return a;
}

Tensor i32(std::vector<int32_t> v, Shape s) { return Tensor::from_vector<int32_t>(v, std::move(s)); }

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

using test::error_of;

}  // namespace

TEST(Recurrent, RnnForwardByHand) {
  // seq 2, batch 1, input 1, hidden 1: h1 = tanh(0.5*1 + 0.3), h2 = tanh(0.5*2 + 0.25*h1 + 0.3).
  auto out = run_op(
      "RNN",
      {f32({1, 2}, {2, 1, 1}), f32({0.5f}, {1, 1, 1}), f32({0.25f}, {1, 1, 1}), f32({0.1f, 0.2f}, {1, 2})},
      {{"hidden_size", attr_i(1)}}, 2, 14);
  double h1 = std::tanh(0.8), h2 = std::tanh(1.0 + 0.25 * h1 + 0.3);
  expect_close(out[0], f32({float(h1), float(h2)}, {2, 1, 1, 1}));
  expect_close(out[1], f32({float(h2)}, {1, 1, 1}));
}

TEST(Recurrent, LstmOneStepByHand) {
  // W rows i, o, f, c; R zero; initial c 0.5, peepholes (i, o, f) 0.1, 0.2, 0.3.
  Tensor w = f32({1, 2, 3, 4}, {1, 4, 1}), r = f32({0, 0, 0, 0}, {1, 4, 1});
  Tensor h0 = f32({0}, {1, 1, 1}), c0 = f32({0.5f}, {1, 1, 1}), p = f32({0.1f, 0.2f, 0.3f}, {1, 3});
  auto out = run_op("LSTM", {f32({1}, {1, 1, 1}), w, r, Tensor(), Tensor(), h0, c0, p}, {}, 3, 14);
  double i = sigmoid(1 + 0.05), f = sigmoid(3 + 0.15), g = std::tanh(4.0);
  double c = f * 0.5 + i * g, o = sigmoid(2 + 0.2 * c), h = o * std::tanh(c);
  expect_close(out[0], f32({float(h)}, {1, 1, 1, 1}));
  expect_close(out[1], f32({float(h)}, {1, 1, 1}));
  expect_close(out[2], f32({float(c)}, {1, 1, 1}));
}

TEST(Recurrent, GruOneStepByHand) {
  // W rows z, r, h = 0.5, -1, 2; R rows 0.3, 0.7, -0.4; initial h 0.6; x = 1.
  Tensor x = f32({1}, {1, 1, 1}), w = f32({0.5f, -1, 2}, {1, 3, 1}), r = f32({0.3f, 0.7f, -0.4f}, {1, 3, 1});
  Tensor b = f32({0, 0, 0, 0, 0, 0.2f}, {1, 6}), h0 = f32({0.6f}, {1, 1, 1});
  double z = sigmoid(0.5 + 0.18), rs = sigmoid(-1 + 0.42);
  for (int lbr : {0, 1}) {
    auto out = run_op("GRU", {x, w, r, b, Tensor(), h0}, {{"linear_before_reset", attr_i(lbr)}}, 2, 14);
    double pre = lbr ? 2 + rs * (-0.4 * 0.6 + 0.2) : 2 + (-0.4 * rs * 0.6 + 0.2);
    double h = (1 - z) * std::tanh(pre) + z * 0.6;
    expect_close(out[1], f32({float(h)}, {1, 1, 1}));
  }
}

TEST(Recurrent, ReverseWithSequenceLens) {
  // Identity-like RNN (Affine alpha 1): h_t = x_t + h_{t-1}. Item 0 has 1 step, item 1 has 2.
  Tensor x = f32({1, 10, 2, 20}, {2, 2, 1});
  auto out = run_op("RNN", {x, f32({1}, {1, 1, 1}), f32({1}, {1, 1, 1}), Tensor(), i32({1, 2}, {2})},
                    {{"direction", attr_s("reverse")},
                     {"activations", attr_strings({"Affine"})},
                     {"activation_alpha", test::attr_floats({1})},
                     {"activation_beta", test::attr_floats({0})}},
                    2, 14);
  // Item 1 reversed: t=1 first (h=20), then t=0 (h=30). Y past item 0's length is zero.
  expect_close(out[0], f32({1, 30, 0, 20}, {2, 1, 2, 1}));
  expect_close(out[1], f32({1, 30}, {1, 2, 1}));
}

TEST(Recurrent, EmptySequenceGivesZeroState) {
  // As onnxruntime: an item of length 0 has zero outputs and a zero final state, not its initial one.
  Tensor x = f32({1, 2, 3, 4}, {2, 2, 1}), h0 = f32({0.5f, 0.7f}, {1, 2, 1}),
         c0 = f32({0.2f, 0.3f}, {1, 2, 1});
  Tensor w = f32({1, 2, 3, 4}, {1, 4, 1}), r = f32({0.1f, 0.2f, 0.3f, 0.4f}, {1, 4, 1});
  auto out = run_op("LSTM", {x, w, r, Tensor(), i32({0, 2}, {2}), h0, c0}, {}, 3, 14);
  auto y = out[0].to_double_vector(), yh = out[1].to_double_vector(), yc = out[2].to_double_vector();
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[2], 0.0);
  EXPECT_EQ(yh[0], 0.0);
  EXPECT_EQ(yc[0], 0.0);
  EXPECT_NE(yh[1], 0.0);
}

TEST(Recurrent, DynamicQuantizeLstmBadScales) {
  // input 1, hidden 1: W [1, 1, 4] and R [1, 1, 4] as uint8.
  Tensor x = f32({1, 2}, {2, 1, 1});
  Tensor q = Tensor::from_vector<uint8_t>({1, 2, 3, 4}, {1, 1, 4});
  Tensor scale = f32({0.1f}, {1}), zp = Tensor::from_vector<uint8_t>({2}, {1});
  auto run = [&](const Tensor& w_scale, const Tensor& w_zp) {
    Node n = test::make_node("DynamicQuantizeLSTM", 12, 3);
    n.domain = "com.microsoft";
    for (int i : {3, 4, 5, 6, 7}) n.inputs[size_t(i)] = "";
    std::vector<Tensor> in = {x,        q,        q,       Tensor(), Tensor(), Tensor(),
                              Tensor(), Tensor(), w_scale, w_zp,     scale,    zp};
    Model m = test::one_node_model(n, 14, in);
    m.opsets["com.microsoft"] = 1;
    std::map<std::string, Tensor> values;
    for (size_t i = 0; i < in.size(); i++)
      if (in[i].defined()) values[n.inputs[i]] = in[i];
    return test::run_model_cpu(m, values, n.outputs);
  };
  auto per_tensor = run(scale, zp);
  auto per_channel =
      run(f32({0.1f, 0.1f, 0.1f, 0.1f}, {1, 4}), Tensor::from_vector<uint8_t>({2, 2, 2, 2}, {1, 4}));
  expect_close(per_channel[1], per_tensor[1]);
  std::string e = error_of([&] { run(f32({0.1f, 0.1f}, {2}), zp); });
  EXPECT_NE(e.find("W_scale must have shape [1] (per tensor) or [1,4] (per channel), got [2]"),
            std::string::npos)
      << e;
  e = error_of([&] { run(scale, Tensor::from_vector<int8_t>({2}, {1})); });
  EXPECT_NE(e.find("W_zero_point must have the type of W (uint8), got int8"), std::string::npos) << e;
}

TEST(Recurrent, OptionalOutputsMayBeOmitted) {
  Tensor x = f32({1, 2}, {2, 1, 1}), w = f32({1, 2, 3, 4}, {1, 4, 1}),
         r = f32({0.1f, 0.2f, 0.3f, 0.4f}, {1, 4, 1});
  auto all = run_op("LSTM", {x, w, r}, {}, 3, 14);
  Node n = test::make_node("LSTM", 3, 3);
  n.outputs[0] = "";
  n.outputs[1] = "";
  auto only_c = test::run_canonical(n, 14, {x, w, r});
  expect_close(only_c[2], all[2]);
}

TEST(Recurrent, HalfInputsRunInFloat) {
  Tensor x = f32({0.5f, -1, 0.25f, 2}, {2, 2, 1}), w = f32({1, -2, 0.5f}, {1, 3, 1}),
         r = f32({0.5f, 0.25f, -1}, {1, 3, 1});
  auto ref = run_op("GRU", {x, w, r}, {}, 2, 14);
  auto to_half = [](const Tensor& t) {
    Tensor h(DType::f16, t.shape());
    for (int64_t i = 0; i < t.numel(); i++) h.data<half_t>()[i].bits = float_to_half(t.data<float>()[i]);
    return h;
  };
  auto out = run_op("GRU", {to_half(x), to_half(w), to_half(r)}, {}, 2, 14);
  ASSERT_EQ(out[0].dtype(), DType::f16);
  auto a = out[0].to_double_vector(), e = ref[0].to_double_vector();
  for (size_t i = 0; i < a.size(); i++) EXPECT_NEAR(a[i], e[i], 2e-3) << i;
}

TEST(Recurrent, BadInputsSayWhatIsWrong) {
  Tensor x = f32({1, 2, 3, 4}, {2, 1, 2});
  Tensor w = Tensor(DType::f32, {1, 12, 2}), r = Tensor(DType::f32, {1, 12, 3});
  std::fill_n(w.data<float>(), w.numel(), 0.f);
  std::fill_n(r.data<float>(), r.numel(), 0.f);
  // LSTM W must be [1, 4*3, 2]: here it is the GRU-sized [1, 9, 2].
  Tensor w_gru(DType::f32, {1, 9, 2});
  std::string e = error_of([&] { run_op("LSTM", {x, w_gru, r}, {}, 1, 14); });
  EXPECT_NE(e.find("W must have shape [1,12,2]"), std::string::npos) << e;
  e = error_of([&] { run_op("LSTM", {x, w, r}, {{"hidden_size", attr_i(4)}}, 1, 14); });
  EXPECT_NE(e.find("W must have shape [1,16,2]"), std::string::npos) << e;
  EXPECT_NE(e.find("hidden_size=4 from the attribute"), std::string::npos) << e;
  e = error_of([&] {
    run_op("LSTM", {x, w, r}, {{"activations", attr_strings({"Sigmoid", "Swish", "Tanh"})}}, 1, 14);
  });
  EXPECT_NE(e.find("unknown activation 'Swish'"), std::string::npos) << e;
  e = error_of([&] { run_op("LSTM", {x, w, r}, {{"activations", attr_strings({"Sigmoid"})}}, 1, 14); });
  EXPECT_NE(e.find("expected 3 per direction"), std::string::npos) << e;
  e = error_of([&] { run_op("LSTM", {x, w, r, Tensor(), i32({3}, {1})}, {}, 1, 14); });
  EXPECT_NE(e.find("sequence_lens[0] = 3 is outside [0, seq_length=2]"), std::string::npos) << e;
  e = error_of([&] { run_op("LSTM", {x, w, r}, {{"direction", attr_s("sideways")}}, 1, 14); });
  EXPECT_NE(e.find("direction 'sideways'"), std::string::npos) << e;
  e = error_of([&] { run_op("LSTM", {x, w, r}, {{"layout", attr_i(2)}}, 1, 14); });
  EXPECT_NE(e.find("layout must be 0"), std::string::npos) << e;
  e = error_of([&] { run_op("LSTM", {x, w, r, Tensor(DType::f32, {1, 12})}, {}, 1, 14); });
  EXPECT_NE(e.find("B must have shape [1,24]"), std::string::npos) << e;
  e = error_of([&] {
    run_op("LSTM", {x, w, r, Tensor(), Tensor(), Tensor(DType::f32, {1, 2, 3})}, {}, 1, 14);
  });
  EXPECT_NE(e.find("initial_h must have shape [1,1,3]"), std::string::npos) << e;
  e = error_of([&] { run_op("GRU", {x, w, r}, {}, 3, 14); });
  EXPECT_NE(e.find("W must have shape [1,9,2]"), std::string::npos) << e;
}

// The float32 fast path (BLAS products, float gates) against the double reference loop
// (VLRT_REFERENCE_KERNELS=1) on every kind, direction and layout, with sequence lengths, initial
// states, peepholes, clip, input_forget, and hidden sizes below, at and past a block of 8 units.
TEST(Recurrent, FastPathMatchesTheReference) {
  struct Case {
    std::string op, direction;
    int64_t layout;
    bool lens, states, linear_before_reset;
    int64_t hidden = 6;
    bool input_forget = false;
  };
  std::vector<Case> cases = {{"LSTM", "forward", 0, false, false, false},
                             {"LSTM", "bidirectional", 0, true, true, false},
                             {"LSTM", "reverse", 1, true, true, false},
                             {"GRU", "bidirectional", 0, true, true, false},
                             {"GRU", "reverse", 1, false, true, true},
                             {"GRU", "forward", 0, true, false, true},
                             {"RNN", "bidirectional", 1, true, true, false},
                             {"RNN", "forward", 0, false, false, false},
                             {"LSTM", "bidirectional", 1, true, true, false, 8, true},
                             {"LSTM", "forward", 0, true, true, false, 37},
                             {"GRU", "bidirectional", 0, false, true, true, 19}};
  const int64_t S = 5, N = 3, I = 7;
  bool paths_differ = false;
  for (size_t i = 0; i < cases.size(); i++) {
    const Case& c = cases[i];
    SCOPED_TRACE(cat(c.op, " ", c.direction, " layout ", c.layout, " hidden ", c.hidden));
    const int64_t H = c.hidden;
    const int64_t nd = c.direction == "bidirectional" ? 2 : 1, gates = c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1;
    const uint32_t seed = uint32_t(10 * i);
    Tensor x = test::random_uniform(c.layout ? Shape{N, S, I} : Shape{S, N, I}, seed);
    Tensor w = test::random_uniform({nd, gates * H, I}, seed + 1, -0.6f, 0.6f);
    Tensor r = test::random_uniform({nd, gates * H, H}, seed + 2, -0.6f, 0.6f);
    Tensor b = test::random_uniform({nd, 2 * gates * H}, seed + 3);
    Shape state = c.layout ? Shape{N, nd, H} : Shape{nd, N, H};
    std::vector<Tensor> in = {x, w, r, b, c.lens ? i32({5, 2, 0}, {N}) : Tensor(),
                              c.states ? test::random_uniform(state, seed + 4) : Tensor()};
    if (c.op == "LSTM") {
      in.push_back(c.states ? test::random_uniform(state, seed + 5) : Tensor());
      in.push_back(test::random_uniform({nd, 3 * H}, seed + 6));  // peepholes
    }
    std::map<std::string, Attribute> attrs{{"hidden_size", attr_i(H)}, {"direction", attr_s(c.direction)},
                                           {"layout", attr_i(c.layout)}};
    if (c.op == "GRU") attrs["linear_before_reset"] = attr_i(c.linear_before_reset);
    if (i % 2) attrs["clip"] = attr_f(0.8f);
    if (c.input_forget) attrs["input_forget"] = attr_i(1);
    size_t outputs = c.op == "LSTM" ? 3 : 2;
    std::vector<Tensor> fast = run_op(c.op, in, attrs, outputs, 14);
    setenv(kReferenceKernelsEnv, "1", 1);
    std::vector<Tensor> reference = run_op(c.op, in, attrs, outputs, 14);
    unsetenv(kReferenceKernelsEnv);
    for (size_t k = 0; k < outputs; k++) {
      expect_close(fast[k], reference[k], 1e-5, 1e-4);
      for (int64_t e = 0; e < fast[k].numel(); e++) paths_differ |= fast[k].data<float>()[e] != reference[k].data<float>()[e];
    }
  }
  EXPECT_TRUE(paths_differ) << "float and double arithmetic should round somewhere: is the fast path running?";
}

// Each fixture folder: model.onnx (X its only graph input), X.npy and one .npy per output, from onnxruntime.
class RecurrentFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(RecurrentFixture, MatchesOnnxRuntime) {
  const std::string dir = test::source_path(std::string("tests/fixtures/recurrent/") + GetParam());
  Model model = load_onnx(dir + "/model.onnx");
  std::vector<std::string> outputs;
  for (auto& o : model.graph.outputs) outputs.push_back(o.name);
  SessionOptions options;
  options.threads = 2;
  Session session(std::move(model), options);
  TensorMap got = session.run({{"X", read_npy(dir + "/X.npy")}});
  // DynamicQuantizeLSTM (dqlstm_*) too: vlrt quantizes X and H as onnxruntime does (on one thread).
  for (auto& name : outputs) {
    SCOPED_TRACE(name);
    expect_close(got.at(name), read_npy(dir + "/" + name + ".npy"));
  }
}

INSTANTIATE_TEST_SUITE_P(Recurrent, RecurrentFixture,
                         ::testing::Values("lstm_bidirectional_lens_peepholes", "lstm_reverse_layout1_clip",
                                           "lstm_input_forget_activations", "gru_bidirectional_lbr_lens",
                                           "gru_reverse_layout1_clip", "gru_activations",
                                           "rnn_bidirectional_lens", "rnn_layout1_activations",
                                           "rnn_relu_clip", "dqlstm_per_tensor_uint8",
                                           "dqlstm_bidirectional_per_channel_int8", "dqlstm_long_reverse_uint8",
                                           "dqlstm_bidirectional_int8_states"));

}  // namespace vlrt
