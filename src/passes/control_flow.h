// Control flow decided at load: an If whose condition is a constant is replaced by
// the nodes of the branch it takes.
#pragma once

#include <cstddef>

#include "graph/graph.h"

namespace vlrt {

// Replaces each top-level If whose condition is an initializer by its chosen branch:
// the branch's nodes and initializers join the graph, and the branch's outputs are
// renamed to the If's outputs (an Identity where a branch output is not computed by a
// branch node). Returns the number of Ifs replaced.
size_t inline_constant_ifs(Model& model);

}  // namespace vlrt
