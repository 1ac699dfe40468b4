// The fusion passes: each test builds a small graph with awkward sizes (channels not a multiple
// of 16, batch 2 under a symbolic batch axis), checks what the pass made of it and that the fused
// session computes what the unfused one does. Cases where a pass must not fire keep their nodes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/isa.h"
#include "exec/session.h"
#include "op_test_util.h"

namespace vlrt {

namespace {

using test::attr_f;
using test::attr_i;
using test::attr_ints;
using test::attr_s;
using test::random_uniform;
using Attrs = std::map<std::string, Attribute>;

Tensor scalar(float v) { return test::f32({v}, {}); }

// A model written node by node; inputs may have a symbolic first axis ("N").
struct Builder {
  Model m;
  int next = 0;
  Builder() { m.opsets[""] = 18; }

  std::string input(const std::string& name, Shape dims, bool symbolic_batch = true) {
    ValueDecl d;
    d.name = name;
    d.dtype = DType::f32;
    d.has_shape = true;
    for (size_t i = 0; i < dims.size(); i++)
      d.dims.push_back(i == 0 && symbolic_batch ? Dim{-1, "N"} : Dim{dims[i], ""});
    m.graph.inputs.push_back(d);
    return name;
  }
  std::string constant(const Tensor& t) {
    std::string name = "c" + std::to_string(next++);
    m.graph.initializers[name] = t;
    return name;
  }
  std::string node(const std::string& op, std::vector<std::string> inputs, Attrs attrs = {},
                   const std::string& domain = "") {
    Node n;
    n.name = op + std::to_string(next);
    n.op_type = op;
    n.domain = domain;
    n.inputs = std::move(inputs);
    n.outputs = {"v" + std::to_string(next++)};
    n.attrs = std::move(attrs);
    m.graph.nodes.push_back(n);
    return n.outputs[0];
  }
  void output(const std::string& v) {
    ValueDecl d;
    d.name = v;
    m.graph.outputs.push_back(d);
  }
};

std::map<std::string, int> op_counts(const Model& m) {
  std::map<std::string, int> c;
  for (auto& n : m.graph.nodes) c[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type]++;
  return c;
}

struct Compared {
  std::map<std::string, int> ops;  // of the fused graph
  FusionReport report;
};

// Runs the model fused (with `options`) and unfused on the same inputs; outputs must agree.
Compared run_both(const Model& model, const TensorMap& inputs, FusionOptions options = {}, double atol = 1e-5) {
  SessionOptions plain;
  plain.threads = 2;
  plain.fusion = FusionOptions::none();
  plain.fuse_qdq =
      false;  // the float passes alone, on any CPU (QDQ groups as integer ops: test_fuse_qdq.cpp)
  SessionOptions fused = plain;
  fused.fusion = options;
  Session a(model, plain), b(model, fused);
  TensorMap want = a.run(inputs), got = b.run(inputs);
  EXPECT_EQ(want.size(), got.size());
  for (auto& [name, t] : want) test::expect_close(got.at(name), t, atol, 1e-4);
  return {op_counts(b.model()), b.fusion_report()};
}

std::string report_of(const Compared& c) { return describe(c.report); }

// ---- Conv ---------------------------------------------------------------------------------

Attrs conv_attrs() { return {{"pads", attr_ints({1, 1, 1, 1})}, {"strides", attr_ints({1, 2})}}; }

TEST(Fusion, BatchNormalizationFoldsIntoConvAndConvTranspose) {
  Builder b;
  std::string x = b.input("x", {2, 5, 9, 7});
  auto bn = [&](const std::string& v, int64_t c, uint32_t seed) {
    return b.node(
        "BatchNormalization",
        {v, b.constant(random_uniform({c}, seed, 0.5f, 1.5f)), b.constant(random_uniform({c}, seed + 1)),
         b.constant(random_uniform({c}, seed + 2)), b.constant(random_uniform({c}, seed + 3, 0.2f, 2.f))},
        {{"epsilon", attr_f(1e-3f)}});
  };
  std::string y =
      b.node("Conv", {x, b.constant(random_uniform({6, 5, 3, 3}, 1)), b.constant(random_uniform({6}, 2))},
             conv_attrs());
  y = bn(y, 6, 10);
  std::string t = b.node("ConvTranspose", {y, b.constant(random_uniform({6, 3, 2, 2}, 3))},
                         {{"group", attr_i(3)}, {"strides", attr_ints({2, 2})}});  // 9 output channels
  b.output(bn(t, 9, 20));
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 4)}}, {}, 1e-4);
  EXPECT_EQ(c.ops.count("BatchNormalization"), 0u);
  EXPECT_EQ(report_of(c), "1 Conv+BatchNormalization, 1 ConvTranspose+BatchNormalization");
}

TEST(Fusion, BatchNormalizationStaysWhenTheConvOutputHasAnotherUser) {
  Builder b;
  std::string x = b.input("x", {2, 5, 6, 6});
  std::string y = b.node("Conv", {x, b.constant(random_uniform({6, 5, 1, 1}, 1))});
  b.output(b.node("BatchNormalization",
                  {y, b.constant(random_uniform({6}, 5, 0.5f, 1.5f)), b.constant(random_uniform({6}, 6)),
                   b.constant(random_uniform({6}, 7)), b.constant(random_uniform({6}, 8, 0.2f, 2.f))}));
  b.output(y);
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 6, 6}, 4)}});
  EXPECT_EQ(c.ops["BatchNormalization"], 1);
  EXPECT_EQ(c.ops["Conv"], 1);
}

TEST(Fusion, ConvResidualAddAndReluBecomeOneFusedConv) {
  Builder b;
  std::string x = b.input("x", {2, 5, 9, 7}), z = b.input("z", {2, 6, 9, 4});
  std::string y =
      b.node("Conv", {x, b.constant(random_uniform({6, 5, 3, 3}, 1)), b.constant(random_uniform({6}, 2))},
             conv_attrs());
  std::string sum = b.node("Add", {z, y});  // the residual first
  b.output(b.node("Relu", {sum}));
  b.output(b.node("Neg", {z}));  // the residual has another user: it stays an input
  Compared c =
      run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 3)}, {"z", random_uniform({2, 6, 9, 4}, 4)}});
  EXPECT_EQ(c.ops["com.microsoft.FusedConv"], 1);
  EXPECT_EQ(c.ops.count("Add") + c.ops.count("Relu") + c.ops.count("Conv"), 0u);
  EXPECT_EQ(report_of(c), "1 Conv+Add+Relu");
}

TEST(Fusion, ABroadcastResidualIsNotFused) {
  Builder b;
  std::string x = b.input("x", {2, 5, 6, 6}), z = b.input("z", {1, 6, 1, 1}, false);
  std::string y =
      b.node("Conv", {x, b.constant(random_uniform({6, 5, 3, 3}, 1))}, {{"pads", attr_ints({1, 1, 1, 1})}});
  b.output(b.node("Relu", {b.node("Add", {y, z})}));
  Compared c =
      run_both(b.m, {{"x", random_uniform({2, 5, 6, 6}, 3)}, {"z", random_uniform({1, 6, 1, 1}, 4)}});
  EXPECT_EQ(c.ops["Conv"], 1);
  EXPECT_EQ(c.ops["Add"], 1);
  EXPECT_EQ(c.ops.count("com.microsoft.FusedConv"), 0u);
}

TEST(Fusion, ConvKeepsItsActivationWhenTheConvOutputIsAGraphOutput) {
  Builder b;
  std::string x = b.input("x", {2, 5, 6, 6});
  std::string y = b.node("Conv", {x, b.constant(random_uniform({6, 5, 1, 1}, 1))});
  b.output(b.node("Relu", {y}));
  b.output(y);
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 6, 6}, 3)}});
  EXPECT_EQ(c.ops["Relu"], 1);
  EXPECT_EQ(c.ops.count("com.microsoft.FusedConv"), 0u);
}

