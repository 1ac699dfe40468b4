// What the machine offers vlrt: CPU and its instruction sets, memory, OpenCL platforms,
// the NVIDIA driver and CUDA runtime. GPU libraries are opened with dlopen, so vlrt has
// no link-time dependency on them and a missing one is a finding, not a failed start.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vlrt {

struct CpuProbe {
  std::string model;
  int online = 0;    // CPUs the kernel has online; the default thread count follows this
  int affinity = 0;  // CPUs this process may run on
  double quota = 0;  // cgroup CPU quota in CPUs; 0 when unlimited
  std::vector<std::pair<std::string, bool>> isa;  // {"AVX2", true}, in a fixed order
  std::vector<std::string> build_needs;           // /proc/cpuinfo flags this binary was compiled for
  std::vector<std::string> build_missing;         // of those, the ones this CPU lacks
};

struct MemoryProbe {
  int64_t total = -1, available = -1;
  int64_t cgroup_limit = -1;  // -1 when unlimited
};

struct OpenClDevice {
  std::string name, type, version, driver;
  int64_t global_mem = 0;
  int compute_units = 0;
};

struct OpenClPlatform {
  std::string name, vendor, version;
  std::vector<OpenClDevice> devices;
};

struct OpenClProbe {
  bool loader = false;  // libOpenCL.so.1 opened
  std::string error;    // why there are no platforms, when there are none
  std::vector<OpenClPlatform> platforms;
};

struct CudaDevice {
  std::string name;
  int64_t memory = 0;
};

struct CudaProbe {
  std::string kernel_module;  // from /proc/driver/nvidia/version; empty when not loaded
  bool driver = false;        // libcuda.so.1 opened
  int driver_version = 0;     // CUDA version the driver supports, 1000 * major + 10 * minor
  std::string device_error;   // why no device is usable, when none is
  std::vector<CudaDevice> devices;
  std::string runtime_library;  // the libcudart found; empty when none
  int runtime_version = 0;
};

CpuProbe probe_cpu();
MemoryProbe probe_memory();
OpenClProbe probe_opencl();
CudaProbe probe_cuda();

// "12.2" from 12020.
std::string cuda_version_str(int version);

}  // namespace vlrt
