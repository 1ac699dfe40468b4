#include "io/shipped.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

namespace vlrt {

namespace fs = std::filesystem;

std::string shipped_model_path(const std::string& relative) {
  std::vector<fs::path> roots;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    fs::path dir = fs::path(exe).parent_path();
    roots.push_back(dir.parent_path());                     // build/vlrt -> repo root
    roots.push_back(dir.parent_path() / "share" / "vlrt");  // installed: bin/vlrt -> share/vlrt
  }
  roots.push_back(fs::current_path());
  for (auto& r : roots) {
    fs::path p = r / "models" / relative;
    std::error_code ec;
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}

}  // namespace vlrt
