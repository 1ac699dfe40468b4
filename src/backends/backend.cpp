#include "backends/backend.h"

#include "backends/cpu/cpu_backend.h"

namespace vlrt {

Device parse_device(const std::string& s) {
  size_t colon = s.find(':');
  std::string kind = s.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    std::string num = s.substr(colon + 1);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 4)
      fail("bad device '", s, "': the index after ':' must be a number, e.g. opencl:0");
    index = std::stoi(num);
  }
  if (kind == "cpu") return Device{DeviceKind::cpu, index};
  if (kind == "opencl") return Device{DeviceKind::opencl, index};
  fail("unknown device '", s, "'; devices are cpu, cpu:N (a simulated second CPU device) and opencl:N");
}

#ifdef VLRT_WITH_OPENCL
std::shared_ptr<Backend> make_opencl_backend(int index);
#endif

std::vector<std::string> built_backends() {
#ifdef VLRT_WITH_OPENCL
  return {"cpu", "opencl"};
#else
  return {"cpu"};
#endif
}

std::shared_ptr<Backend> create_backend(const Device& d, int threads) {
  if (d.kind == DeviceKind::cpu) return std::make_shared<CpuBackend>(d.index, threads);
#ifdef VLRT_WITH_OPENCL
  return make_opencl_backend(d.index);
#else
  unsupported("device ", d.str(), ": this vlrt build has no OpenCL backend (rebuild with OpenCL headers installed)");
#endif
}

}  // namespace vlrt
