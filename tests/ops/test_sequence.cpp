// Sequence and optional ops on the CPU, one node at a time, and their error messages.
#include "op_test_util.h"

namespace vlrt {
namespace {

using test::attr_i;
using test::expect_close;
using test::f32;
using test::i64;
using test::run_op;

Tensor seq_of(std::vector<Tensor> items) { return Tensor::sequence(DType::f32, std::move(items)); }

// The message of the error running `op` throws, "" when none.
std::string error_of(const std::string& op, const std::vector<Tensor>& inputs, std::map<std::string, Attribute> attrs = {}) {
  try {
    run_op(op, inputs, std::move(attrs));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SequenceOps, ConstructAtAndLength) {
  Tensor a = f32({1, 2}, {2}), b = f32({3, 4, 5}, {3});
  Tensor s = run_op("SequenceConstruct", {a, b})[0];
  ASSERT_EQ(s.kind(), ValueKind::sequence);
  ASSERT_EQ(s.elements().size(), 2u);
  expect_close(run_op("SequenceAt", {s, i64({-1}, {})})[0], b);
  expect_close(run_op("SequenceAt", {s, i64({0}, {})})[0], a);
  expect_close(run_op("SequenceLength", {s})[0], i64({2}, {}));
  Tensor empty = run_op("SequenceEmpty", {}, {{"dtype", attr_i(7)}})[0];
  EXPECT_EQ(empty.dtype(), DType::i64);
  EXPECT_TRUE(empty.elements().empty());
}

TEST(SequenceOps, InsertAndErase) {
  Tensor a = f32({1}, {1}), b = f32({2}, {1}), c = f32({3}, {1});
  Tensor s = seq_of({a, b});
  Tensor front = run_op("SequenceInsert", {s, c, i64({0}, {})})[0];
  Tensor back = run_op("SequenceInsert", {s, c})[0];
  expect_close(front.elements()[0], c);
  expect_close(back.elements()[2], c);
  EXPECT_EQ(s.elements().size(), 2u);  // the input sequence is unchanged
  Tensor erased = run_op("SequenceErase", {front})[0];  // the last by default
  ASSERT_EQ(erased.elements().size(), 2u);
  expect_close(erased.elements()[1], a);
  Tensor erased_first = run_op("SequenceErase", {front, i64({-3}, {})})[0];
  expect_close(erased_first.elements()[0], a);
}

TEST(SequenceOps, SplitToSequenceAndConcatFromSequence) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor rows = run_op("SplitToSequence", {x}, {{"keepdims", attr_i(0)}})[0];
  ASSERT_EQ(rows.elements().size(), 3u);
  expect_close(rows.elements()[1], f32({3, 4}, {2}));
  Tensor chunks = run_op("SplitToSequence", {x, i64({2}, {})})[0];  // 2 rows, then the 1 left
  ASSERT_EQ(chunks.elements().size(), 2u);
  expect_close(chunks.elements()[1], f32({5, 6}, {1, 2}));
  Tensor columns = run_op("SplitToSequence", {x, i64({1, 1}, {2})}, {{"axis", attr_i(1)}})[0];
  expect_close(columns.elements()[0], f32({1, 3, 5}, {3, 1}));
  expect_close(run_op("ConcatFromSequence", {chunks}, {{"axis", attr_i(0)}})[0], x);
  expect_close(run_op("ConcatFromSequence", {columns}, {{"axis", attr_i(-1)}})[0], x);
  expect_close(run_op("ConcatFromSequence", {rows}, {{"axis", attr_i(0)}, {"new_axis", attr_i(1)}})[0], x);
  Tensor stacked_last = run_op("ConcatFromSequence", {rows}, {{"axis", attr_i(-1)}, {"new_axis", attr_i(1)}})[0];
  expect_close(stacked_last, f32({1, 3, 5, 2, 4, 6}, {2, 3}));
}

TEST(SequenceOps, OptionalWrapsAndUnwraps) {
  Tensor x = f32({1, 2}, {2});
  Tensor opt = run_op("Optional", {x})[0];
  EXPECT_EQ(opt.kind(), ValueKind::optional_tensor);
  expect_close(run_op("OptionalHasElement", {opt})[0], Tensor::scalar<bool>(true));
  expect_close(run_op("OptionalGetElement", {opt})[0], x);
  Tensor none = Tensor::empty_optional(ValueKind::sequence, DType::f32);
  expect_close(run_op("OptionalHasElement", {none})[0], Tensor::scalar<bool>(false));
  expect_close(run_op("OptionalHasElement", {Tensor()})[0], Tensor::scalar<bool>(false));
  Tensor seq_opt = run_op("Optional", {seq_of({x})})[0];
  EXPECT_EQ(seq_opt.kind(), ValueKind::optional_sequence);
  Tensor seq = run_op("OptionalGetElement", {seq_opt})[0];
  ASSERT_EQ(seq.kind(), ValueKind::sequence);
  expect_close(seq.elements()[0], x);
}

TEST(SequenceOps, ErrorsNameTheNodeAndTheProblem) {
  Tensor s = seq_of({f32({1}, {1}), f32({2}, {1})});
  std::string at = error_of("SequenceAt", {s, i64({2}, {})});
  EXPECT_NE(at.find("node 'n' (SequenceAt)"), std::string::npos) << at;
  EXPECT_NE(at.find("position 2 is out of range for a sequence of 2 tensors"), std::string::npos) << at;
  std::string concat = error_of("ConcatFromSequence", {seq_of({f32({1, 2}, {1, 2}), f32({1, 2, 3}, {1, 3})})},
                                {{"axis", attr_i(0)}});
  EXPECT_NE(concat.find("node 'n' (ConcatFromSequence)"), std::string::npos) << concat;
  EXPECT_NE(concat.find("tensor 1 of the sequence is float32[1,3] but tensor 0 is float32[1,2]"), std::string::npos)
      << concat;
  std::string empty = error_of("OptionalGetElement", {Tensor::empty_optional(ValueKind::tensor, DType::f32)});
  EXPECT_NE(empty.find("node 'n' (OptionalGetElement)"), std::string::npos) << empty;
  EXPECT_NE(empty.find("is empty"), std::string::npos) << empty;
  std::string kind = error_of("Relu", {s});
  EXPECT_NE(kind.find("input 'in0' is a sequence; Relu takes tensors only"), std::string::npos) << kind;
  std::string insert = error_of("SequenceInsert", {s, i64({1}, {1})});
  EXPECT_NE(insert.find("the tensor is int64 but the sequence holds float32"), std::string::npos) << insert;
}

}  // namespace
}  // namespace vlrt
