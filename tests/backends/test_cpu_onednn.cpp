// The CPU backend's oneDNN kernels (Conv, FusedConv, MatMul, Gemm, MatMulInteger and
// DynamicQuantizeMatMul with constant weights) against its reference kernels, on shapes the fast paths find awkward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/direct_conv.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/packed_integer.h"
#include "backends/cpu/vnni_products.h"
#include "core/precision.h"
#include "exec/session.h"
#include "op_test_util.h"

namespace vlrt::test {
namespace {

Node node_for(const std::string& op, const std::vector<Tensor>& inputs, std::map<std::string, Attribute> attrs) {
  Node n = make_node(op, inputs.size(), 1, std::move(attrs));
  if (op == "FusedConv" || op == "DynamicQuantizeMatMul") n.domain = "com.microsoft";
  if (op == "FusedMatMul" || op == "BlockedConv" || op == "FromChannelBlocks") n.domain = "vlrt";
  if (n.attrs.count("channels_last")) n.domain = "com.microsoft";  // QLinearConv on [N, H, W, C]
  for (size_t i = 0; i < inputs.size(); i++)
    if (!inputs[i].defined()) n.inputs[i] = "";
  return n;
}

// Bytes of packed weights the oneDNN kernel of n holds (0: oneDNN does not take n; an integer
// product it leaves goes to vlrt's packed AVX2 kernel, tested in test_cpu_integer_gemm.cpp).
size_t packed_bytes(const Node& n, const std::vector<Tensor>& inputs) {
  ValueInfos infos(inputs);
  CpuBackend cpu(0, test_pool());
  cpu.set_reference_kernels(false);
  PrepareInfo info = cpu.prepare_info(n, 17, infos.ptrs);
  if (info.bytes && info.kernel == packed_integer_prepare_info(n, infos.ptrs).kernel)
    return 0;  // vlrt's AVX2 one
  if (info.bytes && n.op_type == "DynamicQuantizeMatMuls") {
    EXPECT_EQ(info.replaced_inputs.size(), n.outputs.size());
  } else if (info.bytes) {
    EXPECT_EQ(info.replaced_inputs, std::vector<size_t>{n.op_type.starts_with("QLinear") ? 3u : 1u}) << n.op_type;
  }
  return info.bytes;
}

// Asserts that oneDNN takes the node (or not) and agrees with the reference kernel.
void check_against_reference(const std::string& op, const std::vector<Tensor>& inputs,
                             std::map<std::string, Attribute> attrs = {}, bool onednn_takes_it = true) {
  Node n = node_for(op, inputs, std::move(attrs));
  EXPECT_EQ(packed_bytes(n, inputs) > 0, onednn_takes_it) << op;
  expect_close(run_on_cpu(n, inputs, false), run_on_cpu(n, inputs, true), 1e-4, 1e-4);
}

TEST(CpuOneDnn, ConvMatchesReference) {
  struct Case {
    Shape x, w;
    std::map<std::string, Attribute> attrs;
  };
  std::vector<Case> cases = {
      {{2, 5, 9, 11}, {7, 5, 3, 3}, {{"pads", attr_ints({1, 1, 1, 1})}}},  // batch 2, odd channels
      {{1, 3, 13, 10}, {17, 3, 3, 2}, {{"strides", attr_ints({2, 3})}, {"pads", attr_ints({0, 1, 2, 1})}}},
      {{1, 4, 12, 12}, {6, 4, 3, 3}, {{"dilations", attr_ints({2, 3})}, {"pads", attr_ints({2, 1, 0, 3})}}},
      {{2, 6, 8, 7}, {9, 2, 3, 3}, {{"group", attr_i(3)}, {"pads", attr_ints({1, 1, 1, 1})}}},
      {{1, 20, 9, 9}, {20, 1, 3, 3}, {{"group", attr_i(20)}, {"strides", attr_ints({2, 2})}, {"pads", attr_ints({1, 1, 1, 1})}}},
      {{2, 4, 7, 6}, {8, 1, 5, 5}, {{"group", attr_i(4)}, {"pads", attr_ints({2, 2, 2, 2})}}},  // multiplier 2
      {{3, 17, 5, 6}, {33, 17, 1, 1}, {}},                                                    // 1x1
      {{1, 16, 6, 6}, {32, 16, 1, 1}, {{"strides", attr_ints({2, 2})}}},                      // strided 1x1
      {{2, 5, 10, 9}, {3, 5, 3, 3}, {{"auto_pad", attr_s("SAME_UPPER")}, {"strides", attr_ints({2, 2})}}},
      {{1, 5, 10, 9}, {3, 5, 4, 4}, {{"auto_pad", attr_s("SAME_LOWER")}}},
      {{2, 3, 17}, {5, 3, 4}, {{"strides", attr_ints({2})}, {"pads", attr_ints({1, 2})}}},  // 1D
      {{1, 3, 5, 6, 7}, {4, 3, 3, 2, 3}, {{"pads", attr_ints({1, 0, 1, 1, 1, 0})}}},         // 3D
  };
  for (size_t i = 0; i < cases.size(); i++) {
    SCOPED_TRACE(i);
    const Case& c = cases[i];
    Tensor x = random_uniform(c.x, uint32_t(i)), w = random_uniform(c.w, uint32_t(i) + 50);
    check_against_reference("Conv", {x, w}, c.attrs);
    check_against_reference("Conv", {x, w, random_uniform({c.w[0]}, uint32_t(i) + 90)}, c.attrs);
  }
}

TEST(CpuOneDnn, EmptyConvRunsTheReferenceKernel) {
  Tensor x = random_uniform({0, 3, 5, 5}, 1), w = random_uniform({4, 3, 3, 3}, 2);
  check_against_reference("Conv", {x, w}, {}, false);
  EXPECT_EQ(run_on_cpu(node_for("Conv", {x, w}, {}), {x, w}, false).shape(), (Shape{0, 4, 3, 3}));
}

TEST(CpuOneDnn, FusedConvMatchesReference) {
  Tensor x = random_uniform({2, 5, 8, 7}, 3), w = random_uniform({6, 5, 3, 3}, 4), b = random_uniform({6}, 5);
  Tensor z = random_uniform({2, 6, 8, 7}, 6);
  std::map<std::string, Attribute> pads = {{"pads", attr_ints({1, 1, 1, 1})}};
  std::vector<std::pair<std::string, std::vector<float>>> acts = {
      {"", {}}, {"Relu", {}}, {"Tanh", {}}, {"Sigmoid", {}}, {"LeakyRelu", {0.1f}}, {"Clip", {-0.5f, 0.5f}},
      {"HardSigmoid", {0.2f, 0.5f}}, {"HardSwish", {}}, {"SiLU", {}}, {"Gelu", {}}, {"FastGelu", {}}};
  for (auto& [name, params] : acts) {
    SCOPED_TRACE(name);
    std::map<std::string, Attribute> attrs = pads;
    if (!name.empty()) attrs["activation"] = attr_s(name);
    if (!params.empty()) attrs["activation_params"] = attr_floats(params);
    check_against_reference("FusedConv", {x, w, b}, attrs);
    check_against_reference("FusedConv", {x, w, b, z}, attrs);
  }
  check_against_reference("FusedConv", {x, w, Tensor(), z}, {{"pads", attr_ints({1, 1, 1, 1})}, {"activation", attr_s("Relu")}});
}

// Combinations of blocked and plain X, Z and Y, in blocks of 16 and 8, on awkward
// shapes: oneDNN's kernel reads and writes the blocks as the reference kernel does (which
// goes through the plain layout), padding channels included; and the plain result is the
// FusedConv one.
TEST(CpuOneDnn, BlockedConvMatchesReferenceInEveryLayout) {
  struct Case {
    Shape x, w;
    std::map<std::string, Attribute> attrs;
  };
  std::vector<Case> cases = {
      {{2, 5, 7, 6}, {7, 5, 3, 3}, {{"pads", attr_ints({1, 1, 1, 1})}, {"activation", attr_s("Relu")}}},
      {{1, 20, 9, 9}, {20, 1, 3, 3}, {{"group", attr_i(20)}, {"strides", attr_ints({2, 2})}, {"pads", attr_ints({1, 1, 1, 1})}}},
      {{1, 17, 6, 5}, {33, 17, 1, 1}, {{"activation", attr_s("HardSwish")}}},
      {{2, 16, 6, 5}, {16, 8, 3, 3}, {{"group", attr_i(2)}, {"dilations", attr_ints({2, 1})}, {"pads", attr_ints({2, 1, 2, 1})}}},
  };
  for (size_t i = 0; i < cases.size(); i++) {
    const Case& c = cases[i];
    Tensor x = random_uniform(c.x, uint32_t(i)), w = random_uniform(c.w, uint32_t(i) + 50),
           b = random_uniform({c.w[0]}, uint32_t(i) + 90);
    Shape y_shape = run_on_cpu(node_for("FusedConv", {x, w, b}, c.attrs), {x, w, b}, false).shape();
    Tensor z = random_uniform(y_shape, uint32_t(i) + 7);
    Tensor plain_yz = run_on_cpu(node_for("FusedConv", {x, w, b, z}, c.attrs), {x, w, b, z}, true);
    // every layout in blocks of 16; in blocks of 8, X alone and everything blocked
    for (auto [block, layout] : std::vector<std::pair<int64_t, int>>{
             {16, 1}, {16, 2}, {16, 3}, {16, 4}, {16, 5}, {16, 6}, {16, 7}, {8, 1}, {8, 7}}) {
      SCOPED_TRACE(cat("case ", i, " block ", block, " layout ", layout));
        std::map<std::string, Attribute> attrs = c.attrs;
        int64_t src = layout & 1 ? block : 0, sum = layout & 2 ? block : 0, dst = layout & 4 ? block : 0;
        attrs["src_block"] = attr_i(src);
        attrs["sum_block"] = attr_i(sum);
        attrs["dst_block"] = attr_i(dst);
        std::vector<Tensor> in = {src ? channel_blocks(x, block) : x, w, b, sum ? channel_blocks(z, block) : z};
        Node n = node_for("BlockedConv", in, attrs);
        EXPECT_GT(packed_bytes(n, in), 0u);
        Tensor want = dst ? channel_blocks(plain_yz, block) : plain_yz;
        expect_close(run_on_cpu(n, in, false), want, 1e-4, 1e-4);
        expect_close(run_on_cpu(n, in, true), want, 1e-4, 1e-4);
      }
  }
}

TEST(CpuOneDnn, FromChannelBlocksGivesThePlainTensor) {
  Tensor x = random_uniform({2, 19, 3, 5}, 1);
  for (int64_t block : {16, 8}) {
    Tensor blocked = channel_blocks(x, block);
    Node n = node_for("FromChannelBlocks", {blocked}, {{"block", attr_i(block)}, {"channels", attr_i(19)}});
    expect_close(run_on_cpu(n, {blocked}, true), x, 0, 0);
  }
  Node wrong = node_for("FromChannelBlocks", {channel_blocks(x, 8)}, {{"block", attr_i(16)}, {"channels", attr_i(19)}});
  try {
    run_on_cpu(wrong, {channel_blocks(x, 8)}, true);
    FAIL() << "a tensor in blocks of 8 read as blocks of 16 must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks of 16"), std::string::npos) << e.what();
  }
}

