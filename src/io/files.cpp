#include "io/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace vlrt {

namespace fs = std::filesystem;

std::string path_inside(const std::string& dir, const std::string& relative, const std::string& what) {
  fs::path rel(relative);
  if (rel.empty() || rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    fail(what, ": '", relative, "' is not a path relative to the model's folder; refused (external data must ",
         "lie in the model's folder)");
  for (const fs::path& part : rel)
    if (part == "..")
      fail(what, ": '", relative, "' leads out of the model's folder ('..'); refused (external data must ",
           "lie in the model's folder)");
  fs::path base = dir.empty() ? fs::path(".") : fs::path(dir);
  fs::path p = base / rel;
  std::error_code ec1, ec2;
  fs::path real_base = fs::weakly_canonical(base, ec1), real = fs::weakly_canonical(p, ec2);
  if (!ec1 && !ec2) {
    auto [b, r] = std::mismatch(real_base.begin(), real_base.end(), real.begin(), real.end());
    if (b != real_base.end())
      fail(what, ": '", relative, "' leads out of the model's folder through a symbolic link (to '", real.string(),
           "'); refused (external data must lie in the model's folder)");
  }
  return p.string();
}

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

MappedFile::MappedFile(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, ": no such file");
  if (fs::is_directory(path, ec)) fail(path, ": is a directory, expected a file");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      data_ = static_cast<const char*>(p);
      size_ = size_t(st.st_size);
      mapped_ = true;
    }
  }
  if (fd >= 0) ::close(fd);
  if (!mapped_) {
    copy_ = read_file(path);
    data_ = copy_.data();
    size_ = copy_.size();
  }
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<char*>(data_), size_);
}

void MappedFile::drop(const void* p, size_t n) const {
  if (!mapped_ || n == 0) return;
  uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  uintptr_t begin = (uintptr_t(p) + page - 1) / page * page, end = (uintptr_t(p) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void read_file_range(const std::string& path, uint64_t offset, void* dst, size_t n) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open for reading (the model's weights are read from it again)");
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, static_cast<char*>(dst) + done, n - done, off_t(offset + done));
    if (got <= 0) {
      ::close(fd);
      fail(path, ": cannot read bytes ", offset, "..", offset + n, " (was the file changed or truncated?)");
    }
    done += size_t(got);
  }
  ::close(fd);
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
