#include "backends/opencl/kernel.h"

#include "backends/opencl/opencl_backend.h"
#include "ops/shape_util.h"

namespace vlrt {

const Tensor& ClContext::input(size_t i) const {
  if (!has_input(i)) fail("required input ", i, " is missing");
  return *inputs_[i];
}

Tensor& ClContext::output(size_t i) {
  if (!has_output(i)) fail("output ", i, " is not produced by this node");
  return *outputs_[i];
}

std::vector<int64_t> ClContext::input_ints(size_t i) const {
  const Tensor& t = input(i);
  Tensor host(t.dtype(), t.shape());
  backend.copy_to_host(t, host);
  return host.to_int64_vector();
}

cl_kernel ClContext::kernel(const ClProgram& program, const char* name) {
  return backend.kernel(program, name);
}

size_t ClContext::group_size(int64_t n) const {
  size_t g = 1;
  while (g < backend.max_group() && int64_t(g) < n) g *= 2;
  return g;
}

void ClContext::set_raw(cl_kernel k, cl_uint i, size_t size, const void* value) {
  cl_int rc = clSetKernelArg(k, i, size, value);
  if (rc != CL_SUCCESS) cl_check(rc, cat("clSetKernelArg ", i, " of a kernel for ", node.op_type).c_str());
}

void ClContext::set_arg(cl_kernel k, cl_uint& i, const ClAt& at) {
  const Tensor& t = at.tensor;
  // An empty tensor has no cl_mem; a NULL buffer argument is allowed and never read.
  cl_mem m = static_cast<cl_mem>(t.buffer() ? t.buffer()->data : nullptr);
  set_raw(k, i++, sizeof(cl_mem), &m);
  size_t esize = dtype_size(t.dtype());
  VLRT_CHECK(t.offset() % esize == 0, "internal error: ", t.describe(), " starts at byte ", t.offset(),
             ", not at a whole element");
  cl_long off = cl_long(t.offset() / esize) + at.extra;
  set_raw(k, i++, sizeof off, &off);
}

void ClContext::set_arg(cl_kernel k, cl_uint& i, const ClLocal& l) { set_raw(k, i++, l.bytes, nullptr); }

void ClContext::enqueue(cl_kernel k, const ClRange& r) {
  size_t global[3], local[3];
  bool has_local = r.local[0] != 0;
  for (int d = 0; d < r.dims; d++) {
    if (r.global[d] == 0) return;  // an empty output: nothing to run
    local[d] = has_local ? r.local[d] : 0;
    global[d] = has_local ? (r.global[d] + local[d] - 1) / local[d] * local[d] : r.global[d];
  }
  cl_check(clEnqueueNDRangeKernel(backend.queue(), k, cl_uint(r.dims), nullptr, global,
                                  has_local ? local : nullptr, 0, nullptr, nullptr),
           cat("launching a kernel for ", node.op_type, " on ", backend.description()).c_str());
}

ClIndexer collapse_dims(const Shape& dims, const std::vector<std::vector<int64_t>>& strides) {
  size_t k = strides.size();
  Shape out;
  std::vector<std::vector<int64_t>> st(k);
  for (size_t d = 0; d < dims.size(); d++) {
    if (dims[d] == 1) continue;
    bool merge = !out.empty();
    for (size_t j = 0; j < k && merge; j++) merge = st[j].back() == strides[j][d] * dims[d];
    if (merge) {
      out.back() *= dims[d];
      for (size_t j = 0; j < k; j++) st[j].back() = strides[j][d];
    } else {
      out.push_back(dims[d]);
      for (size_t j = 0; j < k; j++) st[j].push_back(strides[j][d]);
    }
  }
  if (out.empty()) {
    out.push_back(1);
    for (auto& s : st) s.push_back(0);
  }
  if (out.size() > size_t(kClMaxDims))
    unsupported("OpenCL kernels walk at most ", kClMaxDims, " axes, shape ", shape_str(dims), " needs ",
                out.size());
  ClIndexer ix;
  ix.rank = int(out.size());
  ix.strides.resize(k);
  for (size_t d = 0; d < out.size(); d++) {
    ix.dims.s[d] = cl_int(out[d]);
    for (size_t j = 0; j < k; j++) ix.strides[j].s[d] = cl_int(st[j][d]);
  }
  return ix;
}

ClIndexer broadcast_indexer(const Shape& out, const std::vector<Shape>& in) {
  std::vector<std::vector<int64_t>> st;
  for (auto& s : in) st.push_back(broadcast_strides(s, out));
  return collapse_dims(out, st);
}

const ClOpTable& opencl_ops() {
  static const ClOpTable table = [] {
    ClOpTable t;
    register_opencl_elementwise(t);
    register_opencl_linalg(t);
    register_opencl_normalization(t);
    register_opencl_reduction(t);
    register_opencl_spatial(t);
    register_opencl_tensor(t);
    return t;
  }();
  return table;
}

bool reject_dtype(const Node& node, size_t input, DType got, const char* supported, std::string* why) {
  if (why)
    *why = cat("OpenCL ", node.op_type, " supports ", supported, " only, input ", input, " is ",
               dtype_name(got));
  return false;
}

bool reject(const Node& node, const std::string& what, std::string* why) {
  if (why) *why = cat("OpenCL ", node.op_type, " does not support ", what);
  return false;
}

bool all_float32(const Node& node, const std::vector<DType>& dtypes, std::string* why) {
  for (size_t i = 0; i < dtypes.size(); i++) {
    if (i < node.inputs.size() && node.inputs[i].empty()) continue;
    if (dtypes[i] != DType::f32) return reject_dtype(node, i, dtypes[i], "float32", why);
  }
  return true;
}

const char* bits_suffix(DType t) {
  switch (dtype_size(t)) {
    case 1:
      return "u8";
    case 2:
      return "u16";
    case 4:
      return "u32";
    case 8:
      return "u64";
    default:
      return nullptr;
  }
}

}  // namespace vlrt
