// `vlrt detect --auto`: the tagger's tags become the prompt, and the ways it can fail say what
// to do.
#include <gtest/gtest.h>

#include <string>

#include "apps/auto_prompt.h"
#include "cli_util.h"

namespace vlrt {
namespace {

using test::error_of;
using test::run_cli;
using test::source_path;

TEST(AutoPrompt, JoinsTagsWithTheDetectorsSeparator) {
  EXPECT_EQ(prompt_from_tags({"red circle", "blue star"}, "a.png"), "red circle . blue star .");
  EXPECT_EQ(prompt_from_tags({"cat"}, "a.png"), "cat .");
}

TEST(AutoPrompt, TrimsTagsAndLeavesOutEmptyOnesAndRepeats) {
  EXPECT_EQ(prompt_from_tags({" red circle ", "", "  ", "red circle", "dog\n"}, "a.png"), "red circle . dog .");
}

TEST(AutoPrompt, NoTagsIsAnErrorNamingTheImageAndWhatToDo) {
  std::string e = error_of([] { prompt_from_tags({}, "scene.png"); });
  EXPECT_NE(e.find("scene.png"), std::string::npos) << e;
  EXPECT_NE(e.find("--prompt"), std::string::npos) << e;
  EXPECT_NE(e.find("--tag-threshold"), std::string::npos) << e;
  EXPECT_FALSE(error_of([] { prompt_from_tags({" ", ""}, "scene.png"); }).empty());
}

TEST(AutoPrompt, AnExplicitTaggerIsUsedAsGiven) { EXPECT_EQ(find_tagger("some/dir"), "some/dir"); }

TEST(AutoPrompt, TaggerFolderWithoutModelIsAnError) {
  std::string e = error_of([] { tagger_model_file(source_path("tests/fixtures")); });
  EXPECT_NE(e.find("has no model.onnx"), std::string::npos) << e;
}

TEST(AutoPrompt, TaggerThatFindsNothingStopsDetectWithAMessage) {
  // The test tagger's probabilities are all below 1: with --tag-threshold 1 no tag is left.
  auto r = run_cli("detect " + source_path("assets/demo.png") + " --auto --tagger " +
                   source_path("tests/fixtures/tagging/tagger.onnx") + " --tag-threshold 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("found nothing"), std::string::npos) << r.output;
}

TEST(AutoPrompt, AutoWithAPromptIsAnError) {
  auto r = run_cli("detect " + source_path("assets/demo.png") + " --auto --prompt 'red circle .'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("not both"), std::string::npos) << r.output;
}

TEST(AutoPrompt, TaggerWithoutAutoIsAnError) {
  auto r = run_cli("detect " + source_path("assets/demo.png") + " --prompt 'red circle .' --tagger x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("is for --auto"), std::string::npos) << r.output;
}

TEST(AutoPrompt, MissingTaggerFolderIsAnError) {
  auto r = run_cli("detect " + source_path("assets/demo.png") + " --auto --tagger " +
                   source_path("tests/fixtures/no_such_tagger"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no_such_tagger"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace vlrt
