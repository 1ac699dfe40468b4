// Streaming SHA-256 (OpenSSL EVP) for model files too large to hold in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

struct evp_md_ctx_st;

namespace vlrt {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  std::string hex_digest();  // 64 lowercase hex digits; ends the computation

 private:
  evp_md_ctx_st* ctx_;
};

// Hashes a file in 1 MiB chunks; fails naming the path when it cannot be read.
std::string sha256_file(const std::string& path);

// True when `hex` is 64 hex digits (either case).
bool is_sha256_hex(const std::string& hex);

}  // namespace vlrt
