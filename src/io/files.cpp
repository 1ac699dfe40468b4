#include "io/files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace vlrt {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, ": no such file");
  if (fs::is_directory(path, ec)) fail(path, ": is a directory, expected a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open for reading");
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) fail(path, ": read error");
  return data;
}

void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts) {
  // The process id keeps two processes writing the same file from sharing a temporary.
  std::string tmp = cat(path, ".tmp", getpid());
  auto give_up = [&](const std::string& why) {
    std::error_code ec;
    fs::remove(tmp, ec);
    fail(path, ": ", why);
  };
  std::error_code dir_ec;
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, dir_ec);
  if (dir_ec) fail(path, ": cannot create its folder (", dir_ec.message(), ")");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) give_up("cannot open for writing (is the folder writable?)");
    for (std::string_view p : parts) f.write(p.data(), std::streamsize(p.size()));
    f.close();
    if (!f) give_up("write failed (is the disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) give_up(cat("cannot rename temporary file into place (", ec.message(), ")"));
}

}  // namespace vlrt
