// The switch that runs models as written: the plain reference kernels, no fusion.
#pragma once

namespace vlrt {

// The environment variable: set to anything but "" or "0" to run the reference path.
inline constexpr const char* kReferenceKernelsEnv = "VLRT_REFERENCE_KERNELS";
// True when VLRT_REFERENCE_KERNELS asks for the reference path.
bool reference_kernels_requested();

}  // namespace vlrt
