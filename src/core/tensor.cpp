#include "core/tensor.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "core/dispatch.h"

namespace vlrt {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t shape_numel(const Shape& s) {
  for (int64_t d : s)
    if (d == 0) return 0;  // whatever the other dims, which may be huge (an empty batch of a file's shape)
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n)) fail("shape ", shape_str(s), " has more elements than 64 bits count");
  return n;
}

namespace {

struct KindNames {
  std::mutex mu;
  std::deque<std::string> names{"cpu"};  // a deque: names handed out by reference stay put
};

KindNames& kind_names() {
  static KindNames k;
  return k;
}

}  // namespace

DeviceKind device_kind(const std::string& name) {
  KindNames& k = kind_names();
  std::lock_guard<std::mutex> lock(k.mu);
  for (size_t i = 0; i < k.names.size(); i++)
    if (k.names[i] == name) return DeviceKind(i);
  k.names.push_back(name);
  return DeviceKind(k.names.size() - 1);
}

const std::string& device_kind_name(DeviceKind kind) {
  KindNames& k = kind_names();
  std::lock_guard<std::mutex> lock(k.mu);
  VLRT_CHECK(kind >= 0 && size_t(kind) < k.names.size(), "unknown device kind ", kind);
  return k.names[size_t(kind)];
}

std::string Device::str() const {
  const std::string& base = device_kind_name(kind);
  if (kind == kCpuKind && index == 0) return base;
  return base + ":" + std::to_string(index);
}

Buffer::~Buffer() {
  if (release && data) release(data);
}

namespace {

// The machine's physical memory: a request above it is refused before asking the allocator,
// which (with the kernel's overcommit) could hand out pages that do not exist and let the process
// be killed when it touches them.
size_t physical_memory() {
  static const size_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : SIZE_MAX;
  }();
  return bytes;
}

std::atomic<int64_t> allocations{0};
std::atomic<int64_t> failing_allocation{[] {
  const char* n = std::getenv("VLRT_FAIL_ALLOCATION");
  return n ? std::strtoll(n, nullptr, 10) : 0;
}()};

void* host_memory(size_t bytes) {
  int64_t k = ++allocations;
  if (k == failing_allocation.load())
    throw OutOfMemory(
        cat("out of host memory allocating ", bytes, " bytes (allocation ", k, ", failed on purpose: VLRT_FAIL_ALLOCATION)"));
  if (bytes > physical_memory())
    throw OutOfMemory(cat("needs ", bytes, " bytes of host memory, more than this machine's ", physical_memory(),
         " bytes; refused before allocating (is a shape in the model or its inputs far larger than meant?)"));
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw OutOfMemory(cat("out of host memory allocating ", bytes, " bytes"));
  return p;
}

}  // namespace

void fail_host_allocation(int64_t n) { failing_allocation = n > 0 ? allocations.load() + n : 0; }

int64_t host_allocations() { return allocations.load(); }

std::shared_ptr<Buffer> host_alloc(size_t bytes) {
  auto b = std::make_shared<Buffer>();
  b->data = host_memory(bytes);
  b->bytes = bytes;
  b->release = [](void* p) { std::free(p); };
  return b;
}

bool Buffer::evict() {
  if (!refill || !data || device.kind != kCpuKind) return false;
  release(data);
  data = nullptr;
  return true;
}

void* Buffer::refilled() {
  if (data || !refill) return data;
  // Recursive: a folded constant's refill reads its inputs, which may be evicted too.
  static std::recursive_mutex refilling;
  std::lock_guard<std::recursive_mutex> lock(refilling);
  if (!data) {
    void* p = host_memory(bytes);
    try {
      refill(p);
    } catch (...) {
      std::free(p);
      throw;
    }
    release = [](void* q) { std::free(q); };
    data = p;
  }
  return data;
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  if (!dtype_supported(dtype)) unsupported("tensors of type ", dtype_name(dtype), " are not supported");
  for (int64_t d : shape_) VLRT_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape_));
  numel_ = shape_numel(shape_);
  buffer_ = host_alloc(nbytes());
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset)
    : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)), offset_(offset) {
  numel_ = shape_numel(shape_);
  VLRT_CHECK(buffer_ && offset_ + nbytes() <= buffer_->bytes, "tensor view ", describe(),
             " at offset ", offset_, " exceeds its buffer");
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

int64_t Tensor::dim(int i) const {
  int r = rank();
  if (i < 0) i += r;
  VLRT_CHECK(i >= 0 && i < r, "axis ", i, " out of range for ", describe());
  return shape_[i];
}

Device Tensor::device() const { return buffer_ ? buffer_->device : Device{}; }

bool is_optional(ValueKind kind) { return kind == ValueKind::optional_tensor || kind == ValueKind::optional_sequence; }

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::tensor: return "tensor";
    case ValueKind::sequence: return "sequence";
    case ValueKind::optional_tensor: return "optional tensor";
    case ValueKind::optional_sequence: return "optional sequence";
  }
  return "?";
}

