// The canonicalizing pass: each older-opset form is rewritten into the opset-18 form (checked on the
// rewritten graph) and computes what the opset-18 form computes (checked through the CPU kernels).
#include <gtest/gtest.h>

#include "cli_util.h"
#include "op_test_util.h"

namespace vlrt {

namespace {

using test::attr_f;
using test::attr_floats;
using test::attr_i;
using test::attr_ints;
using test::attr_s;
using test::f32;
using test::i64;
using Attrs = std::map<std::string, Attribute>;

Tensor iota(Shape s) {
  Tensor t(DType::f32, s);
  for (int64_t i = 0; i < t.numel(); i++) t.data<float>()[i] = float(i % 7) - 2.5f + 0.1f * float(i);
  return t;
}

// The canonical model of one node "n" of `op` at `opset`, inputs declared unless `declare` is false.
Model canonical(const std::string& op, int64_t opset, const std::vector<Tensor>& inputs, Attrs attrs,
                size_t outputs = 1, bool declare = true) {
  Model m = test::one_node_model(test::make_node(op, inputs.size(), outputs, std::move(attrs)), opset, inputs,
                                 declare);
  canonicalize(m);
  return m;
}

const Tensor& init(const Model& m, const std::string& name) { return m.graph.initializers.at(name); }

// The old form (through the pass) and the opset-18 form give the same outputs.
void expect_same(const std::string& op, int64_t opset, const std::vector<Tensor>& old_in, Attrs old_attrs,
                 const std::vector<Tensor>& new_in, Attrs new_attrs, size_t outputs = 1) {
  auto want = test::run_op(op, new_in, std::move(new_attrs), outputs, kCanonicalOpset);
  auto got = test::run_op(op, old_in, std::move(old_attrs), outputs, opset);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) test::expect_close(got[i], want[i], 0, 0);
}

using ::vlrt::test::error_of;

TEST(Canonicalize, PadAttributesBecomeInputs) {
  Tensor x = iota({2, 3});
  Model m = canonical("Pad", 2, {x}, {{"pads", attr_ints({0, 1, 1, 0})}, {"value", attr_f(1.5f)}});
  const Node& n = m.graph.nodes.at(0);
  ASSERT_EQ(m.graph.nodes.size(), 1u);
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"in0", "n__pads", "n__value"}));
  EXPECT_TRUE(n.attrs.empty());
  EXPECT_EQ(init(m, "n__pads").to_int64_vector(), (std::vector<int64_t>{0, 1, 1, 0}));
  test::expect_close(init(m, "n__value"), Tensor::scalar<float>(1.5f));
  EXPECT_EQ(m.opset(), kCanonicalOpset);
  expect_same("Pad", 2, {x}, {{"pads", attr_ints({0, 1, 1, 0})}, {"value", attr_f(1.5f)}},
              {x, i64({0, 1, 1, 0}, {4}), Tensor::scalar<float>(1.5f)}, {});
  expect_same("Pad", 2, {x}, {{"pads", attr_ints({1, 0, 0, 2})}, {"mode", attr_s("edge")}},
              {x, i64({1, 0, 0, 2}, {4})}, {{"mode", attr_s("edge")}});
}

TEST(Canonicalize, PadValueOfAnUndeclaredTypeIsCastLikeTheData) {
  Model m = canonical("Pad", 2, {iota({2, 3})}, {{"pads", attr_ints({0, 1, 1, 0})}, {"value", attr_f(2)}}, 1,
                      false);
  ASSERT_EQ(m.graph.nodes.size(), 2u);
  const Node& cast = m.graph.nodes[0];
  EXPECT_EQ(cast.op_type, "CastLike");
  EXPECT_EQ(cast.inputs, (std::vector<std::string>{"n__value_f32", "in0"}));
  EXPECT_EQ(m.graph.nodes[1].inputs.at(2), cast.outputs.at(0));
}

