// "toy": a backend that exists only to show that a backend plugs in from its own folder.
// It runs Relu and Gemm (float32) on memory the host cannot read directly (every byte
// crosses by copy), with a 256-byte arena alignment, and prepares each Gemm once: the
// constant B is packed as [N,K] into the node's state, which replaces the original.
#include <cstdlib>
#include <cstring>

#include "backends/backend.h"

namespace vlrt {

namespace {

DeviceKind toy_kind() {
  static const DeviceKind kind = device_kind("toy");
  return kind;
}

// Gemm's B, transposed to [N,K] so each output reads one contiguous row.
class PackedB : public KernelState {
 public:
  explicit PackedB(std::vector<float> bt) : bt(std::move(bt)) {}
  size_t bytes() const override { return bt.size() * sizeof(float); }
  std::vector<float> bt;
};

bool packs(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  return node.op_type == "Gemm" && inputs.size() > 1 && inputs[1] && inputs[1]->value &&
         inputs[1]->value->dtype() == DType::f32 && inputs[1]->value->rank() == 2;
}

class ToyBackend : public Backend {
 public:
  explicit ToyBackend(int index) : index_(index) {}
  Device device() const override { return Device{toy_kind(), index_}; }
  bool host_visible() const override { return false; }
  size_t memory_capacity() const override { return size_t(1) << 30; }
  size_t alignment() const override { return 256; }

  std::shared_ptr<Buffer> allocate(size_t bytes) override {
    auto b = std::make_shared<Buffer>();
    b->bytes = bytes;
    b->device = device();
    b->data = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    b->release = [](void* p) { std::free(p); };
    return b;
  }
  void copy_from_host(const Tensor& src, Tensor& dst) override {
    VLRT_CHECK(dst.device() == device() && src.nbytes() == dst.nbytes(), "toy: bad copy in");
    if (src.nbytes()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
  }
  void copy_to_host(const Tensor& src, Tensor& dst) override {
    VLRT_CHECK(src.device() == device() && src.nbytes() == dst.nbytes(), "toy: bad copy out");
    if (src.nbytes()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
  }

  bool supports(const Node& node, const std::vector<DType>& dtypes, std::string* why) const override {
    if (node.op_type != "Relu" && node.op_type != "Gemm") {
      if (why) *why = cat("toy runs Relu and Gemm only, not ", node.op_type);
      return false;
    }
    for (DType t : dtypes)
      if (t != DType::f32 && t != DType::undefined) {
        if (why) *why = cat("toy runs float32 only, not ", dtype_name(t));
        return false;
      }
    if (node.op_type == "Gemm" && node.attr_int("transA", 0)) {
      if (why) *why = "toy's Gemm does not transpose A";
      return false;
    }
    return true;
  }

  PrepareInfo prepare_info(const Node& node, int64_t, const std::vector<const ValueInfo*>& inputs) const override {
    if (!packs(node, inputs)) return {};
    return {size_t(inputs[1]->value->numel()) * sizeof(float), {1}};
  }

  std::unique_ptr<KernelState> prepare(const Node& node, int64_t,
                                       const std::vector<const ValueInfo*>& inputs) override {
    if (!packs(node, inputs)) return nullptr;
    const Tensor& b = *inputs[1]->value;
    const float* v = b.data<float>();
    if (node.attr_int("transB", 0)) return std::make_unique<PackedB>(std::vector<float>(v, v + b.numel()));
    int64_t k = b.dim(0), n = b.dim(1);
    std::vector<float> bt(size_t(k * n));
    for (int64_t i = 0; i < k; i++)
      for (int64_t j = 0; j < n; j++) bt[size_t(j * k + i)] = v[i * n + j];
    return std::make_unique<PackedB>(std::move(bt));
  }

  void execute(const Node& node, int64_t, KernelState* state, const std::vector<const Tensor*>& in,
               const std::vector<Tensor*>& out) override {
    for (auto* t : in) VLRT_CHECK(!t || t->device() == device(), "toy: an input is not on ", device().str());
    Tensor& y = *out[0];
    if (node.op_type == "Relu") {
      const float* x = in[0]->data<float>();
      for (int64_t i = 0; i < y.numel(); i++) y.data<float>()[i] = x[i] > 0 ? x[i] : 0;
      return;
    }
    // Gemm: Y = alpha * A B + beta * C, C broadcast over rows.
    VLRT_CHECK(state && !in[1], "toy: Gemm without its packed B");
    const auto& bt = static_cast<PackedB*>(state)->bt;
    int64_t m = y.dim(0), n = y.dim(1), k = in[0]->dim(1);
    float alpha = node.attr_float("alpha", 1), beta = node.attr_float("beta", 1);
    const float* a = in[0]->data<float>();
    const Tensor* c = in.size() > 2 ? in[2] : nullptr;
    // C broadcasts: [], [N], [1,N], [M,1] or [M,N].
    int64_t c_rows = c && c->rank() == 2 ? c->dim(0) : 1, c_cols = c && c->rank() >= 1 ? c->dim(-1) : 1;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        float s = 0;
        for (int64_t p = 0; p < k; p++) s += a[i * k + p] * bt[size_t(j * k + p)];
        float bias = c ? c->data<float>()[(c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j)] : 0;
        y.data<float>()[i * n + j] = alpha * s + beta * bias;
      }
  }

 private:
  int index_;
};

int one_toy_device(std::string*) { return 1; }

std::shared_ptr<Backend> make_toy_backend(int index, const BackendConfig&) {
  if (index != 0) fail("no toy device ", index, ": there is only toy:0");
  return std::make_shared<ToyBackend>(index);
}

}  // namespace

VLRT_REGISTER_BACKEND(toy, "a test backend: Relu and Gemm on copied host memory", make_toy_backend, one_toy_device);

}  // namespace vlrt
