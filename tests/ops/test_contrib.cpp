// ONNX Runtime's contrib ops against ONNX Runtime's own outputs: each case of
// tests/fixtures/contrib/cases.txt is a one-node model with its inputs and outputs as .npy
// (tools/make_contrib_vectors.py), run through a whole session.
#include <algorithm>
#include <fstream>

#include "exec/session.h"
#include "io/npy.h"
#include "load/onnx_loader.h"
#include "op_test_util.h"
#include "session_util.h"

namespace vlrt::test {
namespace {

std::string fixture(const std::string& name) {
  return std::string(VLRT_SOURCE_DIR) + "/tests/fixtures/contrib/" + name;
}

std::vector<std::string> case_names() {
  std::ifstream f(fixture("cases.txt"));
  std::vector<std::string> names;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) names.push_back(line);
  return names;
}

// Within 1e-5 of the output's scale (its largest magnitude, at least 1).
void expect_matches(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape())
      << what << ": " << actual.describe() << " vs " << expected.describe();
  std::vector<double> a = actual.to_double_vector(), e = expected.to_double_vector();
  double scale = 1;
  for (double v : e) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < a.size(); i++)
    ASSERT_NEAR(a[i], e[i], 1e-5 * scale) << what << " at flat index " << i;
}

class ContribCase : public ::testing::TestWithParam<std::string> {};

TEST_P(ContribCase, MatchesOnnxRuntime) {
  const std::string name = GetParam();
  Model model = load_onnx(fixture(name + ".onnx"));
  TensorMap inputs;
  for (const ValueDecl& d : model.graph.inputs)
    inputs[d.name] = read_npy(fixture(name + "." + d.name + ".npy"));
  std::vector<std::string> outputs;
  for (const ValueDecl& d : model.graph.outputs) outputs.push_back(d.name);
  Session session(std::move(model), on_devices("cpu"));
  TensorMap got = session.run(inputs);
  for (const std::string& o : outputs) {
    SCOPED_TRACE(o);
    expect_matches(got.at(o), read_npy(fixture(name + "." + o + ".npy")), name + " output " + o);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ContribCase, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

TEST(Contrib, FixturesListed) { EXPECT_GE(case_names().size(), 30u); }

// ---- Error paths ---------------------------------------------------------------------

// Runs the com.microsoft op (or a default-domain one when ms is false) on these inputs.
std::vector<Tensor> run_ms(const std::string& op, const std::vector<Tensor>& inputs,
                           std::map<std::string, Attribute> attrs = {}, size_t num_outputs = 1,
                           bool ms = true) {
  Node n = make_node(op, inputs.size(), num_outputs, std::move(attrs));
  if (ms) n.domain = "com.microsoft";
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); i++) {
    if (!inputs[i].defined()) n.inputs[i] = "";
    ptrs.push_back(inputs[i].defined() ? &inputs[i] : nullptr);
  }
  return run_node_cpu(n, 1, ptrs, test_pool());
}

