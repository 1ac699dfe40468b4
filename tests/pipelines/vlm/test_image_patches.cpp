// Qwen2-VL's image preprocessing and vision indices against the reference's outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cli_util.h"
#include "io/npy.h"
#include "pipelines/vlm/image_patches.h"
#include "pipelines/vlm/vlm_fixtures.h"

namespace vlrt::vlm {
namespace {

using test::grids_of;
using test::preprocess_cases;
using test::preprocess_fixture;

using ::vlrt::test::error_of;

TEST(VlmPreprocess, ResizeBicubicMatchesPilExactly) {
  vision::Image src = vision::load_image(preprocess_fixture("bicubic_src.png"));
  for (const auto& size : preprocess_cases()["bicubic_sizes"]) {
    int w = size[0], h = size[1];
    vision::Image want = vision::load_image(
        preprocess_fixture("bicubic_" + std::to_string(w) + "x" + std::to_string(h) + ".png"));
    vision::Image got = vision::resize_bicubic(src, w, h);
    ASSERT_EQ(got.width, w);
    ASSERT_EQ(got.height, h);
    size_t diff = 0;
    for (size_t i = 0; i < got.rgb.size(); i++) diff += got.rgb[i] != want.rgb[i];
    EXPECT_EQ(diff, 0u) << w << "x" << h;
  }
}

TEST(VlmPreprocess, SmartResizeMatchesReference) {
  for (const auto& c : preprocess_cases()["smart_resize"]) {
    int64_t h = c["height"], w = c["width"], lo = c["min_pixels"], hi = c["max_pixels"];
    if (c.contains("size")) {
      EXPECT_EQ(smart_resize(h, w, 28, lo, hi), (std::pair<int64_t, int64_t>{c["size"][0], c["size"][1]}))
          << h << "x" << w;
    } else {
      std::string e = error_of([&] { smart_resize(h, w, 28, lo, hi); });
      EXPECT_FALSE(e.empty()) << h << "x" << w << " was accepted; the reference says " << c["error"];
    }
  }
}

TEST(VlmPreprocess, SmartResizeErrorsSayWhatIsWrong) {
  std::string e = error_of([] { smart_resize(28, 5601); });
  EXPECT_NE(e.find("5601x28 has an aspect ratio of 200.03"), std::string::npos) << e;
  EXPECT_NE(e.find("at most 200"), std::string::npos) << e;
  e = error_of([] { smart_resize(27, 100); });
  EXPECT_NE(e.find("100x27 is too small"), std::string::npos) << e;
  EXPECT_NE(e.find("at least 28 pixels"), std::string::npos) << e;
  vision::Image tiny{20, 40, std::vector<uint8_t>(20 * 40 * 3, 0)};
  e = error_of([&] { image_patches({&tiny}); });
  EXPECT_NE(e.find("20x40 is too small"), std::string::npos) << e;
}

TEST(VlmPreprocess, PixelValuesMatchProcessor) {
  std::vector<vision::Image> images;
  for (const auto& c : preprocess_cases()["images"]) {
    std::string name = c["name"];
    images.push_back(vision::load_image(preprocess_fixture(name + ".png")));
    PatchConfig config;
    config.min_pixels = c["min_pixels"];
    config.max_pixels = c["max_pixels"];
    ImagePatches got = image_patches({&images.back()}, config);
    Tensor want = read_npy(preprocess_fixture(name + ".pixel_values.npy"));
    ASSERT_EQ(got.grids, grids_of(nlohmann::json::array({c["grid"]}))) << name;
    ASSERT_EQ(got.pixel_values.shape(), want.shape()) << name;
    float worst = 0;
    for (int64_t i = 0; i < want.numel(); i++)
      worst = std::max(worst, std::abs(got.pixel_values.data<float>()[i] - want.data<float>()[i]));
    EXPECT_LE(worst, 1e-6f) << name;
  }
}

TEST(VlmPreprocess, SeveralImagesAreConcatenatedInOrder) {
  const auto& cases = preprocess_cases()["images"];
  vision::Image a = vision::load_image(preprocess_fixture(cases[0]["name"].get<std::string>() + ".png"));
  vision::Image b = vision::load_image(preprocess_fixture(cases[1]["name"].get<std::string>() + ".png"));
  ImagePatches both = image_patches({&a, &b});
  ImagePatches first = image_patches({&a}), second = image_patches({&b});
  ASSERT_EQ(both.grids, (std::vector<Grid>{first.grids[0], second.grids[0]}));
  const size_t n1 = first.pixel_values.nbytes(), n2 = second.pixel_values.nbytes();
  ASSERT_EQ(both.pixel_values.nbytes(), n1 + n2);
  const char* all = static_cast<const char*>(both.pixel_values.raw());
  EXPECT_EQ(std::memcmp(all, first.pixel_values.raw(), n1), 0);
  EXPECT_EQ(std::memcmp(all + n1, second.pixel_values.raw(), n2), 0);
}

void expect_equal_i64(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.numel(); i++)
    ASSERT_EQ(got.data<int64_t>()[i], want.data<int64_t>()[i]) << what << " at " << i;
}

// The reference's mask is 0 where attention is allowed and the lowest float elsewhere.
void expect_bias_of_mask(const Tensor& bias, const Tensor& mask, const std::string& what) {
  ASSERT_EQ(bias.shape(), mask.shape()) << what;
  for (int64_t i = 0; i < mask.numel(); i++)
    ASSERT_EQ(bias.data<float>()[i], mask.data<bool>()[i] ? 0.0f : std::numeric_limits<float>::lowest())
        << what << " at " << i;
}

TEST(VlmPreprocess, VisionIndicesMatchTower) {
  for (const auto& c : preprocess_cases()["vision_indices"]) {
    std::string name = c["name"];
    std::vector<Grid> grids = grids_of(c["grids"]);
    VisionIndices qwen2 = vision_indices(grids, {2, 14, 0});
    expect_equal_i64(qwen2.rotary_pos_ids, read_npy(preprocess_fixture(name + ".rotary_pos_ids.npy")), name);
    expect_bias_of_mask(qwen2.attention_bias, read_npy(preprocess_fixture(name + ".attention_mask.npy")),
                        name);
    EXPECT_EQ(qwen2.window_index.numel(), 0) << name;

    VisionIndices qwen25 = vision_indices(grids, {2, 14, 112});
    expect_equal_i64(qwen25.rotary_pos_ids, qwen2.rotary_pos_ids, name);
    expect_equal_i64(qwen25.window_index, read_npy(preprocess_fixture(name + ".window_index.npy")), name);
    expect_equal_i64(qwen25.reverse_window_index,
                     read_npy(preprocess_fixture(name + ".reverse_window_index.npy")), name);
    expect_bias_of_mask(qwen25.window_attention_bias,
                        read_npy(preprocess_fixture(name + ".window_attention_mask.npy")), name);
  }
}

TEST(VlmPreprocess, VisionIndicesRefuseGridsOfPartialBlocks) {
  std::string e = error_of([] { vision_indices({{1, 4, 5}}, {}); });
  EXPECT_NE(e.find("1x4x5 is not whole merge blocks of 2x2"), std::string::npos) << e;
  e = error_of([] { vision_indices({{1, 4, 4}}, {2, 14, 14}); });
  EXPECT_NE(e.find("window_size 14 is smaller than a merge block"), std::string::npos) << e;
}

}  // namespace
}  // namespace vlrt::vlm