TEST(Fusion, EveryActivationFusesIntoConv) {
  struct Case {
    std::string op;
    Attrs attrs;
    std::vector<float> bounds;  // Clip's constant min, max
    std::string pattern;
  };
  std::vector<Case> cases = {
      {"Relu", {}, {}, "Conv+Relu"},
      {"Clip", {}, {0.f, 6.f}, "Conv+Clip"},
      {"LeakyRelu", {{"alpha", attr_f(0.3f)}}, {}, "Conv+LeakyRelu"},
      {"Sigmoid", {}, {}, "Conv+Sigmoid"},
      {"Tanh", {}, {}, "Conv+Tanh"},
      {"HardSigmoid", {{"alpha", attr_f(0.25f)}, {"beta", attr_f(0.4f)}}, {}, "Conv+HardSigmoid"},
      {"HardSwish", {}, {}, "Conv+HardSwish"},
      {"SiLU", {}, {}, "Conv+SiLU"},
  };
  for (auto& k : cases) {
    SCOPED_TRACE(k.op);
    Builder b;
    std::string x = b.input("x", {2, 3, 5, 7});
    std::string y = b.node(
        "Conv", {x, b.constant(random_uniform({7, 3, 3, 3}, 1, -2, 2)), b.constant(random_uniform({7}, 2))},
        {{"pads", attr_ints({1, 1, 1, 1})}});
    if (k.op == "SiLU") {
      b.output(b.node("Mul", {b.node("Sigmoid", {y}), y}));
    } else if (k.op == "Clip") {
      b.output(b.node("Clip", {y, b.constant(scalar(k.bounds[0])), b.constant(scalar(k.bounds[1]))}));
    } else {
      b.output(b.node(k.op, {y}, k.attrs));
    }
    Compared c = run_both(b.m, {{"x", random_uniform({2, 3, 5, 7}, 3, -2, 2)}});
    EXPECT_EQ(report_of(c), "1 " + k.pattern);
    EXPECT_EQ(c.ops.size(), 1u);
  }
}

// HardSwish as paddle2onnx and older torch exports write it: x * Clip(x + 3, 0, 6) / 6, with the
// division as a Mul by 1/6 or before the product, and x * HardSigmoid(x) (alpha 1/6, beta 1/2).
// After a Conv it joins the Conv's epilogue; alone it is one HardSwish node. A Clip of another
// value's sum, or a HardSigmoid with other constants, stays.
TEST(Fusion, HardSwishSubgraphsBecomeHardSwish) {
  Builder b;
  std::string x = b.input("x", {2, 3, 5, 7});
  auto gate = [&](const std::string& v) {
    return b.node("Clip", {b.node("Add", {v, b.constant(scalar(3.f))}), b.constant(scalar(0.f)),
                           b.constant(scalar(6.f))});
  };
  std::string y = b.node(
      "Conv", {x, b.constant(random_uniform({7, 3, 3, 3}, 1, -2, 2)), b.constant(random_uniform({7}, 2))},
      {{"pads", attr_ints({1, 1, 1, 1})}});
  std::string h1 =
      b.node("Div", {b.node("Mul", {y, gate(y)}), b.constant(scalar(6.f))});  // fused into the Conv
  std::string h2 = b.node("Mul", {b.constant(scalar(1.f / 6)), b.node("Mul", {gate(h1), h1})});     // alone
  std::string h3 = b.node("Mul", {h2, b.node("Div", {gate(h2), b.constant(scalar(6.f))})});         // alone
  std::string h4 = b.node("Mul", {h3, b.node("HardSigmoid", {h3}, {{"alpha", attr_f(1.f / 6)}})});  // alone
  std::string kept = b.node("Div", {b.node("Mul", {h4, gate(h1)}), b.constant(scalar(6.f))});
  std::string kept2 = b.node("Mul", {kept, b.node("HardSigmoid", {kept}, {{"alpha", attr_f(0.2f)}})});
  b.output(kept2);
  b.output(h4);
  Compared c = run_both(b.m, {{"x", random_uniform({2, 3, 5, 7}, 3, -2, 2)}});
  EXPECT_EQ(report_of(c), "4 HardSwish subgraph, 1 Conv+HardSwish");
  EXPECT_EQ(c.ops["HardSwish"], 3);
  EXPECT_EQ(c.ops["Clip"], 1);
  EXPECT_EQ(c.ops["HardSigmoid"], 1);
}

// A Mul, Add or Sub by a per-channel constant (one value, or [C, 1, 1]) folds into the Conv
// before it, and into an unpadded Conv after it (groups included); one before a padded Conv
// stays, as does a constant that broadcasts along another axis.
TEST(Fusion, PerChannelMulAndAddFoldIntoConvolutions) {
  Builder b;
  std::string x = b.input("x", {2, 4, 6, 7});
  auto conv = [&](const std::string& v, Shape w, Attrs attrs = {}) {
    return b.node("Conv",
                  {v, b.constant(random_uniform(w, uint32_t(w[0] + w[1]), -1, 1)),
                   b.constant(random_uniform({w[0]}, 9))},
                  std::move(attrs));
  };
  std::string y = conv(x, {6, 4, 3, 3}, {{"pads", attr_ints({1, 1, 1, 1})}});
  y = b.node("Mul", {b.constant(scalar(0.7f)), y});                   // Conv+Mul
  y = b.node("Sub", {y, b.constant(random_uniform({6, 1, 1}, 11))});  // Conv+Add
  y = b.node("Relu", {y});
  y = b.node("Mul", {y, b.constant(random_uniform({1, 6, 1, 1}, 12, 0.5f, 2.f))});  // Mul+Conv
  y = b.node("Add", {b.constant(scalar(0.3f)), y});                                 // Add+Conv
  y = conv(y, {8, 3, 1, 1}, {{"group", attr_i(2)}});
  y = b.node("Add", {b.node("Relu", {y}), b.constant(scalar(0.25f))});  // stays: the Conv pads
  y = conv(y, {5, 8, 3, 3}, {{"pads", attr_ints({1, 1, 1, 1})}});
  b.output(b.node("Mul", {y, b.constant(random_uniform({7}, 13))}));  // stays: along W
  Compared c = run_both(b.m, {{"x", random_uniform({2, 4, 6, 7}, 3, -2, 2)}}, {}, 1e-4);
  std::string r = report_of(c);
  EXPECT_NE(r.find("1 Add+Conv folded, 1 Conv+Add folded, 1 Conv+Mul folded, 1 Mul+Conv folded"),
            std::string::npos)
      << r;
  EXPECT_EQ(c.ops["Add"], 1);
  EXPECT_EQ(c.ops["Mul"], 1);
  EXPECT_EQ(c.ops.count("Sub"), 0u);
}

// Where the input's shape is not declared (no shape facts), the Conv fusions still hold: the
// constants say the values are float32, and a Conv's X has its weights' rank.
TEST(Fusion, ConvolutionsFuseWithoutShapeFacts) {
  Builder b;
  std::string x = b.input("x", {1, 5, 6, 7});
  b.m.graph.inputs[0].has_shape = false;
  std::string y =
      b.node("Conv", {x, b.constant(random_uniform({8, 5, 3, 3}, 1)), b.constant(random_uniform({8}, 2))},
             {{"pads", attr_ints({1, 1, 1, 1})}});
  y = b.node("Mul", {b.node("Mul", {y, b.node("Clip", {b.node("Add", {y, b.constant(scalar(3.f))}),
                                                       b.constant(scalar(0.f)), b.constant(scalar(6.f))})}),
                     b.constant(scalar(1.f / 6))});
  y = b.node("Mul", {y, b.constant(scalar(1.5f))});
  b.output(b.node("Conv", {y, b.constant(random_uniform({4, 8, 1, 1}, 3))}));
  Compared c = run_both(b.m, {{"x", random_uniform({1, 5, 6, 7}, 4, -3, 3)}}, {}, 1e-4);
  std::string r = report_of(c);
  EXPECT_NE(r.find("1 HardSwish subgraph, 1 Mul+Conv folded, 1 Conv+HardSwish"), std::string::npos) << r;
  if (CpuBackend(0, 1).conv_channel_block() > 0) EXPECT_EQ(c.ops["vlrt.BlockedConv"], 2) << r;
}

// ---- MatMul / Gemm ------------------------------------------------------------------------

// 0.5 * x * (1 + erf(x / sqrt 2)) as torch writes it.
std::string erf_gelu(Builder& b, const std::string& x) {
  std::string e = b.node("Erf", {b.node("Div", {x, b.constant(scalar(float(M_SQRT2)))})});
  std::string a = b.node("Add", {e, b.constant(scalar(1.f))});
  return b.node("Mul", {b.node("Mul", {x, a}), b.constant(scalar(0.5f))});
}

TEST(Fusion, MatMulBiasAndGeluBecomeFusedMatMul) {
  Builder b;
  std::string x = b.input("x", {2, 5, 20});
  std::string y = b.node("MatMul", {x, b.constant(random_uniform({20, 13}, 1))});
  y = b.node("Add", {b.constant(random_uniform({13}, 2)), y});
  b.output(erf_gelu(b, y));
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 20}, 3, -2, 2)}});
  EXPECT_EQ(report_of(c), "1 Gelu subgraph (erf), 1 MatMul+Add+Gelu");
  EXPECT_EQ(c.ops.size(), 1u);
  EXPECT_EQ(c.ops["vlrt.FusedMatMul"], 1);
}

