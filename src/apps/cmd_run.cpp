// vlrt run MODEL --input NAME=FILE.npy ... --output-dir DIR
#include <filesystem>
#include <iostream>

#include "apps/commands.h"
#include "exec/session.h"
#include "integrity/load_model.h"
#include "io/npy.h"

namespace vlrt {

namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  int threads = 0;
  DeviceArgs device_args;
  int64_t max_loop_iterations = kDefaultMaxLoopIterations;
  bool no_verify_hash = false;
};

// A short look at a tensor: dtype, shape, a few values and the range.
std::string summarize(const Tensor& t) {
  std::vector<double> v = t.to_double_vector();
  std::string s = t.describe();
  if (v.empty()) return s;
  double lo = v[0], hi = v[0];
  for (double x : v) lo = std::min(lo, x), hi = std::max(hi, x);
  s += cat("  min ", lo, " max ", hi, "  [");
  for (size_t i = 0; i < std::min<size_t>(v.size(), 6); i++) s += cat(i ? ", " : "", v[i]);
  return s + (v.size() > 6 ? ", ...]" : "]");
}

void run(const RunArgs& a) {
  TensorMap inputs;
  for (auto& arg : a.inputs) {
    auto [name, path] = parse_name_value(arg, "--input");
    if (inputs.count(name)) fail("input '", name, "' is given twice");
    inputs[name] = read_npy(path);
  }
  SessionOptions options;
  options.threads = a.threads;
  options.plan = plan_options(a.device_args);
  options.max_loop_iterations = a.max_loop_iterations;
  Session session(load_model(a.model, {.verify_hash = !a.no_verify_hash}), options);
  for (auto& d : session.model().graph.inputs)
    if (d.kind != ValueKind::tensor)
      unsupported("input '", d.name, "' is a ", d.describe(), "; `vlrt run` reads tensors from .npy files and "
                  "cannot take a sequence or an optional input");
  TensorMap outputs = session.run(inputs);
  const Plan& plan = session.plan(signature_of(inputs));
  std::string placement;
  for (auto& dp : plan.devices)
    if (dp.nodes) placement += cat(placement.empty() ? "" : ", ", dp.device.str(), " ", dp.nodes, " nodes");
  std::cout << "ran on " << placement << "; transfers: " << plan.transfers.size() << " planned, "
            << session.executor().transfers_executed() << " executed\n";
  if (!a.output_dir.empty()) std::filesystem::create_directories(a.output_dir);
  for (auto& [name, t] : outputs) {
    std::cout << name << ": " << summarize(t) << "\n";
    if (!a.output_dir.empty()) {
      std::string file = name;
      for (char& c : file)
        if (c == '/' || c == '\\' || c == ':') c = '_';
      // A sequence (or an optional) is written as one file per tensor it holds: NAME_0.npy, ...
      std::vector<Tensor> parts = t.is_tensor() ? std::vector<Tensor>{t} : t.elements();
      if (t.kind() == ValueKind::optional_sequence && !parts.empty()) parts = parts[0].elements();
      for (size_t k = 0; k < parts.size(); k++) {
        std::string stem = t.is_tensor() ? file : cat(file, "_", k);
        std::string path = (std::filesystem::path(a.output_dir) / (stem + ".npy")).string();
        write_npy(path, parts[k]);
        std::cout << "  -> " << path << "\n";
      }
    }
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  static RunArgs a;
  auto* cmd = app.add_subcommand("run", "Run a model once on inputs from .npy files and write each output as .npy");
  cmd->add_option("model", a.model, "ONNX model file")->required();
  cmd->add_option("-i,--input", a.inputs, "NAME=FILE.npy for each model input");
  cmd->add_option("-o,--output-dir", a.output_dir, "write each output as DIR/OUTPUTNAME.npy");
  cmd->add_option("-t,--threads", a.threads, "worker threads (default: all cores)");
  add_device_options(cmd, a.device_args);
  add_loop_limit_option(cmd, a.max_loop_iterations);
  cmd->add_flag("--no-verify-hash", a.no_verify_hash, "check only sizes against the model's manifest");
  cmd->callback([] { run(a); });
}

}  // namespace vlrt
