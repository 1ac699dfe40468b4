// Who may call `vlrt serve`: the API key every route but health asks for (as
// "Authorization: Bearer KEY" or X-AnyLabeling's "Token: KEY", compared in constant time),
// where the key comes from, and which addresses may be bound without one.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace vlrt::serve {

struct ServeOptions;

// The routes answered without the key, so load balancers and orchestrators can probe:
// GET /v2/health/live, GET /v2/health/ready and the labelling tools' GET /health.
bool is_health_route(std::string_view method, std::string_view path);

// The API key: --api-key, else the first line of --api-key-file (trimmed), else the
// environment's VLRT_API_KEY ("" when none is set). Fails naming the file when it cannot be
// read or its first line is empty; a file others may read adds a line to `warnings`.
std::string resolve_api_key(const std::string& flag, const std::string& file, const char* env,
                            std::string* warnings);

// Holds a key's SHA-256 only, and checks a presented key against it in time that depends
// on neither key's content nor length.
class ApiKey {
 public:
  explicit ApiKey(std::string_view key);
  bool matches(std::string_view presented) const;
  // The key carried by the headers: "Authorization: Bearer KEY" (scheme in any case) or "Token: KEY".
  bool accepts(std::string_view authorization, std::string_view token) const;

 private:
  std::array<unsigned char, 32> digest_;
};

// Fails when the options expose the server unsafely or half-configured: a non-loopback
// --host without an API key (unless --insecure), or only one of --tls-cert / --tls-key, or
// either file unreadable.
void check_security_options(const ServeOptions& options);

}  // namespace vlrt::serve
