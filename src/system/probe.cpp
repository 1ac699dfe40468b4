#include "system/probe.h"

#include <dlfcn.h>
#include <sched.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "core/error.h"

namespace vlrt {

namespace {

// The first line of `path` that starts with `key`, after the colon; "" when none.
std::string proc_field(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// cgroup v2 limit files hold a number or "max".
int64_t cgroup_number(const std::string& text) {
  if (text.empty() || text.rfind("max", 0) == 0) return -1;
  return std::atoll(text.c_str());
}

// A string property through clGetPlatformInfo or clGetDeviceInfo, trailing spaces removed.
template <class GetInfo, class Id, class What>
std::string cl_info_string(GetInfo get_info, Id id, What what) {
  char buf[1024] = "";
  get_info(id, what, sizeof buf - 1, buf, nullptr);
  std::string r = buf;  // OpenCL strings include their terminating NUL
  while (!r.empty() && r.back() == ' ') r.pop_back();
  return r;
}

// What a predefined macro expands to, as a string: "1" for the ISA macros GCC and Clang define,
// the macro's own name when it is not defined.
#define VLRT_MACRO_STRING(m) #m
#define VLRT_MACRO_VALUE(m) VLRT_MACRO_STRING(m)

// The instruction-set extensions this build was compiled to use, by their /proc/cpuinfo flag.
constexpr std::pair<const char*, std::string_view> kBuildIsa[] = {{"sse4_2", VLRT_MACRO_VALUE(__SSE4_2__)},
                                                                  {"popcnt", VLRT_MACRO_VALUE(__POPCNT__)},
                                                                  {"avx2", VLRT_MACRO_VALUE(__AVX2__)},
                                                                  {"fma", VLRT_MACRO_VALUE(__FMA__)},
                                                                  {"avx512f", VLRT_MACRO_VALUE(__AVX512F__)}};

}  // namespace

CpuProbe probe_cpu() {
  CpuProbe p;
  p.model = proc_field("/proc/cpuinfo", "model name");
  if (p.model.empty()) p.model = "unknown";
  p.online = int(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  p.affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : p.online;
  std::istringstream cpu_max(first_line("/sys/fs/cgroup/cpu.max"));
  std::string quota, period;
  cpu_max >> quota >> period;
  if (cgroup_number(quota) > 0 && cgroup_number(period) > 0)
    p.quota = double(cgroup_number(quota)) / double(cgroup_number(period));

  // The kernel lists only what it has enabled (e.g. AMX needs OS support), so read its flags.
  std::set<std::string> flags;
  std::istringstream words(proc_field("/proc/cpuinfo", "flags"));
  for (std::string w; words >> w;) flags.insert(w);
  auto has = [&](const std::string& flag) { return flags.count(flag) > 0; };
  const std::pair<const char*, const char*> isa[] = {{"SSE4.2", "sse4_2"},
                                                     {"AVX2", "avx2"},
                                                     {"FMA", "fma"},
                                                     {"AVX-512F", "avx512f"},
                                                     {"AVX512-VNNI", "avx512_vnni"},
                                                     {"AVX-VNNI", "avx_vnni"},
                                                     {"AVX512-BF16", "avx512_bf16"},
                                                     {"AMX-TILE", "amx_tile"},
                                                     {"AMX-BF16", "amx_bf16"},
                                                     {"AMX-INT8", "amx_int8"}};
  for (auto& [name, flag] : isa) p.isa.push_back({name, has(flag)});
  for (auto& [flag, value] : kBuildIsa)
    if (value == "1") p.build_needs.push_back(flag);
  for (auto& f : p.build_needs)
    if (!has(f)) p.build_missing.push_back(f);
  return p;
}

MemoryProbe probe_memory() {
  MemoryProbe m;
  auto kib = [](const std::string& v) { return v.empty() ? int64_t(-1) : std::atoll(v.c_str()) * 1024; };
  m.total = kib(proc_field("/proc/meminfo", "MemTotal"));
  m.available = kib(proc_field("/proc/meminfo", "MemAvailable"));
  m.cgroup_limit = cgroup_number(first_line("/sys/fs/cgroup/memory.max"));
  return m;
}

OpenClProbe probe_opencl() {
  OpenClProbe p;
  // Never dlclose'd: ICDs such as PoCL register exit handlers that must stay mapped.
  void* lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    p.error = "libOpenCL.so.1 not found";
    return p;
  }
  p.loader = true;
  using GetPlatformIDs = cl_int (*)(cl_uint, cl_platform_id*, cl_uint*);
  using GetPlatformInfo = cl_int (*)(cl_platform_id, cl_platform_info, size_t, void*, size_t*);
  using GetDeviceIDs = cl_int (*)(cl_platform_id, cl_device_type, cl_uint, cl_device_id*, cl_uint*);
  using GetDeviceInfo = cl_int (*)(cl_device_id, cl_device_info, size_t, void*, size_t*);
  auto get_platforms = reinterpret_cast<GetPlatformIDs>(dlsym(lib, "clGetPlatformIDs"));
  auto platform_info = reinterpret_cast<GetPlatformInfo>(dlsym(lib, "clGetPlatformInfo"));
  auto get_devices = reinterpret_cast<GetDeviceIDs>(dlsym(lib, "clGetDeviceIDs"));
  auto device_info = reinterpret_cast<GetDeviceInfo>(dlsym(lib, "clGetDeviceInfo"));
  if (!get_platforms || !platform_info || !get_devices || !device_info) {
    p.error = "libOpenCL.so.1 lacks the OpenCL 1.2 entry points";
    return p;
  }
  cl_uint n = 0;
  cl_int rc = get_platforms(0, nullptr, &n);
  if (rc != CL_SUCCESS || n == 0) {
    p.error = rc == CL_SUCCESS || rc == -1001 ? "no OpenCL platform (ICD) is installed"
                                              : cat("clGetPlatformIDs failed with error ", rc);
    return p;
  }
  std::vector<cl_platform_id> ids(n);
  get_platforms(n, ids.data(), nullptr);
  for (cl_platform_id id : ids) {
    auto pstr = [&](cl_platform_info what) { return cl_info_string(platform_info, id, what); };
    OpenClPlatform plat{pstr(CL_PLATFORM_NAME), pstr(CL_PLATFORM_VENDOR), pstr(CL_PLATFORM_VERSION), {}};
    cl_uint nd = 0;
    if (get_devices(id, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) == CL_SUCCESS && nd > 0) {
      std::vector<cl_device_id> devs(nd);
      get_devices(id, CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr);
      for (cl_device_id d : devs) {
        auto dstr = [&](cl_device_info what) { return cl_info_string(device_info, d, what); };
        cl_device_type type = 0;
        cl_ulong mem = 0;
        cl_uint units = 0;
        device_info(d, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
        device_info(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
        device_info(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
        std::string t = type & CL_DEVICE_TYPE_GPU           ? "gpu"
                        : type & CL_DEVICE_TYPE_CPU         ? "cpu"
                        : type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator"
                                                            : "other";
        plat.devices.push_back({dstr(CL_DEVICE_NAME), t, dstr(CL_DEVICE_VERSION), dstr(CL_DRIVER_VERSION),
                                int64_t(mem), int(units)});
      }
    }
    p.platforms.push_back(std::move(plat));
  }
  return p;
}

CudaProbe probe_cuda() {
  CudaProbe p;
  std::string module = first_line("/proc/driver/nvidia/version");
  size_t at = module.find("Kernel Module");
  if (at != std::string::npos) {
    std::istringstream words(module.substr(at + 13));
    words >> p.kernel_module;
  }
  // Never dlclose'd: the driver and runtime do not support being unloaded.
  if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    using IntOut = int (*)(int*);
    auto get_version = reinterpret_cast<IntOut>(dlsym(lib, "cuDriverGetVersion"));
    auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<IntOut>(dlsym(lib, "cuDeviceGetCount"));
    auto name = reinterpret_cast<int (*)(char*, int, int)>(dlsym(lib, "cuDeviceGetName"));
    auto total_mem = reinterpret_cast<int (*)(size_t*, int)>(dlsym(lib, "cuDeviceTotalMem_v2"));
    auto error_string = reinterpret_cast<int (*)(int, const char**)>(dlsym(lib, "cuGetErrorString"));
    p.driver = get_version && get_version(&p.driver_version) == 0;
    int n = 0;
    int rc = init && count && name && total_mem ? init(0) : -1;
    if (rc == 0) rc = count(&n);
    if (rc != 0) {
      const char* msg = nullptr;
      if (error_string && rc > 0) error_string(rc, &msg);
      p.device_error = msg ? cat(msg, " (CUDA error ", rc, ")") : cat("cuInit failed with CUDA error ", rc);
    } else if (n == 0) {
      p.device_error = "the driver sees no GPU";
    }
    for (int i = 0; rc == 0 && i < n; i++) {
      char buf[256] = "";
      size_t mem = 0;
      name(buf, sizeof buf, i);
      total_mem(&mem, i);
      p.devices.push_back({buf, int64_t(mem)});
    }
  }
  for (const char* so : {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
    void* lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    p.runtime_library = so;
    auto get_version = reinterpret_cast<int (*)(int*)>(dlsym(lib, "cudaRuntimeGetVersion"));
    if (get_version) get_version(&p.runtime_version);
    break;
  }
  return p;
}

std::string cuda_version_str(int v) { return cat(v / 1000, ".", (v % 1000) / 10); }

}  // namespace vlrt
