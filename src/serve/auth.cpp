#include "serve/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <fstream>

#include "core/error.h"
#include "serve/loadtest.h"
#include "serve/server.h"

namespace vlrt::serve {

namespace {

std::array<unsigned char, 32> sha256_of(std::string_view s) {
  std::array<unsigned char, 32> digest{};
  unsigned int n = 0;
  if (EVP_Digest(s.data(), s.size(), digest.data(), &n, EVP_sha256(), nullptr) != 1 || n != digest.size())
    fail("OpenSSL: SHA-256 of the API key failed");
  return digest;
}

std::string_view trimmed(std::string_view s) {
  const char* space = " \t\r\n";
  size_t b = s.find_first_not_of(space);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(space) - b + 1);
}

bool readable(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

bool is_health_route(std::string_view method, std::string_view path) {
  return method == "GET" && (path == "/v2/health/live" || path == "/v2/health/ready" || path == "/health");
}

std::string resolve_api_key(const std::string& flag, const std::string& file, const char* env,
                            std::string* warnings) {
  if (!flag.empty()) return flag;
  if (!file.empty()) {
    std::ifstream in(file);
    std::string line;
    if (!in || !std::getline(in, line))
      fail("--api-key-file ", file, ": cannot read it (does it exist, and may this user read it?)");
    std::string key(trimmed(line));
    if (key.empty()) fail("--api-key-file ", file, ": its first line is empty; write the key there");
    struct stat st{};
    if (warnings && stat(file.c_str(), &st) == 0 && (st.st_mode & S_IROTH))
      *warnings += cat("warning: --api-key-file ", file, " may be read by every user; chmod o-r it\n");
    return key;
  }
  return env ? std::string(trimmed(env)) : std::string();
}

ApiKey::ApiKey(std::string_view key) : digest_(sha256_of(key)) {}

bool ApiKey::matches(std::string_view presented) const {
  // Both sides are hashed first, so the comparison runs over 32 bytes whatever the lengths.
  auto given = sha256_of(presented);
  return CRYPTO_memcmp(given.data(), digest_.data(), digest_.size()) == 0;
}

bool ApiKey::accepts(std::string_view authorization, std::string_view token) const {
  bool ok = false;
  authorization = trimmed(authorization);
  constexpr std::string_view bearer = "bearer ";
  if (authorization.size() > bearer.size()) {
    std::string scheme(authorization.substr(0, bearer.size()));
    for (char& c : scheme) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (scheme == bearer) ok |= matches(trimmed(authorization.substr(bearer.size())));
  }
  token = trimmed(token);
  if (!token.empty()) ok |= matches(token);
  return ok;
}

void check_security_options(const ServeOptions& o) {
  if (!is_loopback_host(o.host) && o.api_key.empty() && !o.insecure)
    fail("--host ", o.host, " would let other machines use the server without a key: set --api-key, "
         "--api-key-file or VLRT_API_KEY, or pass --insecure to serve it open");
  if (o.tls_cert.empty() != o.tls_key.empty())
    fail("TLS needs both --tls-cert and --tls-key (PEM files); only ", o.tls_cert.empty() ? "--tls-key" : "--tls-cert",
         " was given");
  for (const auto& [flag, path] : {std::pair{"--tls-cert", &o.tls_cert}, std::pair{"--tls-key", &o.tls_key}})
    if (!path->empty() && !readable(*path)) fail(flag, " ", *path, ": cannot read it (does it exist, and may this user read it?)");
}

}  // namespace vlrt::serve