// A model that takes its 900 best values over a symbolic axis (a detector's queries over every
// feature-map position) has no shapes at the small probe sizes; the passes still get them.
TEST(Fusion, ATopKOverManyPositionsStillGetsShapeFacts) {
  Builder b;
  std::string x = b.input("x", {120, 8});
  std::string y = b.node("MatMul", {x, b.constant(random_uniform({8, 8}, 1))});
  y = b.node("Add", {y, b.constant(random_uniform({8}, 2))});
  b.output(y);
  std::string flat = b.node("Reshape", {y, b.constant(test::i64({1, -1}, {2}))});
  std::string best = b.node("TopK", {flat, b.constant(test::i64({900}, {1}))}, {{"axis", attr_i(1)}});
  b.m.graph.nodes.back().outputs.push_back("best_indices");
  b.output(best);
  Compared c = run_both(b.m, {{"x", random_uniform({120, 8}, 3)}});
  EXPECT_EQ(report_of(c), "1 MatMul+Add");
}

TEST(Fusion, MatMulResidualFusesUnlessTheSumHasAnotherUser) {
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared);
    Builder b;
    std::string x = b.input("x", {2, 5, 20}), z = b.input("z", {2, 5, 13});
    std::string y = b.node("MatMul", {x, b.constant(random_uniform({20, 13}, 1))});
    std::string biased = b.node("Add", {y, b.constant(random_uniform({1, 1, 13}, 2))});
    b.output(b.node("Add", {biased, z}));
    if (shared) b.output(b.node("Neg", {biased}));
    Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 20}, 3)}, {"z", random_uniform({2, 5, 13}, 4)}});
    EXPECT_EQ(report_of(c), shared ? "1 MatMul+Add" : "1 MatMul+Add+Add");
  }
}

TEST(Fusion, GemmWithTransposedWeightsAndReluBecomesFusedMatMul) {
  Builder b;
  std::string x = b.input("x", {3, 20});
  std::string y =
      b.node("Gemm", {x, b.constant(random_uniform({13, 20}, 1)), b.constant(random_uniform({13}, 2))},
             {{"transB", attr_i(1)}});
  b.output(b.node("Relu", {y}));
  Compared c = run_both(b.m, {{"x", random_uniform({3, 20}, 3)}});
  EXPECT_EQ(report_of(c), "1 Gemm+Relu");
  EXPECT_EQ(c.ops["vlrt.FusedMatMul"], 1);
}

// ---- Weights stored in half precision --------------------------------------------------------

// `vlrt quantize --fp16` / `--bf16` store a weight as a half-precision initializer read through a
// Cast to float32. The fused products take the stored weight (half the bytes), a lone MatMul
// included, a Gather reads the stored table and widens the rows it took, and both compute what
// the widened weight gives; a Cast with another reader is folded to float32 as before.
TEST(Fusion, HalfPrecisionWeightsStayHalfInTheProducts) {
  if (!CpuBackend(0, 1).reads_half_product_weights()) GTEST_SKIP() << "the packed products need AVX2";
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    Builder b;
    auto half = [&](Shape s, uint32_t seed) {
      return b.node("Cast", {b.constant(random_uniform(s, seed, -1, 1, dt))}, {{"to", attr_i(1)}});
    };
    std::string x = b.input("x", {2, 5, 20}), x2 = b.input("x2", {3, 20}), ids = b.input("ids", {2, 5});
    b.m.graph.inputs.back().dtype = DType::i64;
    x = b.node("Add", {x, b.node("Gather", {half({50, 20}, 9), ids})});  // an embedding table
    std::string y = b.node("Add", {b.node("MatMul", {x, half({20, 13}, 1)}), b.constant(random_uniform({13}, 2))});
    y = b.node("MatMul", {y, half({13, 17}, 3)});  // alone
    std::string shared = half({17, 17}, 4);
    b.output(b.node("MatMul", {y, shared}));
    b.output(b.node("Neg", {shared}));  // a second reader: widened at load
    b.output(b.node("Gemm", {x2, half({13, 20}, 5), b.constant(random_uniform({13}, 6))}, {{"transB", attr_i(1)}}));
    TensorMap in = {{"x", random_uniform({2, 5, 20}, 7)},
                    {"x2", random_uniform({3, 20}, 8)},
                    {"ids", Tensor::from_vector<int64_t>({0, 49, 3, 3, 7, 1, 2, 40, 8, 9}, {2, 5})}};
    Compared c = run_both(b.m, in, {}, 0);
    std::string w = cat(" (", dtype_name(dt), " weight)");
    EXPECT_EQ(report_of(c), cat("1 Gemm", w, ", 1 MatMul", w, ", 1 MatMul+Add", w));
    EXPECT_EQ(c.ops["vlrt.FusedMatMul"], 3);
    EXPECT_EQ(c.ops["Cast"], 1) << "the rows the Gather read, widened";

    SessionOptions o;
    o.threads = 2;
    Session s(b.m, o);
    std::map<std::string, std::pair<DType, Shape>> shapes = {{"x", {DType::f32, {2, 5, 20}}},
                                                             {"x2", {DType::f32, {3, 20}}},
                                                             {"ids", {DType::i64, {2, 5}}}};
    const DevicePlan& cpu = s.plan(shapes).device_plan(Device{});
    // Panels of 16 columns: 20 x 16, 13 x 32 and 20 x 16 values of 2 bytes; the shared weight
    // packed in float32 (17 x 32 x 4).
    EXPECT_EQ(cpu.prepared_bytes, size_t((20 * 16 + 13 * 32 + 20 * 16) * 2 + 17 * 32 * 4));
    EXPECT_EQ(cpu.kernels.at(cat("packed product", w)), 3);
    size_t half_weights = 0;
    for (auto& [name, t] : s.model().graph.initializers) half_weights += t.dtype() == dt ? t.nbytes() : 0;
    EXPECT_EQ(half_weights, size_t(50 * 20 + 20 * 13 + 13 * 17 + 13 * 20) * 2)
        << "the stored weights, not widened copies";
  }
}

// ---- LayerNormalization and Gelu ------------------------------------------------------------

TEST(Fusion, LayerNormalizationSubgraphBecomesOneNode) {
  Builder b;
  std::string x = b.input("x", {2, 5, 19});
  std::string axes = b.constant(test::i64({-1}, {1}));
  std::string mean = b.node("ReduceMean", {x, axes});
  std::string d = b.node("Sub", {x, mean});
  std::string var = b.node("ReduceMean", {b.node("Pow", {d, b.constant(scalar(2.f))}), axes});
  std::string s = b.node("Sqrt", {b.node("Add", {var, b.constant(scalar(1e-5f))})});
  std::string n = b.node("Div", {d, s});
  b.output(b.node(
      "Add", {b.node("Mul", {n, b.constant(random_uniform({19}, 1))}), b.constant(random_uniform({19}, 2))}));
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 19}, 3, -3, 3)}});
  EXPECT_EQ(report_of(c), "1 LayerNormalization subgraph");
  EXPECT_EQ(c.ops.size(), 1u);
  EXPECT_EQ(c.ops["LayerNormalization"], 1);
}

// 0.044715 x^3 as exporters write it: 0.044715 * Pow(x, 3), 0.044715 * (x * x * x), and jax's
// x * (x * (0.044715 * x)); x^2 or x^4 in its place is not Gelu and stays as it is.
TEST(Fusion, TanhGeluSubgraphBecomesFastGelu) {
  for (int spelling = 0; spelling < 5; spelling++) {
    SCOPED_TRACE(spelling);
    Builder b;
    std::string x = b.input("x", {2, 37});
    std::string c = b.constant(scalar(0.044715f)), cubic;
    if (spelling == 0) cubic = b.node("Mul", {b.node("Pow", {x, b.constant(scalar(3.f))}), c});
    if (spelling == 1) cubic = b.node("Mul", {c, b.node("Mul", {b.node("Mul", {x, x}), x})});
    if (spelling == 2) cubic = b.node("Mul", {x, b.node("Mul", {x, b.node("Mul", {c, x})})});
    if (spelling == 3) cubic = b.node("Mul", {x, b.node("Mul", {c, x})});  // x^2
    if (spelling == 4)
      cubic = b.node("Mul", {x, b.node("Mul", {x, b.node("Mul", {x, b.node("Mul", {c, x})})})});
    std::string inner = b.node("Add", {x, cubic});
    std::string t = b.node("Tanh", {b.node("Mul", {inner, b.constant(scalar(0.7978845608028654f))})});
    std::string a = b.node("Add", {t, b.constant(scalar(1.f))});
    b.output(b.node("Mul", {b.node("Mul", {x, b.constant(scalar(0.5f))}), a}));
    Compared r = run_both(b.m, {{"x", random_uniform({2, 37}, 3, -4, 4)}});
    const bool gelu = spelling < 3;
    EXPECT_EQ(report_of(r), gelu ? "1 FastGelu subgraph (tanh)" : "nothing");
    EXPECT_EQ(r.ops["com.microsoft.FastGelu"], gelu ? 1 : 0);
  }
}

// ---- Attention ----------------------------------------------------------------------------

