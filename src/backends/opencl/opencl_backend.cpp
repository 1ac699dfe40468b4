#include "backends/opencl/opencl_backend.h"

#include <climits>
#include <map>

#include "ops/op_schema.h"

namespace vlrt {

namespace {

const char* cl_error_name(cl_int rc) {
#define VLRT_CL_ERROR(e) \
  { e, #e }
  static const std::map<cl_int, const char*> names = {
      VLRT_CL_ERROR(CL_DEVICE_NOT_FOUND),
      VLRT_CL_ERROR(CL_DEVICE_NOT_AVAILABLE),
      VLRT_CL_ERROR(CL_COMPILER_NOT_AVAILABLE),
      VLRT_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE),
      VLRT_CL_ERROR(CL_OUT_OF_RESOURCES),
      VLRT_CL_ERROR(CL_OUT_OF_HOST_MEMORY),
      VLRT_CL_ERROR(CL_BUILD_PROGRAM_FAILURE),
      VLRT_CL_ERROR(CL_INVALID_VALUE),
      VLRT_CL_ERROR(CL_INVALID_DEVICE),
      VLRT_CL_ERROR(CL_INVALID_CONTEXT),
      VLRT_CL_ERROR(CL_INVALID_MEM_OBJECT),
      VLRT_CL_ERROR(CL_INVALID_BUFFER_SIZE),
      VLRT_CL_ERROR(CL_INVALID_BUILD_OPTIONS),
      VLRT_CL_ERROR(CL_INVALID_KERNEL_NAME),
      VLRT_CL_ERROR(CL_INVALID_ARG_INDEX),
      VLRT_CL_ERROR(CL_INVALID_ARG_VALUE),
      VLRT_CL_ERROR(CL_INVALID_ARG_SIZE),
      VLRT_CL_ERROR(CL_INVALID_KERNEL_ARGS),
      VLRT_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE),
      VLRT_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE),
      VLRT_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE),
      VLRT_CL_ERROR(CL_INVALID_OPERATION),
      {-1001, "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL driver is installed)"}};
#undef VLRT_CL_ERROR
  auto it = names.find(rc);
  return it == names.end() ? "an OpenCL error" : it->second;
}

// Helpers shared by every program: walking a collapsed shape with per-operand strides.
const char* kPrelude = R"CL(
// Offset of flat index i of dims (row-major) under strides st.
inline int offset_of(int i, int rank, const int* dims, const int* st) {
  int off = 0;
  for (int d = rank - 1; d >= 0; d--) {
    int q = i / dims[d];
    off += (i - q * dims[d]) * st[d];
    i = q;
  }
  return off;
}
// The same for two operands at once.
inline void offsets2(int i, int rank, const int* dims, const int* sa, const int* sb, int* oa, int* ob) {
  int a = 0, b = 0;
  for (int d = rank - 1; d >= 0; d--) {
    int q = i / dims[d], r = i - q * dims[d];
    a += r * sa[d];
    b += r * sb[d];
    i = q;
  }
  *oa = a;
  *ob = b;
}
#define UNPACK8(v, a) \
  int a[8];           \
  vstore8(v, 0, a)
// Sum and maximum of one value per work-item over a work-group of power-of-two size,
// through `s` (one float per item); every item gets the result.
inline float group_sum(float v, __local float* s) {
  int lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = get_local_size(0) / 2; h > 0; h >>= 1) {
    if (lid < h) s[lid] += s[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // s is reused by the next call
  return r;
}
inline float group_max(float v, __local float* s) {
  int lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = get_local_size(0) / 2; h > 0; h >>= 1) {
    if (lid < h) s[lid] = fmax(s[lid], s[lid + h]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
)CL";

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  return s.c_str();  // OpenCL strings include their terminating NUL
}

std::string platform_name(cl_platform_id p) {
  size_t n = 0;
  if (clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
  std::string s(n, '\0');
  clGetPlatformInfo(p, CL_PLATFORM_NAME, n, s.data(), nullptr);
  return s.c_str();
}

struct FoundDevice {
  cl_device_id id;
  cl_platform_id platform;
};

// Every device: the GPUs of all platforms first, in platform order, then the others.
std::vector<FoundDevice> list_devices(std::string* problem) {
  cl_uint n = 0;
  cl_int rc = clGetPlatformIDs(0, nullptr, &n);
  if (rc != CL_SUCCESS || n == 0) {
    *problem = rc == CL_SUCCESS || rc == -1001 ? "no OpenCL platform (driver) is installed"
                                               : cat("clGetPlatformIDs failed: ", cl_error_name(rc));
    return {};
  }
  std::vector<cl_platform_id> platforms(n);
  clGetPlatformIDs(n, platforms.data(), nullptr);
  std::vector<FoundDevice> gpus, others;
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> ids(nd);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids.data(), nullptr);
    for (cl_device_id d : ids) {
      cl_device_type type = 0;
      clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
      (type & CL_DEVICE_TYPE_GPU ? gpus : others).push_back({d, p});
    }
  }
  gpus.insert(gpus.end(), others.begin(), others.end());
  if (gpus.empty()) *problem = cat(n, " OpenCL platform(s) but no device");
  return gpus;
}

}  // namespace