TEST(Canonicalize, MalformedOldPadNamesTheNode) {
  std::string e = error_of([] { canonical("Pad", 2, {iota({2, 3})}, {{"pads", attr_ints({0, 1, 1})}}); });
  EXPECT_NE(e.find("node 'n' (Pad)"), std::string::npos) << e;
  EXPECT_NE(e.find("'pads' [0,1,1] has 3 values, expected 4"), std::string::npos) << e;
  e = error_of([] { canonical("Pad", 2, {iota({2, 3})}, {}); });
  EXPECT_NE(e.find("node 'n' (Pad): attribute 'pads' is required before opset 11"), std::string::npos) << e;
}

TEST(Canonicalize, SliceAttributesBecomeInputs) {
  Tensor x = iota({4, 5});
  Attrs old = {{"starts", attr_ints({1, 0})}, {"ends", attr_ints({3, -1})}, {"axes", attr_ints({0, 1})}};
  Model m = canonical("Slice", 9, {x}, old);
  const Node& n = m.graph.nodes.at(0);
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"in0", "n__starts", "n__ends", "n__axes"}));
  EXPECT_TRUE(n.attrs.empty());
  EXPECT_EQ(init(m, "n__ends").to_int64_vector(), (std::vector<int64_t>{3, -1}));
  expect_same("Slice", 9, {x}, old, {x, i64({1, 0}, {2}), i64({3, -1}, {2}), i64({0, 1}, {2})}, {});
  std::string e = error_of([&] { canonical("Slice", 9, {x, i64({1}, {1})}, {}); });
  EXPECT_NE(e.find("node 'n' (Slice): before opset 10 Slice takes"), std::string::npos) << e;
}

TEST(Canonicalize, ClipBoundsBecomeInputs) {
  Tensor x = iota({3, 4});
  Model m = canonical("Clip", 6, {x}, {{"max", attr_f(0.5f)}});
  const Node& n = m.graph.nodes.at(0);
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"in0", "", "n__max"}));
  EXPECT_TRUE(n.attrs.empty());
  expect_same("Clip", 6, {x}, {{"min", attr_f(-1)}, {"max", attr_f(0.5f)}},
              {x, Tensor::scalar<float>(-1), Tensor::scalar<float>(0.5f)}, {});
  expect_same("Clip", 6, {x}, {{"max", attr_f(0.5f)}}, {x, Tensor(), Tensor::scalar<float>(0.5f)}, {});
  EXPECT_THROW(test::run_op("Clip", {x, Tensor::scalar<float>(0)}, {}, 1, 6), Error);
}

TEST(Canonicalize, SplitAttributeBecomesAnInput) {
  Tensor x = iota({2, 6});
  Model m = canonical("Split", 11, {x}, {{"axis", attr_i(1)}, {"split", attr_ints({4, 2})}}, 2);
  EXPECT_EQ(m.graph.nodes.at(0).inputs, (std::vector<std::string>{"in0", "n__split"}));
  EXPECT_EQ(init(m, "n__split").to_int64_vector(), (std::vector<int64_t>{4, 2}));
  expect_same("Split", 11, {x}, {{"axis", attr_i(1)}, {"split", attr_ints({4, 2})}}, {x, i64({4, 2}, {2})},
              {{"axis", attr_i(1)}}, 2);
}

TEST(Canonicalize, ReduceAxesBecomeAnInput) {
  Tensor x = iota({3, 4, 5});
  for (auto [op, opset] : {std::pair<const char*, int64_t>{"ReduceSum", 11},
                           {"ReduceMean", 17},
                           {"ReduceMax", 13},
                           {"ReduceLogSumExp", 11}}) {
    SCOPED_TRACE(op);
    Model m = canonical(op, opset, {x}, {{"axes", attr_ints({0, 2})}, {"keepdims", attr_i(0)}});
    EXPECT_EQ(m.graph.nodes.at(0).inputs, (std::vector<std::string>{"in0", "n__axes"}));
    EXPECT_FALSE(m.graph.nodes[0].has_attr("axes"));
    expect_same(op, opset, {x}, {{"axes", attr_ints({0, 2})}, {"keepdims", attr_i(0)}}, {x, i64({0, 2}, {2})},
                {{"keepdims", attr_i(0)}});
    // No axes: all of them, as before.
    expect_same(op, opset, {x}, {}, {x}, {});
  }
  std::string e = error_of([&] { canonical("ReduceMean", 17, {x, i64({0}, {1})}, {}); });
  EXPECT_NE(e.find("node 'n' (ReduceMean): before opset 18 ReduceMean takes axes as attributes"),
            std::string::npos)
      << e;
}