// BERT's form: heads [B, S, H, D] transposed in, 1 / sqrt(D) as a Div, an additive [B, 1, 1, S]
// mask, the output transposed back.
TEST(Fusion, BertAttentionBecomesOneNode) {
  Builder b;
  std::string q = b.input("q", {2, 7, 3, 12}), k = b.input("k", {2, 7, 3, 12}), v = b.input("v", {2, 7, 3, 12});
  std::string mask = b.input("mask", {2, 1, 1, 7});
  std::string qt = b.node("Transpose", {q}, {{"perm", attr_ints({0, 2, 1, 3})}});
  std::string kt = b.node("Transpose", {k}, {{"perm", attr_ints({0, 2, 3, 1})}});
  std::string vt = b.node("Transpose", {v}, {{"perm", attr_ints({0, 2, 1, 3})}});
  std::string s = b.node("Div", {b.node("MatMul", {qt, kt}), b.constant(scalar(std::sqrt(12.f)))});
  std::string p = b.node("Softmax", {b.node("Add", {s, mask})}, {{"axis", attr_i(-1)}});
  b.output(b.node("Transpose", {b.node("MatMul", {p, vt})}, {{"perm", attr_ints({0, 2, 1, 3})}}));
  Tensor m = random_uniform({2, 1, 1, 7}, 9);
  for (int64_t i = 0; i < m.numel(); i++) m.data<float>()[i] = m.data<float>()[i] > 0.5f ? -10000.f : 0.f;
  Compared c = run_both(b.m, {{"q", random_uniform({2, 7, 3, 12}, 1, -2, 2)},
                              {"k", random_uniform({2, 7, 3, 12}, 2, -2, 2)},
                              {"v", random_uniform({2, 7, 3, 12}, 3)},
                              {"mask", m}});
  EXPECT_EQ(report_of(c), "1 Attention+mask");
  EXPECT_EQ(c.ops.size(), 1u);
}

// torchvision ViT's form: [B*H, S, D] operands, the scale applied to q, k^T by Transpose [1, 2, 0]
// of [S, B*H, D].
TEST(Fusion, VitAttentionOnRank3OperandsBecomesOneNode) {
  Builder b;
  std::string q = b.input("q", {6, 5, 10}, false), k = b.input("k", {5, 6, 10}, false),
              v = b.input("v", {6, 5, 10}, false);
  std::string qs = b.node("Div", {q, b.constant(scalar(std::sqrt(10.f)))});
  std::string kt = b.node("Transpose", {k}, {{"perm", attr_ints({1, 2, 0})}});
  std::string p = b.node("Softmax", {b.node("MatMul", {qs, kt})}, {{"axis", attr_i(-1)}});
  b.output(b.node("MatMul", {p, v}));
  Compared c = run_both(b.m, {{"q", random_uniform({6, 5, 10}, 1, -2, 2)},
                              {"k", random_uniform({5, 6, 10}, 2, -2, 2)},
                              {"v", random_uniform({6, 5, 10}, 3)}});
  EXPECT_EQ(report_of(c), "1 Attention");
  EXPECT_EQ(c.ops.size(), 1u);
}

TEST(Fusion, ScoresWithAnotherUserAreNotFused) {
  Builder b;
  std::string q = b.input("q", {2, 4, 8}), k = b.input("k", {2, 8, 4});
  std::string s = b.node("MatMul", {q, k});
  b.output(b.node("MatMul", {b.node("Softmax", {s}, {{"axis", attr_i(-1)}}), q}));
  b.output(s);
  Compared c = run_both(b.m, {{"q", random_uniform({2, 4, 8}, 1)}, {"k", random_uniform({2, 8, 4}, 2)}});
  EXPECT_EQ(c.ops["Softmax"], 1);
}

// ---- Weighted sum ----------------------------------------------------------------------------

// ReduceSum(Mul(A, W)) over the last axis becomes vlrt.WeightedSum, with broadcasting on the
// other axes (deformable attention's weights [N, 1, Q, K] over its samples [N, D, Q, K]), the axis
// given as an input or, before opset 13, as an attribute, negative or not, keepdims either way, a
// summed axis of 17 (not a whole number of vectors) and a scalar result; on every instruction set
// level the CPU has. A product broadcast along the summed axis, a sum over another axis and a
// product something else reads stay as they are.
TEST(Fusion, ASumOfProductsOverTheLastAxisBecomesAWeightedSum) {
  auto build = [](int64_t opset) {
    Builder b;
    b.m.opsets[""] = opset;
    std::string x = b.input("x", {2, 3, 5, 17}), w = b.input("w", {2, 1, 5, 17}),
                wl = b.input("wl", {2, 3, 5, 1}), v = b.input("v", {33}, false),
                u = b.input("u", {33}, false);
    auto sum = [&](const std::string& product, int64_t axis, int64_t keepdims) {
      if (opset >= 13)
        return b.node("ReduceSum", {product, b.constant(Tensor::from_vector<int64_t>({axis}, {1}))},
                      {{"keepdims", attr_i(keepdims)}});
      return b.node("ReduceSum", {product}, {{"axes", attr_ints({axis})}, {"keepdims", attr_i(keepdims)}});
    };
    b.output(sum(b.node("Mul", {x, w}), -1, 0));  // fused
    b.output(sum(b.node("Mul", {w, x}), 3, 1));   // fused
    b.output(sum(b.node("Mul", {v, u}), 0, 0));   // fused, a scalar
    b.output(sum(b.node("Mul", {x, wl}), -1, 0));
    b.output(sum(b.node("Mul", {x, w}), 2, 0));
    std::string read_twice = b.node("Mul", {x, w});
    b.output(sum(read_twice, -1, 1));
    b.output(read_twice);
    return b.m;
  };
  TensorMap inputs = {{"x", random_uniform({2, 3, 5, 17}, 1)},
                      {"w", random_uniform({2, 1, 5, 17}, 2)},
                      {"wl", random_uniform({2, 3, 5, 1}, 3)},
                      {"v", random_uniform({33}, 4)},
                      {"u", random_uniform({33}, 5)}};
  for (CpuIsa isa : {CpuIsa::plain, CpuIsa::avx2, CpuIsa::avx512}) {
    if (isa > detected_cpu_isa()) continue;
    SCOPED_TRACE(cpu_isa_name(isa));
    CpuIsa before = set_cpu_isa(isa);
    for (int64_t opset : {11, 18}) {
      SCOPED_TRACE(cat("opset ", opset));
      Compared c = run_both(build(opset), inputs);
      EXPECT_EQ(report_of(c), "3 Mul+ReduceSum");
      EXPECT_EQ(c.ops["vlrt.WeightedSum"], 3);
      EXPECT_EQ(c.ops["ReduceSum"], 3);
    }
    set_cpu_isa(before);
  }
}

