// A pipeline's model contract: the inputs and outputs it needs by name, dtype and rank,
// checked at load so that a model of another export fails with every difference listed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace vlrt {

struct ValueWant {
  std::string name;
  size_t rank;
  DType dtype = DType::f32;
};

// Every problem of `have` against `want`: missing names, other dtypes, other ranks. `kind`
// is "input" or "output".
void check_values(const std::vector<ValueDecl>& have, const std::vector<ValueWant>& want, const char* kind,
                  std::vector<std::string>& problems);
// The declaration named `name`, or null.
const ValueDecl* find_decl(const std::vector<ValueDecl>& values, const std::string& name);
// "MODEL does not follow the WHAT contract:" with one line per problem and what is expected.
[[noreturn]] void fail_contract(const Model& m, const std::string& what, const std::vector<std::string>& problems,
                                const std::string& expected);

}  // namespace vlrt
