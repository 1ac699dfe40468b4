// vlrt detect and vlrt label end to end on a small GroundingDINO-contract model:
// outputs, and every bad input giving a clear message and a non-zero exit.
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_util.h"
#include "io/files.h"
#include "vision/image.h"

namespace vlrt {

namespace fs = std::filesystem;
using test::run_cli;
using test::source_path;

namespace {

const std::string kModel = source_path("tests/fixtures/grounding/tiny/model.onnx");
const std::string kImage = source_path("tests/fixtures/image/src.png");
const std::string kPrompt = "\"red circle . blue star .\"";

std::string detect_args(const std::string& image, const std::string& extra = "") {
  return "detect " + image + " --model " + kModel + " --prompt " + kPrompt + " " + extra;
}

// A folder of n copies of the test image (some in a subfolder), plus optional extras.
std::string image_folder(const std::string& name, int n) {
  std::string dir = test::temp_dir(name);
  fs::create_directories(dir + "/sub");
  for (int i = 0; i < n; i++)
    fs::copy_file(kImage, dir + (i % 3 == 0 ? "/sub/" : "/") + "img" + std::to_string(100 + i) + ".png");
  return dir;
}

std::map<std::string, std::string> read_tree(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = read_file(e.path().string());
  return files;
}

}  // namespace

TEST(DetectCli, PrintsTableAndWritesJsonAndPng) {
  std::string dir = test::temp_dir("detect_ok");
  auto r = run_cli(detect_args(kImage, "--json " + dir + "/d.json --draw " + dir + "/d.png"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("label"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote " + dir + "/d.png"), std::string::npos) << r.output;
  auto j = nlohmann::json::parse(read_file(dir + "/d.json"));
  EXPECT_EQ(j["width"], 37);
  ASSERT_TRUE(j["detections"].is_array());
  for (auto& d : j["detections"]) {
    EXPECT_GT(d["score"].get<double>(), 0.35);
    EXPECT_EQ(d["box"].size(), 4u);
  }
  vision::Image drawn = vision::load_image(dir + "/d.png");
  EXPECT_EQ(drawn.width, 37);
  EXPECT_EQ(drawn.height, 23);
}

// --repeat runs the whole detection again on the same session: the same detections each time,
// every run's time in the JSON, the first as latency_ms; a count out of range is refused.
TEST(DetectCli, RepeatTimesEveryRunAndKeepsTheDetections) {
  std::string dir = test::temp_dir("detect_repeat");
  ASSERT_EQ(run_cli(detect_args(kImage, "--json " + dir + "/once.json")).exit_code, 0);
  auto r = run_cli(detect_args(kImage, "--repeat 3 --json " + dir + "/d.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("run 3 of 3: "), std::string::npos) << r.output;
  auto once = nlohmann::json::parse(read_file(dir + "/once.json")),
       j = nlohmann::json::parse(read_file(dir + "/d.json"));
  EXPECT_EQ(j["detections"], once["detections"]);
  ASSERT_EQ(j["repeat_latency_ms"].size(), 3u);
  EXPECT_EQ(j["latency_ms"], j["repeat_latency_ms"][0]);
  for (auto& ms : j["repeat_latency_ms"]) EXPECT_GT(ms.get<double>(), 0);
  EXPECT_FALSE(once.contains("repeat_latency_ms"));
  auto zero = run_cli(detect_args(kImage, "--repeat 0"));
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_NE(zero.output.find("--repeat"), std::string::npos) << zero.output;
}

TEST(DetectCli, BadInputsAreClearErrors) {
  std::string dir = test::temp_dir("detect_bad");
  auto missing = run_cli(detect_args(dir + "/nope.png"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("no such file"), std::string::npos) << missing.output;

  auto text = run_cli(detect_args(source_path("tests/fixtures/image/not_an_image.png")));
  EXPECT_NE(text.exit_code, 0);
  EXPECT_NE(text.output.find("not an image"), std::string::npos) << text.output;

  auto empty = run_cli("detect " + kImage + " --model " + kModel + " --prompt \" . \"");
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_NE(empty.output.find("error:"), std::string::npos) << empty.output;

  auto contract = run_cli("detect " + kImage + " --model " + source_path("models/tiny/tiny_cnn.onnx") +
                          " --vocab " + source_path("tests/fixtures/grounding/tiny/vocab.txt") + " --prompt " + kPrompt);
  EXPECT_NE(contract.exit_code, 0);
  EXPECT_NE(contract.output.find("does not follow the GroundingDINO model contract"), std::string::npos)
      << contract.output;
  EXPECT_NE(contract.output.find("missing input 'input_ids'"), std::string::npos) << contract.output;
  EXPECT_NE(contract.output.find("unexpected input 'image'"), std::string::npos) << contract.output;

  // A vocab without [CLS].
  std::string vocab = read_file(source_path("tests/fixtures/grounding/tiny/vocab.txt"));
  size_t at = vocab.find("[CLS]\n");
  ASSERT_NE(at, std::string::npos);
  vocab.replace(at, 6, "[XLS]\n");
  std::ofstream(dir + "/vocab.txt") << vocab;
  auto novocab = run_cli(detect_args(kImage, "--vocab " + dir + "/vocab.txt"));
  EXPECT_NE(novocab.exit_code, 0);
  EXPECT_NE(novocab.output.find("[CLS]"), std::string::npos) << novocab.output;
}

TEST(LabelCli, AllFormatsAndUnreadableImagesAreSkipped) {
  std::string dir = image_folder("label_in", 4);
  fs::copy_file(source_path("tests/fixtures/image/truncated.jpg"), dir + "/sub/broken.jpg");
  for (std::string format : {"coco", "yolo", "labelme"}) {
    std::string out = test::temp_dir("label_out_" + format);
    auto r = run_cli("label " + dir + " --model " + kModel + " --prompt " + kPrompt + " --format " + format +
                     " --out " + out);
    EXPECT_EQ(r.exit_code, 2) << r.output;  // some images unreadable
    EXPECT_NE(r.output.find("skipped sub/broken.jpg"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("labelled 4 images"), std::string::npos) << r.output;
    if (format == "coco") {
      auto coco = nlohmann::json::parse(read_file(out + "/annotations.json"));
      EXPECT_EQ(coco["images"].size(), 4u);
      EXPECT_EQ(coco["categories"].size(), 2u);
      EXPECT_EQ(coco["categories"][1]["name"], "blue star");
    } else if (format == "yolo") {
      EXPECT_EQ(read_file(out + "/classes.txt"), "red circle\nblue star\n");
      EXPECT_TRUE(fs::exists(out + "/labels/sub/img100.txt"));
    } else {
      auto lm = nlohmann::json::parse(read_file(out + "/img101.json"));
      EXPECT_EQ(lm["imageWidth"], 37);
      EXPECT_TRUE(lm["shapes"].is_array());
    }
  }
  auto bad = run_cli("label " + dir + " --model " + kModel + " --prompt " + kPrompt + " --format voc --out " + dir + "/o");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--format must be coco, yolo or labelme"), std::string::npos) << bad.output;
}

TEST(LabelCli, KilledRunResumesToTheSameOutput) {
  std::string dir = image_folder("label_resume_in", 50);
  std::string full = test::temp_dir("label_full");
  auto r = run_cli("label " + dir + " --model " + kModel + " --prompt " + kPrompt + " --format yolo --batch 1 --out " + full);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  std::string part = test::temp_dir("label_part");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    std::string model = kModel;
    execl(VLRT_BINARY, VLRT_BINARY, "label", dir.c_str(), "--model", model.c_str(), "--prompt",
          "red circle . blue star .", "--format", "yolo", "--batch", "1", "--threads", "1", "--out", part.c_str(),
          (char*)nullptr);
    _exit(127);
  }
  // Kill it once some, not all, images are done.
  size_t records = 0;
  for (int i = 0; i < 20000 && records < 5; i++) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    records = 0;
    if (fs::exists(part + "/.vlrt-label/records"))
      for (auto& e : fs::recursive_directory_iterator(part + "/.vlrt-label/records"))
        records += e.path().extension() == ".json";
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_GE(records, 5u);
  EXPECT_LT(records, 50u) << "the run finished before it could be interrupted";

  auto resumed = run_cli("label " + dir + " --model " + kModel + " --prompt " + kPrompt + " --format yolo --batch 1 --out " + part);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("from an earlier run"), std::string::npos) << resumed.output;
  auto a = read_tree(full), b = read_tree(part);
  for (const char* differs : {".vlrt-label/run.json", "data.yaml"}) {  // data.yaml names its own folder
    a.erase(differs);
    ASSERT_TRUE(b.erase(differs)) << differs;
  }
  EXPECT_EQ(a.size(), b.size());
  for (auto& [name, content] : a) {
    if (name.find(".tmp") != std::string::npos) continue;
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_EQ(b[name], content) << name;
  }
  for (auto& [name, content] : b) EXPECT_EQ(name.find(".tmp"), std::string::npos) << "left behind: " << name;

  auto other = run_cli("label " + dir + " --model " + kModel + " --prompt \"green ring .\" --format yolo --out " + part);
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("holds an earlier run with other settings"), std::string::npos) << other.output;
}

TEST(DetectCli, ReadsWebpTiffGifByContent) {
  for (const char* name : {"src.webp", "src.tif", "palette.gif"}) {
    auto r = run_cli(detect_args(source_path(std::string("tests/fixtures/image/") + name)));
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    EXPECT_NE(r.output.find(": 37x23 (model input"), std::string::npos) << r.output;
  }
  std::string dir = test::temp_dir("detect_formats");
  std::string bytes = read_file(source_path("tests/fixtures/image/src.webp"));
  std::ofstream(dir + "/cut.webp", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto cut = run_cli(detect_args(dir + "/cut.webp"));
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.output.find(dir + "/cut.webp: truncated WebP"), std::string::npos) << cut.output;
}

TEST(DetectCli, PromptOrClassesAndBadOntologiesAreClearErrors) {
  auto both = run_cli(detect_args(kImage, "--classes car"));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("--prompt or --classes, not both"), std::string::npos) << both.output;
  auto neither = run_cli("detect " + kImage + " --model " + kModel);
  EXPECT_NE(neither.exit_code, 0);
  EXPECT_NE(neither.output.find("give --prompt"), std::string::npos) << neither.output;
  auto empty = run_cli("detect " + kImage + " --model " + kModel + " --classes 'car, , bus'");
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_NE(empty.output.find("--classes entry 2 (''): the prompt phrase is empty"), std::string::npos)
      << empty.output;
  std::string yaml = test::temp_dir("detect_yaml") + "/classes.yaml";
  std::ofstream(yaml) << "- phrase: red circle\n  name circle\n";
  auto syntax = run_cli("detect " + kImage + " --model " + kModel + " --classes " + yaml);
  EXPECT_NE(syntax.exit_code, 0);
  EXPECT_NE(syntax.output.find(yaml + ":2: expected 'key: value'"), std::string::npos) << syntax.output;
}

// A folder of PNG, WebP, TIFF, GIF and an extensionless WebP, labelled with an ontology whose
// two phrases are one class: YOLO ids and data.yaml follow the ontology; a text file is no image.
TEST(LabelCli, OtherFormatsAndClassesWithYoloDataYaml) {
  std::string dir = test::temp_dir("label_formats_in");
  for (auto [from, to] : {std::pair{"src.png", "a.png"},
                          {"src.webp", "b.webp"},
                          {"src.tif", "c.tif"},
                          {"palette.gif", "d.gif"}})
    fs::copy_file(source_path(std::string("tests/fixtures/image/") + from), dir + "/" + to);
  fs::copy_file(source_path("tests/fixtures/image/src.webp"), dir + "/no_extension");
  std::ofstream(dir + "/notes.txt") << "not an image\n";
  std::string out = test::temp_dir("label_formats_out");
  std::string cmd =
      "label " + dir + " --model " + kModel +
      " --classes 'red circle=shape, blue star=shape' --box-threshold 0.05 --format yolo --out " + out;
  auto r = run_cli(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("labelled 5 images"), std::string::npos) << r.output;
  std::string data = read_file(out + "/data.yaml");
  EXPECT_NE(data.find("\nnc: 1\nnames:\n  0: \"shape\"\n"), std::string::npos) << data;
  EXPECT_NE(data.find("path: \"" + fs::absolute(out).lexically_normal().generic_string() + "\""),
            std::string::npos)
      << data;
  EXPECT_EQ(read_file(out + "/classes.txt"), "shape\n");
  size_t lines = 0;
  for (const char* name : {"a", "b", "c", "d", "no_extension"}) {
    std::string txt = read_file(out + "/labels/" + name + ".txt");
    for (size_t at = 0; at < txt.size(); at = txt.find('\n', at) + 1, lines++)
      EXPECT_EQ(txt.substr(at, 2), "0 ");
  }
  EXPECT_GT(lines, 0u) << "no boxes to check the class ids of";

  auto again = run_cli(cmd);  // resumes: nothing to do
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("5 from an earlier run"), std::string::npos) << again.output;
  auto renamed = run_cli(
      "label " + dir + " --model " + kModel +
      " --classes 'red circle=circle, blue star=shape' --box-threshold 0.05 --format yolo --out " + out);
  EXPECT_NE(renamed.exit_code, 0);
  EXPECT_NE(renamed.output.find("holds an earlier run with other settings"), std::string::npos)
      << renamed.output;
}

// Ids from a YAML ontology: COCO and YOLO take them; YOLO's gaps get placeholder names.
TEST(LabelCli, YamlClassIdsReachCocoAndYolo) {
  std::string dir = image_folder("label_ids_in", 2);
  std::string yaml = test::temp_dir("label_ids_yaml") + "/classes.yaml";
  std::ofstream(yaml)
      << "- {phrase: red circle, name: circle, id: 2}\n- phrase: blue star\n  name: star\n  id: 0\n";
  std::string coco_out = test::temp_dir("label_ids_coco"), yolo_out = test::temp_dir("label_ids_yolo");
  std::string args = " --model " + kModel + " --classes " + yaml + " --box-threshold 0.05 --out ";
  ASSERT_EQ(run_cli("label " + dir + args + coco_out).exit_code, 0);
  auto coco = nlohmann::json::parse(read_file(coco_out + "/annotations.json"));
  EXPECT_EQ(coco["categories"],
            nlohmann::json::parse(R"([{"id":2,"name":"circle"},{"id":0,"name":"star"}])"));
  ASSERT_FALSE(coco["annotations"].empty());
  for (auto& a : coco["annotations"]) EXPECT_TRUE(a["category_id"] == 2 || a["category_id"] == 0) << a.dump();

  ASSERT_EQ(run_cli("label " + dir + args + yolo_out + " --format yolo").exit_code, 0);
  EXPECT_EQ(read_file(yolo_out + "/classes.txt"), "star\nclass_1\ncircle\n");
  std::string data = read_file(yolo_out + "/data.yaml");
  EXPECT_NE(data.find("nc: 3\nnames:\n  0: \"star\"\n  1: \"class_1\"\n  2: \"circle\"\n"), std::string::npos)
      << data;
}

// LabelMe rectangles as X-AnyLabeling writes them: four corners clockwise from the top left, a score.
TEST(LabelCli, LabelmeRectanglesHaveFourPointsAndScores) {
  std::string dir = image_folder("label_labelme_in", 1);
  std::string out = test::temp_dir("label_labelme_out");
  auto r = run_cli("label " + dir + " --model " + kModel + " --prompt " + kPrompt +
                   " --box-threshold 0.05 --format labelme --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lm = nlohmann::json::parse(read_file(out + "/sub/img100.json"));
  EXPECT_TRUE(fs::equivalent(out + "/sub/" + lm["imagePath"].get<std::string>(), dir + "/sub/img100.png"));
  ASSERT_FALSE(lm["shapes"].empty());
  for (auto& s : lm["shapes"]) {
    EXPECT_EQ(s["shape_type"], "rectangle");
    ASSERT_EQ(s["points"].size(), 4u) << s.dump();
    auto p = s["points"].get<std::vector<std::vector<double>>>();
    EXPECT_LT(p[0][0], p[1][0]);  // top left -> top right
    EXPECT_EQ(p[0][1], p[1][1]);
    EXPECT_EQ(p[1][0], p[2][0]);  // -> bottom right
    EXPECT_LT(p[1][1], p[2][1]);
    EXPECT_EQ(p[3][0], p[0][0]);  // -> bottom left
    EXPECT_EQ(p[3][1], p[2][1]);
    EXPECT_GT(s["score"].get<double>(), 0.05);
    EXPECT_TRUE(s["label"] == "red circle" || s["label"] == "blue star") << s.dump();
  }
}

}  // namespace vlrt