TEST(CpuOneDnn, FusedMatMulMatchesReference) {
  Tensor a = random_uniform({2, 3, 19}, 1), b = random_uniform({19, 21}, 2), bt = random_uniform({21, 19}, 3),
         bias = random_uniform({21}, 4), z = random_uniform({2, 3, 21}, 5);
  for (const char* act : {"", "Relu", "Gelu", "Tanh", "HardSwish"}) {
    SCOPED_TRACE(act);
    std::map<std::string, Attribute> attrs;
    if (*act) attrs["activation"] = attr_s(act);
    check_against_reference("FusedMatMul", {a, b, bias}, attrs);
    check_against_reference("FusedMatMul", {a, b, bias, z}, attrs);
    check_against_reference("FusedMatMul", {a, b, Tensor(), z}, attrs);
  }
  check_against_reference("FusedMatMul", {a, bt, bias, z}, {{"transB", attr_i(1)}});
  // A broadcast residual is not the output's shape: the reference kernel refuses it, oneDNN does not take it.
  EXPECT_EQ(packed_bytes(node_for("FusedMatMul", {a, b, bias, random_uniform({21}, 6)}, {}),
                         {a, b, bias, random_uniform({21}, 6)}),
            0u);
}

TEST(CpuOneDnn, MatMulAndGemmMatchReference) {
  check_against_reference("MatMul", {random_uniform({2, 3, 19}, 1), random_uniform({19, 21}, 2)});
  check_against_reference("MatMul", {random_uniform({1, 64}, 3), random_uniform({64, 17}, 4)});
  check_against_reference("Gemm",
                          {random_uniform({5, 19}, 5), random_uniform({23, 19}, 6), random_uniform({23}, 7)},
                          {{"transB", attr_i(1)}});
  check_against_reference(
      "Gemm", {random_uniform({5, 19}, 5), random_uniform({19, 23}, 6), random_uniform({1, 23}, 7)});
  check_against_reference("Gemm", {random_uniform({5, 19}, 5), random_uniform({19, 23}, 6)});
  // Not taken: a [M, N] C, alpha, a transposed A, a vector A, a batched B.
  check_against_reference(
      "Gemm", {random_uniform({5, 19}, 5), random_uniform({19, 23}, 6), random_uniform({5, 23}, 7)}, {},
      false);
  check_against_reference("Gemm", {random_uniform({5, 19}, 5), random_uniform({19, 23}, 6)},
                          {{"alpha", attr_f(0.5f)}}, false);
  check_against_reference("Gemm", {random_uniform({19, 5}, 5), random_uniform({19, 23}, 6)},
                          {{"transA", attr_i(1)}}, false);
  check_against_reference("MatMul", {random_uniform({19}, 1), random_uniform({19, 21}, 2)}, {}, false);
  check_against_reference("MatMul", {random_uniform({2, 3, 19}, 1), random_uniform({2, 19, 21}, 2)}, {},
                          false);
}

