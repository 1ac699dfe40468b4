#include "graph/graph.h"

#include <unordered_map>
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
const Graph& Node::attr_graph(const std::string& name) const {
  auto a = find_attr(*this, name, Attribute::Kind::graph);
  if (!a || !a->graph) fail(label(), ": subgraph attribute '", name, "' is missing");
  return *a->graph;
}

std::vector<std::pair<std::string, const Graph*>> Node::subgraphs() const {
  std::vector<std::pair<std::string, const Graph*>> out;
  for (auto& [name, a] : attrs) {
    if (a.graph) out.push_back({name, a.graph.get()});
    for (size_t i = 0; i < a.graphs.size(); i++)
      if (a.graphs[i]) out.push_back({cat(name, "[", i, "]"), a.graphs[i].get()});
  }
  return out;
}

Attribute int_attribute(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = v;
  return a;
}

Attribute ints_attribute(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::ints;
  a.ints = std::move(v);
  return a;
}

Node make_node(const std::string& name, const std::string& op, std::vector<std::string> inputs,
               std::vector<std::string> outputs) {
  Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

std::string Node::label() const {
  std::string d = domain.empty() ? "" : domain + ".";
  return cat("node '", name, "' (", d, op_type, ")");
}

std::string ValueDecl::describe() const {
  std::string s = dtype_name(dtype);
  if (!has_shape) {
    s += "[?]";
  } else {
    s += "[";
    for (size_t i = 0; i < dims.size(); i++) {
      if (i) s += ",";
      if (dims[i].value >= 0) s += std::to_string(dims[i].value);
      else s += dims[i].param.empty() ? "?" : dims[i].param;
    }
    s += "]";
  }
  switch (kind) {
    case ValueKind::tensor: return s;
    case ValueKind::sequence: return "sequence(" + s + ")";
    case ValueKind::optional_tensor: return "optional(" + s + ")";
    case ValueKind::optional_sequence: return "optional(sequence(" + s + "))";
  }
  return s;
}

int64_t Model::opset() const {
  auto it = opsets.find("");
  if (it != opsets.end()) return it->second;
  it = opsets.find("ai.onnx");
  return it != opsets.end() ? it->second : 0;
}

namespace {

std::unordered_set<std::string> defined_in(const Graph& g) {
  std::unordered_set<std::string> defined;
  for (auto& v : g.inputs) defined.insert(v.name);
  for (auto& [name, t] : g.initializers) defined.insert(name);
  for (auto& n : g.nodes)
    for (auto& o : n.outputs) defined.insert(o);
  defined.insert("");
  return defined;
}

void add_once(std::vector<std::string>& out, std::unordered_set<std::string>& seen, const std::string& v) {
  if (seen.insert(v).second) out.push_back(v);
}

}  // namespace

std::vector<std::string> outer_scope_reads(const Graph& g) {
  std::unordered_set<std::string> defined = defined_in(g), seen;
  std::vector<std::string> out;
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs)
      if (!defined.count(in)) add_once(out, seen, in);
    for (auto& [attr, sub] : n.subgraphs())
      for (auto& v : outer_scope_reads(*sub))
        if (!defined.count(v)) add_once(out, seen, v);
  }
  for (auto& o : g.outputs)
    if (!defined.count(o.name)) add_once(out, seen, o.name);
  return out;
}

std::vector<std::string> implicit_inputs(const Node& n) {
  std::unordered_set<std::string> seen;
  std::vector<std::string> out;
  for (auto& [attr, sub] : n.subgraphs())
    for (auto& v : outer_scope_reads(*sub)) add_once(out, seen, v);
  return out;
}

void topo_sort(Graph& g, const std::vector<std::string>& outer) {
  std::unordered_set<std::string> ready(outer.begin(), outer.end());
  for (auto& v : g.inputs) ready.insert(v.name);
  for (auto& [name, t] : g.initializers) ready.insert(name);
  // Every value is defined once (ONNX graphs are in SSA form): a second definition would make
  // which of the two a reader sees depend on the order nodes run in.
  std::unordered_map<std::string, const Node*> producer;
  for (auto& n : g.nodes)
    for (auto& o : n.outputs) {
      if (o.empty()) continue;
      if (auto [it, fresh] = producer.emplace(o, &n); !fresh)
        fail(n.label(), ": its output '", o, "' is also the output of ", it->second->label(),
             "; every value must be defined once (re-export the model, or rename one of them)");
      bool graph_input = false;
      for (auto& v : g.inputs) graph_input = graph_input || v.name == o;
      if (graph_input || g.initializers.count(o))
        fail(n.label(), ": its output '", o, "' is also ", graph_input ? "a graph input" : "an initializer",
             "; every value must be defined once (re-export the model, or rename one of them)");
    }
  ready.insert("");
  // Subgraphs first: each may read anything its enclosing graphs define.
  bool nested = false;
  for (auto& n : g.nodes) nested = nested || !n.subgraphs().empty();
  if (nested) {
    std::unordered_set<std::string> visible = defined_in(g);
    visible.insert(outer.begin(), outer.end());
    std::vector<std::string> scope(visible.begin(), visible.end());
    for (auto& n : g.nodes)
      for (auto& [name, a] : n.attrs) {
        std::vector<Graph*> subs;
        if (a.graph) subs.push_back(a.graph.get());
        for (auto& sg : a.graphs) subs.push_back(sg.get());
        for (Graph* sub : subs) {
          try {
            topo_sort(*sub, scope);
          } catch (const Error& e) {
            fail(n.label(), ": subgraph '", name, "': ", e.what());
          }
        }
      }
  }
  // What each node reads: its inputs and the outer-scope values of its subgraphs.
  std::vector<std::vector<std::string>> reads(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); i++) {
    reads[i] = g.nodes[i].inputs;
    if (nested)
      for (auto& v : implicit_inputs(g.nodes[i])) reads[i].push_back(v);
  }
  std::vector<Node> sorted;
  std::vector<bool> done(g.nodes.size(), false);
  sorted.reserve(g.nodes.size());
  bool progress = true;
  while (sorted.size() < g.nodes.size() && progress) {
    progress = false;
    for (size_t i = 0; i < g.nodes.size(); i++) {
      if (done[i]) continue;
      bool ok = true;
      for (auto& in : reads[i]) ok = ok && ready.count(in);
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
      for (auto& in : reads[i]) {
        if (!ready.count(in)) {
          bool produced = false;
          for (size_t j = 0; j < g.nodes.size(); j++)
            for (auto& o : g.nodes[j].outputs) produced = produced || (!done[j] && o == in);
          if (!produced)
            fail(g.nodes[i].label(), ": input '", in, "' is not a graph input, an initializer, the output of any node",
                 outer.empty() ? "" : " or a value of an enclosing graph");
        }
      }
    }
    std::string stuck;
    size_t named = 0;
    for (size_t i = 0; i < g.nodes.size() && named < 3; i++)
      if (!done[i]) stuck += cat(named++ ? ", " : "", g.nodes[i].label());
    fail("the graph has a cycle: ", g.nodes.size() - sorted.size(),
         " nodes cannot be ordered (in a cycle, or reading from one), among them ", stuck);
  }
  if (!outer.empty())
    for (auto& o : g.outputs)
      if (!ready.count(o.name))
        fail("output '", o.name, "' is not an input, an initializer, the output of any node or a value of an enclosing graph");
  g.nodes = std::move(sorted);
}

}  // namespace vlrt
