// Standard base64 (RFC 4648), as images travel in JSON request bodies.
#pragma once

#include <string>

namespace vlrt {

// Padding optional, whitespace ignored; a "data:...;base64," prefix is skipped. Fails with
// what is wrong ("not valid base64: character 3 is byte 0x2a", "a data URL without
// ';base64,'"), for the caller to prefix with what the text is.
std::string base64_decode(const std::string& text);
std::string base64_encode(const std::string& bytes);

}  // namespace vlrt