// The error's message contains `text`.
template <class E = Error, class F>
void expect_error(F&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << text << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

Tensor zeros(Shape s) { return Tensor::zeros(DType::f32, std::move(s)); }

TEST(Contrib, GeluFamilyErrors) {
  expect_error([] { run_ms("FastGelu", {zeros({2, 8}), zeros({4})}); }, "bias must have shape [8]");
  expect_error([] { run_ms("BiasGelu", {zeros({2, 8})}); }, "has 1 inputs");
  expect_error([] { run_ms("BiasAdd", {zeros({2, 8}), zeros({8}), zeros({2, 8})}); }, "X must be 3-D");
  expect_error([] { run_ms("Gelu", {Tensor::zeros(DType::i32, {3})}); }, "floating-point");
}

TEST(Contrib, LayerNormErrors) {
  Tensor x = zeros({2, 3, 16}), g = zeros({16});
  expect_error([&] { run_ms("SkipLayerNormalization", {x, x, zeros({8})}); }, "gamma must have shape [16]");
  expect_error([&] { run_ms("SkipLayerNormalization", {x, zeros({2, 3, 8}), g}); }, "skip must have");
  expect_error(
      [&] {
        run_ms("SkipLayerNormalization", {x, x, g, Tensor(), zeros({4})});
      },
      "bias must have shape [16]");
  expect_error([&] { run_ms("SkipLayerNormalization", {zeros({16}), zeros({16}), g}); }, "input must be 3-D");
  expect_error(
      [&] {
        run_ms("SkipSimplifiedLayerNormalization", {x, Tensor(), g});
      },
      "required input 1 is missing");
  expect_error(
      [&] {
        run_ms("SimplifiedLayerNormalization", {x, zeros({3})}, {}, 1, false);
      },
      "scale must have the normalized shape [16]");
  Tensor ids = Tensor::from_vector<int32_t>({1, 2, 3, 9}, {2, 2});
  Tensor word = zeros({4, 16}), pos = zeros({4, 16});
  expect_error(
      [&] {
        run_ms("EmbedLayerNormalization", {ids, Tensor(), word, pos, Tensor(), g, g});
      },
      "input_ids value 9 is out of range [0, 4)");
  expect_error(
      [&] {
        run_ms("EmbedLayerNormalization", {ids, Tensor(), word, zeros({4, 8}), Tensor(), g, g});
      },
      "position_embedding must be 2-D [rows, 16]");
  expect_error(
      [&] {
        run_ms("EmbedLayerNormalization", {ids, ids, word, pos, Tensor(), g, g});
      },
      "segment_embedding is missing");
}

TEST(Contrib, FusedMatMulAndConvErrors) {
  expect_error(
      [] {
        run_ms("FusedMatMul", {zeros({2, 3}), zeros({2, 4})});
      },
      "inner dimensions do not match");
  expect_error(
      [] {
        run_ms("FusedMatMul", {zeros({2, 3}), zeros({4, 3})}, {{"transA", attr_i(1)}});
      },
      "inner dimensions do not match");
  Tensor x = zeros({1, 2, 4, 4}), w = zeros({3, 2, 3, 3});
  expect_error<Unsupported>(
      [&] {
        run_ms("FusedConv", {x, w}, {{"activation", attr_s("Swish")}});
      },
      "activation 'Swish'");
  expect_error(
      [&] {
        run_ms("FusedConv", {x, w}, {{"activation", attr_s("Clip")}});
      },
      "Clip takes 2 activation_params");
  expect_error(
      [&] {
        run_ms("FusedConv", {x, w, Tensor(), zeros({1, 3, 4, 4})});
      },
      "Z (added before the activation) must have the output's shape [1,3,2,2]");
}

// ONNX Runtime's channels-last QLinearConv and vlrt's joined dynamically quantized products: what
// does not fit is named.
TEST(Contrib, ChannelsLastAndJoinedQuantizedOpErrors) {
  auto u8 = [](Shape s) { return Tensor::zeros(DType::u8, std::move(s)); };
  Tensor one = test::f32({0.1f}, {}), w = Tensor::zeros(DType::i8, {2, 5, 3, 3});
  std::map<std::string, Attribute> last = {{"channels_last", attr_i(1)}};
  expect_error(
      [&] {
        run_ms("QLinearConv", {u8({4, 5}), one, u8({}), w, one, Tensor::zeros(DType::i8, {}), one, u8({})},
               last);
      },
      "X must have rank >= 3 ([N, D..., C])");
  expect_error(
      [&] {
        run_ms("QLinearConv",
               {u8({1, 6, 6, 3}), one, u8({}), w, one, Tensor::zeros(DType::i8, {}), one, u8({})}, last);
      },
      "does not fit X with C=3");
  expect_error(
      [&] {
        run_ms("NhwcMaxPool", {u8({1, 4, 4})}, {{"kernel_shape", attr_ints({3, 3})}});
      },
      "kernel_shape");
  Tensor a = zeros({2, 8}), b = Tensor::zeros(DType::i8, {8, 3});
  Node n = make_node("DynamicQuantizeMatMuls", 9, 1);
  n.domain = "vlrt";
  std::vector<Tensor> inputs = {a, b, one, Tensor(), Tensor(), b, one, Tensor(), Tensor()};
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); i++) {
    if (!inputs[i].defined()) n.inputs[i] = "";
    ptrs.push_back(inputs[i].defined() ? &inputs[i] : nullptr);
  }
  expect_error([&] { run_node_cpu(n, 1, ptrs, test_pool()); }, "has 1 outputs for 2 products");
  n.outputs.push_back("out1");
  inputs[5] = Tensor::zeros(DType::i8, {7, 3});
  expect_error([&] { run_node_cpu(n, 1, ptrs, test_pool()); }, "inner");
}

