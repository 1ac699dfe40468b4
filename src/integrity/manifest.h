// A manifest lists the files that make up a model (the .onnx, its external data, its
// vocab) with size and SHA-256, in a JSON sidecar MODEL.manifest.json. It turns "the
// model fails to load" into "weights.bin is truncated: 200 MB of 400 MB".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vlrt {

struct ManifestEntry {
  std::string path;  // relative to the model's folder
  int64_t size = 0;
  std::string sha256;  // lowercase hex
};

struct Manifest {
  std::string model;  // file name of the .onnx it describes
  std::vector<ManifestEntry> files;
};

// "dir/model.onnx" -> "dir/model.onnx.manifest.json"
std::string manifest_path(const std::string& model_path);

// Hashes the model, every external-data file it references and a vocab (`vocab_path`, or
// vocab.txt beside the model), then writes the manifest through a temporary file and a
// rename so that a reader never sees half of one. Fails when the model does not load.
Manifest write_manifest(const std::string& model_path, const std::string& vocab_path = "");

// Fails naming the file and what is wrong when it is not a manifest.
Manifest read_manifest(const std::string& path);

enum class FileStatus { ok, missing, truncated, corrupted };

struct FileCheck {
  ManifestEntry expected;
  FileStatus status = FileStatus::ok;
  int64_t actual_size = -1;   // -1 when missing
  std::string actual_sha256;  // empty when not hashed
  // "TRUNCATED  model.onnx: 3438 of 6877 bytes (50%): ..."
  std::string describe() const;
};

struct VerifyReport {
  std::string manifest;     // its path
  bool found = false;       // false when the model has no manifest
  std::string other_model;  // set when the manifest describes a different model
  std::string model;        // file name of the model checked
  std::vector<FileCheck> files;
  bool ok() const;
  // What is wrong (with the failing lines when `list_files`) and what to do, for an error message.
  std::string problems(bool list_files = true) const;
};

// Checks each file the model's manifest lists: sizes always, hashes when `check_hash`.
// A model without a manifest gives an empty report with `found` false.
VerifyReport verify_manifest(const std::string& model_path, bool check_hash = true);

}  // namespace vlrt