// Integers in [lo, hi] of type dt, from a seed.
Tensor random_integers(Shape shape, uint32_t seed, int lo, int hi, DType dt) {
  Tensor u = random_uniform(std::move(shape), seed, float(lo), float(hi) + 1, DType::f64);
  std::vector<double> v = u.to_double_vector();
  for (double& x : v) x = std::min(std::floor(x), double(hi));
  Tensor t(dt, u.shape());
  t.assign_doubles(v);
  return t;
}
Tensor u8_scalar(int v) { return Tensor::from_vector<uint8_t>({uint8_t(v)}, {}); }

// Integer outputs are exact: oneDNN's must equal the reference's bit for bit.
void check_exact(const std::string& op, const std::vector<Tensor>& inputs, bool onednn_takes_it = true,
                 std::map<std::string, Attribute> attrs = {}) {
  Node n = node_for(op, inputs, std::move(attrs));
  EXPECT_EQ(packed_bytes(n, inputs) > 0, onednn_takes_it && onednn_exact_integer_products()) << op;
  Tensor fast = run_on_cpu(n, inputs, false), reference = run_on_cpu(n, inputs, true);
  ASSERT_EQ(fast.shape(), reference.shape());
  ASSERT_EQ(fast.dtype(), reference.dtype());
  EXPECT_EQ(std::memcmp(fast.raw(), reference.raw(), fast.nbytes()), 0) << op << " " << shape_str(fast.shape());
}

TEST(CpuOneDnn, MatMulIntegerIsExact) {
  struct Case {
    Shape a;
    int64_t n;
  };
  // K and N off the 16/64 blocks, batch > 1, one row; K a multiple of 4 (the VNNI kernel's, where the CPU
  // has VNNI), one over 1024 (two slices of a panel) with 150 rows (four jobs per panel).
  std::vector<Case> cases = {{{2, 3, 19}, 21},    {{1, 64}, 17},    {{5, 100}, 70},
                             {{2, 37, 300}, 129}, {{1, 1, 768}, 3}, {{3, 50, 1028}, 40}};
  for (size_t i = 0; i < cases.size(); i++) {
    SCOPED_TRACE(i);
    const Case& c = cases[i];
    int64_t k = c.a.back();
    Tensor a = random_integers(c.a, uint32_t(i), 0, 255, DType::u8);
    Tensor b = random_integers({k, c.n}, uint32_t(i) + 9, -128, 127, DType::i8);
    check_exact("MatMulInteger", {a, b});
    for (int zp : {0, 255, 37}) {
      check_exact("MatMulInteger", {a, b, u8_scalar(zp)});
      check_exact("MatMulInteger", {a, b, u8_scalar(zp), Tensor::zeros(DType::i8, {c.n})});
      check_exact("MatMulInteger", {a, b, u8_scalar(zp), Tensor::zeros(DType::i8, {})});
    }
  }
  // Weight zero points other than 0, per tensor and per column, and uint8 weights (as older
  // quantizers write them): oneDNN's product of B less its offset, corrected per column.
  // K = 20: on the VNNI kernel, where the CPU has it.
  for (int64_t k : {19, 20}) {
    Tensor a = random_integers({2, 5, k}, 1, 0, 255, DType::u8),
           b = random_integers({k, 21}, 2, -128, 127, DType::i8);
    Tensor ub = random_integers({k, 21}, 3, 0, 255, DType::u8);
    Tensor column_zp = random_integers({21}, 4, -128, 127, DType::i8),
           column_uzp = random_integers({21}, 5, 0, 255, DType::u8);
    for (int zp : {0, 255, 91}) {
      SCOPED_TRACE(cat(k, " ", zp));
      check_exact("MatMulInteger", {a, b, u8_scalar(zp), Tensor::from_vector<int8_t>({-7}, {})});
      check_exact("MatMulInteger", {a, b, u8_scalar(zp), column_zp});
      check_exact("MatMulInteger", {a, ub, u8_scalar(zp)});
      check_exact("MatMulInteger", {a, ub, u8_scalar(zp), u8_scalar(128)});
      check_exact("MatMulInteger", {a, ub, u8_scalar(zp), u8_scalar(255)});
      check_exact("MatMulInteger", {a, ub, u8_scalar(zp), column_uzp});
    }
  }
  Tensor a = random_integers({2, 5, 19}, 1, 0, 255, DType::u8),
         b = random_integers({19, 21}, 2, -128, 127, DType::i8);
  // Not taken: per-row A zero points, a batched B.
  check_exact("MatMulInteger", {random_integers({4, 19}, 6, 0, 255, DType::u8), b, random_integers({4}, 7, 0, 255, DType::u8)},
              false);
  check_exact("MatMulInteger", {a, random_integers({2, 19, 21}, 8, -128, 127, DType::i8)}, false);
}

