// Runs the vlrt program and captures its exit code and combined output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace vlrt::test {

struct CliResult {
  int exit_code = -1;
  std::string output;
};

// Runs a shell command line.
inline CliResult run_command(const std::string& command) {
  std::string cmd = command + " 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Runs the vlrt program.
inline CliResult run_cli(const std::string& args) { return run_command(std::string(VLRT_BINARY) + " " + args); }

inline std::string source_path(const std::string& rel) { return std::string(VLRT_SOURCE_DIR) + "/" + rel; }

// A fresh empty directory under the build tree's temp area.
inline std::string temp_dir(const std::string& name) {
  std::string d = std::string(::testing::TempDir()) + "vlrt_" + name;
  std::string cmd = "rm -rf '" + d + "' && mkdir -p '" + d + "'";
  if (std::system(cmd.c_str()) != 0) return "";
  return d;
}

// The message of the Error that f throws; empty when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace vlrt::test
