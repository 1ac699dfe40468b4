// vlrt verify, fetch and doctor end to end: each kind of damage gives its precise
// message and a non-zero exit from `vlrt verify` and from `vlrt run`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "cli_util.h"
#include "integrity/integrity_util.h"
#include "integrity/loopback_server.h"
#include "integrity/manifest.h"
#include "integrity/sha256.h"
#include "io/npy.h"

namespace vlrt {

namespace fs = std::filesystem;
using test::run_cli;

namespace {

const std::string kImage = test::source_path("models/tiny/image.npy");

// A copy of the tiny CNN with a manifest written by `vlrt verify --write`.
std::string tiny_with_manifest(const std::string& name) {
  std::string dir = test::temp_dir(name);
  std::string model = test::copy_model(dir, "tiny/tiny_cnn.onnx");
  auto w = run_cli("verify --write " + model);
  EXPECT_EQ(w.exit_code, 0) << w.output;
  return model;
}

void expect_fails_with(const std::string& args, const std::string& message) {
  auto r = run_cli(args);
  EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << args << "\nexpected: " << message << "\n"
                                                       << r.output;
}

}  // namespace

TEST(VerifyCli, GoodModelPasses) {
  std::string model = tiny_with_manifest("cli_verify_ok");
  auto r = run_cli("verify " + model);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("OK         tiny_cnn.onnx (6877 bytes, sha256 OK)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("structure: OK (9 nodes, 6 initializers, 1562 parameters"), std::string::npos)
      << r.output;
  auto run = run_cli("run " + model + " --input image=" + kImage);
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST(VerifyCli, WithoutManifestChecksStructure) {
  std::string dir = test::temp_dir("cli_verify_none");
  std::string model = test::copy_model(dir, "tiny/tiny_cnn.onnx");
  auto r = run_cli("verify " + model);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no manifest"), std::string::npos) << r.output;
  test::truncate_to(model, 3000);
  expect_fails_with("verify " + model, "the file is truncated");
}

TEST(VerifyCli, TruncatedAtHalf) {
  std::string model = tiny_with_manifest("cli_truncated");
  int64_t full = int64_t(fs::file_size(model));
  test::truncate_to(model, uintmax_t(full / 2));
  std::string line = cat("TRUNCATED  tiny_cnn.onnx: ", full / 2, " of ", full, " bytes");
  expect_fails_with("verify " + model, line);
  expect_fails_with("run " + model + " --input image=" + kImage, line);
  expect_fails_with("run --no-verify-hash " + model + " --input image=" + kImage, line);
}

TEST(VerifyCli, FlippedByte) {
  std::string model = tiny_with_manifest("cli_flipped");
  std::string good = sha256_file(model);
  test::flip_byte(model, std::streamoff(fs::file_size(model) / 2));
  std::string line = cat("CORRUPTED  tiny_cnn.onnx: sha256 ", sha256_file(model), ", expected ", good);
  expect_fails_with("verify " + model, line);
  expect_fails_with("run " + model + " --input image=" + kImage, line);
  expect_fails_with("bench " + model + " --input image=1x3x32x32 --runs 1", line);
}

TEST(VerifyCli, ExternalDataDeleted) {
  std::string dir = test::temp_dir("cli_ext_deleted");
  std::string model = test::copy_model(dir, "integrity/ext_affine.onnx", {"ext_affine.weights"});
  write_npy(dir + "/x.npy", Tensor::from_vector<float>({1, 1, 1, 1}, {4}));
  ASSERT_EQ(run_cli("verify --write " + model).exit_code, 0);
  auto ok = run_cli("run " + model + " --input x=" + dir + "/x.npy");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("[1.5, 1.5, 3.25, 3.75]"), std::string::npos) << ok.output;

  fs::remove(dir + "/ext_affine.weights");
  std::string line = "MISSING    ext_affine.weights: not found (expected 32 bytes beside the model)";
  expect_fails_with("verify " + model, line);
  expect_fails_with("run " + model + " --input x=" + dir + "/x.npy", line);
}

TEST(VerifyCli, ManifestOfAnotherModel) {
  std::string model = tiny_with_manifest("cli_other");
  std::string dir = fs::path(model).parent_path().string();
  std::string ext = test::copy_model(dir, "integrity/ext_affine.onnx", {"ext_affine.weights"});
  ASSERT_EQ(run_cli("verify --write " + ext).exit_code, 0);
  fs::copy_file(manifest_path(ext), manifest_path(model), fs::copy_options::overwrite_existing);
  std::string line = "is for another model ('ext_affine.onnx', not 'tiny_cnn.onnx')";
  expect_fails_with("verify " + model, line);
  expect_fails_with("run " + model + " --input image=" + kImage, line);
}

TEST(VerifyCli, NanWeightsAreRefused) {
  std::string nan = test::source_path("models/integrity/nan_weights.onnx");
  expect_fails_with("run " + nan, "initializer 'w' float32[4] holds only NaN/Inf values");
  expect_fails_with("verify " + nan, "initializer 'w' float32[4] holds only NaN/Inf values");
}

TEST(FetchCli, WrongBytesLeaveNoFile) {
  test::LoopbackServer server;
  std::string dir = test::temp_dir("cli_fetch_wrong");
  std::string want = test::sha256_of(server.content()), got = test::sha256_of(server.wrong());
  size_t n = server.content().size();
  expect_fails_with(
      cat("fetch ", server.url("/wrong"), " --sha256 ", want, " --size ", n, " --out ", dir, "/m.bin"),
      cat("does not match (expected sha256 ", want, ", ", n, " bytes, found sha256 ", got, ", ", n,
          " bytes); removed ", dir, "/m.bin.part and did not create ", dir, "/m.bin"));
  EXPECT_FALSE(fs::exists(dir + "/m.bin"));
  EXPECT_FALSE(fs::exists(dir + "/m.bin.part"));
}

TEST(FetchCli, ResumesAndSkipsWhatIsPresent) {
  test::LoopbackServer server;
  std::string dir = test::temp_dir("cli_fetch_resume");
  std::string out = dir + "/m.bin";
  std::ofstream(out + ".part", std::ios::binary).write(server.content().data(), 5000);
  std::string args =
      cat("fetch ", server.url("/file"), " --sha256 ", test::sha256_of(server.content()), " --out ", out);
  auto r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(cat(out, ": ", server.content().size(),
                              " bytes, hash OK (1 request, resumed from byte 5000)")),
            std::string::npos)
      << r.output;
  EXPECT_EQ(server.ranges(), std::vector<std::string>{"bytes=5000-"});

  auto again = run_cli(args);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find(out + ": already present, hash OK"), std::string::npos) << again.output;
  EXPECT_EQ(server.requests(), 1u);
}

TEST(DoctorCli, JsonHasCpuSectionAndTextExitsZero) {
  auto j = run_cli("doctor --json");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  // An OpenCL driver may write notes to stderr, which run_cli merges in.
  size_t begin = j.output.find('{'), end = j.output.rfind('}');
  ASSERT_NE(begin, std::string::npos) << j.output;
  nlohmann::json doc = nlohmann::json::parse(j.output.substr(begin, end - begin + 1));
  ASSERT_TRUE(doc.contains("cpu")) << j.output;
  EXPECT_TRUE(doc["cpu"]["isa"].contains("AVX2"));
  EXPECT_GE(doc["cpu"]["threads"].get<int>(), 1);
  EXPECT_TRUE(doc["cpu_backend_usable"].get<bool>());
  // The program's backends: registered ones (the test binary has a test backend more).
  ASSERT_FALSE(doc["backends"].empty());
  EXPECT_EQ(doc["backends"][0], "cpu");
  auto built = built_backends();
  for (auto& b : doc["backends"])
    EXPECT_NE(std::find(built.begin(), built.end(), b.get<std::string>()), built.end()) << b;
  for (auto& f : doc["findings"]) {
    std::string v = f["verdict"];
    EXPECT_TRUE(v == "ok" || v == "warning" || v == "missing") << f.dump();
  }

  auto text = run_cli("doctor");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("the CPU backend is usable"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("AVX2"), std::string::npos) << text.output;
  // A missing optional level says what runs instead.
  for (auto& f : doc["findings"])
    if (f["name"] == "AVX512-VNNI" && f["verdict"] == "missing")
      EXPECT_NE(f["detail"].get<std::string>().find("int8 products run on"), std::string::npos) << f.dump();
}

}  // namespace vlrt
