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

template <class... Args> [[noreturn]] void fail(const Args&... args) { throw Error(cat(args...)); }
template <class... Args> [[noreturn]] void unsupported(const Args&... args) {
  throw Unsupported(cat(args...));
}

#define VLRT_CHECK(cond, ...)            \
  do {                                   \
    if (!(cond)) ::vlrt::fail(__VA_ARGS__); \
  } while (0)

}  // namespace vlrt