// A quantized on the fly, the product dequantized with per-tensor or per-column scales and a
// bias: the same floats as the reference kernel, to the bit. Activations that are all positive
// (zero point 0), all negative (zero point 255) and all zero (scale 1) included; int8 and uint8
// weights with zero points.
TEST(CpuOneDnn, DynamicQuantizeMatMulIsExact) {
  for (int64_t k :
       {75, 100}) {  // oneDNN's product, and (K a multiple of 4) the VNNI kernel's where the CPU has it
    SCOPED_TRACE(k);
    int64_t n = 33;
    Tensor b = random_integers({k, n}, 1, -127, 127, DType::i8);
    Tensor column_scales = random_uniform({n}, 2, 0.001f, 0.02f), scale = f32({0.0123f}, {}),
           bias = random_uniform({n}, 3);
    // The last: enough rows that oneDNN dequantizes the product itself (its output scales and a bias
    // post-op).
    std::vector<Tensor> activations = {
        random_uniform({2, 7, k}, 4, -3, 5), random_uniform({9, k}, 5, 0.5f, 2),
        random_uniform({3, k}, 6, -2, -0.1f), Tensor::zeros(DType::f32, {4, k}),
        random_uniform({2100, k}, 9, -3, 5)};
    for (size_t i = 0; i < activations.size(); i++) {
      SCOPED_TRACE(i);
      const Tensor& a = activations[i];
      check_exact("DynamicQuantizeMatMul", {a, b, scale});
      check_exact("DynamicQuantizeMatMul", {a, b, column_scales, Tensor(), bias});
      check_exact("DynamicQuantizeMatMul", {a, b, column_scales, Tensor::zeros(DType::i8, {n}), bias});
    }
    Tensor ub = random_integers({k, n}, 7, 0, 255, DType::u8);
    check_exact("DynamicQuantizeMatMul", {activations[0], b, scale, Tensor::from_vector<int8_t>({2}, {})});
    check_exact("DynamicQuantizeMatMul", {activations[0], ub, column_scales, u8_scalar(131), bias});
    check_exact("DynamicQuantizeMatMul",
                {activations[1], ub, scale, random_integers({n}, 8, 0, 255, DType::u8)});
  }
}

// vlrt.DynamicQuantizeMatMuls: oneDNN's products of one A (one joined product below 2048 rows,
// one per B from there) equal, output by output, the reference kernel's and each product's own
// DynamicQuantizeMatMul, to the bit. Per-column and per-tensor scales, int8 and uint8 B with zero
// points (per-column offsets), with and without biases.
TEST(CpuOneDnn, DynamicQuantizeMatMulsAreEachProductExactly) {
  for (int64_t k : {75, 76}) {  // as above: 76 on the VNNI kernel below 2048 rows, where the CPU has VNNI
    SCOPED_TRACE(k);
    Tensor b0 = random_integers({k, 33}, 1, -127, 127, DType::i8),
           b1 = random_integers({k, 16}, 2, -127, 127, DType::i8),
           b2 = random_integers({k, 7}, 3, -127, 127, DType::i8);
    Tensor u0 = random_integers({k, 33}, 4, 0, 255, DType::u8),
           u1 = random_integers({k, 16}, 5, 0, 255, DType::u8);
    struct Product {
      Tensor b, scale, zp, bias;
    };
    std::vector<std::vector<Product>> groups = {
        {{b0, random_uniform({33}, 6, 0.001f, 0.02f), Tensor(), random_uniform({33}, 7)},
         {b1, f32({0.0123f}, {}), Tensor::zeros(DType::i8, {}), random_uniform({16}, 8)},
         {b2, random_uniform({7}, 9, 0.001f, 0.02f), Tensor::zeros(DType::i8, {7}), random_uniform({7}, 10)}},
        {{b0, f32({0.004f}, {}), Tensor(), Tensor()}, {b1, f32({0.007f}, {}), Tensor(), Tensor()}},
        {{u0, random_uniform({33}, 11, 0.001f, 0.02f), u8_scalar(131), Tensor()},
         {u1, f32({0.01f}, {}), random_integers({16}, 12, 0, 255, DType::u8), Tensor()}},
    };
    for (const Tensor& a : {random_uniform({2, 7, k}, 13, -3, 5), random_uniform({2100, k}, 14, -3, 5)}) {
      for (size_t g = 0; g < groups.size(); g++) {
        SCOPED_TRACE(cat(shape_str(a.shape()), " group ", g));
        Node n = make_node("DynamicQuantizeMatMuls", 1 + 4 * groups[g].size(), groups[g].size());
        n.domain = "vlrt";
        std::vector<Tensor> inputs = {a};
        for (const Product& p : groups[g]) inputs.insert(inputs.end(), {p.b, p.scale, p.zp, p.bias});
        for (size_t i = 0; i < inputs.size(); i++)
          if (!inputs[i].defined()) n.inputs[i] = "";
        if (onednn_exact_integer_products()) {
          EXPECT_GT(packed_bytes(n, inputs), 0u);
        }
        std::vector<const Tensor*> ptrs;
        for (auto& t : inputs) ptrs.push_back(t.defined() ? &t : nullptr);
        CpuBackend fast(0, test_pool()), reference(0, test_pool());
        fast.set_reference_kernels(false);
        reference.set_reference_kernels(true);
        std::vector<Tensor> got = run_node(fast, n, 17, ptrs), want = run_node(reference, n, 17, ptrs);
        ASSERT_EQ(got.size(), groups[g].size());
        for (size_t i = 0; i < got.size(); i++) {
          const Product& p = groups[g][i];
          Tensor own = run_on_cpu(node_for("DynamicQuantizeMatMul", {a, p.b, p.scale, p.zp, p.bias}, {}),
                                  {a, p.b, p.scale, p.zp, p.bias}, true);
          ASSERT_EQ(got[i].shape(), own.shape());
          EXPECT_EQ(std::memcmp(got[i].raw(), own.raw(), own.nbytes()), 0) << i;
          EXPECT_EQ(std::memcmp(want[i].raw(), own.raw(), own.nbytes()), 0) << i;
        }
      }
    }
  }
}

