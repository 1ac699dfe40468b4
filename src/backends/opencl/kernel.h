// The OpenCL backend's op interface. Each family file of src/backends/opencl/ops/ holds
// its OpenCL C source (one program, compiled on first use) and the host code that
// checks dtypes and launches its kernels; it registers its ops in one table.
//
// Adding an op: write its kernel and host function in the family's file, add it to
// that file's register function with a `supports` check, and add cases for it to
// tests/backends/test_backend_ops.cpp (which fails when a claimed op has no case).
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace vlrt {

class OpenClBackend;

// One program: a name (the family) and its OpenCL C source.
struct ClProgram {
  const char* name;
  const char* source;
};

// Kernels index elements with 32-bit ints and take per-dimension sizes and strides
// as int8 vectors, so a shape is collapsed to at most this many axes first.
constexpr int kClMaxDims = 8;

// A walk over `dims` (row-major) with one stride vector per operand, in elements.
struct ClIndexer {
  int rank = 1;
  cl_int8 dims{};
  std::vector<cl_int8> strides;
};

// Collapses `dims` and the operands' strides: size-1 axes are dropped and neighbours
// merged where every operand is contiguous across them. Fails beyond kClMaxDims axes.
ClIndexer collapse_dims(const Shape& dims, const std::vector<std::vector<int64_t>>& strides);
// Operands of shapes `in` broadcast (right-aligned) to `out`.
ClIndexer broadcast_indexer(const Shape& out, const std::vector<Shape>& in);

// A tensor's buffer at `extra` elements past the tensor's start; passed like a Tensor.
struct ClAt {
  const Tensor& tensor;
  int64_t extra;
};

// A __local buffer of this many bytes as a kernel argument.
struct ClLocal {
  size_t bytes;
};

// Work sizes of a launch: global[i] is rounded up to a multiple of local[i] (0: the driver picks).
struct ClRange {
  std::array<size_t, 3> global{1, 1, 1};
  std::array<size_t, 3> local{0, 0, 0};
  int dims = 1;
};
inline ClRange cl_range(size_t n, size_t local = 0) { return ClRange{{n, 1, 1}, {local, 0, 0}, 1}; }

class ClContext {
 public:
  ClContext(OpenClBackend& backend, const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs,
            const std::vector<Tensor*>& outputs)
      : node(node), opset(opset), backend(backend), inputs_(inputs), outputs_(outputs) {}

  const Node& node;
  const int64_t opset;
  OpenClBackend& backend;

  size_t input_count() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& input(size_t i) const;
  bool has_output(size_t i) const { return i < outputs_.size() && outputs_[i] != nullptr; }
  Tensor& output(size_t i);

  // A small device input (axes, starts ...) read back to the host.
  std::vector<int64_t> input_ints(size_t i) const;

  cl_kernel kernel(const ClProgram& program, const char* name);
  // Work-group size for kernels where a group shares one row of `n` elements: a power of
  // two, no larger than the row needs or the device allows.
  size_t group_size(int64_t n) const;
  // Sets the arguments and enqueues the kernel. A Tensor passes two arguments: its
  // buffer and its offset in elements (`__global T* x, long x_off`).
  template <class... Args>
  void launch(cl_kernel k, const ClRange& range, const Args&... args) {
    cl_uint i = 0;
    (set_arg(k, i, args), ...);
    enqueue(k, range);
  }

 private:
  void set_arg(cl_kernel k, cl_uint& i, const Tensor& t) { set_arg(k, i, ClAt{t, 0}); }
  void set_arg(cl_kernel k, cl_uint& i, const ClAt& at);
  void set_arg(cl_kernel k, cl_uint& i, const ClLocal& l);
  template <class T>
  void set_arg(cl_kernel k, cl_uint& i, const T& v) {
    set_raw(k, i++, sizeof(T), &v);
  }
  void set_raw(cl_kernel k, cl_uint i, size_t size, const void* value);
  void enqueue(cl_kernel k, const ClRange& range);

  std::vector<const Tensor*> inputs_;
  std::vector<Tensor*> outputs_;
};

struct ClOp {
  // Whether the kernels handle this node with these input dtypes; `why` says why not.
  bool (*supports)(const Node& node, const std::vector<DType>& dtypes, std::string* why);
  void (*run)(ClContext& ctx);
};

using ClOpTable = std::map<std::string, ClOp>;

const ClOpTable& opencl_ops();

// Family registration, one per file of src/backends/opencl/ops/.
void register_opencl_elementwise(ClOpTable& t);
void register_opencl_linalg(ClOpTable& t);
void register_opencl_normalization(ClOpTable& t);
void register_opencl_reduction(ClOpTable& t);
void register_opencl_spatial(ClOpTable& t);
void register_opencl_tensor(ClOpTable& t);

// ---- Helpers for `supports` functions ---------------------------------------------

// Dtype of input i, or undefined when the input is omitted.
inline DType dtype_at(const std::vector<DType>& d, size_t i) {
  return i < d.size() ? d[i] : DType::undefined;
}
// True when every given input (omitted ones aside) is float32; otherwise says which is not.
bool all_float32(const Node& node, const std::vector<DType>& dtypes, std::string* why);
// The reason for an unsupported input dtype: "OpenCL MatMul supports float32 only, input 1 is int64".
bool reject_dtype(const Node& node, size_t input, DType got, const char* supported, std::string* why);
// The reason for an unsupported attribute value or input form.
bool reject(const Node& node, const std::string& what, std::string* why);
// Suffix of the kernels that move elements of this dtype's size ("u8", "u16", "u32", "u64"), or
// nullptr for other sizes.
const char* bits_suffix(DType t);

}  // namespace vlrt