void cl_check(cl_int rc, const char* what) {
  if (rc != CL_SUCCESS) fail(what, " failed: ", cl_error_name(rc), " (", rc, ")");
}

OpenClBackend::OpenClBackend(int index) : index_(index) {
  std::string problem;
  std::vector<FoundDevice> devices = list_devices(&problem);
  if (index < 0 || size_t(index) >= devices.size()) {
    if (problem.empty()) {
      problem =
          cat("this machine has ", devices.size(), " OpenCL device", devices.size() == 1 ? "" : "s", " (");
      for (size_t i = 0; i < devices.size(); i++)
        problem += cat(i ? ", " : "", "opencl:", i, " ", device_string(devices[i].id, CL_DEVICE_NAME));
      problem += ")";
    }
    fail("no OpenCL device ", index, ": ", problem,
         "; install pocl-opencl-icd or a GPU driver, or use --devices cpu");
  }
  device_ = devices[size_t(index)].id;
  description_ = cat(device().str(), " (", device_string(device_, CL_DEVICE_NAME), ", ",
                     platform_name(devices[size_t(index)].platform), ")");
  cl_ulong mem = 0, max_alloc = 0;
  size_t max_group = 0;
  clGetDeviceInfo(device_, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
  clGetDeviceInfo(device_, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, nullptr);
  clGetDeviceInfo(device_, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_group, &max_group, nullptr);
  memory_ = size_t(mem);
  max_alloc_ = size_t(max_alloc);
  tile_ = max_group >= 256 ? 16 : 8;
  while (max_group_ > max_group && max_group_ > 1) max_group_ /= 2;
  cl_int rc = CL_SUCCESS;
  context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &rc);
  cl_check(rc, cat("clCreateContext on ", description_).c_str());
  queue_ = clCreateCommandQueue(context_, device_, 0, &rc);
  cl_check(rc, cat("clCreateCommandQueue on ", description_).c_str());
}

OpenClBackend::~OpenClBackend() {
  // Buffers still alive keep the context alive (OpenCL reference counts it).
  if (queue_) clFinish(queue_);
  for (auto& [name, k] : kernels_) clReleaseKernel(k);
  for (auto& [name, p] : programs_) clReleaseProgram(p);
  if (queue_) clReleaseCommandQueue(queue_);
  if (context_) clReleaseContext(context_);
}

std::shared_ptr<Buffer> OpenClBackend::allocate(size_t bytes) {
  auto b = std::make_shared<Buffer>();
  b->device = device();
  b->bytes = bytes;
  if (bytes == 0) return b;  // nothing to hold; kernels never touch empty tensors
  cl_int rc = CL_SUCCESS;
  cl_mem m = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &rc);
  if (rc != CL_SUCCESS)
    fail("cannot allocate ", bytes, " bytes on ", description_, ": ", cl_error_name(rc), " (the device has ",
         memory_, " bytes, at most ", max_alloc_, " in one buffer); cap it with --memory ", device().str(),
         "=SIZE or use smaller inputs");
  b->data = m;
  b->release = [](void* p) { clReleaseMemObject(static_cast<cl_mem>(p)); };
  return b;
}

void OpenClBackend::copy_from_host(const Tensor& src, Tensor& dst) {
  VLRT_CHECK(src.nbytes() == dst.nbytes() && dst.device() == device(), "copy of ", src.describe(), " into ",
             dst.describe(), " on ", dst.device().str());
  if (!src.nbytes()) return;
  cl_check(clEnqueueWriteBuffer(queue_, static_cast<cl_mem>(dst.buffer()->data), CL_TRUE, dst.offset(),
                                dst.nbytes(), src.raw(), 0, nullptr, nullptr),
           cat("copying ", src.describe(), " to ", description_).c_str());
}