// vlrt.WeightedSum refuses operands it does not define, naming what they must be.
TEST(Fusion, AWeightedSumOfMismatchedOperandsIsRefused) {
  auto run = [](const Tensor& a, const Tensor& w) {
    Node n = test::make_node("WeightedSum", 2, 1, {});
    n.domain = "vlrt";
    run_node_cpu(n, 18, {&a, &w}, test::test_pool());
  };
  auto expect_error = [&](const Tensor& a, const Tensor& w, const std::string& text) {
    try {
      run(a, w);
      ADD_FAILURE() << "no error; expected one mentioning '" << text << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_error(random_uniform({2, 5}, 1), random_uniform({2, 4}, 2),
               "the same last axis, got [2,5] and [2,4]");
  expect_error(random_uniform({2, 5}, 1), random_uniform({5}, 2), "one rank");
  expect_error(random_uniform({2, 5}, 1), Tensor::zeros(DType::i32, {2, 5}), "A and W must be float32");
}

// ---- Deformable sampling ----------------------------------------------------------------------

// Multi-scale deformable attention as the PyTorch reference exports it: per level a GridSample
// [N, C, Q, P], Unsqueeze at -2, a Concat at -2, a Reshape to [N, C, Q, L * P] and the weighted sum.
// `computed_target`: the Reshape's target is Shape(stacked)[:3] + [L * P], as the export computes it
// (the Shape then reads the stacked samples too); otherwise a constant.
Model deformable_attention(const Attrs& sampling, bool computed_target, bool sample_read_elsewhere = false) {
  Builder b;
  std::string w = b.input("w", {2, 1, 6, 6});
  std::vector<std::string> levels;
  for (auto [name, shape] : {std::pair<std::string, Shape>{"0", {2, 5, 7, 9}}, {"1", {2, 5, 3, 4}}}) {
    std::string x = b.input("x" + name, shape), g = b.input("g" + name, {2, 6, 3, 2});
    std::string sample = b.node("GridSample", {x, g}, sampling);
    if (sample_read_elsewhere && name == "1") b.output(sample);
    levels.push_back(b.node("Unsqueeze", {sample, b.constant(Tensor::from_vector<int64_t>({-2}, {1}))}));
  }
  std::string stacked = b.node("Concat", levels, {{"axis", attr_i(-2)}});
  std::string target = computed_target
                           ? b.node("Concat",
                                    {b.node("Slice", {b.node("Shape", {stacked}),
                                                      b.constant(Tensor::from_vector<int64_t>({0}, {1})),
                                                      b.constant(Tensor::from_vector<int64_t>({3}, {1}))}),
                                     b.constant(Tensor::from_vector<int64_t>({6}, {1}))},
                                    {{"axis", attr_i(0)}})
                           : b.constant(Tensor::from_vector<int64_t>({-1, 5, 6, 6}, {4}));
  std::string product = b.node("Mul", {b.node("Reshape", {stacked, target}), w});
  b.output(b.node("ReduceSum", {product, b.constant(Tensor::from_vector<int64_t>({-1}, {1}))},
                  {{"keepdims", attr_i(0)}}));
  return b.m;
}

TensorMap deformable_inputs() {
  // Points up to 30% outside the image on each side: taps dropped, clamped or reflected.
  return {{"w", random_uniform({2, 1, 6, 6}, 1)},
          {"x0", random_uniform({2, 5, 7, 9}, 2)},
          {"x1", random_uniform({2, 5, 3, 4}, 3)},
          {"g0", random_uniform({2, 6, 3, 2}, 4, -1.3f, 1.3f)},
          {"g1", random_uniform({2, 6, 3, 2}, 5, -1.3f, 1.3f)}};
}

// The samples of every level and their weighted sum become one vlrt.DeformableSampleSum, whatever
// the padding and corner alignment, with the Reshape's target computed or constant; the Shape
// computation goes with it. 5 channels, points outside the image.
TEST(Fusion, DeformableAttentionSamplesAndSumsInOneNode) {
  for (std::string pad : {"zeros", "border", "reflection"})
    for (int64_t align : {0, 1})
      for (bool computed : {true, false}) {
        SCOPED_TRACE(cat(pad, " align_corners ", align, computed ? " computed target" : " constant target"));
        Attrs sampling = {
            {"mode", attr_s("bilinear")}, {"padding_mode", attr_s(pad)}, {"align_corners", attr_i(align)}};
        Compared c = run_both(deformable_attention(sampling, computed), deformable_inputs());
        EXPECT_EQ(report_of(c), "1 Mul+ReduceSum, 1 GridSample+Concat+WeightedSum");
        EXPECT_EQ(c.ops["vlrt.DeformableSampleSum"], 1);
        EXPECT_EQ(
            c.ops.count("GridSample") + c.ops.count("Concat") + c.ops.count("Shape") + c.ops.count("Slice"),
            0u);
      }
}

// A level's samples read elsewhere, or nearest sampling, keep the GridSamples.
TEST(Fusion, DeformableSamplingStaysWhereItsSamplesAreNeeded) {
  Attrs bilinear = {{"mode", attr_s("bilinear")}};
  Compared kept = run_both(deformable_attention(bilinear, true, true), deformable_inputs());
  EXPECT_EQ(kept.ops["GridSample"], 2);
  EXPECT_EQ(kept.ops["vlrt.WeightedSum"], 1);
  Compared nearest = run_both(deformable_attention({{"mode", attr_s("nearest")}}, true), deformable_inputs());
  EXPECT_EQ(nearest.ops["GridSample"], 2);
  EXPECT_EQ(nearest.ops.count("vlrt.DeformableSampleSum"), 0u);
}

// vlrt.DeformableSampleSum names what its inputs must be.
TEST(Fusion, ADeformableSampleSumOfMismatchedInputsIsRefused) {
  auto expect_error = [](std::vector<Tensor> in, const std::string& text, Attrs attrs = {}) {
    Node n = test::make_node("DeformableSampleSum", in.size(), 1, attrs);
    n.domain = "vlrt";
    std::vector<const Tensor*> ptrs;
    for (auto& t : in) ptrs.push_back(&t);
    try {
      run_node_cpu(n, 18, ptrs, test::test_pool());
      ADD_FAILURE() << "no error; expected one mentioning '" << text << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  Tensor x = random_uniform({2, 5, 7, 9}, 1), g = random_uniform({2, 6, 3, 2}, 2),
         w = random_uniform({2, 1, 6, 3}, 3);
  expect_error({w, x}, "has 2 inputs, the op takes 3 to 65");
  expect_error({w, x, g, x}, "takes W and then one X and Grid per level, got 4 inputs");
  expect_error({random_uniform({2, 1, 6, 4}, 4), x, g}, "W must have shape [2,1,6,3]");
  expect_error({w, x, random_uniform({2, 6, 3, 3}, 5)}, "Grid_0 must have shape [2,6,3,2]");
  expect_error({w, x, g}, "mode must be 'bilinear'", {{"mode", attr_s("cubic")}});
}

// ---- Channel-blocked layout ----------------------------------------------------------------

// A run of convolutions keeps its activations in blocks: the residual read blocked, one
// conversion back for the value the graph returns mid-run and one for the MaxPool reading it.
TEST(Fusion, ARunOfConvolutionsKeepsItsActivationsBlocked) {
  Builder b;
  std::string x = b.input("x", {2, 5, 9, 7});
  std::string a = b.node("Relu", {b.node("Conv", {x, b.constant(random_uniform({6, 5, 3, 3}, 1)),
                                                  b.constant(random_uniform({6}, 2))},
                                         {{"pads", attr_ints({1, 1, 1, 1})}})});
  std::string c2 = b.node("Conv", {a, b.constant(random_uniform({20, 6, 3, 3}, 3))},
                          {{"pads", attr_ints({1, 1, 1, 1})}, {"strides", attr_ints({2, 2})}});
  std::string c3 = b.node("Conv", {c2, b.constant(random_uniform({20, 1, 3, 3}, 4))},
                          {{"group", attr_i(20)}, {"pads", attr_ints({1, 1, 1, 1})}});
  std::string d = b.node("Relu", {b.node("Add", {c3, c2})});
  b.output(b.node("Conv", {d, b.constant(random_uniform({7, 20, 1, 1}, 5))}));
  b.output(b.node("MaxPool", {c2}, {{"kernel_shape", attr_ints({2, 2})}}));
  b.output(a);
  int64_t block = CpuBackend(0, 1).conv_channel_block();
  if (block == 0) GTEST_SKIP() << "the CPU backend has no blocked layout here";
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 6)}}, {}, 1e-4);
  EXPECT_EQ(c.ops["vlrt.BlockedConv"], 4);
  EXPECT_EQ(c.ops["vlrt.FromChannelBlocks"], 2);
  EXPECT_EQ(c.ops.count("Conv") + c.ops.count("com.microsoft.FusedConv"), 0u);
  EXPECT_NE(report_of(c).find(cat("4 Conv in blocks of ", block, " channels, 2 conversion from blocks")),
            std::string::npos)
      << report_of(c);
  FusionOptions no_layout;
  no_layout.conv_layout = false;
  Compared plain = run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 6)}}, no_layout, 1e-4);
  EXPECT_EQ(plain.ops.count("vlrt.BlockedConv"), 0u);
}

