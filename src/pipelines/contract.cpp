#include "pipelines/contract.h"

#include <algorithm>

#include "core/error.h"

namespace vlrt {

void check_values(const std::vector<ValueDecl>& have, const std::vector<ValueWant>& want, const char* kind,
                  std::vector<std::string>& problems) {
  for (auto& w : want) {
    const ValueDecl* v = find_decl(have, w.name);
    if (!v) {
      problems.push_back(cat("missing ", kind, " '", w.name, "' (", dtype_name(w.dtype), ", rank ", w.rank, ")"));
      continue;
    }
    if (v->dtype != w.dtype)
      problems.push_back(cat(kind, " '", w.name, "' is ", dtype_name(v->dtype), ", expected ", dtype_name(w.dtype)));
    if (v->has_shape && v->dims.size() != w.rank)
      problems.push_back(cat(kind, " '", w.name, "' is ", v->describe(), ", expected rank ", w.rank));
  }
}

const ValueDecl* find_decl(const std::vector<ValueDecl>& values, const std::string& name) {
  auto it = std::find_if(values.begin(), values.end(), [&](const ValueDecl& v) { return v.name == name; });
  return it == values.end() ? nullptr : &*it;
}

void fail_contract(const Model& m, const std::string& what, const std::vector<std::string>& problems,
                   const std::string& expected) {
  std::string msg = cat(m.path, " does not follow the ", what, " contract:");
  for (auto& p : problems) msg += "\n  - " + p;
  fail(msg, "\n  expected ", expected);
}

}  // namespace vlrt