TEST(Canonicalize, SqueezeAxesBecomeAnInput) {
  Tensor x = iota({3, 1, 4, 1});
  Model m = canonical("Squeeze", 11, {x}, {{"axes", attr_ints({1})}});
  EXPECT_EQ(m.graph.nodes.at(0).inputs, (std::vector<std::string>{"in0", "n__axes"}));
  expect_same("Squeeze", 11, {x}, {{"axes", attr_ints({1})}}, {x, i64({1}, {1})}, {});
  expect_same("Squeeze", 11, {x}, {}, {x}, {});
  expect_same("Unsqueeze", 12, {x}, {{"axes", attr_ints({0, -1})}}, {x, i64({0, -1}, {2})}, {});
  std::string e = error_of([&] { canonical("Unsqueeze", 11, {x}, {}); });
  EXPECT_NE(e.find("node 'n' (Unsqueeze): attribute 'axes' is required before opset 13"), std::string::npos)
      << e;
}

TEST(Canonicalize, TopKAttributeBecomesAnInput) {
  Tensor x = iota({3, 6});
  Model m = canonical("TopK", 9, {x}, {{"k", attr_i(2)}}, 2);
  EXPECT_EQ(m.graph.nodes.at(0).inputs, (std::vector<std::string>{"in0", "n__k"}));
  EXPECT_EQ(init(m, "n__k").to_int64_vector(), (std::vector<int64_t>{2}));
  expect_same("TopK", 9, {x}, {{"k", attr_i(2)}}, {x, i64({2}, {1})}, {}, 2);
}

// Before opset 13 the input is coerced to 2-D at axis: Flatten, the op on the last axis, Reshape back.
TEST(Canonicalize, SoftmaxBefore13SpellsOutTheCoercion) {
  Tensor x = iota({2, 5, 3});
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    SCOPED_TRACE(op);
    Model m = canonical(op, 11, {x}, {}, 1, false);
    ASSERT_EQ(m.graph.nodes.size(), 4u);
    const auto& g = m.graph.nodes;
    EXPECT_EQ(g[0].op_type, "Flatten");
    EXPECT_EQ(g[0].attr_int("axis", 0), 1);
    EXPECT_EQ(g[1].op_type, "Shape");
    EXPECT_EQ(g[1].inputs, (std::vector<std::string>{"in0"}));
    EXPECT_EQ(g[2].op_type, op);
    EXPECT_EQ(g[2].attr_int("axis", 0), -1);
    EXPECT_EQ(g[2].inputs.at(0), g[0].outputs.at(0));
    EXPECT_EQ(g[3].op_type, "Reshape");
    EXPECT_EQ(g[3].inputs, (std::vector<std::string>{g[2].outputs.at(0), g[1].outputs.at(0)}));
    EXPECT_EQ(g[3].outputs, (std::vector<std::string>{"out0"}));
    auto got = test::run_model_cpu(m, {{"in0", x}}, {"out0"});
    Tensor want =
        test::run_op(op, {x.reshaped({2, 15})}, {{"axis", attr_i(-1)}}, 1, 18)[0].reshaped({2, 5, 3});
    test::expect_close(got[0], want, 0, 0);
    // Axis 0 coerces everything into one row.
    got = test::run_op(op, {x}, {{"axis", attr_i(0)}}, 1, 11);
    want = test::run_op(op, {x.reshaped({1, 30})}, {}, 1, 18)[0].reshaped({2, 5, 3});
    test::expect_close(got[0], want, 0, 0);
  }
}