// Which integer matmuls the VNNI kernel takes (vnni_products.h): K a multiple of 4, fewer than 2048
// rows, not QLinearMatMul, and not with VLRT_VNNI_PRODUCTS=0; oneDNN the others. Its results are
// checked above, to the bit.
TEST(CpuOneDnn, VnniKernelTakesTheSmallProducts) {
  if (!onednn_exact_integer_products() || !vnni_products_available()) GTEST_SKIP() << "no AVX512-VNNI here";
  auto kernel = [](const Tensor& a, int64_t k) {
    std::vector<Tensor> inputs = {a, random_integers({k, 40}, 1, -127, 127, DType::i8), f32({0.01f}, {})};
    ValueInfos infos(inputs);
    CpuBackend cpu(0, test_pool());
    cpu.set_reference_kernels(false);
    return cpu.prepare_info(node_for("DynamicQuantizeMatMul", inputs, {}), 17, infos.ptrs).kernel;
  };
  EXPECT_EQ(kernel(random_uniform({32, 768}, 2), 768), "VNNI integer matmul");
  EXPECT_EQ(kernel(random_uniform({2047, 8}, 3), 8), "VNNI integer matmul");
  EXPECT_EQ(kernel(random_uniform({32, 770}, 4), 770), "oneDNN integer matmul");
  EXPECT_EQ(kernel(random_uniform({2048, 8}, 5), 8), "oneDNN integer matmul");
  setenv("VLRT_VNNI_PRODUCTS", "0", 1);
  EXPECT_EQ(kernel(random_uniform({32, 768}, 2), 768), "oneDNN integer matmul");
  unsetenv("VLRT_VNNI_PRODUCTS");
}

// Padding contributes nothing (it holds x's zero point) in both kernels.
// Integer convolutions the fast kernels find awkward: channels off the blocks, padding, stride,
// dilation, groups, depthwise, batch > 1, SAME padding, one and three spatial axes (the last two).
struct IntegerConvCase {
  Shape x, w;
  std::map<std::string, Attribute> attrs;
};
std::vector<IntegerConvCase> integer_conv_cases() {
  return {
      {{2, 5, 9, 11}, {7, 5, 3, 3}, {{"pads", attr_ints({1, 1, 1, 1})}}},
      {{1, 3, 13, 10}, {17, 3, 3, 2}, {{"strides", attr_ints({2, 3})}, {"pads", attr_ints({0, 1, 2, 1})}}},
      {{1, 4, 12, 12}, {6, 4, 3, 3}, {{"dilations", attr_ints({2, 3})}, {"pads", attr_ints({2, 1, 0, 3})}}},
      {{2, 6, 8, 7}, {9, 2, 3, 3}, {{"group", attr_i(3)}, {"pads", attr_ints({1, 1, 1, 1})}}},
      {{1, 20, 9, 9},
       {20, 1, 3, 3},
       {{"group", attr_i(20)}, {"strides", attr_ints({2, 2})}, {"pads", attr_ints({1, 1, 1, 1})}}},
      {{3, 17, 5, 6}, {33, 17, 1, 1}, {}},
      {{1, 64, 7, 7}, {70, 64, 3, 3}, {{"auto_pad", attr_s("SAME_UPPER")}}},
      {{2, 3, 17}, {5, 3, 4}, {{"strides", attr_ints({2})}, {"pads", attr_ints({1, 2})}}},
      {{1, 3, 5, 6, 7}, {4, 3, 3, 2, 3}, {{"pads", attr_ints({1, 0, 1, 1, 1, 0})}}},
  };
}

TEST(CpuOneDnn, ConvIntegerIsExact) {
  std::vector<IntegerConvCase> cases = integer_conv_cases();
  for (size_t i = 0; i < cases.size(); i++) {
    SCOPED_TRACE(i);
    const IntegerConvCase& c = cases[i];
    Tensor x = random_integers(c.x, uint32_t(i), 0, 255, DType::u8), w = random_integers(c.w, uint32_t(i) + 50, -128, 127, DType::i8);
    check_exact("ConvInteger", {x, w}, true, c.attrs);
    for (int zp : {0, 255, 37}) check_exact("ConvInteger", {x, w, u8_scalar(zp), Tensor::zeros(DType::i8, {c.w[0]})}, true, c.attrs);
  }
  // Not taken: a weight zero point other than 0, uint8 weights.
  Tensor x = random_integers({1, 3, 6, 6}, 1, 0, 255, DType::u8), w = random_integers({4, 3, 3, 3}, 2, -128, 127, DType::i8);
  check_exact("ConvInteger", {x, w, u8_scalar(3), Tensor::from_vector<int8_t>({1}, {})}, false);
  check_exact("ConvInteger", {x, random_integers({4, 3, 3, 3}, 3, 0, 255, DType::u8), u8_scalar(3)}, false);
}

