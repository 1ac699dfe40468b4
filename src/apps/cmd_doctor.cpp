// vlrt doctor: what this machine offers vlrt, each finding with a verdict and what to do.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "backends/backend.h"
#include "system/probe.h"

namespace vlrt {

namespace {

struct Finding {
  std::string section, name, verdict, detail, advice;  // verdict: ok, warning, missing
};

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// What vlrt runs where the CPU lacks an optional instruction set.
std::string instead_of(const std::string& isa, const CpuProbe& c) {
  auto has = [&](const char* name) {
    return std::any_of(c.isa.begin(), c.isa.end(), [&](auto& p) { return p.first == name && p.second; });
  };
  if (isa == "AVX512-VNNI" || isa == "AVX-VNNI") {
    if (has("AVX512-VNNI") || has("AVX-VNNI")) return "the other VNNI level runs oneDNN's int8 kernels";
    return has("AVX2") ? "int8 products run on vlrt's exact AVX2 kernels instead of oneDNN's VNNI ones"
                       : "int8 products run on the plain reference loops";
  }
  if (isa == "AVX512-BF16" || isa == "AMX-BF16") {
    if (has("AVX512-BF16") || has("AMX-BF16"))
      return "the other level runs --precision bf16's bfloat16 products";
    return "--precision bf16 computes in float32 (with a warning); bf16 and fp16 weights are widened to "
           "float32";
  }
  if (isa == "AVX-512F") return "vlrt's own kernels use AVX2";
  return "vlrt runs without it";
}

std::vector<Finding> cpu_findings(const CpuProbe& c) {
  std::vector<Finding> f;
  f.push_back({"cpu", "cpu", "ok", cat(c.model, ", ", c.online, " logical CPUs"), ""});
  if (!c.build_missing.empty())
    f.push_back(
        {"cpu", "build", "missing",
         cat("this vlrt was compiled for ", join(c.build_needs, " "), " but the CPU lacks ",
             join(c.build_missing, " ")),
         "rebuild vlrt for this CPU: change -march in CMakeLists.txt (e.g. -march=native) and run make"});
  for (auto& [name, present] : c.isa) {
    if (present) {
      f.push_back({"cpu", name, "ok", "available", ""});
    } else if (name == "AVX2" || name == "FMA") {
      f.push_back(
          {"cpu", name, "warning", "not available",
           "OpenBLAS falls back to SSE kernels and matrix products run several times slower; use a CPU "
           "with AVX2 (any x86 CPU since 2015) for speed"});
    } else {
      f.push_back({"cpu", name, "missing", cat("not available (optional: ", instead_of(name, c), ")"), ""});
    }
  }
  int usable = c.affinity;
  if (c.quota > 0 && c.quota < usable) usable = std::max(1, int(c.quota));
  if (usable < c.online)
    f.push_back({"cpu", "threads", "warning",
                 cat("vlrt starts ", c.online, " threads by default but this process may use ", usable,
                     " CPUs (affinity ", c.affinity, c.quota > 0 ? cat(", cgroup quota ", c.quota) : "", ")"),
                 cat("pass --threads ", usable, " to run and bench to avoid oversubscription")});
  else
    f.push_back({"cpu", "threads", "ok",
                 cat("vlrt uses ", c.online, " threads (one per CPU; --threads to change)"), ""});
  return f;
}

std::vector<Finding> memory_findings(const MemoryProbe& m) {
  if (m.total < 0) return {{"memory", "memory", "warning", "/proc/meminfo is unreadable", ""}};
  int64_t avail = m.available;
  if (m.cgroup_limit > 0 && m.cgroup_limit < avail) avail = m.cgroup_limit;
  std::string detail =
      cat(human_bytes(double(m.total)), " total, ", human_bytes(double(m.available)), " available",
          m.cgroup_limit > 0 ? ", cgroup limit " + human_bytes(double(m.cgroup_limit)) : "");
  if (avail < (int64_t(2) << 30))
    return {{"memory", "memory", "warning", detail,
             "less than 2 GiB is free for vlrt: large models (a GroundingDINO export needs about 2 GiB with "
             "activations) may not fit; close other programs or raise the container's memory limit"}};
  return {{"memory", "memory", "ok", detail, ""}};
}

std::vector<Finding> opencl_findings(const OpenClProbe& o) {
  if (!o.loader)
    return {{"opencl", "loader", "missing", o.error,
             "install ocl-icd-libopencl1 and an OpenCL driver (pocl-opencl-icd for CPUs, your GPU vendor's "
             "ICD)"}};
  if (o.platforms.empty())
    return {{"opencl", "platforms", "warning", o.error,
             "install an OpenCL driver: pocl-opencl-icd for CPUs or your GPU vendor's ICD (e.g. "
             "intel-opencl-icd, nvidia-opencl-icd)"}};
  std::vector<Finding> f;
  for (size_t p = 0; p < o.platforms.size(); p++) {
    auto& plat = o.platforms[p];
    if (plat.devices.empty())
      f.push_back({"opencl", cat("platform ", p), "warning", plat.name + ": no devices",
                   "the driver for this platform finds no device; check that the hardware is visible"});
    for (size_t d = 0; d < plat.devices.size(); d++) {
      auto& dev = plat.devices[d];
      f.push_back({"opencl", cat("device ", p, ".", d), "ok",
                   cat(dev.name, " (", dev.type, ", ", dev.version, ", ", human_bytes(double(dev.global_mem)),
                       ", ", dev.compute_units, " compute units) on ", plat.name),
                   ""});
    }
  }
  return f;
}

std::vector<Finding> cuda_findings(const CudaProbe& c) {
  std::vector<Finding> f;
  std::vector<std::string> others;
  for (auto& kind : built_backends())
    if (kind != "cuda") others.push_back(kind);
  std::string runs_on = "vlrt runs on " + join(others, " and ");
  if (!c.driver) {
    std::string advice = "CUDA backends are unavailable; " + runs_on +
                         "; install the NVIDIA driver to use an "
                         "NVIDIA GPU";
    if (!c.kernel_module.empty())
      advice = cat("the NVIDIA kernel module ", c.kernel_module,
                   " is loaded but its user library is not visible; ",
                   "in a container, start it with the NVIDIA container toolkit (docker run --gpus all)");
    f.push_back({"cuda", "driver", "missing", "no NVIDIA driver (libcuda.so.1 not found)", advice});
  } else {
    f.push_back({"cuda", "driver", "ok",
                 cat("NVIDIA driver supports CUDA ", cuda_version_str(c.driver_version),
                     c.kernel_module.empty() ? "" : " (kernel module " + c.kernel_module + ")"),
                 ""});
    if (c.devices.empty())
      f.push_back(
          {"cuda", "devices", "warning", "no usable GPU: " + c.device_error,
           "check CUDA_VISIBLE_DEVICES, that the GPU is passed to the container (--gpus all), and that "
           "the driver matches the kernel module (reboot after a driver update)"});
    for (size_t i = 0; i < c.devices.size(); i++)
      f.push_back({"cuda", cat("gpu ", i), "ok",
                   cat(c.devices[i].name, ", ", human_bytes(double(c.devices[i].memory))), ""});
  }
  if (c.runtime_library.empty()) {
    f.push_back({"cuda", "runtime", "missing", "no CUDA runtime (libcudart) found",
                 "only CUDA backends need it, and this vlrt build has none"});
  } else if (c.driver && c.runtime_version > c.driver_version) {
    f.push_back(
        {"cuda", "runtime", "warning",
         cat(c.runtime_library, ": CUDA runtime ", cuda_version_str(c.runtime_version),
             " is newer than the driver supports (", cuda_version_str(c.driver_version), ")"),
         cat("update the NVIDIA driver to one that supports CUDA ", cuda_version_str(c.runtime_version),
             ", or use a CUDA runtime no newer than ", cuda_version_str(c.driver_version))});
  } else {
    f.push_back({"cuda", "runtime", "ok",
                 cat(c.runtime_library, ": CUDA runtime ", cuda_version_str(c.runtime_version),
                     c.driver ? "" : " (unusable without an NVIDIA driver)"),
                 ""});
  }
  return f;
}

std::vector<Finding> backend_findings() {
  std::vector<Finding> f;
  for (auto& b : registered_backends()) {
    std::string why;
    int n = b.device_count ? b.device_count(&why) : 0;
    if (n > 0)
      f.push_back({"backends", b.kind, "ok", cat("in this build: ", b.description, "; ", n, " device", n == 1 ? "" : "s",
                                                  " here: ", b.kind, ":0", n > 1 ? cat("..", b.kind, ":", n - 1) : ""),
                   ""});
    else
      f.push_back({"backends", b.kind, "warning", cat("in this build: ", b.description, "; but no device here: ", why),
                   cat("--devices ", b.kind, ":N cannot run on this machine")});
  }
  if (!find_backend("cuda")) f.push_back({"backends", "cuda", "missing", "not in this build yet", ""});
  return f;
}

nlohmann::json facts_json(const CpuProbe& c, const MemoryProbe& m, const OpenClProbe& o,
                          const CudaProbe& cu) {
  nlohmann::json isa = nlohmann::json::object();
  for (auto& [name, present] : c.isa) isa[name] = present;
  nlohmann::json platforms = nlohmann::json::array();
  for (auto& p : o.platforms) {
    nlohmann::json devices = nlohmann::json::array();
    for (auto& d : p.devices)
      devices.push_back({{"name", d.name},
                         {"type", d.type},
                         {"version", d.version},
                         {"driver", d.driver},
                         {"global_mem_bytes", d.global_mem},
                         {"compute_units", d.compute_units}});
    platforms.push_back(
        {{"name", p.name}, {"vendor", p.vendor}, {"version", p.version}, {"devices", devices}});
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (auto& d : cu.devices) gpus.push_back({{"name", d.name}, {"memory_bytes", d.memory}});
  auto opt = [](bool has, auto v) { return has ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"cpu",
           {{"model", c.model},
            {"logical_cpus", c.online},
            {"affinity_cpus", c.affinity},
            {"cgroup_cpu_quota", opt(c.quota > 0, c.quota)},
            {"threads", c.online},
            {"isa", isa},
            {"build_needs", c.build_needs}}},
          {"memory",
           {{"total_bytes", m.total},
            {"available_bytes", m.available},
            {"cgroup_limit_bytes", opt(m.cgroup_limit > 0, m.cgroup_limit)}}},
          {"opencl", {{"loader", o.loader}, {"platforms", platforms}}},
          {"cuda",
           {{"driver", cu.driver},
            {"driver_cuda_version", opt(cu.driver, cuda_version_str(cu.driver_version))},
            {"kernel_module", opt(!cu.kernel_module.empty(), cu.kernel_module)},
            {"devices", gpus},
            {"runtime_library", opt(!cu.runtime_library.empty(), cu.runtime_library)},
            {"runtime_cuda_version", opt(cu.runtime_version > 0, cuda_version_str(cu.runtime_version))}}},
          {"backends", built_backends()}};
}

void doctor(bool json) {
  CpuProbe cpu = probe_cpu();
  MemoryProbe mem = probe_memory();
  OpenClProbe ocl = probe_opencl();
  CudaProbe cuda = probe_cuda();
  std::vector<Finding> findings;
  for (auto&& part : {cpu_findings(cpu), memory_findings(mem), opencl_findings(ocl), cuda_findings(cuda),
                      backend_findings()})
    findings.insert(findings.end(), part.begin(), part.end());
  bool cpu_usable = cpu.build_missing.empty();

  if (json) {
    nlohmann::json j = facts_json(cpu, mem, ocl, cuda);
    j["cpu_backend_usable"] = cpu_usable;
    j["findings"] = nlohmann::json::array();
    for (auto& f : findings)
      j["findings"].push_back({{"section", f.section},
                               {"name", f.name},
                               {"verdict", f.verdict},
                               {"detail", f.detail},
                               {"advice", f.advice}});
    std::cout << j.dump(2) << "\n";
  } else {
    std::string section;
    for (auto& f : findings) {
      if (f.section != section) std::cout << (section.empty() ? "" : "\n") << (section = f.section) << "\n";
      std::printf("  %-8s %-12s %s\n", f.verdict.c_str(), f.name.c_str(), f.detail.c_str());
      if (!f.advice.empty()) std::printf("  %-8s %-12s -> %s\n", "", "", f.advice.c_str());
    }
    std::cout << "\n"
              << (cpu_usable ? "the CPU backend is usable"
                             : "the CPU backend is NOT usable: see 'build' above")
              << "\n";
  }
  if (!cpu_usable) fail("this vlrt build cannot run on this CPU");
}

}  // namespace

void add_doctor_command(CLI::App& app) {
  static bool json = false;
  auto* cmd = app.add_subcommand(
      "doctor", "Report the CPU, memory, OpenCL devices, NVIDIA driver and CUDA runtime, with what to fix");
  cmd->add_flag("--json", json, "print one JSON object");
  cmd->callback([] { doctor(json); });
}

}  // namespace vlrt
