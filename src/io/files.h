// Whole files in and out: reads that name the path when they fail, and writes that
// never leave a half-written file where a reader (or a resumed run) would take it as done.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace vlrt {

// A file that a file in `dir` refers to by `relative` (a model's external data): the path inside
// dir. Fails, naming `what`, when `relative` is absolute, climbs out with "..", or leads out of
// dir through a symbolic link, so that a model from elsewhere cannot make vlrt read other files.
std::string path_inside(const std::string& dir, const std::string& relative, const std::string& what);

// Reads a whole file; fails naming the path when it cannot.
std::string read_file(const std::string& path);

// A whole file mapped read-only into memory (read into memory where it cannot be mapped).
// Pages are read from the file as they are touched; drop() lets go of a range already used,
// so walking a large file does not keep all of it resident.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // fails naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {data_, size_}; }
  // The whole pages inside [p, p + n) are given back (they are read again if touched).
  void drop(const void* p, size_t n) const;

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::string copy_;  // when the file could not be mapped
};

// Reads `n` bytes at `offset` of a file into dst; fails naming the path when the file is
// shorter than that or cannot be read.
void read_file_range(const std::string& path, uint64_t offset, void* dst, size_t n);

// Writes the parts, one after another, to a temporary file beside `path` and renames it
// over `path`: readers see the old file or the new one, never a part of it. Fails naming
// the path, and removes the temporary file, when it cannot. Missing folders are created.
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts);
inline void write_file_atomically(const std::string& path, std::string_view bytes) {
  write_file_atomically(path, {bytes});
}

}  // namespace vlrt