// Quantized convolutions run channels-last with the QLinearAdd, MaxPool and
// QLinearGlobalAveragePool between them: one Transpose in, one back for each value read outside
// (a graph output mid-run, a DequantizeLinear, the pooled result), the same bytes as the plain run.
TEST(Fusion, QuantizedConvolutionsRunChannelsLast) {
  if (!CpuBackend(0, 1).channels_last_integer_convs())
    GTEST_SKIP() << "no channels-last integer convolutions here";
  Builder b;
  auto u8 = [&](int v) { return b.constant(Tensor::from_vector<uint8_t>({uint8_t(v)}, {})); };
  auto i8 = [&](Shape s, uint32_t seed) {
    Tensor t = random_uniform(s, seed, -127, 127);
    return b.constant(t.converted(DType::i8));
  };
  auto qconv = [&](const std::string& x, int64_t m, int64_t c, int64_t k, int y_zp, uint32_t seed,
                   Attrs attrs) {
    Tensor bias = random_uniform({m}, seed + 1, -3000, 3000).converted(DType::i32);
    return b.node(
        "QLinearConv",
        {x, b.constant(scalar(0.02f)), u8(128), i8({m, c, k, k}, seed),
         b.constant(random_uniform({m}, seed + 2, 0.001f, 0.01f)), b.constant(Tensor::zeros(DType::i8, {m})),
         b.constant(scalar(0.02f)), u8(y_zp), b.constant(bias)},
        std::move(attrs));
  };
  std::string x = b.input("x", {2, 5, 9, 11});
  std::string q = b.node("QuantizeLinear", {x, b.constant(scalar(0.02f)), u8(128)});
  std::string c1 = qconv(q, 20, 5, 3, 128, 1, {{"pads", attr_ints({1, 1, 1, 1})}});
  std::string c2 = qconv(c1, 20, 1, 3, 0, 5, {{"pads", attr_ints({1, 1, 1, 1})}, {"group", attr_i(20)}});
  std::string sum = b.node("QLinearAdd",
                           {c1, b.constant(scalar(0.02f)), u8(128), c2, b.constant(scalar(0.02f)), u8(0),
                            b.constant(scalar(0.03f)), u8(120)},
                           {}, "com.microsoft");
  std::string pooled = b.node("MaxPool", {sum},
                              {{"kernel_shape", attr_ints({3, 3})},
                               {"strides", attr_ints({2, 2})},
                               {"pads", attr_ints({1, 1, 1, 1})}});
  std::string c3 = qconv(pooled, 7, 20, 1, 3, 9, {});
  b.output(b.node("QLinearGlobalAveragePool",
                  {c3, b.constant(scalar(0.02f)), u8(3), b.constant(scalar(0.01f)), u8(100)}, {},
                  "com.microsoft"));
  b.output(b.node("DequantizeLinear", {c3, b.constant(scalar(0.02f)), u8(3)}));
  b.output(c2);
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 9, 11}, 6, -2.5f, 2.5f)}}, {}, 0);
  EXPECT_EQ(c.ops["com.microsoft.QLinearConv"], 3);
  EXPECT_EQ(c.ops.count("QLinearConv"), 0u);
  EXPECT_EQ(c.ops["com.microsoft.NhwcMaxPool"], 1);
  EXPECT_EQ(c.ops["Transpose"], 4);
  EXPECT_EQ(report_of(c),
            "1 NhwcMaxPool channels-last, 1 QLinearAdd channels-last, 3 QLinearConv channels-last, "
            "1 QLinearGlobalAveragePool channels-last, 3 Transpose from channels-last, 1 Transpose to "
            "channels-last");
  FusionOptions plain_layout;
  plain_layout.qlinear_channels_last = false;
  EXPECT_EQ(run_both(b.m, {{"x", random_uniform({2, 5, 9, 11}, 6)}}, plain_layout, 0).ops.count("Transpose"),
            0u);
}

// Convolution weights stored in half precision stay so in the blocked convolutions; a
// convolution that a BatchNormalization follows, or one left unblocked, gets float32 weights.
TEST(Fusion, BlockedConvolutionsKeepHalfPrecisionWeights) {
  if (!CpuBackend(0, 1).reads_half_conv_weights())
    GTEST_SKIP() << "the direct convolution needs AVX2 and blocks of 8";
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    Builder b;
    auto half = [&](Shape s, uint32_t seed) {
      return b.node("Cast", {b.constant(random_uniform(s, seed, -1, 1, dt))}, {{"to", attr_i(1)}});
    };
    Attrs pad = {{"pads", attr_ints({1, 1, 1, 1})}};
    std::string x = b.input("x", {2, 5, 9, 7});
    std::string a =
        b.node("Relu", {b.node("Conv", {x, half({6, 5, 3, 3}, 1), b.constant(random_uniform({6}, 2))}, pad)});
    std::string c2 = b.node("Conv", {a, half({20, 6, 3, 3}, 3)}, pad);
    std::string n2 =
        b.node("BatchNormalization",
               {c2, b.constant(random_uniform({20}, 4, 0.5f, 1.5f)), b.constant(random_uniform({20}, 5)),
                b.constant(random_uniform({20}, 6)), b.constant(random_uniform({20}, 7, 0.5f, 1.5f))});
    std::string c3 = b.node("Conv", {n2, half({8, 20, 1, 1}, 8)});
    b.output(b.node("Sigmoid", {b.node("Conv", {c3, half({4, 8, 3, 3}, 9)}, pad)}));
    b.output(b.node("Conv", {b.input("x2", {1, 3, 5, 5}), half({4, 3, 3, 3}, 10)}));  // alone: not blocked
    Compared c = run_both(
        b.m, {{"x", random_uniform({2, 5, 9, 7}, 11)}, {"x2", random_uniform({1, 3, 5, 5}, 12)}}, {}, 1e-4);
    EXPECT_EQ(c.ops["vlrt.BlockedConv"], 4);
    EXPECT_EQ(c.ops["Cast"], 0);
    std::string r = report_of(c);
    EXPECT_NE(r.find(cat("1 Conv in blocks of 8 channels, 3 Conv in blocks of 8 channels (", dtype_name(dt),
                         " weight)")),
              std::string::npos)
        << r;
  }
}

// Scalar ops between two convolutions (a model's affine after an activation, before a padded
// convolution it cannot fold into) run on the blocks; the graph returns the chain's end through a
// conversion. Where the channels leave a partial last block the chain stays plain.
TEST(Fusion, ScalarOpsBetweenConvolutionsStayBlocked) {
  int64_t block = CpuBackend(0, 1).conv_channel_block();
  if (block == 0) GTEST_SKIP() << "the CPU backend has no blocked layout here";
  Builder b;
  Attrs pad = {{"pads", attr_ints({1, 1, 1, 1})}};
  std::string x = b.input("x", {2, 5, 9, 7});
  std::string y =
      b.node("Relu", {b.node("Conv", {x, b.constant(random_uniform({2 * block, 5, 3, 3}, 1))}, pad)});
  y = b.node("Add", {b.constant(scalar(0.5f)), b.node("Mul", {y, b.constant(scalar(1.5f))})});
  b.output(y);
  y = b.node("Relu", {b.node("Conv", {y, b.constant(random_uniform({6, 2 * block, 3, 3}, 2))}, pad)});
  y = b.node("Div", {y, b.constant(test::f32({4.f}, {1, 1, 1, 1}))});  // 6 channels: stays plain
  b.output(b.node("Conv", {y, b.constant(random_uniform({3, 6, 3, 3}, 3))}, pad));
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 4)}}, {}, 1e-4);
  std::string r = report_of(c);
  EXPECT_NE(
      r.find(cat("1 Add by a scalar in blocks of ", block, " channels, 2 Conv in blocks of ", block,
                 " channels, 1 Mul by a scalar in blocks of ", block, " channels, 1 conversion from blocks")),
      std::string::npos)
      << r;
  EXPECT_EQ(c.ops["vlrt.BlockedConv"], 2);
  EXPECT_EQ(c.ops["Div"], 1);
  EXPECT_EQ(c.ops["Conv"], 1);
}

// Split along the channels into parts of `sizes` (a constant input), or into `parts` equal ones.
std::vector<std::string> split_channels(Builder& b, const std::string& x, std::vector<int64_t> sizes,
                                        int parts, int64_t axis = 1) {
  Node n;
  n.name = "Split" + std::to_string(b.next);
  n.op_type = "Split";
  n.inputs = {x};
  if (!sizes.empty())
    n.inputs.push_back(b.constant(test::i64(sizes, {int64_t(sizes.size())})));
  else
    n.attrs["num_outputs"] = attr_i(parts);
  n.attrs["axis"] = attr_i(axis);
  for (int k = 0; k < (sizes.empty() ? parts : int(sizes.size())); k++)
    n.outputs.push_back("v" + std::to_string(b.next) + "_" + std::to_string(k));
  b.next++;
  b.m.graph.nodes.push_back(n);
  return n.outputs;
}

// YOLO's C2f block: a convolution split along the channels, convolutions on a part, all parts
// concatenated into the next convolution. Split and Concat run on the blocks (along the axis of
// blocks) where every part fills whole blocks; a part the graph returns is converted back. A split
// into parts off the blocks stays plain.
TEST(Fusion, SplitAndConcatBetweenConvolutionsStayBlocked) {
  int64_t block = CpuBackend(0, 1).conv_channel_block();
  if (block == 0) GTEST_SKIP() << "the CPU backend has no blocked layout here";
  Attrs pad = {{"pads", attr_ints({1, 1, 1, 1})}};
  for (int variant = 0; variant < 3; variant++) {
    SCOPED_TRACE(variant);
    Builder b;
    std::string x = b.input("x", {2, 5, 9, 7});
    std::string y =
        b.node("Relu", {b.node("Conv", {x, b.constant(random_uniform({4 * block, 5, 3, 3}, 1))}, pad)});
    std::vector<std::string> parts = variant == 0   ? split_channels(b, y, {block, 3 * block}, 0)
                                     : variant == 1 ? split_channels(b, y, {}, 2, -3)
                                                    : split_channels(b, y, {block + 3, 3 * block - 3}, 0);
    const int64_t second = variant == 0 ? 3 * block : variant == 1 ? 2 * block : 3 * block - 3;
    std::string t = b.node("Conv", {parts[1], b.constant(random_uniform({block, second, 3, 3}, 2))}, pad);
    std::string cat_v = b.node("Concat", {parts[0], parts[1], t}, {{"axis", attr_i(variant == 1 ? -3 : 1)}});
    b.output(b.node("Conv", {cat_v, b.constant(random_uniform({6, 5 * block, 1, 1}, 3))}));
    b.output(parts[0]);
    Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 4)}}, {}, 1e-4);
    std::string r = report_of(c);
    if (variant < 2) {
      EXPECT_NE(r.find(cat("1 Concat in blocks of ", block, " channels, 3 Conv in blocks of ", block,
                           " channels, 1 Split in blocks of ", block, " channels, 1 conversion from blocks")),
                std::string::npos)
          << r;
      EXPECT_EQ(c.ops["vlrt.BlockedConv"], 3);
      EXPECT_EQ(c.ops["vlrt.FromChannelBlocks"], 1);
    } else {
      EXPECT_EQ(r.find("Split in blocks"), std::string::npos) << r;
      EXPECT_EQ(r.find("Concat in blocks"), std::string::npos) << r;
    }
  }
}