void OpenClBackend::copy_to_host(const Tensor& src, Tensor& dst) {
  VLRT_CHECK(src.nbytes() == dst.nbytes() && src.device() == device(), "copy of ", src.describe(), " on ",
             src.device().str(), " into ", dst.describe());
  if (!src.nbytes()) return;
  // A blocking read also waits for the kernels queued before it.
  cl_check(clEnqueueReadBuffer(queue_, static_cast<cl_mem>(src.buffer()->data), CL_TRUE, src.offset(),
                               src.nbytes(), dst.raw(), 0, nullptr, nullptr),
           cat("copying ", src.describe(), " from ", description_).c_str());
}

bool OpenClBackend::supports(const Node& node, const std::vector<DType>& input_dtypes,
                             std::string* why) const {
  const OpSchema* schema = find_schema(node.domain, node.op_type);
  // A view: the executor makes it and no kernel runs, unless it has more outputs (Dropout's mask).
  if (schema && schema->alias_input >= 0) {
    bool more = false;
    for (size_t i = 1; i < node.outputs.size(); i++) more = more || !node.outputs[i].empty();
    if (!more) return true;
  }
  auto it = (node.domain.empty() || node.domain == "ai.onnx") ? opencl_ops().find(node.op_type)
                                                              : opencl_ops().end();
  if (it == opencl_ops().end()) {
    if (why) *why = cat("no OpenCL kernel for ", node.op_type);
    return false;
  }
  if (input_dtypes.empty()) return true;  // asked at load, before dtypes are known
  return it->second.supports(node, input_dtypes, why);
}

void OpenClBackend::execute(const Node& node, int64_t opset, KernelState*, const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs) {
  auto it = opencl_ops().find(node.op_type);
  if (it == opencl_ops().end()) unsupported("no OpenCL kernel for ", node.op_type);
  auto check_size = [](const Tensor* t) {
    if (t && t->numel() >= INT_MAX)
      unsupported(t->describe(), " has more elements than OpenCL kernels index with 32-bit integers");
  };
  for (const Tensor* t : inputs) check_size(t);
  for (const Tensor* t : outputs) check_size(t);
  ClContext ctx(*this, node, opset, inputs, outputs);
  it->second.run(ctx);
}

void OpenClBackend::synchronize() { cl_check(clFinish(queue_), cat("clFinish on ", description_).c_str()); }

cl_program OpenClBackend::build(const ClProgram& program) {
  std::string source = std::string(kPrelude) + program.source;
  const char* text = source.c_str();
  size_t length = source.size();
  cl_int rc = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(context_, 1, &text, &length, &rc);
  cl_check(rc, "clCreateProgramWithSource");
  std::string options = cat("-cl-std=CL1.2 -DTILE=", tile_);
  rc = clBuildProgram(p, 1, &device_, options.c_str(), nullptr, nullptr);
  if (rc != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(p, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(p, device_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    clReleaseProgram(p);
    fail("OpenCL program '", program.name, "' failed to build on ", description_, " (", cl_error_name(rc),
         "); build log:\n", log.c_str());
  }
  return p;
}

cl_kernel OpenClBackend::kernel(const ClProgram& program, const char* name) {
  std::string key = cat(program.name, "/", name);
  auto it = kernels_.find(key);
  if (it != kernels_.end()) return it->second;
  cl_program& p = programs_[program.name];
  if (!p) {
    try {
      p = build(program);
    } catch (...) {
      programs_.erase(program.name);
      throw;
    }
  }
  cl_int rc = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p, name, &rc);
  cl_check(rc, cat("clCreateKernel ", key).c_str());
  return kernels_[key] = k;
}

DeviceKind opencl_kind() {
  static const DeviceKind kind = device_kind("opencl");
  return kind;
}

namespace {

std::shared_ptr<Backend> make_opencl_backend(int index, const BackendConfig&) {
  return std::make_shared<OpenClBackend>(index);
}

int count_opencl_devices(std::string* why) {
  std::string problem;
  int n = int(list_devices(&problem).size());
  if (why) *why = problem;
  return n;
}

}  // namespace

VLRT_REGISTER_BACKEND(opencl, "OpenCL 1.2 devices, GPUs first", make_opencl_backend,
                      count_opencl_devices);

}  // namespace vlrt
