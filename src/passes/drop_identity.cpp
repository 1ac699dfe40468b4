// Identity nodes between other nodes (exporters leave them after a bias Add, as in PaddlePaddle's
// models) hide a chain from the passes that match it: Conv -> Add -> Identity -> Relu is no
// Conv+Add+Relu. Their readers read the Identity's input instead and the node goes. An Identity
// whose output must stay (a graph output, or read by a subgraph) is kept.
#include "passes/fusion_graph.h"

namespace vlrt {

void drop_identities(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++) {
    const Node& n = g.node(i);
    if (!g.alive(i) || !is_op(n, "Identity") || n.inputs.size() != 1 || n.outputs.size() != 1 ||
        n.inputs[0].empty() || g.pinned(n.outputs[0]))
      continue;
    const std::string in = n.inputs[0], out = n.outputs[0];
    for (size_t u : g.users(out)) {
      Node reader = g.node(u);
      for (std::string& v : reader.inputs)
        if (v == out) v = in;
      g.replace(u, std::move(reader));
    }
    g.remove(i);
    counts["Identity dropped"]++;
  }
}

}  // namespace vlrt
