// Errors carry context (file, node, op, shapes) and read as advice.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace vlrt {

// Concatenates anything streamable: cat("axis ", axis, " out of range").
template <class... Args> std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// "[1,3,224,224]"
std::string shape_str(const std::vector<int64_t>& shape);

// Every failure vlrt reports: bad model, bad input, bad shape, bug.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// An op, attribute or dtype combination vlrt does not implement.
class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& msg) : Error(msg) {}
};

// Memory ran out (or an allocation was made to fail: VLRT_FAIL_ALLOCATION). What tries a thing
// and falls back on an Error (a fusion, a plan within caps) lets this one through: running out of
// memory is reported, not worked around.
class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(const std::string& msg) : Error(msg) {}
};

// Throws an error of e's kind (Error, Unsupported or OutOfMemory) with `message`: context added on
// the way up keeps what a caller acts on.
[[noreturn]] inline void rethrow_as(const Error& e, const std::string& message) {
  if (dynamic_cast<const OutOfMemory*>(&e)) throw OutOfMemory(message);
  if (dynamic_cast<const Unsupported*>(&e)) throw Unsupported(message);
  throw Error(message);
}

template <class... Args> [[noreturn]] void fail(const Args&... args) { throw Error(cat(args...)); }
template <class... Args> [[noreturn]] void unsupported(const Args&... args) {
  throw Unsupported(cat(args...));
}

#define VLRT_CHECK(cond, ...)            \
  do {                                   \
    if (!(cond)) ::vlrt::fail(__VA_ARGS__); \
  } while (0)

}  // namespace vlrt
