#include "backends/cuda/cuda_backend.h"

#include "backends/cuda/cublas_api.h"
#include "backends/cuda/kernel.h"
#include "ops/op_schema.h"

namespace vlrt {

DeviceKind cuda_kind() {
  static const DeviceKind kind = device_kind("cuda");
  return kind;
}

void cuda_check(cudaError_t rc, const std::string& what) {
  if (rc != cudaSuccess) fail(what, ": ", cudaGetErrorName(rc), " (", cudaGetErrorString(rc), ")");
}

void cublas_check(int status, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(what, ": ", cublas_api().status_name(cublasStatus_t(status)), " (",
         cublas_api().status_string(cublasStatus_t(status)), ")");
}

const CudaOpTable& cuda_ops() {
  static const CudaOpTable table = [] {
    CudaOpTable t;
    register_cuda_linalg_ops(t);
    return t;
  }();
  return table;
}

CudaBackend::CudaBackend(int index) : index_(index) {
  std::string why;
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || index < 0 || index >= count)
    fail("cuda:", index, " is not available: ",
         rc != cudaSuccess ? cat(cudaGetErrorString(rc), " (", cudaGetErrorName(rc), ")")
                           : cat(count, " CUDA device(s) found"),
         "; `vlrt doctor` shows the driver and the runtime this build needs");
  activate();
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, index), cat("cuda:", index, ": reading its properties"));
  description_ = cat("cuda:", index, " (", prop.name, ", compute capability ", prop.major, ".", prop.minor, ")");
  size_t free_bytes = 0, total = 0;
  cuda_check(cudaMemGetInfo(&free_bytes, &total), description_ + ": reading its memory");
  memory_ = total;
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), description_ + ": creating a stream");
  cublas_check(cublas_api().create(&cublas_), description_ + ": starting cuBLAS");
  cublas_check(cublas_api().set_stream(cublas_, stream_), description_ + ": giving cuBLAS its stream");
  // float32 products in float32: no TF32 tensor cores unless asked for
  cublas_check(cublas_api().set_math_mode(cublas_, CUBLAS_PEDANTIC_MATH), description_ + ": setting cuBLAS's math mode");
}

CudaBackend::~CudaBackend() {
  if (cublas_) cublas_api().destroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaBackend::activate() const { cuda_check(cudaSetDevice(index_), cat("selecting cuda:", index_)); }

std::shared_ptr<Buffer> CudaBackend::allocate(size_t bytes) {
  activate();
  auto b = std::make_shared<Buffer>();
  void* p = nullptr;
  cudaError_t rc = cudaMalloc(&p, bytes ? bytes : 1);
  if (rc != cudaSuccess)
    fail(description_, ": cannot allocate ", bytes, " bytes (", cudaGetErrorString(rc),
         "); the plan sized this device's memory: pass a smaller --memory cap or a smaller batch");
  b->data = p;
  b->bytes = bytes;
  b->device = device();
  int index = index_;
  b->release = [index](void* q) {
    cudaSetDevice(index);
    cudaFree(q);
  };
  return b;
}

void CudaBackend::copy_from_host(const Tensor& src, Tensor& dst) {
  activate();
  cuda_check(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyHostToDevice, stream_),
             cat("copying ", src.describe(), " to ", description_));
}

void CudaBackend::copy_to_host(const Tensor& src, Tensor& dst) {
  activate();
  cuda_check(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, stream_),
             cat("copying ", src.describe(), " from ", description_));
  synchronize();  // the host reads it next
}

bool CudaBackend::copy_on_device(const Tensor& src, Tensor& dst) {
  if (src.device().kind != cuda_kind()) return false;
  activate();
  int from = src.device().index;
  if (from == index_) {
    cuda_check(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, stream_),
               cat("copying ", src.describe(), " on ", description_));
    return true;
  }
  // Peer copies go through the driver's path between the two devices (direct where the hardware allows).
  cuda_check(cudaMemcpyPeerAsync(dst.raw(), index_, src.raw(), from, src.nbytes(), stream_),
             cat("copying ", src.describe(), " from cuda:", from, " to ", description_));
  return true;
}

bool CudaBackend::supports(const Node& node, const std::vector<DType>& input_dtypes, std::string* why) const {
  const OpSchema* schema = find_schema(node.domain, node.op_type);
  if (schema && schema->alias_input >= 0 && node.outputs.size() == 1) return true;  // a view: no kernel
  auto it = (node.domain.empty() || node.domain == "ai.onnx") ? cuda_ops().find(node.op_type) : cuda_ops().end();
  if (it == cuda_ops().end()) {
    if (why) *why = cat("no CUDA kernel for ", node.op_type);
    return false;
  }
  if (input_dtypes.empty()) return true;  // asked at load, before dtypes are known
  return it->second.supports(node, input_dtypes, why);
}

void CudaBackend::execute(const Node& node, int64_t opset, KernelState*, const std::vector<const Tensor*>& inputs,
                          const std::vector<Tensor*>& outputs) {
  auto it = cuda_ops().find(node.op_type);
  if (it == cuda_ops().end()) unsupported(node.label(), ": no CUDA kernel for ", node.op_type);
  activate();
  CudaContext ctx{*this, node, opset, inputs, outputs};
  it->second.run(ctx);
}

void CudaBackend::synchronize() {
  activate();
  cuda_check(cudaStreamSynchronize(stream_), description_ + ": waiting for its stream");
}

namespace {

std::shared_ptr<Backend> make_cuda_backend(int index, const BackendConfig&) {
  return std::make_shared<CudaBackend>(index);
}

int count_cuda_devices(std::string* why) {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    if (why)
      *why = cat(cudaGetErrorString(rc), " (", cudaGetErrorName(rc), "); this build needs an NVIDIA driver for CUDA ",
                 runtime / 1000, ".", runtime % 1000 / 10, " or newer");
    return 0;
  }
  if (count == 0 && why) *why = "the CUDA runtime lists no devices";
  return count;
}

}  // namespace

VLRT_REGISTER_BACKEND(cuda, "NVIDIA GPUs through the CUDA runtime and cuBLAS", make_cuda_backend,
                      count_cuda_devices);

}  // namespace vlrt