// The int32 sum requantized as the reference kernel does (round half to even, then y's zero
// point), per-tensor and per-channel weight scales, with and without a bias, uint8 and int8 y.
TEST(CpuOneDnn, QLinearConvIsExact) {
  Tensor x = random_integers({2, 5, 9, 11}, 1, 0, 255, DType::u8), w = random_integers({7, 5, 3, 3}, 2, -128, 127, DType::i8);
  Tensor bias = random_integers({7}, 3, -20000, 20000, DType::i32);
  Tensor w_scales = random_uniform({7}, 4, 0.001f, 0.01f), w_zp = Tensor::zeros(DType::i8, {7});
  std::map<std::string, Attribute> pads = {{"pads", attr_ints({1, 1, 1, 1})}};
  for (int x_zp : {0, 255, 120}) {
    SCOPED_TRACE(x_zp);
    Tensor xs = f32({0.02f}, {}), ys = f32({0.37f}, {});
    check_exact("QLinearConv", {x, xs, u8_scalar(x_zp), w, w_scales, w_zp, ys, u8_scalar(128), bias}, true, pads);
    check_exact("QLinearConv", {x, xs, u8_scalar(x_zp), w, f32({0.004f}, {}), Tensor::zeros(DType::i8, {}), ys, u8_scalar(0)},
                true, pads);
    check_exact("QLinearConv",
                {x, xs, u8_scalar(x_zp), w, w_scales, w_zp, ys, Tensor::from_vector<int8_t>({-3}, {}), bias}, true,
                {{"strides", attr_ints({2, 2})}});
    // y's zero point 0: oneDNN requantizes itself, per-channel and per-tensor scales, with and without a
    // bias.
    check_exact("QLinearConv", {x, xs, u8_scalar(x_zp), w, w_scales, w_zp, ys, u8_scalar(0), bias}, true,
                pads);
    check_exact("QLinearConv",
                {x, xs, u8_scalar(x_zp), w, w_scales, w_zp, ys, Tensor::from_vector<int8_t>({0}, {}), bias},
                true, pads);
  }
  // Halves: with a multiplier of 0.5 every odd sum is a tie, rounded to even; sums past either end saturate.
  Tensor small = random_integers({2, 5, 9, 11}, 5, 0, 3, DType::u8),
         w3 = random_integers({7, 5, 3, 3}, 6, -3, 3, DType::i8);
  Tensor one = f32({1.f}, {}), half = f32({0.5f}, {}),
         small_bias = random_integers({7}, 7, -200, 200, DType::i32);
  // A y zero point other than 0 is added after oneDNN's rounding, not before.
  for (const Tensor& y_zp : {u8_scalar(0), Tensor::from_vector<int8_t>({0}, {}), u8_scalar(7),
                             Tensor::from_vector<int8_t>({-5}, {})}) {
    check_exact("QLinearConv",
                {small, one, u8_scalar(0), w3, half, Tensor::zeros(DType::i8, {}), one, y_zp, small_bias},
                true, pads);
    check_exact("QLinearConv", {small, one, u8_scalar(1), w3, half, Tensor::zeros(DType::i8, {}), one, y_zp},
                true, pads);
  }
}

// com.microsoft QLinearConv with channels_last=1: oneDNN's kernel equals the reference kernel to the
// bit, and the reference is the standard QLinearConv on the channels-first tensors. Odd channel
// counts, padding, stride, dilation, groups, depthwise, batch > 1; y zero points 0 and not.
TEST(CpuOneDnn, ChannelsLastQLinearConvIsExact) {
  std::vector<IntegerConvCase> cases = integer_conv_cases();
  cases.resize(cases.size() - 2);  // two spatial axes
  auto move = [](const Tensor& t, std::vector<int64_t> perm) {
    return run_op("Transpose", {t}, {{"perm", attr_ints(std::move(perm))}})[0];
  };
  for (size_t i = 0; i < cases.size(); i++) {
    SCOPED_TRACE(i);
    const IntegerConvCase& c = cases[i];
    int64_t m = c.w[0];
    Tensor x = random_integers(c.x, uint32_t(i), 0, 255, DType::u8),
           w = random_integers(c.w, uint32_t(i) + 50, -128, 127, DType::i8);
    Tensor bias = random_integers({m}, uint32_t(i) + 70, -20000, 20000, DType::i32);
    Tensor w_scales = random_uniform({m}, uint32_t(i) + 90, 0.001f, 0.01f),
           w_zp = Tensor::zeros(DType::i8, {m});
    Tensor xs = f32({0.02f}, {}), ys = f32({0.37f}, {});
    auto last = c.attrs;
    last["channels_last"] = attr_i(1);
    for (const Tensor& y_zp : {u8_scalar(0), u8_scalar(131)}) {
      std::vector<Tensor> in = {move(x, {0, 2, 3, 1}), xs, u8_scalar(37), w, w_scales, w_zp, ys, y_zp, bias};
      check_exact("QLinearConv", in, true, last);
      in[4] = f32({0.004f}, {});
      in[5] = Tensor::zeros(DType::i8, {});
      check_exact("QLinearConv", in, true, last);
      Tensor want = run_on_cpu(
          node_for("QLinearConv", {x, xs, u8_scalar(37), w, in[4], in[5], ys, y_zp, bias}, c.attrs),
          {x, xs, u8_scalar(37), w, in[4], in[5], ys, y_zp, bias}, true);
      Tensor got = run_on_cpu(node_for("QLinearConv", in, last), in, true);
      Tensor want_last = move(want, {0, 2, 3, 1});
      ASSERT_EQ(got.shape(), want_last.shape());
      EXPECT_EQ(std::memcmp(got.raw(), want_last.raw(), got.nbytes()), 0);
    }
  }
}

TEST(CpuOneDnn, QLinearMatMulIsExact) {
  Tensor a = random_integers({2, 5, 19}, 1, 0, 255, DType::u8), b = random_integers({19, 21}, 2, -128, 127, DType::i8);
  Tensor ub = random_integers({19, 21}, 3, 0, 255, DType::u8), b_scales = random_uniform({21}, 4, 0.001f, 0.01f);
  Tensor as = f32({0.03f}, {}), ys = f32({0.11f}, {});
  for (int a_zp : {0, 255, 77}) {
    SCOPED_TRACE(a_zp);
    check_exact("QLinearMatMul", {a, as, u8_scalar(a_zp), b, b_scales, Tensor::zeros(DType::i8, {21}), ys, u8_scalar(128)});
    check_exact("QLinearMatMul",
                {a, as, u8_scalar(a_zp), b, f32({0.004f}, {}), Tensor::from_vector<int8_t>({0}, {}), ys,
                 Tensor::from_vector<int8_t>({5}, {})});
    check_exact("QLinearMatMul", {a, as, u8_scalar(a_zp), ub, b_scales, random_integers({21}, 7, 0, 255, DType::u8), ys, u8_scalar(0)});
  }
  // Not taken: per-row A scales.
  Tensor rows = random_integers({5, 19}, 5, 0, 255, DType::u8);
  check_exact("QLinearMatMul",
              {rows, random_uniform({5}, 6, 0.01f, 0.02f), random_integers({5}, 8, 0, 255, DType::u8), b, b_scales, Tensor::zeros(DType::i8, {21}), ys, u8_scalar(9)},
              false);
}