TEST(Canonicalize, SoftmaxOnTheLastAxisOnlyNormalizesTheAttribute) {
  Tensor x = iota({2, 5, 3});
  Model m = canonical("Softmax", 11, {x}, {{"axis", attr_i(2)}});
  ASSERT_EQ(m.graph.nodes.size(), 1u);
  EXPECT_EQ(m.graph.nodes[0].attr_int("axis", 0), -1);
  m = canonical("LogSoftmax", 12, {iota({4, 6})}, {}, 1, false);
  EXPECT_EQ(m.graph.nodes.size(), 4u);  // rank unknown: axis 1 may not be the last
  m = canonical("LogSoftmax", 12, {iota({4, 6})}, {});
  ASSERT_EQ(m.graph.nodes.size(), 1u);
  expect_same("Softmax", 11, {x}, {{"axis", attr_i(-1)}}, {x}, {});
}

TEST(Canonicalize, UpsampleAndResize10BecomeResize) {
  Tensor x = iota({1, 1, 4, 6});
  Tensor up = f32({1, 1, 2, 1.5f}, {4}), down = f32({1, 1, 0.5f, 0.6f}, {4});
  Model m = canonical("Upsample", 7, {x}, {{"scales", attr_floats({1, 1, 2, 1.5f})}});
  const Node& n = m.graph.nodes.at(0);
  EXPECT_EQ(n.op_type, "Resize");
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"in0", "", "n__scales"}));
  EXPECT_EQ(n.attr_string("coordinate_transformation_mode", ""), "asymmetric");
  EXPECT_EQ(n.attr_string("nearest_mode", ""), "floor");
  EXPECT_EQ(m.opset(), kCanonicalOpset);
  Attrs asym = {{"coordinate_transformation_mode", attr_s("asymmetric")}};
  Attrs round_down = asym, round_up = asym, linear = asym;
  round_down["nearest_mode"] = attr_s("floor");
  round_up["nearest_mode"] = attr_s("ceil");
  linear["mode"] = attr_s("linear");
  auto resize18 = [&](const Tensor& scales, const Attrs& a) {
    return test::run_op("Resize", {x, Tensor(), scales}, a, 1, 18)[0];
  };
  auto old = [&](const char* op, int64_t opset, std::vector<Tensor> in, Attrs a) {
    Node node = test::make_node(op, in.size(), 1, std::move(a));
    return test::run_canonical(node, opset, in)[0];
  };
  test::expect_close(old("Upsample", 7, {x}, {{"scales", attr_floats({1, 1, 2, 1.5f})}}),
                     resize18(up, round_down), 0, 0);
  test::expect_close(old("Upsample", 9, {x, up}, {{"mode", attr_s("bilinear")}}), resize18(up, linear), 0, 0);
  test::expect_close(old("Resize", 10, {x, down}, {}), resize18(down, round_up), 0, 0);
  test::expect_close(old("Resize", 10, {x, up}, {{"mode", attr_s("linear")}}), resize18(up, linear), 0, 0);
  // Resize-10 nearest rounds up when downsampling: output column 1 at scale 0.6 reads ceil(1.67) = 2.
  Tensor y = old("Resize", 10, {x, down}, {});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 3}));
  EXPECT_EQ(y.data<float>()[1], x.data<float>()[2]);
  std::string e = error_of([&] {
    canonical("Upsample", 7, {x}, {{"scales", attr_floats({1, 1, 0.5f, 1})}});
  });
  EXPECT_NE(e.find("node 'n' (Upsample): Upsample scales must be >= 1"), std::string::npos) << e;
}

