// A writer for the protobuf wire format, the counterpart of proto_reader.h: enough to
// encode ONNX files without generated code. Fields are appended in the order written.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace vlrt {

class ProtoWriter {
 public:
  enum WireType { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

  explicit ProtoWriter(std::string& out) : out_(out) {}

  void write_varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(char(uint8_t(v) | 0x80));
      v >>= 7;
    }
    out_.push_back(char(v));
  }
  void key(uint32_t field, WireType type) { write_varint((uint64_t(field) << 3) | type); }

  void int64_field(uint32_t field, int64_t v) {
    key(field, varint);
    write_varint(uint64_t(v));
  }
  void float_field(uint32_t field, float v) {
    key(field, fixed32);
    append_fixed(v);
  }
  void bytes_field(uint32_t field, std::string_view bytes) {
    key(field, length_delimited);
    write_varint(bytes.size());
    out_.append(bytes);
  }
  // A field whose bytes come in two parts (a message's fields, then a large payload
  // field already encoded), so that the payload is copied once.
  void bytes_field(uint32_t field, std::string_view head, std::string_view tail) {
    key(field, length_delimited);
    write_varint(head.size() + tail.size());
    out_.append(head);
    out_.append(tail);
  }
  // A nested message: fn(ProtoWriter&) writes its fields.
  template <class F> void message_field(uint32_t field, F&& fn) {
    std::string sub;
    ProtoWriter w(sub);
    fn(w);
    bytes_field(field, sub);
  }
  // Repeated scalars, packed (one length-delimited run); readers take either form.
  template <class T> void packed_int64s(uint32_t field, const T& values) {
    if (values.empty()) return;
    std::string sub;
    ProtoWriter w(sub);
    for (auto v : values) w.write_varint(uint64_t(int64_t(v)));
    bytes_field(field, sub);
  }
  template <class T> void packed_floats(uint32_t field, const T& values) {
    if (values.empty()) return;
    std::string sub;
    ProtoWriter w(sub);
    for (float v : values) w.append_fixed(v);
    bytes_field(field, sub);
  }

 private:
  // Little-endian, as the machine's own (little-endian) layout.
  template <class T> void append_fixed(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  std::string& out_;
};

}  // namespace vlrt
