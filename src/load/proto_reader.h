// A reader for the protobuf wire format, enough to decode ONNX files without
// generated code. Every read is bounds-checked: a file cut short is reported as such.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"

namespace vlrt {

// Thrown when a message ends before a field it declares.
class Truncated : public Error {
 public:
  using Error::Error;
};

class ProtoReader {
 public:
  enum WireType { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

  ProtoReader(const uint8_t* data, size_t size, size_t base_offset = 0)
      : begin_(data), p_(data), end_(data + size), base_(base_offset) {}

  bool done() const { return p_ >= end_; }
  // Absolute offset in the file, for messages.
  size_t offset() const { return base_ + size_t(p_ - begin_); }

  // Reads a field key; returns false at the end of the message.
  bool next(uint32_t& field, WireType& type) {
    if (done()) return false;
    uint64_t key = read_varint();
    field = uint32_t(key >> 3);
    type = WireType(key & 7);
    if (field == 0) fail("invalid protobuf field number 0 at byte ", offset(), ": the file is corrupted");
    return true;
  }

  // Calls fn(field, type) for each field to the end of the message; fn reads the value or skips it.
  template <class F> void for_each_field(F&& fn) {
    uint32_t field;
    WireType type;
    while (next(field, type)) fn(field, type);
  }

  // Calls fn(sub-reader) for each occurrence of the message field `number`; skips the other fields.
  template <class F> void for_each_message(uint32_t number, F&& fn) {
    for_each_field([&](uint32_t field, WireType type) {
      if (field == number) fn(read_message());
      else skip(type);
    });
  }

  uint64_t read_varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) throw Truncated(cat("data ends inside a number at byte ", offset()));
      uint8_t b = *p_++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("malformed varint at byte ", offset(), ": the file is corrupted");
  }
  int64_t read_int64() { return int64_t(read_varint()); }
  float read_float() { return read_fixed<float>(); }
  double read_double() { return read_fixed<double>(); }
  // A length-delimited field as a sub-reader.
  ProtoReader read_message() {
    size_t n = read_length();
    ProtoReader sub(p_, n, offset());
    p_ += n;
    return sub;
  }
  std::string_view read_bytes() {
    size_t n = read_length();
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  std::string read_string() { return std::string(read_bytes()); }

  void skip(WireType type) {
    switch (type) {
      case varint: read_varint(); break;
      case fixed64: need(8); p_ += 8; break;
      case fixed32: need(4); p_ += 4; break;
      case length_delimited: read_bytes(); break;
      default: fail("unsupported protobuf wire type ", int(type), " at byte ", offset(), ": the file is corrupted");
    }
  }

  // Repeated scalar fields may arrive packed (one length-delimited run) or one by one.
  template <class F> void read_repeated(WireType type, F&& read_one) {
    if (type == length_delimited) {
      ProtoReader sub = read_message();
      while (!sub.done()) read_one(sub);
    } else {
      read_one(*this);
    }
  }

 private:
  void need(size_t n) {
    if (size_t(end_ - p_) < n)
      throw Truncated(cat("data ends at byte ", base_ + size_t(end_ - begin_), " but a field needs ", n,
                          " bytes from byte ", offset()));
  }
  // A little-endian fixed32 or fixed64 value, as the machine's own (little-endian) type.
  template <class T> T read_fixed() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  size_t read_length() {
    uint64_t n = read_varint();
    if (n > uint64_t(end_ - p_))
      throw Truncated(cat("a field at byte ", offset(), " declares ", n, " bytes but only ",
                          size_t(end_ - p_), " remain"));
    return size_t(n);
  }
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  size_t base_;
};

}  // namespace vlrt
