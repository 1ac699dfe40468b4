#include "passes/control_flow.h"

#include <unordered_map>

namespace vlrt {

namespace {

// Renames every read of `from` to `to` in a graph and its subgraphs (copied first: a
// copied Model shares its subgraphs).
void rename_reads(Graph& g, const std::string& from, const std::string& to) {
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs)
      if (in == from) in = to;
    for (auto& [name, a] : n.attrs) {
      if (a.graph) {
        a.graph = std::make_shared<Graph>(*a.graph);
        rename_reads(*a.graph, from, to);
      }
      for (auto& sub : a.graphs) {
        sub = std::make_shared<Graph>(*sub);
        rename_reads(*sub, from, to);
      }
    }
  }
  for (auto& o : g.outputs)
    if (o.name == from) o.name = to;
}

// The nodes that replace `n`, the If, taking the branch `b`.
std::vector<Node> inline_branch(Graph& g, const Node& n, Graph b) {
  if (b.outputs.size() != n.outputs.size())
    fail(n.label(), ": the branch has ", b.outputs.size(), " outputs but the node has ", n.outputs.size());
  std::unordered_map<std::string, size_t> producer;  // value -> index of the branch node computing it
  for (size_t i = 0; i < b.nodes.size(); i++)
    for (auto& o : b.nodes[i].outputs) producer[o] = i;
  std::vector<Node> extra;
  for (size_t i = 0; i < n.outputs.size(); i++) {
    const std::string from = b.outputs[i].name, to = n.outputs[i];
    if (to.empty()) continue;
    auto p = producer.find(from);
    bool once = true;  // a branch output named twice keeps its name and gets Identities
    for (size_t j = 0; j < b.outputs.size(); j++) once = once && (j == i || b.outputs[j].name != from);
    if (p != producer.end() && once) {
      for (auto& o : b.nodes[p->second].outputs)
        if (o == from) o = to;
      rename_reads(b, from, to);
      producer.erase(p);
      continue;
    }
    Node id;
    id.name = cat(n.name, "__", to);
    id.op_type = "Identity";
    id.inputs = {from};
    id.outputs = {to};
    extra.push_back(std::move(id));
  }
  for (auto& [name, t] : b.initializers) g.initializers[name] = std::move(t);
  std::vector<Node> nodes = std::move(b.nodes);
  for (auto& e : extra) nodes.push_back(std::move(e));
  return nodes;
}

}  // namespace

size_t inline_constant_ifs(Model& model) {
  Graph& g = model.graph;
  size_t replaced = 0;
  std::vector<Node> nodes;
  for (auto& n : g.nodes) {
    auto cond = n.op_type == "If" && n.domain.empty() && !n.inputs.empty() ? g.initializers.find(n.inputs[0])
                                                                             : g.initializers.end();
    if (cond == g.initializers.end() || cond->second.numel() != 1) {
      nodes.push_back(std::move(n));
      continue;
    }
    bool taken = cond->second.to_double_vector()[0] != 0;
    Graph branch = n.attr_graph(taken ? "then_branch" : "else_branch");
    for (auto& b : inline_branch(g, n, std::move(branch))) nodes.push_back(std::move(b));
    replaced++;
  }
  g.nodes = std::move(nodes);
  return replaced;
}

}  // namespace vlrt