Tensor Tensor::sequence(DType element_type, std::vector<Tensor> elements) {
  for (auto& e : elements) {
    VLRT_CHECK(e.is_tensor() && e.dtype() == element_type && e.device() == Device{},
               "a sequence of ", dtype_name(element_type), " cannot hold ", e.describe(), " on ", e.device().str());
  }
  Tensor t;
  t.kind_ = ValueKind::sequence;
  t.dtype_ = element_type;
  t.elements_ = std::make_shared<const std::vector<Tensor>>(std::move(elements));
  return t;
}

Tensor Tensor::optional(Tensor element) {
  VLRT_CHECK(element.kind() == ValueKind::tensor || element.kind() == ValueKind::sequence,
             "an optional holds a tensor or a sequence, not an ", element.describe());
  Tensor t = empty_optional(element.kind(), element.dtype());
  t.elements_ = std::make_shared<const std::vector<Tensor>>(std::vector<Tensor>{std::move(element)});
  return t;
}

Tensor Tensor::empty_optional(ValueKind of, DType element_type) {
  VLRT_CHECK(of == ValueKind::tensor || of == ValueKind::sequence, "an optional holds a tensor or a sequence");
  Tensor t;
  t.kind_ = of == ValueKind::tensor ? ValueKind::optional_tensor : ValueKind::optional_sequence;
  t.dtype_ = element_type;
  t.elements_ = std::make_shared<const std::vector<Tensor>>();
  return t;
}

const std::vector<Tensor>& Tensor::elements() const {
  static const std::vector<Tensor> none;
  return elements_ ? *elements_ : none;
}

void Tensor::check_type(DType t) const {
  if (kind_ != ValueKind::tensor) fail("a ", describe(), " is not a tensor");
  if (t != dtype_) fail("tensor is ", dtype_name(dtype_), ", accessed as ", dtype_name(t));
}

Tensor Tensor::reshaped(Shape shape) const {
  VLRT_CHECK(shape_numel(shape) == numel_, "cannot view ", describe(), " as shape ", shape_str(shape));
  return Tensor(dtype_, std::move(shape), buffer_, offset_);
}

Tensor Tensor::clone() const {
  if (kind_ != ValueKind::tensor) {
    std::vector<Tensor> copies;
    for (auto& e : elements()) copies.push_back(e.clone());
    Tensor t = *this;
    t.elements_ = std::make_shared<const std::vector<Tensor>>(std::move(copies));
    return t;
  }
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

std::vector<int64_t> Tensor::to_int64_vector() const {
  std::vector<int64_t> out(numel_);
  if (dtype_ == DType::i64) {
    if (numel_) std::memcpy(out.data(), raw(), nbytes());
  } else if (dtype_ == DType::i32) {
    const int32_t* p = data<int32_t>();
    for (int64_t i = 0; i < numel_; i++) out[i] = p[i];
  } else {
    fail("expected an int32 or int64 tensor, got ", describe());
  }
  return out;
}

Tensor Tensor::converted(DType t) const {
  Tensor out(t, shape_);
  if (t == DType::f32 && dtype_is_half(dtype_)) {  // the common case, without the detour through double
    auto src = static_cast<const uint16_t*>(raw());
    float* dst = out.data<float>();
    for (int64_t i = 0; i < numel_; i++) dst[i] = dtype_ == DType::f16 ? half_to_float(src[i]) : bf16_to_float(src[i]);
    return out;
  }
  out.assign_doubles(to_double_vector());
  return out;
}

std::vector<double> Tensor::to_double_vector() const {
  std::vector<double> out(numel_);
  if (dtype_ == DType::f16) {
    auto p = static_cast<const uint16_t*>(raw());
    for (int64_t i = 0; i < numel_; i++) out[i] = half_to_float(p[i]);
  } else if (dtype_ == DType::bf16) {
    auto p = static_cast<const uint16_t*>(raw());
    for (int64_t i = 0; i < numel_; i++) out[i] = bf16_to_float(p[i]);
  } else {
    dispatch_all(dtype_, [&]<class T>() {
      const T* p = data<T>();
      for (int64_t i = 0; i < numel_; i++) out[i] = double(p[i]);
    });
  }
  return out;
}

void Tensor::assign_doubles(const std::vector<double>& v) {
  VLRT_CHECK(int64_t(v.size()) == numel_, "assign_doubles: ", v.size(), " values for ", describe());
  if (dtype_ == DType::f16 || dtype_ == DType::bf16) {
    auto p = static_cast<uint16_t*>(raw());
    for (int64_t i = 0; i < numel_; i++)
      p[i] = dtype_ == DType::f16 ? float_to_half(float(v[size_t(i)])) : float_to_bf16(float(v[size_t(i)]));
    return;
  }
  dispatch_all(dtype_, [&]<class T>() {
    T* p = data<T>();
    for (int64_t i = 0; i < numel_; i++) p[i] = T(v[size_t(i)]);
  });
}

std::string Tensor::describe() const {
  switch (kind_) {
    case ValueKind::tensor: return cat(dtype_name(dtype_), shape_str(shape_));
    case ValueKind::sequence: return cat("sequence(", dtype_name(dtype_), ")[", elements().size(), "]");
    default:
      if (elements().empty())
        return cat("optional(", kind_ == ValueKind::optional_sequence ? "sequence " : "", dtype_name(dtype_), ")[empty]");
      return cat("optional(", elements()[0].describe(), ")");
  }
}

}  // namespace vlrt