// A squeeze-and-excitation gate between two convolutions (MobileNetV3's): the global average, the
// two small convolutions and the Mul by the gate, either way round, run on the blocks, the average
// as a mean over the spatial axes. With channels that leave a partial last block they stay plain.
TEST(Fusion, SqueezeAndExcitationBetweenConvolutionsStaysBlocked) {
  int64_t block = CpuBackend(0, 1).conv_channel_block();
  if (block == 0) GTEST_SKIP() << "the CPU backend has no blocked layout here";
  Attrs pad = {{"pads", attr_ints({1, 1, 1, 1})}};
  for (int variant = 0; variant < 3; variant++) {
    SCOPED_TRACE(variant);
    const int64_t c = variant == 2 ? 2 * block + 3 : 2 * block;
    Builder b;
    std::string x = b.input("x", {2, 5, 9, 7});
    std::string y = b.node("Relu", {b.node("Conv", {x, b.constant(random_uniform({c, 5, 3, 3}, 1))}, pad)});
    std::string s = b.node("GlobalAveragePool", {y});
    s = b.node("Relu", {b.node("Conv", {s, b.constant(random_uniform({4, c, 1, 1}, 2))})});
    s = b.node("HardSigmoid", {b.node("Conv", {s, b.constant(random_uniform({c, 4, 1, 1}, 3))})});
    std::string gated = variant == 1 ? b.node("Mul", {s, y}) : b.node("Mul", {y, s});
    b.output(b.node("Conv", {gated, b.constant(random_uniform({6, c, 1, 1}, 4))}));
    Compared cmp = run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 5)}}, {}, 1e-4);
    std::string r = report_of(cmp);
    if (variant < 2) {
      EXPECT_NE(r.find(cat("4 Conv in blocks of ", block, " channels, 1 GlobalAveragePool in blocks of ",
                           block, " channels")),
                std::string::npos)
          << r;
      EXPECT_NE(r.find(cat("1 Mul in blocks of ", block, " channels")), std::string::npos) << r;
      EXPECT_EQ(cmp.ops["ReduceMean"], 1);
      EXPECT_EQ(cmp.ops["GlobalAveragePool"], 0);
      EXPECT_EQ(cmp.ops.count("vlrt.FromChannelBlocks"), 0u);
    } else {
      EXPECT_EQ(r.find("GlobalAveragePool in blocks"), std::string::npos) << r;
      EXPECT_EQ(r.find("Mul in blocks"), std::string::npos) << r;
      EXPECT_EQ(cmp.ops["GlobalAveragePool"], 1);
    }
  }
}

// A Mul of a blocked value by a plain one (here a graph input that a convolution also reads) stays
// plain, and so does that input.
TEST(Fusion, AMulByAPlainValueStaysPlain) {
  int64_t block = CpuBackend(0, 1).conv_channel_block();
  if (block == 0) GTEST_SKIP() << "the CPU backend has no blocked layout here";
  Builder b;
  std::string x = b.input("x", {2, 5, 9, 7}), x2 = b.input("x2", {2, block, 9, 7});
  std::string y = b.node("Relu", {b.node("Conv", {x, b.constant(random_uniform({block, 5, 1, 1}, 1))})});
  std::string t = b.node("Conv", {x2, b.constant(random_uniform({block, block, 1, 1}, 2))});
  std::string m = b.node("Mul", {y, x2});
  b.output(b.node("Conv", {b.node("Add", {m, t}), b.constant(random_uniform({4, block, 1, 1}, 3))}));
  Compared c =
      run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 4)}, {"x2", random_uniform({2, block, 9, 7}, 5)}});
  std::string r = report_of(c);
  EXPECT_EQ(r.find("Mul in blocks"), std::string::npos) << r;
  EXPECT_EQ(c.ops["Mul"], 1);
}

// An Identity between a convolution's bias Add and its activation (as PaddlePaddle's exports
// write them) goes, so the chain fuses; one whose output the graph returns stays.
TEST(Fusion, IdentitiesBetweenNodesAreDropped) {
  Builder b;
  std::string x = b.input("x", {2, 5, 9, 7});
  std::string y = b.node("Conv", {x, b.constant(random_uniform({6, 5, 3, 3}, 1))});
  y = b.node("Identity", {b.node("Add", {y, b.constant(random_uniform({1, 6, 1, 1}, 2))})});
  y = b.node("Relu", {y});
  b.output(b.node("Identity", {y}));
  b.output(b.node("Identity", {x}));
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 3)}});
  std::string r = report_of(c);
  EXPECT_NE(r.find("1 Identity dropped"), std::string::npos) << r;
  EXPECT_EQ(c.ops["Identity"], 2);
  EXPECT_EQ(c.ops["Relu"], 0);
  EXPECT_EQ(c.ops["Add"], 0);
}

// A convolution whose neighbours are not convolutions stays as it was.
TEST(Fusion, ALoneConvolutionIsNotBlocked) {
  Builder b;
  std::string x = b.input("x", {2, 5, 9, 7});
  std::string y = b.node("Conv", {x, b.constant(random_uniform({6, 5, 3, 3}, 1))});
  b.output(b.node("Conv", {b.node("MaxPool", {y}, {{"kernel_shape", attr_ints({2, 2})}}),
                           b.constant(random_uniform({4, 6, 1, 1}, 2))}));
  Compared c = run_both(b.m, {{"x", random_uniform({2, 5, 9, 7}, 6)}});
  EXPECT_EQ(c.ops["Conv"], 2);
  EXPECT_EQ(c.ops.count("vlrt.BlockedConv"), 0u);
}

// ---- Dynamically quantized MatMul --------------------------------------------------------

// DynamicQuantizeLinear(x) as three named values: quantized, scale, zero point.
std::vector<std::string> dynamic_quantize(Builder& b, const std::string& x) {
  Node n;
  n.name = "DynamicQuantizeLinear" + std::to_string(b.next);
  n.op_type = "DynamicQuantizeLinear";
  n.inputs = {x};
  for (const char* part : {"_q", "_scale", "_zp"}) n.outputs.push_back("v" + std::to_string(b.next) + part);
  b.next++;
  b.m.graph.nodes.push_back(n);
  return n.outputs;
}

// MatMulInteger(x_q, W, x_zp, 0) -> Cast -> Mul(x_scale * W_scale), as the quantizers write it.
std::string integer_product(Builder& b, const std::vector<std::string>& q, int64_t k, int64_t n, uint32_t seed,
                            bool per_column) {
  Tensor w = test::random_uniform({k, n}, seed, -127, 127, DType::i8);
  Tensor w_scale = per_column ? random_uniform({n}, seed + 1, 0.001f, 0.01f) : scalar(0.0042f);
  std::string y = b.node("MatMulInteger", {q[0], b.constant(w), q[2], b.constant(Tensor::zeros(DType::i8, {}))});
  y = b.node("Cast", {y}, {{"to", attr_i(1)}});
  return b.node("Mul", {y, b.node("Mul", {q[1], b.constant(w_scale)})});
}

// Fused and unfused sessions give the same floats, to the bit.
Compared run_both_exact(const Model& model, const TensorMap& inputs) {
  SessionOptions plain;
  plain.threads = 2;
  plain.fusion = FusionOptions::none();
  plain.fuse_qdq = false;
  SessionOptions fused = plain;
  fused.fusion = FusionOptions();
  Session a(model, plain), b(model, fused);
  TensorMap want = a.run(inputs), got = b.run(inputs);
  for (auto& [name, t] : want) {
    SCOPED_TRACE(name);
    EXPECT_EQ(got.at(name).shape(), t.shape());
    EXPECT_EQ(std::memcmp(got.at(name).raw(), t.raw(), t.nbytes()), 0);
  }
  return {op_counts(b.model()), b.fusion_report()};
}

