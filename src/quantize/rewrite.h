// What the precision rewrites (dynamic_int8.h, half.h) share: the nodes left alone
// (--exclude), refusing models that are already quantized, fresh value names, and the
// report printed by `vlrt quantize`.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/graph.h"

namespace vlrt {

struct QuantizeReport {
  std::map<std::string, int> rewritten;  // op type -> nodes rewritten
  int64_t weight_bytes_before = 0;       // initializers, all of them
  int64_t weight_bytes_after = 0;
};

// Node names and op types to leave as they are. Fails naming an entry that matches no
// node and no op type of the graph (subgraphs included).
class Exclusions {
 public:
  Exclusions(const Graph& g, const std::vector<std::string>& names_or_ops);
  bool excludes(const Node& n) const { return names_.count(n.name) || ops_.count(n.op_type); }

 private:
  std::set<std::string> names_;
  std::set<std::string> ops_;
};

// Fails when the graph already holds quantized ops (QuantizeLinear, DynamicQuantizeLinear,
// MatMulInteger, ConvInteger, QLinear*, ...), naming the first one; `mode` ("int8",
// "fp16") goes in the message.
void refuse_quantized(const Graph& g, const std::string& mode);

// Bytes of every initializer of the graph.
int64_t initializer_bytes(const Graph& g);

// Names not yet used by any value, node or initializer of the graph (subgraphs included):
// `base` itself when free, else base_1, base_2, ...
class NameGenerator {
 public:
  explicit NameGenerator(const Graph& g);
  std::string fresh(const std::string& base);

 private:
  std::unordered_set<std::string> used_;
};

// How many nodes read each value: top-level inputs, plus one for each node whose
// subgraphs read it from the enclosing graph, plus one for a graph output.
std::unordered_map<std::string, int> count_readers(const Graph& g);

// A Cast node to `to`.
Node make_cast(const std::string& name, const std::string& input, const std::string& output, DType to);

}  // namespace vlrt
