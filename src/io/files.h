// Whole files in and out: reads that name the path when they fail, and writes that
// never leave a half-written file where a reader (or a resumed run) would take it as done.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace vlrt {

// Reads a whole file; fails naming the path when it cannot.
std::string read_file(const std::string& path);

// Writes the parts, one after another, to a temporary file beside `path` and renames it
// over `path`: readers see the old file or the new one, never a part of it. Fails naming
// the path, and removes the temporary file, when it cannot. Missing folders are created.
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts);
inline void write_file_atomically(const std::string& path, std::string_view bytes) {
  write_file_atomically(path, {bytes});
}

}  // namespace vlrt