TEST(Contrib, AttentionErrors) {
  Tensor x = zeros({2, 4, 8}), w = zeros({8, 24}), bias = zeros({24});
  auto heads = [](int64_t n) { return std::map<std::string, Attribute>{{"num_heads", attr_i(n)}}; };
  expect_error(
      [&] {
        run_ms("Attention", {x, w, bias}, heads(3));
      },
      "num_heads 3 does not divide the q/k hidden size 8");
  expect_error([&] { run_ms("Attention", {x, w, bias}); }, "attribute num_heads is required");
  expect_error([&] { run_ms("Attention", {zeros({2, 4, 6}), w, bias}, heads(2)); }, "weights must be 2-D [6");
  expect_error([&] { run_ms("Attention", {x, w, zeros({12})}, heads(2)); }, "bias must have shape [24]");
  expect_error(
      [&] {
        run_ms("Attention", {x, w, bias, Tensor::from_vector<int32_t>({1, 2, 3}, {3})}, heads(2));
      },
      "mask_index must be [2] or [4]");
  Tensor q = zeros({2, 4, 8});
  expect_error(
      [&] {
        run_ms("MultiHeadAttention", {q, zeros({2, 5, 8}), zeros({2, 5, 8})}, heads(3));
      },
      "num_heads 3 does not divide the hidden size 8");
  expect_error(
      [&] {
        run_ms("MultiHeadAttention", {q, zeros({2, 5, 6}), zeros({2, 5, 8})}, heads(2));
      },
      "key must be 3-D [2, kv_sequence, 8]");
  expect_error([&] { run_ms("MultiHeadAttention", {q}, heads(2)); }, "key and value are required");
  expect_error(
      [&] {
        run_ms("MultiHeadAttention", {q, q, q, Tensor(), Tensor(), Tensor(), zeros({2, 2, 3, 4})}, heads(2));
      },
      "past_key and past_value come together");
}

TEST(Contrib, MatMulNBitsErrors) {
  auto attrs = [](int64_t k, int64_t n, int64_t block, int64_t bits = 4) {
    return std::map<std::string, Attribute>{
        {"K", attr_i(k)}, {"N", attr_i(n)}, {"block_size", attr_i(block)}, {"bits", attr_i(bits)}};
  };
  Tensor a = zeros({2, 32}), b = Tensor::zeros(DType::u8, {3, 2, 8}), sc = zeros({6});
  expect_error(
      [&] {
        run_ms("MatMulNBits", {a, b, sc}, attrs(32, 3, 24));
      },
      "block_size must be a power of two >= 16, got 24");
  expect_error(
      [&] {
        run_ms("MatMulNBits", {a, b, sc}, attrs(32, 3, 8));
      },
      "block_size must be a power of two >= 16, got 8");
  expect_error([&] { run_ms("MatMulNBits", {a, b, sc}, attrs(32, 3, 32)); }, "B must have shape [3,1,16]");
  expect_error(
      [&] {
        run_ms("MatMulNBits", {zeros({2, 40}), b, sc}, attrs(32, 3, 16));
      },
      "A's last dimension must be K=32");
  expect_error(
      [&] {
        run_ms("MatMulNBits", {a, b, zeros({5})}, attrs(32, 3, 16));
      },
      "scales must have N * ceil(K / block_size) = 6");
  expect_error(
      [&] {
        run_ms("MatMulNBits", {a, b, sc, Tensor::zeros(DType::u8, {6})}, attrs(32, 3, 16));
      },
      "zero_points must have 3 elements");
  expect_error<Unsupported>([&] { run_ms("MatMulNBits", {a, b, sc}, attrs(32, 3, 16, 8)); }, "bits=8");
  expect_error([&] { run_ms("MatMulNBits", {a, b}, attrs(32, 3, 16)); }, "has 2 inputs");
}

TEST(Contrib, RotaryEmbeddingErrors) {
  Tensor cache = zeros({10, 4});
  Tensor pos = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 12}, {2, 3});
  expect_error(
      [&] {
        run_ms("RotaryEmbedding", {zeros({2, 3, 16}), pos, cache, cache}, {{"num_heads", attr_i(3)}});
      },
      "num_heads 3 does not divide the hidden size 16");
  expect_error(
      [&] {
        run_ms("RotaryEmbedding", {zeros({2, 3, 16}), pos, cache, cache});
      },
      "position 12 is outside the caches' 10 positions");
  expect_error(
      [&] {
        run_ms("RotaryEmbedding", {zeros({2, 3, 16}), pos, cache, zeros({10, 3})});
      },
      "cos_cache and sin_cache must be 2-D");
  expect_error([&] { run_ms("RotaryEmbedding", {zeros({2, 2, 3, 4}), pos, cache, cache}); }, "rotary dim 8");
}

