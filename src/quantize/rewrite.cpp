#include "quantize/rewrite.h"

#include <fnmatch.h>

namespace vlrt {

namespace {

void collect_names(const Graph& g, std::set<std::string>& nodes, std::set<std::string>& ops) {
  for (const Node& n : g.nodes) {
    nodes.insert(n.name);
    ops.insert(n.op_type);
    for (auto& [attr, sub] : n.subgraphs()) collect_names(*sub, nodes, ops);
  }
}

bool is_quantized_op(const Node& n) {
  static const std::set<std::string> ops = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                                            "MatMulInteger", "ConvInteger", "DynamicQuantizeMatMul",
                                            "MatMulIntegerToFloat", "QGemm", "QAttention", "DynamicQuantizeLSTM"};
  return ops.count(n.op_type) || n.op_type.rfind("QLinear", 0) == 0;
}

const Node* find_quantized(const Graph& g) {
  for (const Node& n : g.nodes) {
    if (is_quantized_op(n)) return &n;
    for (auto& [attr, sub] : n.subgraphs())
      if (const Node* q = find_quantized(*sub)) return q;
  }
  return nullptr;
}

void collect_used(const Graph& g, std::unordered_set<std::string>& used) {
  for (const ValueDecl& v : g.inputs) used.insert(v.name);
  for (const ValueDecl& v : g.outputs) used.insert(v.name);
  for (const ValueDecl& v : g.value_infos) used.insert(v.name);
  for (const auto& [name, t] : g.initializers) used.insert(name);
  for (const Node& n : g.nodes) {
    used.insert(n.name);
    used.insert(n.inputs.begin(), n.inputs.end());
    used.insert(n.outputs.begin(), n.outputs.end());
    for (auto& [attr, sub] : n.subgraphs()) collect_used(*sub, used);
  }
}

}  // namespace

Exclusions::Exclusions(const Graph& g, const std::vector<std::string>& names_or_ops) {
  std::set<std::string> nodes, ops;
  collect_names(g, nodes, ops);
  for (const std::string& e : names_or_ops) {
    if (e.find_first_of("*?[") != std::string::npos) {  // a pattern of node names, e.g. "/bert/*"
      size_t before = names_.size();
      for (const std::string& name : nodes)
        if (fnmatch(e.c_str(), name.c_str(), 0) == 0) names_.insert(name);
      if (names_.size() == before)
        fail("--exclude '", e, "' matches no node name of the model (`vlrt info MODEL` lists them)");
      continue;
    }
    bool node = nodes.count(e) != 0, op = ops.count(e) != 0;
    if (!node && !op)
      fail("--exclude '", e, "' matches no node name and no op type of the model (`vlrt info MODEL` lists them)");
    if (node) names_.insert(e);
    if (op) ops_.insert(e);
  }
}

void refuse_quantized(const Graph& g, const std::string& mode) {
  if (const Node* q = find_quantized(g))
    fail("the model is already quantized (", q->label(), "): converting it to ", mode,
         " again would lose accuracy twice; start from the float32 model");
}

int64_t initializer_bytes(const Graph& g) {
  int64_t bytes = 0;
  for (const auto& [name, t] : g.initializers) bytes += int64_t(t.nbytes());
  return bytes;
}

NameGenerator::NameGenerator(const Graph& g) { collect_used(g, used_); }

std::string NameGenerator::fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; used_.count(name); i++) name = base + "_" + std::to_string(i);
  used_.insert(name);
  return name;
}

std::unordered_map<std::string, int> count_readers(const Graph& g) {
  std::unordered_map<std::string, int> readers;
  for (const Node& n : g.nodes) {
    for (const std::string& in : n.inputs)
      if (!in.empty()) readers[in]++;
    for (const std::string& outer : implicit_inputs(n)) readers[outer]++;
  }
  for (const ValueDecl& v : g.outputs) readers[v.name]++;
  return readers;
}

Node make_cast(const std::string& name, const std::string& input, const std::string& output, DType to) {
  Node n;
  n.name = name;
  n.op_type = "Cast";
  n.inputs = {input};
  n.outputs = {output};
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = int64_t(to);
  n.attrs["to"] = a;
  return n;
}

}  // namespace vlrt
