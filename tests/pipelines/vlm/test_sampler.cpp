#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "pipelines/vlm/sampler.h"

namespace vlrt::vlm {
namespace {

TEST(Sampler, GreedyTakesTheLargestAfterThePenalty) {
  std::vector<float> logits{1.0f, 3.0f, 2.5f, -1.0f};
  Sampler greedy({});
  EXPECT_EQ(greedy.next(logits, {}), 1);
  SamplingOptions o;
  o.repetition_penalty = 1.5f;  // 3 / 1.5 = 2 < 2.5
  EXPECT_EQ(Sampler(o).next(logits, std::vector<int64_t>{1, 1, 3}), 2);
}

TEST(Sampler, TopKAndTopPLeaveOnlyTheBest) {
  std::vector<float> logits{0.0f, 2.0f, 1.0f, 1.9f};
  for (auto [k, p] : {std::pair<int64_t, float>{1, 1.0f}, {0, 0.2f}}) {
    SamplingOptions o;
    o.sample = true, o.top_k = k, o.top_p = p, o.temperature = 5.0f, o.seed = 7;
    Sampler s(o);
    for (int i = 0; i < 50; i++) EXPECT_EQ(s.next(logits, {}), 1);
  }
}

TEST(Sampler, SamplesTheSoftmaxReproducibly) {
  std::vector<float> logits{0.0f, std::log(3.0f)};  // probabilities 1/4 and 3/4
  SamplingOptions o;
  o.sample = true, o.seed = 42;
  Sampler a(o), b(o);
  int ones = 0;
  for (int i = 0; i < 4000; i++) {
    int64_t x = a.next(logits, {});
    ASSERT_EQ(x, b.next(logits, {})) << "the same seed draws the same tokens";
    ones += int(x);
  }
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(Sampler, RefusesOptionsOutOfRange) {
  for (auto bad : {SamplingOptions{true, 0.0f}, SamplingOptions{true, 1.0f, -1}, SamplingOptions{true, 1.0f, 0, 0.0f},
                   SamplingOptions{true, 1.0f, 0, 1.0f, -2.0f}})
    EXPECT_THROW(Sampler{bad}, Error);
}

}  // namespace
}  // namespace vlrt::vlm
