// The float32 row loops for CpuIsa::avx512 (compiled with its own -march: CMakeLists.txt).
#if defined(__x86_64__)
#define VLRT_ROW_ISA avx512
#define VLRT_ROW_BYTES 64
#include "backends/cpu/row_kernels.inc"
#endif
