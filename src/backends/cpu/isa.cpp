#include "backends/cpu/isa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "backends/cpu/row_kernels.h"
#include "core/error.h"

namespace vlrt {

#if defined(__x86_64__)
namespace avx2 {
extern const RowKernelsF32 row_kernels;
}
namespace avx512 {
extern const RowKernelsF32 row_kernels;
}
#endif

namespace {

CpuIsa detect() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // The levels are the x86-64-v3 and x86-64-v4 that their row loops are compiled for.
  if (__builtin_cpu_supports("x86-64-v4")) return CpuIsa::avx512;
  if (__builtin_cpu_supports("x86-64-v3")) return CpuIsa::avx2;
#endif
  return CpuIsa::plain;
}

CpuIsa env_capped() {
  const char* env = std::getenv("VLRT_CPU_ISA");
  if (!env || !*env) return detected_cpu_isa();
  std::optional<CpuIsa> cap = parse_cpu_isa(env);
  if (!cap) fail("VLRT_CPU_ISA=", env, " is not a CPU instruction set level: use plain, avx2 or avx512");
  return std::min(*cap, detected_cpu_isa());
}

std::atomic<int> isa_override{-1};

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512:
      return "avx512";
    case CpuIsa::avx2:
      return "avx2";
    default:
      return "plain";
  }
}

std::optional<CpuIsa> parse_cpu_isa(const std::string& name) {
  for (CpuIsa isa : {CpuIsa::plain, CpuIsa::avx2, CpuIsa::avx512})
    if (name == cpu_isa_name(isa)) return isa;
  return std::nullopt;
}

CpuIsa detected_cpu_isa() {
  static const CpuIsa isa = detect();
  return isa;
}

CpuIsa cpu_isa() {
  int forced = isa_override.load(std::memory_order_relaxed);
  if (forced >= 0) return CpuIsa(forced);
  static const CpuIsa isa = env_capped();
  return isa;
}

CpuIsa set_cpu_isa(CpuIsa isa) {
  CpuIsa before = cpu_isa();
  isa_override.store(int(std::min(isa, detected_cpu_isa())), std::memory_order_relaxed);
  return before;
}

const RowKernelsF32* row_kernels_f32() {
#if defined(__x86_64__)
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return &avx512::row_kernels;
    case CpuIsa::avx2:
      return &avx2::row_kernels;
    default:
      break;
  }
#endif
  return nullptr;
}

}  // namespace vlrt