TEST(Contrib, GroupQueryAttentionErrors) {
  auto heads = [](int64_t n, int64_t kv) {
    return std::map<std::string, Attribute>{{"num_heads", attr_i(n)}, {"kv_num_heads", attr_i(kv)}};
  };
  Tensor q = zeros({2, 1, 32}), kv = zeros({2, 1, 16}), past = zeros({2, 2, 3, 8});
  Tensor seqlens = Tensor::from_vector<int32_t>({3, 3}, {2}), total = Tensor::from_vector<int32_t>({4}, {1});
  auto run = [&](std::vector<Tensor> in, std::map<std::string, Attribute> attrs) {
    run_ms("GroupQueryAttention", in, std::move(attrs), 3);
  };
  expect_error(
      [&] {
        run({q, kv, kv, past, past, seqlens, total}, heads(4, 3));
      },
      "num_heads 4 is not a multiple of kv_num_heads 3");
  expect_error(
      [&] {
        run({q, kv, kv, past, past, seqlens, total}, {{"num_heads", attr_i(4)}});
      },
      "attributes num_heads and kv_num_heads are required");
  expect_error(
      [&] {
        run({q, kv, kv, past, past, Tensor::from_vector<int32_t>({3, 3, 3}, {3}), total}, heads(4, 2));
      },
      "seqlens_k must have shape [2] (each sequence's total length - 1), got [3]");
  expect_error(
      [&] {
        run({q, kv, kv, past, past, Tensor::from_vector<int64_t>({3, 3}, {2}), total}, heads(4, 2));
      },
      "seqlens_k must be int32");
  expect_error(
      [&] {
        run({q, zeros({2, 1, 8}), kv, past, past, seqlens, total}, heads(4, 2));
      },
      "key must be [2, 1, 16] (kv_num_heads * head size)");
  expect_error(
      [&] {
        run({q, kv, kv, past, Tensor(), seqlens, total}, heads(4, 2));
      },
      "past_key and past_value come together");
  expect_error(
      [&] {
        run({q, kv, kv, past, past, seqlens, total},
            {{"num_heads", attr_i(4)}, {"kv_num_heads", attr_i(2)}, {"do_rotary", attr_i(1)}});
      },
      "do_rotary=1 needs cos_cache and sin_cache");
  // Sequence 1 claims 7 positions: 6 past ones do not fit a past_key of 3.
  expect_error(
      [&] {
        run({q, kv, kv, past, past, Tensor::from_vector<int32_t>({3, 6}, {2}),
             Tensor::from_vector<int32_t>({7}, {1})},
            heads(4, 2));
      },
      "seqlens_k[1] = 6 does not fit");
}

TEST(Contrib, GatherBlockQuantizedErrors) {
  auto attrs = [](int64_t bits, int64_t block) {
    return std::map<std::string, Attribute>{{"bits", attr_i(bits)}, {"block_size", attr_i(block)}};
  };
  Tensor data = Tensor::zeros(DType::u8, {4, 16}), idx = Tensor::from_vector<int64_t>({1, 5}, {2});
  Tensor ok_idx = Tensor::from_vector<int64_t>({1, -4}, {2});
  expect_error(
      [&] {
        run_ms("GatherBlockQuantized", {data, ok_idx, zeros({4, 3})}, attrs(4, 16));
      },
      "scales must have shape [4,2]");
  expect_error(
      [&] {
        run_ms("GatherBlockQuantized", {data, ok_idx, zeros({4, 2})}, attrs(4, 24));
      },
      "block_size must be a power of two >= 16, got 24");
  expect_error(
      [&] {
        run_ms("GatherBlockQuantized", {data, ok_idx, zeros({4, 2})}, attrs(3, 16));
      },
      "bits must be 2, 4 or 8");
  expect_error(
      [&] {
        run_ms("GatherBlockQuantized", {data, idx, zeros({4, 2})}, attrs(4, 16));
      },
      "indices value 5 is out of range [-4, 4)");
  expect_error(
      [&] {
        run_ms("GatherBlockQuantized", {data, ok_idx, zeros({4, 2}), Tensor::zeros(DType::u8, {4, 2})},
               attrs(4, 16));
      },
      "zero_points must have shape [4,1] (2 per byte)");
  expect_error<Unsupported>(
      [&] {
        run_ms("GatherBlockQuantized", {zeros({4, 16}), ok_idx, zeros({4, 2})});
      },
      "only uint8 data");
  expect_error(
      [&] {
        run_ms("GatherBlockQuantized", {data, ok_idx, zeros({4, 2})}, {{"quantize_axis", attr_i(0)}});
      },
      "uint8 data needs gather_axis 0 and quantize_axis 1");
}

}  // namespace
}  // namespace vlrt::test
