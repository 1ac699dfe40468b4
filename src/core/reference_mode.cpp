#include "core/reference_mode.h"

#include <cstdlib>
#include <string>

namespace vlrt {

bool reference_kernels_requested() {
  const char* v = std::getenv(kReferenceKernelsEnv);
  return v && *v && std::string(v) != "0";
}

}  // namespace vlrt
