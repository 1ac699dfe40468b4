// The instruction set the CPU kernels' float32 row loops use, chosen once at run time
// from CPUID and capped by the environment variable VLRT_CPU_ISA (plain, avx2, avx512)
// for reproducible results or to compare the levels.
#pragma once

#include <optional>
#include <string>

namespace vlrt {

// Ordered: each level runs on every CPU that runs the next one.
enum class CpuIsa { plain, avx2, avx512 };

const char* cpu_isa_name(CpuIsa isa);
std::optional<CpuIsa> parse_cpu_isa(const std::string& name);

// The best level this CPU (and its operating system) supports.
CpuIsa detected_cpu_isa();

// The level the kernels use: the detected one, capped by VLRT_CPU_ISA. An unknown
// VLRT_CPU_ISA value is an error naming the accepted ones.
CpuIsa cpu_isa();

// Makes the kernels use `isa` (at most the detected level) until it is called again;
// returns the level in use before. For tests that run every level in one process.
CpuIsa set_cpu_isa(CpuIsa isa);

}  // namespace vlrt
