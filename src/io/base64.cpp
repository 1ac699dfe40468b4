#include "io/base64.h"

#include <cstdint>

#include "core/error.h"

namespace vlrt {

std::string base64_decode(const std::string& text) {
  size_t start = 0;
  if (text.rfind("data:", 0) == 0) {
    size_t comma = text.find(',');
    if (comma == std::string::npos || text.rfind(";base64", comma) == std::string::npos)
      fail("a data URL without ';base64,'");
    start = comma + 1;
  }
  std::string out;
  out.reserve((text.size() - start) / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0, pad = 0;
  size_t symbols = 0;
  for (size_t i = start; i < text.size(); i++) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    else if (c == '=') {
      pad++;
      continue;
    } else {
      fail("not valid base64: character ", i, " is byte 0x", "0123456789abcdef"[c >> 4],
           "0123456789abcdef"[c & 15]);
    }
    if (pad) fail("not valid base64: data after '=' padding at character ", i);
    symbols++;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  if (symbols % 4 == 1) fail("not valid base64: ", symbols, " symbols is not a possible length");
  if (pad > 2 || (pad && (symbols + pad) % 4 != 0)) fail("not valid base64: wrong '=' padding");
  return out;
}

std::string base64_encode(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) n |= uint8_t(bytes[i + 2]);
    out += digits[(n >> 18) & 63];
    out += digits[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? digits[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? digits[n & 63] : '=';
  }
  return out;
}

}  // namespace vlrt
