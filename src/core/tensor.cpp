#include "core/tensor.h"

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
  int64_t n = 1;
  for (int64_t d : s) n *= d;
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

std::shared_ptr<Buffer> host_alloc(size_t bytes) {
  auto b = std::make_shared<Buffer>();
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  b->data = std::aligned_alloc(64, rounded);
  if (!b->data) fail("out of host memory allocating ", bytes, " bytes");
  b->bytes = bytes;
  b->release = [](void* p) { std::free(p); };
  return b;
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

void Tensor::check_type(DType t) const {
  if (t != dtype_) fail("tensor is ", dtype_name(dtype_), ", accessed as ", dtype_name(t));
}

Tensor Tensor::reshaped(Shape shape) const {
  VLRT_CHECK(shape_numel(shape) == numel_, "cannot view ", describe(), " as shape ", shape_str(shape));
  return Tensor(dtype_, std::move(shape), buffer_, offset_);
}

Tensor Tensor::clone() const {
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

std::string Tensor::describe() const { return cat(dtype_name(dtype_), shape_str(shape_)); }

}  // namespace vlrt
