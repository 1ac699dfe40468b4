// Sequence and optional kernels. Their values are made here, on the host: a tensor put
// into a sequence is copied (its input may be arena memory the next node reuses); the
// tensors of a sequence are never written again, so sequences share them.
#include <cstring>

#include "backends/cpu/kernel.h"
#include "ops/sequence_semantics.h"

namespace vlrt {

namespace {

// Bytes of one step along `axis` and the number of such blocks before it.
struct AxisLayout {
  size_t outer = 1, inner = 1;
};

AxisLayout layout_of(const Shape& shape, size_t axis, DType dtype) {
  AxisLayout l;
  l.inner = dtype_size(dtype);
  for (size_t d = 0; d < axis; d++) l.outer *= size_t(shape[d]);
  for (size_t d = axis + 1; d < shape.size(); d++) l.inner *= size_t(shape[d]);
  return l;
}

void copy_into(Tensor& out, const Tensor& src) {
  VLRT_CHECK(out.shape() == src.shape() && out.dtype() == src.dtype(), "internal error: ", src.describe(),
             " written to ", out.describe());
  if (src.nbytes()) std::memcpy(out.raw(), src.raw(), src.nbytes());
}

void sequence_empty_kernel(KernelContext& ctx) {
  ctx.output(0) = Tensor::sequence(dtype_from_onnx(int32_t(ctx.node.attr_int("dtype", 1))), {});
}

void sequence_construct_kernel(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.input_count(); i++) items.push_back(ctx.input(i).clone());
  ctx.output(0) = Tensor::sequence(ctx.input(0).dtype(), std::move(items));
}

void sequence_insert_kernel(KernelContext& ctx) {
  const Tensor& seq = ctx.input(0);
  std::vector<Tensor> items = seq.elements();
  size_t at = ctx.has_input(2) ? sequence_position(ctx.input(2), items.size(), true) : items.size();
  items.insert(items.begin() + std::ptrdiff_t(at), ctx.input(1).clone());
  ctx.output(0) = Tensor::sequence(seq.dtype(), std::move(items));
}

void sequence_erase_kernel(KernelContext& ctx) {
  const Tensor& seq = ctx.input(0);
  std::vector<Tensor> items = seq.elements();
  if (items.empty()) fail("cannot erase from an empty sequence");
  size_t at = ctx.has_input(1) ? sequence_position(ctx.input(1), items.size(), false) : items.size() - 1;
  items.erase(items.begin() + std::ptrdiff_t(at));
  ctx.output(0) = Tensor::sequence(seq.dtype(), std::move(items));
}

void sequence_length_kernel(KernelContext& ctx) {
  ctx.output(0).data<int64_t>()[0] = int64_t(ctx.input(0).elements().size());
}

void sequence_at_kernel(KernelContext& ctx) {
  const Tensor& seq = ctx.input(0);
  copy_into(ctx.output(0), seq.elements()[sequence_position(ctx.input(1), seq.elements().size(), false)]);
}

// The sizes of the parts along `axis`: from `split` (one size for all, the last part
// smaller; or one size per part), else parts of one.
std::vector<int64_t> split_sizes(const KernelContext& ctx, int64_t dim) {
  if (!ctx.has_input(1)) return std::vector<int64_t>(size_t(dim), 1);
  const Tensor& split = ctx.input(1);
  std::vector<int64_t> v = split.to_int64_vector();
  if (split.rank() == 0) {
    if (v[0] <= 0) fail("split is ", v[0], ", expected a positive size");
    std::vector<int64_t> sizes(size_t(dim / v[0]), v[0]);
    if (dim % v[0]) sizes.push_back(dim % v[0]);
    return sizes;
  }
  int64_t sum = 0;
  for (int64_t s : v) {
    if (s < 0) fail("split has a negative size ", s);
    sum += s;
  }
  if (sum != dim) fail("split sizes sum to ", sum, " but the axis has ", dim, " entries");
  return v;
}

void split_to_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t rank = x.rank(), axis = ctx.node.attr_int("axis", 0);
  if (axis < -rank || axis >= rank) fail("axis ", axis, " is out of range for ", x.describe());
  if (axis < 0) axis += rank;
  bool squeeze = !ctx.has_input(1) && ctx.node.attr_int("keepdims", 1) == 0;
  std::vector<int64_t> sizes = split_sizes(ctx, x.dim(int(axis)));
  AxisLayout l = layout_of(x.shape(), size_t(axis), x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t n : sizes) {
    Shape shape = x.shape();
    shape[size_t(axis)] = n;
    Tensor part(x.dtype(), shape);
    char* dst = static_cast<char*>(part.raw());
    for (size_t o = 0; o < l.outer; o++)
      std::memcpy(dst + o * size_t(n) * l.inner, src + (o * size_t(x.dim(int(axis))) + size_t(start)) * l.inner,
                  size_t(n) * l.inner);
    if (squeeze) shape.erase(shape.begin() + axis);
    parts.push_back(part.reshaped(shape));
    start += n;
  }
  ctx.output(0) = Tensor::sequence(x.dtype(), std::move(parts));
}

