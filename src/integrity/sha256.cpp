#include "integrity/sha256.h"

#include <openssl/evp.h>

#include <cctype>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace vlrt {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1)
    fail("OpenSSL: cannot start a SHA-256 digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void* data, size_t n) {
  if (EVP_DigestUpdate(ctx_, data, n) != 1) fail("OpenSSL: SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_, md, &len) != 1) fail("OpenSSL: SHA-256 final failed");
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < len; i++) hex += {digits[md[i] >> 4], digits[md[i] & 15]};
  return hex;
}

std::string sha256_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open for reading");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), std::streamsize(buf.size()));
    h.update(buf.data(), size_t(f.gcount()));
  }
  if (f.bad()) fail(path, ": read error while hashing");
  return h.hex_digest();
}

bool is_sha256_hex(const std::string& hex) {
  if (hex.size() != 64) return false;
  for (char c : hex)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace vlrt
