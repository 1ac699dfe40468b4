// The helpers pipelines parse request bodies with, and the registry.
#include <gtest/gtest.h>

#include "io/base64.h"
#include "pipelines/pipeline.h"

namespace vlrt {

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(PipelineRequest, Base64Field) {
  std::string all;
  for (int i = 0; i < 256; i++) all.push_back(char(i));
  for (size_t n : {0, 1, 2, 3, 4, 255, 256})
    EXPECT_EQ(base64_decode(base64_encode(all.substr(0, n))), all.substr(0, n));
  EXPECT_EQ(base64_decode("aGVs\nbG8="), "hello");
  EXPECT_EQ(base64_decode("aGVsbG8"), "hello");  // unpadded
  EXPECT_EQ(base64_decode("data:image/png;base64,aGVsbG8="), "hello");
  auto error = [](const std::string& s) {
    try {
      decode_base64_field("image", s);
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status(), 400);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_TRUE(contains(error("aGV*bG8="), "character 3")) << error("aGV*bG8=");
  EXPECT_TRUE(contains(error("aGVsb"), "not a possible length"));
  EXPECT_TRUE(contains(error("aGVsbG8=aGVs"), "after '=' padding"));
  EXPECT_TRUE(contains(error("aGVsbG==="), "padding"));
}

TEST(PipelineRequest, JsonBodyIsAnObject) {
  auto status_of = [](std::string_view body) {
    try {
      parse_json_object(body);
    } catch (const RequestError& e) {
      return e.status();
    }
    return 200;
  };
  EXPECT_EQ(status_of(R"({"a": 1})"), 200);
  EXPECT_EQ(status_of(""), 400);
  EXPECT_EQ(status_of("[1]"), 400);
  EXPECT_EQ(status_of("{"), 400);
  EXPECT_EQ(status_of(std::string(100, '[') + std::string(100, ']')), 400);
}

TEST(PipelineRegistry, FindsGroundingAndNamesTheOthers) {
  EXPECT_EQ(find_pipeline("grounding").name, "grounding");
  try {
    find_pipeline("nope");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "no pipeline named 'nope'; the pipelines are grounding")) << e.what();
  }
}

}  // namespace vlrt
