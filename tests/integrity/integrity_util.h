// Copies of the shipped test models in a fresh folder, and ways to damage them.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_util.h"
#include "integrity/sha256.h"

namespace vlrt::test {

// Copies models/<rel> (and any companion files named) into `dir`; returns the model's new path.
inline std::string copy_model(const std::string& dir, const std::string& rel,
                              std::initializer_list<const char*> companions = {}) {
  namespace fs = std::filesystem;
  fs::path src = source_path("models/" + rel);
  fs::copy_file(src, fs::path(dir) / src.filename(), fs::copy_options::overwrite_existing);
  for (const char* c : companions)
    fs::copy_file(src.parent_path() / c, fs::path(dir) / c, fs::copy_options::overwrite_existing);
  return (fs::path(dir) / src.filename()).string();
}

inline std::string sha256_of(const std::string& bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex_digest();
}

inline void truncate_to(const std::string& path, uintmax_t size) { std::filesystem::resize_file(path, size); }

inline void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = char(f.get());
  f.seekp(at);
  f.put(char(c ^ 0x5a));
}

}  // namespace vlrt::test
