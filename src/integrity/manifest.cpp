#include "integrity/manifest.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "integrity/load_model.h"
#include "integrity/sha256.h"
#include "io/files.h"
#include "load/onnx_loader.h"

namespace vlrt {

namespace fs = std::filesystem;

namespace {

fs::path model_dir(const std::string& model_path) {
  fs::path dir = fs::path(model_path).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

std::string percent(int64_t part, int64_t whole) { return whole > 0 ? cat(part * 100 / whole, "%") : "0%"; }

}  // namespace

std::string manifest_path(const std::string& model_path) { return model_path + ".manifest.json"; }

Manifest write_manifest(const std::string& model_path, const std::string& vocab_path) {
  // A manifest vouches for the files, so they must load first.
  check_initializers_finite(load_onnx(model_path));
  fs::path dir = model_dir(model_path);
  Manifest m;
  m.model = fs::path(model_path).filename().string();
  std::vector<std::string> rel = {m.model};
  for (auto& loc : external_data_files(model_path)) rel.push_back(loc);
  if (!vocab_path.empty()) {
    if (!fs::exists(vocab_path)) fail(vocab_path, ": no such file (given as the vocab)");
    rel.push_back(fs::proximate(vocab_path, dir).string());
  } else if (fs::exists(dir / "vocab.txt")) {
    rel.push_back("vocab.txt");
  }
  for (auto& r : rel) {
    fs::path p = dir / r;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
      fail(p.string(), ": referenced by ", model_path,
           " but missing; a manifest must describe a complete model");
    m.files.push_back({r, int64_t(fs::file_size(p)), sha256_file(p.string())});
  }

  nlohmann::json j = {{"vlrt_manifest", 1}, {"model", m.model}, {"files", nlohmann::json::array()}};
  for (auto& f : m.files) j["files"].push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
  try {
    write_file_atomically(manifest_path(model_path), j.dump(2) + "\n");
  } catch (const Error& e) {
    fail("cannot write the manifest: ", e.what());
  }
  return m;
}

Manifest read_manifest(const std::string& path) {
  std::string advice = "write a new one with `vlrt verify --write MODEL` from known-good files";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not a valid manifest (", e.what(), "); ", advice);
  }
  Manifest m;
  try {
    m.model = j.at("model").get<std::string>();
    for (auto& f : j.at("files")) {
      ManifestEntry e{f.at("path").get<std::string>(), f.at("size").get<int64_t>(),
                      f.at("sha256").get<std::string>()};
      if (e.size < 0 || !is_sha256_hex(e.sha256) || e.path.empty() || fs::path(e.path).is_absolute())
        fail("entry '", e.path, "' needs a relative path, a size >= 0 and a 64-digit sha256");
      for (char& c : e.sha256) c = char(std::tolower(static_cast<unsigned char>(c)));
      m.files.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not a valid manifest (", e.what(), "); ", advice);
  } catch (const Error& e) {
    fail(path, ": not a valid manifest (", e.what(), "); ", advice);
  }
  bool lists_model = false;
  for (auto& f : m.files) lists_model |= f.path == m.model;
  if (!lists_model)
    fail(path, ": not a valid manifest (it does not list the model '", m.model, "'); ", advice);
  return m;
}

std::string FileCheck::describe() const {
  const std::string& p = expected.path;
  switch (status) {
    case FileStatus::ok:
      return cat("OK         ", p, " (", actual_size, " bytes, ",
                 actual_sha256.empty() ? "size OK, hash not checked)" : "sha256 OK)");
    case FileStatus::missing:
      return cat("MISSING    ", p, ": not found (expected ", expected.size, " bytes beside the model)");
    case FileStatus::truncated:
      return cat("TRUNCATED  ", p, ": ", actual_size, " of ", expected.size, " bytes (",
                 percent(actual_size, expected.size), "): the download or copy was cut short");
    case FileStatus::corrupted:
      if (actual_size != expected.size)
        return cat("CORRUPTED  ", p, ": ", actual_size, " bytes, expected ", expected.size,
                   ": not the file the manifest lists");
      return cat("CORRUPTED  ", p, ": sha256 ", actual_sha256, ", expected ", expected.sha256,
                 ": the bytes changed on disk or in transfer");
  }
  return p;
}

bool VerifyReport::ok() const {
  if (!other_model.empty()) return false;
  for (auto& f : files)
    if (f.status != FileStatus::ok) return false;
  return true;
}

std::string VerifyReport::problems(bool list_files) const {
  if (!other_model.empty())
    return cat("the manifest ", manifest, " is for another model ('", other_model, "', not '", model,
               "'); use the manifest that came with ", model, ", or write one with `vlrt verify --write`");
  std::string s;
  int bad = 0;
  for (auto& f : files) {
    if (f.status == FileStatus::ok) continue;
    if (list_files) s += "\n  " + f.describe();
    bad++;
  }
  return cat(
      bad, " of ", files.size(), " files do not match the manifest ", manifest, s, list_files ? "\n" : "; ",
      "fetch or copy the damaged files again; if you changed the model on purpose, write a new manifest "
      "with `vlrt verify --write`");
}

VerifyReport verify_manifest(const std::string& model_path, bool check_hash) {
  VerifyReport r;
  r.manifest = manifest_path(model_path);
  r.model = fs::path(model_path).filename().string();
  std::error_code ec;
  if (!fs::exists(r.manifest, ec)) return r;
  r.found = true;
  Manifest m = read_manifest(r.manifest);
  if (m.model != r.model) {
    r.other_model = m.model;
    return r;
  }
  fs::path dir = model_dir(model_path);
  for (auto& e : m.files) {
    FileCheck c;
    c.expected = e;
    fs::path p = dir / e.path;
    if (!fs::is_regular_file(p, ec)) {
      c.status = FileStatus::missing;
    } else {
      c.actual_size = int64_t(fs::file_size(p));
      if (c.actual_size < e.size) {
        c.status = FileStatus::truncated;
      } else if (c.actual_size > e.size) {
        c.status = FileStatus::corrupted;
      } else if (check_hash) {
        c.actual_sha256 = sha256_file(p.string());
        if (c.actual_sha256 != e.sha256) c.status = FileStatus::corrupted;
      }
    }
    r.files.push_back(std::move(c));
  }
  return r;
}

}  // namespace vlrt