// Scales known only at run time (or mixing directions): up with floor, then down with ceil.
TEST(Canonicalize, Resize10NearestWithRuntimeScalesSplitsByDirection) {
  Tensor x = iota({1, 1, 4, 6});
  Tensor mixed = f32({1, 1, 1.5f, 0.6f}, {4});
  Model m = canonical("Resize", 10, {x, mixed}, {});
  const auto& g = m.graph.nodes;
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].op_type, "Max");
  EXPECT_EQ(g[1].op_type, "Min");
  EXPECT_EQ(g[2].op_type, "Resize");
  EXPECT_EQ(g[2].inputs, (std::vector<std::string>{"in0", "", g[0].outputs.at(0)}));
  EXPECT_EQ(g[2].attr_string("nearest_mode", ""), "floor");
  EXPECT_EQ(g[3].inputs, (std::vector<std::string>{g[2].outputs.at(0), "", g[1].outputs.at(0)}));
  EXPECT_EQ(g[3].attr_string("nearest_mode", ""), "ceil");
  EXPECT_EQ(g[3].outputs, (std::vector<std::string>{"out0"}));
  Attrs asym = {{"coordinate_transformation_mode", attr_s("asymmetric")}};
  Attrs up = asym, down = asym;
  up["nearest_mode"] = attr_s("floor");
  down["nearest_mode"] = attr_s("ceil");
  Tensor mid = test::run_op("Resize", {x, Tensor(), f32({1, 1, 1.5f, 1}, {4})}, up, 1, 18)[0];
  Tensor want = test::run_op("Resize", {mid, Tensor(), f32({1, 1, 1, 0.6f}, {4})}, down, 1, 18)[0];
  Tensor got = test::run_op("Resize", {x, mixed}, {}, 1, 10)[0];
  EXPECT_EQ(got.shape(), (Shape{1, 1, 6, 3}));
  test::expect_close(got, want, 0, 0);
}

TEST(Canonicalize, OldDropoutMaskIsCastToTheInputType) {
  Tensor x = iota({2, 3});
  Model m = canonical("Dropout", 7, {x}, {{"ratio", attr_f(0.3f)}}, 2);
  ASSERT_EQ(m.graph.nodes.size(), 2u);
  EXPECT_FALSE(m.graph.nodes[0].has_attr("ratio"));
  EXPECT_EQ(m.graph.nodes[1].op_type, "CastLike");
  EXPECT_EQ(m.graph.nodes[1].inputs, (std::vector<std::string>{m.graph.nodes[0].outputs[1], "in0"}));
  EXPECT_EQ(m.graph.nodes[1].outputs, (std::vector<std::string>{"out1"}));
  auto out = test::run_op("Dropout", {x}, {{"ratio", attr_f(0.3f)}}, 2, 7);
  test::expect_close(out[0], x, 0, 0);
  test::expect_close(out[1], f32({1, 1, 1, 1, 1, 1}, {2, 3}), 0, 0);
}

TEST(Canonicalize, AttributesOfLaterOpsetsAreDroppedAndOldDefaultsSpelledOut) {
  Tensor x = iota({2, 3});
  Model m = canonical("ArgMax", 11, {x}, {{"select_last_index", attr_i(1)}});
  EXPECT_FALSE(m.graph.nodes.at(0).has_attr("select_last_index"));
  m = canonical("TopK", 10, {x, i64({1}, {1})}, {{"largest", attr_i(0)}}, 2);
  EXPECT_FALSE(m.graph.nodes.at(0).has_attr("largest"));
  m = canonical("RoiAlign", 10, {iota({1, 1, 4, 4}), f32({0, 0, 2, 2}, {1, 4}), i64({0}, {1})}, {});
  EXPECT_EQ(m.graph.nodes.at(0).attr_string("coordinate_transformation_mode", ""), "output_half_pixel");
  std::string e = error_of([&] { canonical("Gemm", 9, {x, iota({3, 2})}, {}); });
  EXPECT_NE(e.find("node 'n' (Gemm): input C is required before opset 11"), std::string::npos) << e;
}

TEST(Canonicalize, CanonicalModelsAreLeftAlone) {
  Tensor x = iota({2, 3});
  Model m = canonical("Clip", 6, {x}, {{"min", attr_f(0)}});
  Model again = m;
  EXPECT_EQ(canonicalize(again), 0u);
  EXPECT_EQ(again.graph.nodes.at(0).inputs, m.graph.nodes.at(0).inputs);
  Model current =
      test::one_node_model(test::make_node("ReduceSum", 1, 1, {{"axes", attr_ints({0})}}), 18, {x});
  EXPECT_EQ(canonicalize(current), 0u);
  EXPECT_TRUE(current.graph.nodes.at(0).has_attr("axes"));  // left for shape inference to refuse
}

}  // namespace

}  // namespace vlrt