TEST(Fusion, DynamicallyQuantizedMatMulsSharingTheirQuantizationBecomeOneNodeEach) {
  Builder b;
  b.m.opsets[""] = 13;
  std::string x = b.input("x", {2, 5, 37});
  std::vector<std::string> q = dynamic_quantize(b, x);
  b.output(b.node("Add", {integer_product(b, q, 37, 21, 1, true), b.constant(random_uniform({21}, 3))}));
  b.output(integer_product(b, q, 37, 19, 5, false));
  Compared c = run_both_exact(b.m, {{"x", random_uniform({2, 5, 37}, 7, -3, 2)}});
  EXPECT_EQ(report_of(c),
            "1 DynamicQuantizeLinear+MatMulInteger+Cast+Mul, 1 DynamicQuantizeLinear+MatMulInteger+Cast+Mul+Add");
  EXPECT_EQ(c.ops.size(), 1u);
  EXPECT_EQ(c.ops["com.microsoft.DynamicQuantizeMatMul"], 2);
}

// Products of one quantized activation (attention's query, key and value) run as one
// vlrt.DynamicQuantizeMatMuls where integer products are fast: those with a bias together, the one
// without apart; to the bit, few rows and thousands.
TEST(Fusion, DynamicallyQuantizedMatMulsOfOneActivationRunTogether) {
  for (int64_t rows : {5, 2100}) {
    SCOPED_TRACE(rows);
    Builder b;
    b.m.opsets[""] = 13;
    std::string x = b.input("x", {2, rows, 37});
    std::vector<std::string> q = dynamic_quantize(b, x);
    for (int64_t n : {21, 16, 9})
      b.output(b.node("Add", {integer_product(b, q, 37, n, uint32_t(n), n != 16),
                              b.constant(random_uniform({n}, uint32_t(n) + 3))}));
    b.output(integer_product(b, q, 37, 19, 5, false));
    Compared c = run_both_exact(b.m, {{"x", random_uniform({2, rows, 37}, 7, -3, 2)}});
    if (!CpuBackend(0, 1).fast_integer_products()) {
      EXPECT_EQ(c.ops["com.microsoft.DynamicQuantizeMatMul"], 4);
      continue;
    }
    EXPECT_EQ(c.ops["vlrt.DynamicQuantizeMatMuls"], 1);
    EXPECT_EQ(c.ops["com.microsoft.DynamicQuantizeMatMul"], 1);
    EXPECT_NE(report_of(c).find("3 DynamicQuantizeMatMul sharing A"), std::string::npos) << report_of(c);
  }
}

TEST(Fusion, AQuantizationWithAnotherReaderStays) {
  Builder b;
  b.m.opsets[""] = 13;
  std::string x = b.input("x", {3, 16});
  std::vector<std::string> q = dynamic_quantize(b, x);
  b.output(integer_product(b, q, 16, 8, 1, true));
  b.output(q[1]);  // the activation's scale is a graph output
  Compared c = run_both_exact(b.m, {{"x", random_uniform({3, 16}, 2)}});
  EXPECT_EQ(c.ops["com.microsoft.DynamicQuantizeMatMul"], 1);
  EXPECT_EQ(c.ops["DynamicQuantizeLinear"], 1);
}

TEST(Fusion, AnIntegerProductWithAnotherReaderIsNotFused) {
  Builder b;
  b.m.opsets[""] = 13;
  std::string x = b.input("x", {3, 16});
  std::vector<std::string> q = dynamic_quantize(b, x);
  std::string y = integer_product(b, q, 16, 8, 1, false);
  b.output(y);
  b.output(b.m.graph.nodes[1].outputs[0]);  // the int32 product
  Compared c = run_both_exact(b.m, {{"x", random_uniform({3, 16}, 2)}});
  EXPECT_EQ(c.ops.count("com.microsoft.DynamicQuantizeMatMul"), 0u);
  EXPECT_EQ(c.ops["MatMulInteger"], 1);
}

// ---- Switches -----------------------------------------------------------------------------

TEST(Fusion, ReferenceKernelsSwitchTurnsEveryPassOff) {
  Builder b;
  std::string x = b.input("x", {2, 3, 5, 5});
  b.output(b.node("Relu", {b.node("Conv", {x, b.constant(random_uniform({4, 3, 1, 1}, 1))})}));
  setenv(kReferenceKernelsEnv, "1", 1);
  Session off(b.m);
  unsetenv(kReferenceKernelsEnv);
  Session on(b.m);
  EXPECT_EQ(op_counts(off.model()).count("com.microsoft.FusedConv"), 0u);
  EXPECT_TRUE(off.fusion_report().empty());
  EXPECT_EQ(op_counts(on.model())["com.microsoft.FusedConv"], 1);
  SessionOptions no_conv;
  no_conv.fusion.conv_activation = false;
  Session some(b.m, no_conv);
  EXPECT_EQ(op_counts(some.model())["Relu"], 1);
}

// ---- QDQ models run in float32 -------------------------------------------------------------

// QuantizeLinear + DequantizeLinear of value v (scale, uint8 zero point), as quantize_static writes.
std::string fake_quantize(Builder& b, const std::string& v, float scale, uint8_t zero_point,
                          float dq_scale = 0) {
  std::string zp = b.constant(Tensor::from_vector<uint8_t>({zero_point}, {}));
  std::string q = b.node("QuantizeLinear", {v, b.constant(scalar(scale)), zp});
  return b.node("DequantizeLinear", {q, b.constant(scalar(dq_scale ? dq_scale : scale)), zp});
}

// A QDQ residual block (ReLUs folded into the quantization's lower bound): each Conv's fake
// quantization becomes its epilogue, and the Add of two fake-quantized values joins the Conv
// before it with the fake quantization of both its operands and of its sum. Values are multiples
// of the scales (float32 exact), so fused and unfused agree to the bit.
TEST(Fusion, QuantizeDequantizeJoinsTheConvolutionsOfAQdqModel) {
  Builder b;
  std::string x = b.input("x", {1, 16, 14, 14});
  auto conv = [&](const std::string& in, int64_t k, uint32_t seed) {
    return b.node("Conv",
                  {in, b.constant(test::random_multiples({16, 16, k, k}, seed, 1.f, -1, 1)),
                   b.constant(test::random_multiples({16}, seed + 1, 0.5f, -4, 4))},
                  {{"pads", attr_ints({k / 2, k / 2, k / 2, k / 2})}});
  };
  std::string a = fake_quantize(b, x, 0.5f, 0);
  std::string c1 = fake_quantize(b, conv(a, 3, 1), 0.5f, 100);
  std::string c2 = fake_quantize(b, conv(c1, 1, 3), 0.5f, 128);
  b.output(fake_quantize(b, b.node("Add", {c2, a}), 0.25f, 0));
  Compared c = run_both_exact(b.m, {{"x", test::random_multiples({1, 16, 14, 14}, 7, 0.5f, -2, 6)}});
  EXPECT_EQ(report_of(c), cat("1 Conv+QuantizeDequantize, 1 Conv+QuantizeDequantize+Add+QuantizeDequantize, "
                              "2 Conv in blocks of ",
                              CpuBackend(0, 1).conv_channel_block(), " channels"));
  EXPECT_EQ(c.ops["QuantizeLinear"], 1);  // the input's
  EXPECT_EQ(c.ops["vlrt.BlockedConv"], 2);
}

// With a bias Add before the fake quantization, and without (a QDQ transformer's products: the
// bias Add comes after).
TEST(Fusion, QuantizeDequantizeJoinsAProduct) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    Builder b;
    std::string x = b.input("x", {2, 3, 16});
    std::string y = b.node("MatMul", {x, b.constant(test::random_multiples({16, 8}, 1, 1.f, -1, 1))});
    if (bias) y = b.node("Add", {y, b.constant(test::random_multiples({8}, 2, 0.5f, -4, 4))});
    b.output(fake_quantize(b, y, 0.5f, 10));
    Compared c = run_both_exact(b.m, {{"x", test::random_multiples({2, 3, 16}, 3, 0.5f, -6, 6)}});
    EXPECT_EQ(report_of(c), bias ? "1 MatMul+Add+QuantizeDequantize" : "1 MatMul+QuantizeDequantize");
    EXPECT_EQ(c.ops["vlrt.FusedMatMul"], 1);
    EXPECT_EQ(c.ops.size(), 1u);
  }
}

TEST(Fusion, QuantizeDequantizeStaysWhenItsScalesDiffer) {
  Builder b;
  std::string x = b.input("x", {1, 4, 6, 6});
  std::string y = b.node("Conv", {x, b.constant(random_uniform({4, 4, 1, 1}, 1))});
  b.output(fake_quantize(b, y, 0.5f, 0, 0.25f));
  Compared c = run_both(b.m, {{"x", random_uniform({1, 4, 6, 6}, 2)}});
  EXPECT_EQ(c.ops["QuantizeLinear"], 1);
  EXPECT_EQ(c.ops["DequantizeLinear"], 1);
}

}  // namespace

}  // namespace vlrt
