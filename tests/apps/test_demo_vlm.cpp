// The shipped demo VLM (models/demo-vlm): `vlrt chat` without a model folder finds it and
// answers questions about the shipped demo image (assets/demo.png: a yellow heart, a yellow
// triangle, a black ring and a green heart).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "io/files.h"

namespace vlrt {
namespace {

using test::run_cli;
using test::source_path;

std::string ask_demo(const std::string& name, const std::string& prompt) {
  std::string out = test::temp_dir("demo_vlm_" + name) + "/answer.json";
  // No model folder: the program finds the shipped demo VLM by itself.
  auto r = run_cli("chat --image " + source_path("assets/demo.png") + " -p '" + prompt + "' --greedy --json " + out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return "";
  return nlohmann::json::parse(read_file(out))["text"].get<std::string>();
}

// The answer forms it was taught (its accuracy is models/demo-vlm/TRAINING.md's, not a test's).
TEST(DemoVlm, ChatWithoutModelAnswersInTheTaughtForms) {
  std::string yes_no = ask_demo("yes_no", "Is there a black ring?");
  EXPECT_TRUE(yes_no == "Yes." || yes_no == "No.") << yes_no;
  std::string count = ask_demo("count", "How many objects?");
  ASSERT_EQ(count.size(), 2u) << count;
  EXPECT_TRUE(count[0] >= '0' && count[0] <= '9' && count[1] == '.') << count;
}

}  // namespace
}  // namespace vlrt
