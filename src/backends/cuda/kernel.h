// The CUDA backend's op interface: each family file of src/backends/cuda/ops registers its ops
// in one table with a dtype check and a launch on the backend's stream.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"

namespace vlrt {

struct CudaContext {
  CudaBackend& backend;
  const Node& node;
  int64_t opset;
  const std::vector<const Tensor*>& inputs;
  const std::vector<Tensor*>& outputs;
};

struct CudaOp {
  // Whether the op runs here with these input dtypes; `why` says why not.
  bool (*supports)(const Node& node, const std::vector<DType>& input_dtypes, std::string* why);
  void (*run)(CudaContext& ctx);
};

// Keyed by op_type (ONNX domain).
using CudaOpTable = std::map<std::string, CudaOp>;
const CudaOpTable& cuda_ops();

// Family registration, one per file of src/backends/cuda/ops/.
void register_cuda_linalg_ops(CudaOpTable& t);

// Fails naming `what` and the cuBLAS status.
void cublas_check(int status, const std::string& what);

}  // namespace vlrt
