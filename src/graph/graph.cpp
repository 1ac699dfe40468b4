#include "graph/graph.h"

#include <unordered_set>

namespace vlrt {

namespace {
const Attribute* find_attr(const Node& n, const std::string& name, Attribute::Kind kind) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return nullptr;
  if (it->second.kind != kind) fail(n.label(), ": attribute '", name, "' has the wrong type");
  return &it->second;
}
}  // namespace

int64_t Node::attr_int(const std::string& name, int64_t fallback) const {
  auto a = find_attr(*this, name, Attribute::Kind::i);
  return a ? a->i : fallback;
}
float Node::attr_float(const std::string& name, float fallback) const {
  auto a = find_attr(*this, name, Attribute::Kind::f);
  return a ? a->f : fallback;
}
std::string Node::attr_string(const std::string& name, const std::string& fallback) const {
  auto a = find_attr(*this, name, Attribute::Kind::s);
  return a ? a->s : fallback;
}
std::vector<int64_t> Node::attr_ints(const std::string& name, std::vector<int64_t> fallback) const {
  auto a = find_attr(*this, name, Attribute::Kind::ints);
  return a ? a->ints : fallback;
}
std::vector<float> Node::attr_floats(const std::string& name, std::vector<float> fallback) const {
  auto a = find_attr(*this, name, Attribute::Kind::floats);
  return a ? a->floats : fallback;
}
const Tensor* Node::attr_tensor(const std::string& name) const {
  auto a = find_attr(*this, name, Attribute::Kind::t);
  return a ? &a->t : nullptr;
}
std::string Node::label() const {
  std::string d = domain.empty() ? "" : domain + ".";
  return cat("node '", name, "' (", d, op_type, ")");
}

std::string ValueDecl::describe() const {
  std::string s = dtype_name(dtype);
  if (!has_shape) return s + "[?]";
  s += "[";
  for (size_t i = 0; i < dims.size(); i++) {
    if (i) s += ",";
    if (dims[i].value >= 0) s += std::to_string(dims[i].value);
    else s += dims[i].param.empty() ? "?" : dims[i].param;
  }
  return s + "]";
}

int64_t Model::opset() const {
  auto it = opsets.find("");
  if (it != opsets.end()) return it->second;
  it = opsets.find("ai.onnx");
  return it != opsets.end() ? it->second : 0;
}

void topo_sort(Graph& g) {
  std::unordered_set<std::string> ready;
  for (auto& v : g.inputs) ready.insert(v.name);
  for (auto& [name, t] : g.initializers) ready.insert(name);
  ready.insert("");
  std::vector<Node> sorted;
  std::vector<bool> done(g.nodes.size(), false);
  sorted.reserve(g.nodes.size());
  bool progress = true;
  while (sorted.size() < g.nodes.size() && progress) {
    progress = false;
    for (size_t i = 0; i < g.nodes.size(); i++) {
      if (done[i]) continue;
      bool ok = true;
      for (auto& in : g.nodes[i].inputs) ok = ok && ready.count(in);
      if (!ok) continue;
      for (auto& out : g.nodes[i].outputs) ready.insert(out);
      sorted.push_back(std::move(g.nodes[i]));
      done[i] = true;
      progress = true;
    }
  }
  if (sorted.size() < g.nodes.size()) {
    for (size_t i = 0; i < g.nodes.size(); i++) {
      if (done[i]) continue;
      for (auto& in : g.nodes[i].inputs) {
        if (!ready.count(in)) {
          bool produced = false;
          for (size_t j = 0; j < g.nodes.size(); j++)
            for (auto& o : g.nodes[j].outputs) produced = produced || (!done[j] && o == in);
          if (!produced)
            fail(g.nodes[i].label(), ": input '", in,
                 "' is not a graph input, an initializer or the output of any node");
        }
      }
    }
    fail("the graph has a cycle (", g.nodes.size() - sorted.size(), " nodes cannot be ordered)");
  }
  g.nodes = std::move(sorted);
}

}  // namespace vlrt
