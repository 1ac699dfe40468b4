// get_rope_index's M-RoPE positions and deltas against the reference, and decode positions.
#include <gtest/gtest.h>

#include "cli_util.h"
#include "pipelines/vlm/rope_index.h"
#include "pipelines/vlm/vlm_fixtures.h"

namespace vlrt::vlm {
namespace {

using test::grids_of;
using test::preprocess_cases;

Tensor i64_matrix(const nlohmann::json& rows) {
  std::vector<int64_t> v;
  for (const auto& r : rows)
    for (const auto& x : r) v.push_back(x);
  return Tensor::from_vector<int64_t>(v, {int64_t(rows.size()), int64_t(rows[0].size())});
}

using ::vlrt::test::error_of;

TEST(VlmRopeIndex, MatchesReference) {
  for (const auto& c : preprocess_cases()["rope_index"]) {
    std::string name = c["name"];
    Tensor ids = i64_matrix(c["input_ids"]);
    Tensor mask = c["attention_mask"].is_null() ? Tensor() : i64_matrix(c["attention_mask"]);
    RopeIndex got = rope_index(ids, mask, grids_of(c["grids"]));
    const int64_t batch = ids.shape()[0], seq = ids.shape()[1];
    ASSERT_EQ(got.position_ids.shape(), (Shape{3, batch, seq})) << name;
    for (int axis = 0; axis < 3; axis++)
      for (int64_t b = 0; b < batch; b++)
        for (int64_t s = 0; s < seq; s++)
          ASSERT_EQ(got.position_ids.data<int64_t>()[(axis * batch + b) * seq + s],
                    c["position_ids"][axis][b][s].get<int64_t>())
              << name << " axis " << axis << " row " << b << " token " << s;
    EXPECT_EQ(got.deltas, c["deltas"].get<std::vector<int64_t>>()) << name;
  }
}

TEST(VlmRopeIndex, DecodePositionsContinueAfterTheCache) {
  Tensor p = decode_position_ids({-5, -8}, 20, 2);
  ASSERT_EQ(p.shape(), (Shape{3, 2, 2}));
  for (int axis = 0; axis < 3; axis++) {
    EXPECT_EQ(p.data<int64_t>()[axis * 4 + 0], 15);
    EXPECT_EQ(p.data<int64_t>()[axis * 4 + 1], 16);
    EXPECT_EQ(p.data<int64_t>()[axis * 4 + 2], 12);
    EXPECT_EQ(p.data<int64_t>()[axis * 4 + 3], 13);
  }
}

TEST(VlmRopeIndex, MismatchedImagesAreNamedErrors) {
  RopeConfig c;
  const int64_t vs = c.vision_start_token_id, im = c.image_token_id;
  Tensor one_image = Tensor::from_vector<int64_t>({1, vs, im, im, im, im, 2}, {1, 7});
  std::string e = error_of([&] { rope_index(one_image, Tensor(), {}); });
  EXPECT_NE(e.find("more images than the 0 image grids"), std::string::npos) << e;
  e = error_of([&] { rope_index(one_image, Tensor(), {{1, 6, 4}}); });
  EXPECT_NE(e.find("need 8 positions but the row has 7 tokens"), std::string::npos) << e;
  Tensor video = Tensor::from_vector<int64_t>({vs, c.video_token_id, 2}, {1, 3});
  e = error_of([&] { rope_index(video, Tensor(), {}); });
  EXPECT_NE(e.find("only images are supported"), std::string::npos) << e;
  e = error_of([&] {
    rope_index(one_image, Tensor::from_vector<int64_t>(std::vector<int64_t>(7, 0), {1, 7}), {});
  });
  EXPECT_NE(e.find("all padding"), std::string::npos) << e;
}

}  // namespace
}  // namespace vlrt::vlm
