// Manifests and load_model: each kind of damage is named precisely.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "integrity/load_model.h"
#include "integrity/manifest.h"
#include "integrity/sha256.h"
#include "integrity_util.h"
#include "io/files.h"
#include "load/onnx_loader.h"

namespace vlrt {

namespace fs = std::filesystem;

namespace {

std::string load_error(const std::string& path, LoadOptions options = {}) {
  try {
    load_model(path, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Manifest, Sha256MatchesKnownDigests) {
  Sha256 empty;
  EXPECT_EQ(empty.hex_digest(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 abc;
  abc.update("abc", 3);
  EXPECT_EQ(abc.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Manifest, ListsModelExternalDataAndVocab) {
  std::string dir = test::temp_dir("manifest_write");
  std::string model = test::copy_model(dir, "integrity/ext_affine.onnx", {"ext_affine.weights"});
  std::ofstream(dir + "/vocab.txt") << "[PAD]\n[UNK]\n";
  Manifest m = write_manifest(model);
  ASSERT_EQ(m.files.size(), 3u);
  EXPECT_EQ(m.model, "ext_affine.onnx");
  EXPECT_EQ(m.files[1].path, "ext_affine.weights");
  EXPECT_EQ(m.files[1].size, 32);
  EXPECT_EQ(m.files[1].sha256, sha256_file(dir + "/ext_affine.weights"));
  EXPECT_EQ(m.files[2].path, "vocab.txt");
  auto j = nlohmann::json::parse(read_file(manifest_path(model)));
  EXPECT_EQ(j["files"].size(), 3u);
  EXPECT_FALSE(fs::exists(manifest_path(model) + ".tmp"));

  VerifyReport r = verify_manifest(model);
  EXPECT_TRUE(r.found);
  EXPECT_TRUE(r.ok()) << r.problems();
  EXPECT_NO_THROW(load_model(model));
}

TEST(Manifest, TruncatedModelIsNamedWithSizes) {
  std::string dir = test::temp_dir("manifest_truncated");
  std::string model = test::copy_model(dir, "tiny/tiny_cnn.onnx");
  write_manifest(model);
  int64_t full = int64_t(fs::file_size(model));
  test::truncate_to(model, uintmax_t(full / 2));
  std::string line = cat("TRUNCATED  tiny_cnn.onnx: ", full / 2, " of ", full, " bytes (",
                         full / 2 * 100 / full, "%): the download or copy was cut short");
  VerifyReport r = verify_manifest(model);
  ASSERT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].status, FileStatus::truncated);
  EXPECT_EQ(r.files[0].describe(), line);
  // Sizes are checked even when hashes are not.
  EXPECT_NE(load_error(model, {.verify_hash = false}).find(line), std::string::npos);
}

TEST(Manifest, FlippedByteIsCorruptedWithBothHashes) {
  std::string dir = test::temp_dir("manifest_flipped");
  std::string model = test::copy_model(dir, "tiny/tiny_cnn.onnx");
  std::string good = write_manifest(model).files[0].sha256;
  test::flip_byte(model, std::streamoff(fs::file_size(model) / 2));
  std::string err = load_error(model);
  EXPECT_NE(err.find(cat("CORRUPTED  tiny_cnn.onnx: sha256 ", sha256_file(model), ", expected ", good)),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("1 of 1 files do not match the manifest"), std::string::npos) << err;
  // Without hashing, a same-size change goes unnoticed: that is what the flag trades away.
  EXPECT_EQ(load_error(model, {.verify_hash = false}), "");
}

TEST(Manifest, MissingExternalDataIsNamed) {
  std::string dir = test::temp_dir("manifest_missing");
  std::string model = test::copy_model(dir, "integrity/ext_affine.onnx", {"ext_affine.weights"});
  write_manifest(model);
  fs::remove(dir + "/ext_affine.weights");
  EXPECT_NE(
      load_error(model).find("MISSING    ext_affine.weights: not found (expected 32 bytes beside the model)"),
      std::string::npos);
  // Without a manifest the loader names it too.
  fs::remove(manifest_path(model));
  EXPECT_NE(load_error(model).find("external data file '" + dir + "/ext_affine.weights' is missing"),
            std::string::npos)
      << load_error(model);
}

TEST(Manifest, TruncatedExternalDataWithoutManifestIsNamed) {
  std::string dir = test::temp_dir("manifest_ext_cut");
  std::string model = test::copy_model(dir, "integrity/ext_affine.onnx", {"ext_affine.weights"});
  test::truncate_to(dir + "/ext_affine.weights", 20);
  std::string err = load_error(model);
  EXPECT_NE(err.find("tensor 'b': external data file '" + dir +
                     "/ext_affine.weights' is 20 bytes but the tensor "
                     "needs bytes 16..32: the file is truncated"),
            std::string::npos)
      << err;
}

TEST(Manifest, ManifestOfAnotherModelIsNamed) {
  std::string dir = test::temp_dir("manifest_other");
  std::string tiny = test::copy_model(dir, "tiny/tiny_cnn.onnx");
  std::string ext = test::copy_model(dir, "integrity/ext_affine.onnx", {"ext_affine.weights"});
  write_manifest(ext);
  fs::copy_file(manifest_path(ext), manifest_path(tiny));
  VerifyReport r = verify_manifest(tiny);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.other_model, "ext_affine.onnx");
  EXPECT_NE(load_error(tiny).find("is for another model ('ext_affine.onnx', not 'tiny_cnn.onnx')"),
            std::string::npos);
}

TEST(Manifest, MalformedManifestSaysWhatToDo) {
  std::string dir = test::temp_dir("manifest_malformed");
  std::string model = test::copy_model(dir, "tiny/tiny_cnn.onnx");
  std::ofstream(manifest_path(model)) << "{\"model\": \"tiny_cnn.onnx\", \"files\": [{\"path\": \"x\"}]}";
  std::string err = load_error(model);
  EXPECT_NE(err.find("not a valid manifest"), std::string::npos) << err;
  EXPECT_NE(err.find("vlrt verify --write"), std::string::npos) << err;
}

TEST(Manifest, NanOnlyInitializerIsRefused) {
  std::string nan = test::source_path("models/integrity/nan_weights.onnx");
  std::string err = load_error(nan);
  EXPECT_NE(err.find("initializer 'w' float32[4] holds only NaN/Inf values"), std::string::npos) << err;
  std::string dir = test::temp_dir("manifest_nan");
  EXPECT_THROW(write_manifest(test::copy_model(dir, "integrity/nan_weights.onnx")), Error);
  EXPECT_FALSE(fs::exists(dir + "/nan_weights.onnx.manifest.json"));
}

TEST(Manifest, ExternalDataFilesAreListedOnce) {
  EXPECT_EQ(external_data_files(test::source_path("models/integrity/ext_affine.onnx")),
            std::vector<std::string>{"ext_affine.weights"});
  EXPECT_TRUE(external_data_files(test::source_path("models/tiny/tiny_cnn.onnx")).empty());
}

}  // namespace vlrt
