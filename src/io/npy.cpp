#include "io/npy.h"

#include <cstring>

#include "io/files.h"

namespace vlrt {

namespace {

const char* npy_descr(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::f16: return "<f2";
    case DType::i8: return "|i1";
    case DType::i16: return "<i2";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::u8: return "|u1";
    case DType::u16: return "<u2";
    case DType::u32: return "<u4";
    case DType::u64: return "<u8";
    case DType::boolean: return "|b1";
    default: return nullptr;
  }
}

DType dtype_from_descr(const std::string& d) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::i8, DType::i16, DType::i32, DType::i64, DType::u8,
                  DType::u16, DType::u32, DType::u64, DType::boolean}) {
    std::string want = npy_descr(t);
    // '=' (native) and '<' are the same on the little-endian machines vlrt runs on.
    if (d == want || (want[0] == '<' && d.size() == want.size() && d[0] == '=' && d.compare(1, d.npos, want, 1) == 0)) return t;
  }
  return DType::undefined;
}

// Value of `key` in the header dict, e.g. 'descr': '<f4' -> <f4.
std::string header_field(const std::string& h, const std::string& key, const std::string& path) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) fail(path, ": .npy header has no '", key, "'");
  size_t colon = h.find(':', k);
  size_t start = colon == std::string::npos ? colon : h.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) fail(path, ": .npy header has no value for '", key, "'");
  char open = h[start];
  size_t end = open == '\'' ? h.find('\'', start + 1) : open == '(' ? h.find(')', start) : h.find_first_of(",}", start);
  if (end == std::string::npos) fail(path, ": .npy header's '", key, "' has no end");
  if (open == '\'' || open == '(') start++;
  return h.substr(start, end - start);
}

// One dimension of the header's shape tuple: digits only, and small enough to be a size.
int64_t parse_dim(const std::string& tok, const std::string& path) {
  size_t b = tok.find_first_not_of(' '), e = tok.find_last_not_of(' ');
  std::string digits = tok.substr(b, e - b + 1);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
    fail(path, ": .npy shape has a dimension '", digits, "' that is not a size");
  return std::stoll(digits);
}

}  // namespace

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

Tensor parse_npy(std::string_view data, const std::string& path) {
  if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0) fail(path, ": not a NumPy .npy file");
  int major = uint8_t(data[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = uint8_t(data[8]) | (size_t(uint8_t(data[9])) << 8);
    header_start = 10;
  } else {
    VLRT_CHECK(data.size() >= 12, path, ": truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; i++) header_len |= size_t(uint8_t(data[8 + i])) << (8 * i);
    header_start = 12;
  }
  VLRT_CHECK(header_start + header_len <= data.size(), path, ": truncated .npy header");
  std::string h(data.substr(header_start, header_len));
  std::string descr = header_field(h, "descr", path);
  DType dt = dtype_from_descr(descr);
  if (dt == DType::undefined) fail(path, ": unsupported .npy dtype '", descr, "'");
  if (header_field(h, "fortran_order", path) != "False")
    fail(path, ": Fortran-order arrays are not supported; save with np.ascontiguousarray");
  Shape shape;
  std::string dims = header_field(h, "shape", path);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t next = dims.find(',', pos);
    std::string tok = dims.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    if (tok.find_first_not_of(' ') != std::string::npos) shape.push_back(parse_dim(tok, path));
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  // The data's size is checked before the tensor is allocated, so a header that declares a
  // huge shape is refused, not allocated.
  size_t offset = header_start + header_len, available = data.size() - offset, expected = dtype_size(dt);
  int64_t nonzero = 1;  // an empty array's other dims still index it (strides): they must be countable
  for (int64_t d : shape)
    if (d != 0 && __builtin_mul_overflow(nonzero, d, &nonzero))
      fail(path, ": .npy shape ", shape_str(shape), " has more elements than 64 bits count");
  for (int64_t d : shape) {
    if (d != 0 && expected > available / size_t(d)) expected = available + 1;  // more than there is
    else expected *= size_t(d);
  }
  if (expected != available)
    fail(path, ": the header declares ", dtype_name(dt), " of shape ", shape_str(shape), " but ", available,
         " bytes of data follow it (the file is truncated or corrupted)");
  Tensor t(dt, shape);
  if (t.nbytes()) std::memcpy(t.raw(), data.data() + offset, t.nbytes());
  return t;
}

void write_npy(const std::string& path, const Tensor& t) {
  const char* descr = npy_descr(t.dtype());
  if (!descr) unsupported("cannot write ", dtype_name(t.dtype()), " to .npy");
  std::string shape;
  for (size_t i = 0; i < t.shape().size(); i++) shape += std::to_string(t.shape()[i]) + (t.rank() == 1 || i + 1 < t.shape().size() ? "," : "");
  std::string h = cat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", shape, "), }");
  size_t total = 10 + h.size() + 1;
  h += std::string((64 - total % 64) % 64, ' ') + "\n";
  uint16_t len = uint16_t(h.size());
  const char prefix[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, char(len & 0xff), char(len >> 8)};
  write_file_atomically(path, {std::string_view(prefix, sizeof prefix), h,
                               std::string_view(static_cast<const char*>(t.raw()), t.nbytes())});
}

}  // namespace vlrt
