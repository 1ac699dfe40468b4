// A tensor: dtype, shape, device and a reference to memory its backend owns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace vlrt {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);

// A device kind is a small number naming a backend ("cpu" is 0). Backends add their
// kind when they register, so core knows the names without knowing the backends.
using DeviceKind = int16_t;
inline constexpr DeviceKind kCpuKind = 0;
// The kind with this name, added if new.
DeviceKind device_kind(const std::string& name);
// The name of a kind ("cpu", "opencl", ...).
const std::string& device_kind_name(DeviceKind kind);

struct Device {
  DeviceKind kind = kCpuKind;
  int index = 0;
  std::string str() const;  // "cpu", "cpu:1", "opencl:0"
  bool operator==(const Device&) const = default;
};

// A block of memory owned by one device. The release function gives it back.
//
// A host buffer may also know how to read its contents again from where they came from (a
// model's weights from the model file): evict() then gives its memory back, and the next access
// through a Tensor (raw(), data()) allocates it anew and refills it. The session evicts the
// weights that every reader holds packed in its prepared state, so they are not kept twice.
struct Buffer {
  void* data = nullptr;
  size_t bytes = 0;
  Device device;
  std::function<void(void*)> release;
  std::function<void(void*)> refill;  // writes `bytes` bytes of the contents (host buffers only)
  // Gives the memory back when the contents can be refilled; false when they cannot.
  bool evict();
  bool evicted() const { return !data && refill; }
  // The memory, refilled first when evicted (nullptr for a buffer that never had any).
  void* refilled();
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
};

// What a value is. Sequences and optionals live on the host: the sequence and optional ops
// make them, If and Loop carry them, every other op sees tensors only. An optional
// remembers whether it holds (or would hold) a tensor or a sequence.
enum class ValueKind : uint8_t { tensor, sequence, optional_tensor, optional_sequence };
bool is_optional(ValueKind kind);
// "tensor", "sequence", "optional tensor", "optional sequence"
const char* value_kind_name(ValueKind kind);

// A value: a tensor (dtype, shape, memory on a device) or, of another ValueKind, a host
// value holding tensors (a sequence's elements; an optional's element, if any).
class Tensor {
 public:
  Tensor() = default;
  // Allocates uninitialised host memory (64-byte aligned).
  Tensor(DType dtype, Shape shape);
  // A view of `bytes` of an existing buffer starting at `offset`.
  Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset);

  static Tensor zeros(DType dtype, Shape shape);
  template <class T> static Tensor from_vector(const std::vector<T>& v, Shape shape) {
    Tensor t(dtype_v<T>, std::move(shape));
    VLRT_CHECK(t.numel() == int64_t(v.size()), "from_vector: ", v.size(), " values for shape ",
               shape_str(t.shape()));
    for (size_t i = 0; i < v.size(); i++) t.data<T>()[i] = v[i];
    return t;
  }
  template <class T> static Tensor scalar(T v) { return from_vector<T>({v}, {}); }
  // A sequence of host tensors of `element_type`, each with its own shape.
  static Tensor sequence(DType element_type, std::vector<Tensor> elements);
  // An optional holding `element` (a tensor or a sequence).
  static Tensor optional(Tensor element);
  // An empty optional of a tensor or a sequence (`of`) of `element_type`.
  static Tensor empty_optional(ValueKind of, DType element_type);

  bool defined() const { return buffer_ != nullptr || kind_ != ValueKind::tensor; }
  ValueKind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == ValueKind::tensor; }
  // A sequence's elements; an optional's element (none when empty). Empty for a tensor.
  const std::vector<Tensor>& elements() const;
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  // Size of axis i; negative i counts from the end.
  int64_t dim(int i) const;
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * dtype_size(dtype_); }
  Device device() const;
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  size_t offset() const { return offset_; }

  void* raw() { return static_cast<char*>(buffer_->data ? buffer_->data : buffer_->refilled()) + offset_; }
  const void* raw() const {
    return static_cast<const char*>(buffer_->data ? buffer_->data : buffer_->refilled()) + offset_;
  }
  template <class T> T* data() {
    check_type(dtype_v<T>);
    return static_cast<T*>(raw());
  }
  template <class T> const T* data() const {
    check_type(dtype_v<T>);
    return static_cast<const T*>(raw());
  }

  // Same memory, another shape with the same element count.
  Tensor reshaped(Shape shape) const;
  // A deep copy on the host.
  Tensor clone() const;
  // Integer tensor (int32/int64) values as int64, e.g. a shape or axes input.
  std::vector<int64_t> to_int64_vector() const;
  // Any numeric tensor's values converted to double (for tests and tolerance checks).
  std::vector<double> to_double_vector() const;
  // The reverse: writes numel() values, each converted to the tensor's type.
  void assign_doubles(const std::vector<double>& v);
  // A new host tensor of type t holding these values converted (exact from float16 or bfloat16
  // to float32).
  Tensor converted(DType t) const;
  // "float32[1,3,224,224]", "sequence(float32)[3]", "optional(sequence(int32)[2])", "optional(float32)[empty]"
  std::string describe() const;

 private:
  void check_type(DType t) const;
  DType dtype_ = DType::undefined;  // for a sequence or an optional: its elements' type
  ValueKind kind_ = ValueKind::tensor;
  std::shared_ptr<const std::vector<Tensor>> elements_;  // sequences and optionals
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
};

// Host buffer, 64-byte aligned. Every tensor, arena, cache and scratch block of the CPU backend
// comes from here.
std::shared_ptr<Buffer> host_alloc(size_t bytes);

// Out-of-memory tests: the n-th host_alloc from now (1: the next) fails as memory running out
// would, and the ones after it succeed again; 0 turns it off. VLRT_FAIL_ALLOCATION=n in the
// environment sets it at start (counted from the program's first allocation).
void fail_host_allocation(int64_t n);
// Host allocations made so far, in this process.
int64_t host_allocations();

}  // namespace vlrt
