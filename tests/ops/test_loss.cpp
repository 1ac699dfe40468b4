#include <cmath>

#include "op_test_util.h"

namespace vlrt::test {
namespace {

// log of [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25], [0.3, 0.3, 0.4], [0.6, 0.2, 0.2]]
Tensor log_probs() {
  std::vector<float> p = {0.1f, 0.2f, 0.7f, 0.5f, 0.25f, 0.25f, 0.3f, 0.3f, 0.4f, 0.6f, 0.2f, 0.2f};
  for (float& v : p) v = std::log(v);
  return f32(p, {4, 3});
}

TEST(Loss, NllReductions) {
  Tensor t = i64({2, 0, 1, 1}, {4});
  expect_close(run_op("NegativeLogLikelihoodLoss", {log_probs(), t}, {{"reduction", attr_s("none")}})[0],
               f32({0.3566749f, 0.6931472f, 1.203973f, 1.609438f}, {4}));
  expect_close(run_op("NegativeLogLikelihoodLoss", {log_probs(), t}, {{"reduction", attr_s("sum")}})[0],
               Tensor::scalar<float>(3.863233f));
  expect_close(run_op("NegativeLogLikelihoodLoss", {log_probs(), t})[0], Tensor::scalar<float>(0.9658082f));
}

TEST(Loss, NllWeightsAndIgnoreIndex) {
  Tensor t = i64({2, 0, 1, 1}, {4}), w = f32({1, 2, 0.5f}, {3});
  expect_close(run_op("NegativeLogLikelihoodLoss", {log_probs(), t, w}, {{"reduction", attr_s("none")}})[0],
               f32({0.1783375f, 0.6931472f, 2.407946f, 3.218876f}, {4}));
  expect_close(run_op("NegativeLogLikelihoodLoss", {log_probs(), t, w})[0], Tensor::scalar<float>(1.18151f));
  // Ignored targets drop out of the loss and of the mean's weight sum.
  expect_close(run_op("NegativeLogLikelihoodLoss", {log_probs(), t, w}, {{"ignore_index", attr_i(1)}})[0],
               Tensor::scalar<float>(0.5809898f));
  // An ignored target may lie outside the classes.
  Tensor t32 = Tensor::from_vector<int32_t>({2, 0, -100, -100}, {4});
  expect_close(run_op("NegativeLogLikelihoodLoss", {log_probs(), t32, w},
                      {{"ignore_index", attr_i(-100)}, {"reduction", attr_s("none")}})[0],
               f32({0.1783375f, 0.6931472f, 0, 0}, {4}));
}

TEST(Loss, SoftmaxCrossEntropyWithLogProb) {
  Tensor s = f32({1, 2, 0, 0, -1, 3, 2, 2, 1, 0, 0.5f, -1}, {2, 3, 2});
  Tensor t = i64({0, 2, 1, 1}, {2, 2});
  auto y = run_op("SoftmaxCrossEntropyLoss", {s, t}, {{"reduction", attr_s("none")}}, 2);
  expect_close(y[0], f32({0.407606f, 0.3490122f, 1.464369f, 2.169846f}, {2, 2}));
  expect_close(y[1], f32({-0.407606f, -1.349012f, -1.407606f, -3.349012f, -2.407606f, -0.3490122f,
                          -0.4643687f, -0.169846f, -1.464369f, -2.169846f, -1.964369f, -3.169846f},
                         {2, 3, 2}));
  expect_close(run_op("SoftmaxCrossEntropyLoss", {s, t})[0], Tensor::scalar<float>(1.097708f));
}

TEST(Loss, Errors) {
  Tensor w = f32({1, 1, 1}, {3});
  EXPECT_THROW(run_op("NegativeLogLikelihoodLoss", {log_probs(), i64({0, 1, 3, 0}, {4})}), Error);
  EXPECT_THROW(run_op("NegativeLogLikelihoodLoss", {log_probs(), i64({0, -1, 2, 0}, {4})}), Error);
  EXPECT_THROW(run_op("NegativeLogLikelihoodLoss", {log_probs(), i64({0, 1}, {2})}), Error);
  EXPECT_THROW(run_op("NegativeLogLikelihoodLoss", {log_probs(), f32({0, 1, 2, 0}, {4})}), Error);
  EXPECT_THROW(run_op("SoftmaxCrossEntropyLoss", {log_probs(), i64({0, 1, 2, 0}, {4}), f32({1, 1}, {2})}),
               Error);
  EXPECT_THROW(run_op("SoftmaxCrossEntropyLoss", {log_probs(), i64({0, 1, 2, 0}, {4}), w},
                      {{"reduction", attr_s("avg")}}),
               Error);
  EXPECT_THROW(run_op("SoftmaxCrossEntropyLoss", {f32({1, 2}, {2}), i64({0}, {1})}), Error);
}

}  // namespace
}  // namespace vlrt::test