// The plan counts what the integer kernel holds: the packed weights and, for uint8 weights or
// weight zero points, one int32 per column (a session fails when the two differ).
TEST(CpuOneDnn, SessionCountsTheIntegerKernelsState) {
  Tensor a = random_integers({3, 19}, 1, 0, 255, DType::u8), ub = random_integers({19, 21}, 2, 0, 255, DType::u8);
  Node n = node_for("MatMulInteger", {a, ub, u8_scalar(3), u8_scalar(120)}, {});
  Model m = one_node_model(n, 17, {a});
  m.graph.initializers["in1"] = ub;
  m.graph.initializers["in2"] = u8_scalar(3);
  m.graph.initializers["in3"] = u8_scalar(120);
  SessionOptions o;
  o.threads = 2;
  Session s(m, o);
  const Plan& p = s.plan({{"in0", {DType::u8, a.shape()}}});
  size_t prepared = 0;
  for (auto& step : p.steps) prepared += step.prepared_bytes;
  if (!CpuBackend(0, test_pool()).reference_kernels() && onednn_exact_integer_products()) {
    EXPECT_GE(prepared, ub.nbytes() + 21 * sizeof(int32_t));
  }
  TensorMap y = s.run({{"in0", a}});
  Tensor want = run_on_cpu(n, {a, ub, u8_scalar(3), u8_scalar(120)}, true);
  EXPECT_EQ(std::memcmp(y.at("out0").raw(), want.raw(), want.nbytes()), 0);
}

// In a session the weight is a constant the prepared state replaces: the plan counts the
// packed bytes, and the result is the reference one (under VLRT_REFERENCE_KERNELS=1,
// nothing is packed).
TEST(CpuOneDnn, SessionPacksConstantWeightsOnce) {
  Tensor x = random_uniform({1, 5, 9, 9}, 1), w = random_uniform({7, 5, 3, 3}, 2);
  Node n = node_for("Conv", {x, w}, {{"pads", attr_ints({1, 1, 1, 1})}});
  Model m = one_node_model(n, 17, {x});
  m.graph.initializers["in1"] = w;
  SessionOptions o;
  o.threads = 2;
  Session s(m, o);
  const Plan& p = s.plan({{"in0", {DType::f32, x.shape()}}});
  size_t packed = 0;
  for (auto& step : p.steps) packed += step.prepared_bytes;
  bool replaced = false;
  for (auto& slot : p.slots) replaced = replaced || slot.replaced;
  if (CpuBackend(0, test_pool()).reference_kernels()) {  // VLRT_REFERENCE_KERNELS=1: nothing packed
    EXPECT_EQ(packed, 0u);
    EXPECT_FALSE(replaced);
    EXPECT_TRUE(p.devices[0].kernels.empty());
  } else {
    EXPECT_GE(packed, w.nbytes());
    EXPECT_TRUE(replaced);
    // vlrt's own direct convolution where it runs (AVX2), else oneDNN's.
    ValueInfos infos({x, w});
    std::string kernel = direct_conv_prepare_info(n, 17, infos.ptrs).bytes ? "direct conv" : "oneDNN conv";
    EXPECT_EQ(p.devices[0].kernels, (std::map<std::string, int>{{kernel, 1}})) << "vlrt plan names the kernel";
  }
  TensorMap y = s.run({{"in0", x}});
  expect_close(y.at("out0"), run_on_cpu(n, {x, w}, true), 1e-4, 1e-4);
}

// --precision bf16 (PlanOptions::bf16_products).
Tensor bf16_rounded(Tensor t) {
  t = t.clone();
  round_to_precision(t.data<float>(), size_t(t.numel()), Precision::bf16);
  return t;
}

Tensor magnitudes(Tensor t) {
  t = t.clone();
  for (int64_t i = 0; i < t.numel(); i++) t.data<float>()[i] = std::fabs(t.data<float>()[i]);
  return t;
}

struct Bf16Case {
  std::string op;
  std::vector<Tensor> inputs;  // X or A, the constant W or B, then the rest
  std::map<std::string, Attribute> attrs;
};

std::vector<Bf16Case> bf16_cases() {
  Tensor z = random_uniform({2, 3, 21}, 5);
  return {
      {"MatMul", {random_uniform({2, 3, 19}, 1), random_uniform({19, 21}, 2)}, {}},
      {"Gemm",
       {random_uniform({5, 40}, 5), random_uniform({23, 40}, 6), random_uniform({23}, 7)},
       {{"transB", attr_i(1)}}},
      {"FusedMatMul",
       {random_uniform({2, 3, 19}, 1), random_uniform({19, 21}, 2), random_uniform({21}, 4), z},
       {{"activation", attr_s("Gelu")}}},
      {"Conv",
       {random_uniform({2, 5, 9, 11}, 8), random_uniform({7, 5, 3, 3}, 9), random_uniform({7}, 10)},
       {{"pads", attr_ints({1, 1, 1, 1})}}},
      {"Conv",
       {random_uniform({1, 3, 13, 10}, 11), random_uniform({17, 3, 3, 2}, 12)},
       {{"strides", attr_ints({2, 3})}, {"pads", attr_ints({0, 1, 2, 1})}}},
      {"Conv",
       {random_uniform({1, 4, 12, 12}, 13), random_uniform({6, 4, 3, 3}, 14)},
       {{"dilations", attr_ints({2, 3})}, {"pads", attr_ints({2, 1, 0, 3})}}},
      {"Conv", {random_uniform({3, 17, 5, 6}, 15), random_uniform({33, 17, 1, 1}, 16)}, {}},
      {"Conv",
       {random_uniform({2, 3, 17}, 17), random_uniform({5, 3, 4}, 18)},
       {{"strides", attr_ints({2})}, {"pads", attr_ints({1, 2})}}},
      {"FusedConv",
       {random_uniform({2, 5, 8, 7}, 19), random_uniform({6, 5, 3, 3}, 20), random_uniform({6}, 21),
        random_uniform({2, 6, 8, 7}, 22)},
       {{"pads", attr_ints({1, 1, 1, 1})}, {"activation", attr_s("Relu")}}},
  };
}

