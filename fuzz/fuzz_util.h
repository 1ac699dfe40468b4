// Shared pieces of the fuzz harnesses: the input as a string, a scratch file for the parsers
// that read a path, and the committed fixtures the harnesses parse against.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace vlrt::fuzz {

inline std::string_view bytes_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A folder of this process's own (several harnesses may run at once), made on first use.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("vlrt_fuzz_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// Writes `bytes` to scratch_dir()/name and returns its path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

// A committed file of the source tree, e.g. "tests/fixtures/vlm/tokenizer/tokenizer.json".
inline std::string source_path(const std::string& rel) { return std::string(VLRT_SOURCE_DIR) + "/" + rel; }

}  // namespace vlrt::fuzz