void concat_from_sequence_kernel(KernelContext& ctx) {
  const Tensor& seq = ctx.input(0);
  bool new_axis = ctx.node.attr_int("new_axis", 0) != 0;
  Tensor& out = ctx.output(0);
  Shape shape = concat_from_sequence_shape(seq, ctx.node.attr_int("axis", 0), new_axis);
  VLRT_CHECK(shape == out.shape(), "internal error: the output is ", out.describe(), ", expected ", shape_str(shape));
  int64_t axis = ctx.node.attr_int("axis", 0);
  if (axis < 0) axis += int64_t(shape.size());
  AxisLayout l = layout_of(shape, size_t(axis), out.dtype());
  size_t row = size_t(shape[size_t(axis)]) * l.inner, offset = 0;
  char* dst = static_cast<char*>(out.raw());
  for (auto& t : seq.elements()) {
    size_t n = new_axis ? l.inner : size_t(t.dim(int(axis))) * l.inner;
    const char* src = static_cast<const char*>(t.raw());
    for (size_t o = 0; o < l.outer; o++) std::memcpy(dst + o * row + offset, src + o * n, n);
    offset += n;
  }
}

void optional_kernel(KernelContext& ctx) {
  if (ctx.has_input(0)) {
    const Tensor& x = ctx.input(0);
    ctx.output(0) = Tensor::optional(x.is_tensor() ? x.clone() : x);
    return;
  }
  const ValueDecl& type = ctx.node.attrs.at("type").type;
  ctx.output(0) = Tensor::empty_optional(type.kind, type.dtype);
}

void optional_has_element_kernel(KernelContext& ctx) {
  bool has = ctx.has_input(0) && (!is_optional(ctx.input(0).kind()) || !ctx.input(0).elements().empty());
  ctx.output(0).data<bool>()[0] = has;
}

void optional_get_element_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (is_optional(in.kind()) && in.elements().empty())
    fail("the optional input '", ctx.node.inputs[0], "' is empty; check it with OptionalHasElement first");
  const Tensor& element = is_optional(in.kind()) ? in.elements()[0] : in;
  if (element.is_tensor()) copy_into(ctx.output(0), element);
  else ctx.output(0) = element;
}

}  // namespace

void register_sequence_kernels(CpuKernelTable& t) {
  // Sequences hold tensors of any type as they are: no float16 conversion around the call.
  t["SequenceEmpty"] = {sequence_empty_kernel, true};
  t["SequenceConstruct"] = {sequence_construct_kernel, true};
  t["SequenceInsert"] = {sequence_insert_kernel, true};
  t["SequenceErase"] = {sequence_erase_kernel, true};
  t["SequenceLength"] = {sequence_length_kernel, true};
  t["SequenceAt"] = {sequence_at_kernel, true};
  t["SplitToSequence"] = {split_to_sequence_kernel, true};
  t["ConcatFromSequence"] = {concat_from_sequence_kernel, true};
  t["Optional"] = {optional_kernel, true};
  t["OptionalHasElement"] = {optional_has_element_kernel, true};
  t["OptionalGetElement"] = {optional_get_element_kernel, true};
}

}  // namespace vlrt
