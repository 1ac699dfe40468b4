// The graph IR: what a loaded model is, independent of any file format.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace vlrt {

struct Graph;

// A dimension as declared in the model: a fixed size or a symbol such as "batch".
struct Dim {
  int64_t value = -1;  // -1 when symbolic or unknown
  std::string param;   // symbol name, may be empty for an anonymous dynamic dim
};

// A graph input, output or annotated intermediate value as the model declares it. For a
// sequence or an optional, dtype and dims are those of its tensors.
struct ValueDecl {
  std::string name;
  DType dtype = DType::undefined;  // undefined: not declared, or a type vlrt does not take (maps, strings)
  bool has_shape = false;
  std::vector<Dim> dims;
  ValueKind kind = ValueKind::tensor;
  std::string describe() const;  // "float32[batch,3,224,224]", "sequence(float32[N])"
};

struct Attribute {
  enum class Kind { undefined, f, i, s, t, floats, ints, strings, graph, graphs, type };
  Kind kind = Kind::undefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::shared_ptr<Graph> graph;                // kind graph: a subgraph (If's branches, Loop's body)
  std::vector<std::shared_ptr<Graph>> graphs;  // kind graphs
  ValueDecl type;                              // kind type: a type (Optional's element type), no name
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an unused optional output
  std::map<std::string, Attribute> attrs;

  bool has_attr(const std::string& name) const { return attrs.count(name) != 0; }
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  float attr_float(const std::string& name, float fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> attr_floats(const std::string& name, std::vector<float> fallback = {}) const;
  // nullptr when absent.
  const Tensor* attr_tensor(const std::string& name) const;
  // The subgraph attribute `name`; fails naming the node when absent.
  const Graph& attr_graph(const std::string& name) const;
  // Every subgraph of the node, with its attribute name, in attribute order.
  std::vector<std::pair<std::string, const Graph*>> subgraphs() const;
  // "node 'conv1' (Conv)" for messages.
  std::string label() const;
};

// A node of the default domain with no attributes.
Node make_node(const std::string& name, const std::string& op, std::vector<std::string> inputs,
               std::vector<std::string> outputs);
// n is the operator `op` of the default (ONNX) domain.
inline bool is_op(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }
// An integer attribute holding v, and a list of integers.
Attribute int_attribute(int64_t v);
Attribute ints_attribute(std::vector<int64_t> v);

struct Graph {
  std::vector<Node> nodes;  // topologically sorted after load
  std::vector<ValueDecl> inputs;   // runtime inputs only (initializers removed)
  std::vector<ValueDecl> outputs;
  std::vector<ValueDecl> value_infos;
  std::unordered_map<std::string, Tensor> initializers;
};

struct Model {
  std::string path;
  int64_t ir_version = 0;
  std::string producer;
  std::map<std::string, int64_t> opsets;  // domain -> version ("" is the ONNX domain)
  std::map<std::string, std::string> metadata;  // metadata_props
  Graph graph;
  int64_t opset() const;  // default-domain opset
};

// Orders nodes so that each runs after the producers of its inputs, subgraphs
// included (each recursively; a node also waits for the outer-scope values its
// subgraphs read). `outer` names the values of enclosing graphs a subgraph may read.
// Fails naming a node whose input nothing produces, or a cycle; in a subgraph, the
// message names the node and the subgraph attribute that hold it.
void topo_sort(Graph& g, const std::vector<std::string>& outer = {});

// The values a subgraph reads from enclosing graphs (not its inputs, initializers
// or node outputs), nested subgraphs included, each once in order of first use.
std::vector<std::string> outer_scope_reads(const Graph& g);
// The outer-scope values every subgraph of a node reads: its implicit inputs.
std::vector<std::string> implicit_inputs(const Node& n);

}  // namespace vlrt
