// vlrt info MODEL: what a model declares and whether vlrt can run it.
#include <functional>
#include <iostream>

#include "apps/commands.h"
#include "backends/backend.h"
#include "integrity/load_model.h"
#include "ops/op_schema.h"
#include "passes/export_lint.h"

namespace vlrt {

namespace {

// Shape constants holding the export-time size of a dynamic dimension (passes/export_lint.h).
void print_export_lint(const ExportLintReport& lint) {
  if (lint.findings.empty() && lint.notes.empty()) {
    std::cout << "export lint: no baked sizes (each dynamic dimension probed at two sizes)\n";
    return;
  }
  for (auto& f : lint.findings) std::cout << "\nwarning: baked size: " << f.message << "\n";
  for (auto& n : lint.notes) std::cout << "\nexport lint: " << n << "\n";
}

void print_info(const std::string& path) {
  Model m = load_model(path);
  std::cout << "model:     " << path << "\n";
  std::cout << "ir:        " << m.ir_version << (m.producer.empty() ? "" : "  producer: " + m.producer) << "\n";
  std::cout << "opsets:   ";
  for (auto& [domain, v] : m.opsets) std::cout << " " << (domain.empty() ? "ai.onnx" : domain) << "=" << v;
  std::cout << "\n\ninputs:\n";
  for (auto& v : m.graph.inputs) std::cout << "  " << v.name << ": " << v.describe() << "\n";
  std::cout << "outputs:\n";
  for (auto& v : m.graph.outputs) std::cout << "  " << v.name << ": " << v.describe() << "\n";

  int64_t params = 0;
  size_t bytes = 0;
  for (auto& [name, t] : m.graph.initializers) {
    params += t.numel();
    bytes += t.nbytes();
  }
  std::cout << "\nparameters: " << params << " (" << human_bytes(double(bytes)) << " in "
            << m.graph.initializers.size() << " initializers)\n";

  // An op is supported when the CPU (the reference every model must run on) has a kernel.
  std::shared_ptr<Backend> cpu = create_backend(Device{}, 1);
  std::map<std::string, int> histogram;
  std::map<std::string, int> missing;
  std::vector<std::string> subgraph_lines;
  size_t nested_nodes = 0;
  // Subgraph nodes (If branches, Loop and Scan bodies) count like any other.
  std::function<void(const Graph&, int)> count = [&](const Graph& g, int depth) {
    for (auto& n : g.nodes) {
      std::string key = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
      histogram[key]++;
      if (depth > 0) nested_nodes++;
      const OpSchema* schema = find_schema(n.domain, n.op_type);
      bool control_flow = schema && schema->control_flow;
      if (!schema || (!control_flow && !cpu->supports(n, {}, nullptr))) missing[key]++;
      for (auto& [attr, sub] : n.subgraphs()) {
        std::map<std::string, int> ops;
        for (auto& inner : sub->nodes) ops[inner.op_type]++;
        std::string line = cat(std::string(size_t(2 + 2 * depth), ' '), n.name, " (", n.op_type, ") ", attr, ":");
        for (auto& [op, k] : ops) line += cat(" ", op, " ", k);
        subgraph_lines.push_back(line);
        count(*sub, depth + 1);
      }
    }
  };
  count(m.graph, 0);
  std::cout << "nodes:      " << m.graph.nodes.size();
  if (nested_nodes) std::cout << " (and " << nested_nodes << " in subgraphs, counted below)";
  std::cout << "\n";
  std::vector<std::pair<int, std::string>> sorted;
  for (auto& [op, n] : histogram) sorted.push_back({-n, op});
  std::sort(sorted.begin(), sorted.end());
  for (auto& [n, op] : sorted) std::cout << "  " << op << std::string(op.size() < 24 ? 24 - op.size() : 1, ' ') << -n << "\n";
  if (!subgraph_lines.empty()) {
    std::cout << "\nsubgraphs:\n";
    for (auto& line : subgraph_lines) std::cout << line << "\n";
  }
  if (missing.empty()) {
    std::cout << "\nunsupported ops: none (every node has a CPU kernel)\n";
  } else {
    std::cout << "\nunsupported ops:";
    for (auto& [op, n] : missing) std::cout << " " << op << " (" << n << " nodes)";
    std::cout << "\n";
  }
  print_export_lint(lint_baked_sizes(m, *cpu));
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show a model's inputs, outputs, opset, op histogram, parameters and unsupported ops");
  static std::string model;
  cmd->add_option("model", model, "ONNX model file")->required();
  cmd->callback([] { print_info(model); });
}

}  // namespace vlrt