// With bfloat16 products oneDNN rounds the activations and the weights to bfloat16 and sums in
// float32: on values that are bfloat16 already the result is the reference kernel's float32 one
// (up to the order of the sums), and on any others it is within two bfloat16 roundings of each
// term, 2^-7 * sum |x| |w|. A CPU without AVX512-BF16 says so and keeps its float32 kernels.
TEST(CpuOneDnn, Bf16ProductsAreFloat32ProductsOfBf16Values) {
  CpuBackend bf16(0, test_pool()), fp32(0, test_pool());
  bf16.set_reference_kernels(false);
  fp32.set_reference_kernels(false);
  bool native = bf16.use_bf16_products(true);
  EXPECT_EQ(native, onednn_bf16_products());
  for (const Bf16Case& c : bf16_cases()) {
    SCOPED_TRACE(c.op + " " + c.inputs[0].describe());
    Node n = node_for(c.op, c.inputs, c.attrs);
    ValueInfos infos(c.inputs);
    PrepareInfo got = bf16.prepare_info(n, 17, infos.ptrs), plain = fp32.prepare_info(n, 17, infos.ptrs);
    if (!native) {
      EXPECT_EQ(got.kernel, plain.kernel) << "without bfloat16 kernels the float32 ones run";
      continue;
    }
    EXPECT_NE(got.kernel.find("bf16"), std::string::npos) << got.kernel;
    std::vector<Tensor> rounded = c.inputs;
    rounded[0] = bf16_rounded(rounded[0]);
    rounded[1] = bf16_rounded(rounded[1]);
    std::vector<const Tensor*> ptrs;
    for (auto& t : rounded) ptrs.push_back(&t);
    expect_close(run_node(bf16, n, 17, ptrs)[0], run_on_cpu(n, rounded, true), 1e-5, 1e-5);
    if (c.op == "FusedMatMul" || c.op == "FusedConv") continue;  // the bound is for sums alone
    ptrs.clear();
    for (auto& t : c.inputs) ptrs.push_back(&t);
    Tensor y = run_node(bf16, n, 17, ptrs)[0], want = run_on_cpu(n, c.inputs, true);
    std::vector<Tensor> abs_inputs = {magnitudes(c.inputs[0]), magnitudes(c.inputs[1])};
    Tensor bound = run_on_cpu(node_for(c.op, abs_inputs, c.attrs), abs_inputs, true);
    ASSERT_EQ(y.shape(), want.shape());
    double worst = 0;
    for (int64_t i = 0; i < y.numel(); i++) {
      double err = std::fabs(double(y.data<float>()[i]) - want.data<float>()[i]);
      EXPECT_LE(err, std::ldexp(double(bound.data<float>()[i]), -7) + 1e-5) << "element " << i;
      worst = std::max(worst, err);
    }
    EXPECT_GT(worst, 0.0) << "the unrounded values were rounded";
  }
  if (native) {  // a FusedMatMul weight stored in bfloat16 (vlrt quantize --bf16) is packed as it is
    Tensor a = bf16_rounded(random_uniform({3, 40}, 30)),
           b = random_uniform({40, 24}, 31).converted(DType::bf16);
    Node n = node_for("FusedMatMul", {a, b}, {});
    ValueInfos infos({a, b});
    EXPECT_EQ(bf16.prepare_info(n, 17, infos.ptrs).kernel, "oneDNN bf16 matmul");
    expect_close(run_node(bf16, n, 17, {&a, &b})[0], run_on_cpu(n, {a, b.converted(DType::f32)}, true), 1e-5,
                 1e-5);
  }
  // Depthwise and other grouped convolutions stay float32: memory-bound, not faster in bfloat16.
  Tensor x = random_uniform({1, 20, 9, 9}, 1), w = random_uniform({20, 1, 3, 3}, 2);
  Node dw = node_for("Conv", {x, w}, {{"group", attr_i(20)}, {"pads", attr_ints({1, 1, 1, 1})}});
  ValueInfos infos({x, w});
  EXPECT_EQ(bf16.prepare_info(dw, 17, infos.ptrs).kernel, fp32.prepare_info(dw, 17, infos.ptrs).kernel);
}

// PlanOptions::bf16_products reaches the CPU backend: the plan names the bfloat16 kernel and
// counts bfloat16 weights, half the float32 bytes (on a shape without padding to oneDNN's blocks).
TEST(CpuOneDnn, SessionWithBf16ProductsPlansTheBf16Kernels) {
  Tensor a = random_uniform({4, 64}, 1), b = random_uniform({64, 64}, 2);
  Node n = node_for("MatMul", {a, b}, {});
  Model m = one_node_model(n, 17, {a});
  m.graph.initializers["in1"] = b;
  SessionOptions o;
  o.threads = 2;
  o.plan.bf16_products = true;
  Session s(m, o);
  const Plan& p = s.plan({{"in0", {DType::f32, a.shape()}}});
  size_t packed = 0;
  for (auto& step : p.steps) packed += step.prepared_bytes;
  Tensor y = s.run({{"in0", a}}).at("out0");
  if (CpuBackend(0, test_pool()).reference_kernels() || !onednn_bf16_products()) {
    for (auto& [kernel, count] : p.devices[0].kernels) EXPECT_EQ(kernel.find("bf16"), std::string::npos);
    expect_close(y, run_on_cpu(n, {a, b}, false), 1e-5, 1e-5);
    return;
  }
  EXPECT_EQ(p.devices[0].kernels, (std::map<std::string, int>{{"oneDNN bf16 matmul", 1}}));
  EXPECT_EQ(packed, b.nbytes() / 2);
  expect_close(y, run_on_cpu(n, {bf16_rounded(a), bf16_rounded(b)}, true), 1e-5, 1e-5);
}

}  // namespace
}  // namespace vlrt::test
