// vlrt verify MODEL: check a model's files against its manifest, or write the manifest.
#include <iostream>

#include "apps/commands.h"
#include "integrity/load_model.h"
#include "integrity/manifest.h"
#include "load/onnx_loader.h"

namespace vlrt {

namespace {

struct VerifyArgs {
  std::string model;
  std::string vocab;
  bool write = false;
};

void write(const VerifyArgs& a) {
  Manifest m = write_manifest(a.model, a.vocab);
  std::cout << "wrote " << manifest_path(a.model) << "\n";
  for (auto& f : m.files) std::cout << "  " << f.sha256 << "  " << f.path << " (" << f.size << " bytes)\n";
}

void verify(const VerifyArgs& a) {
  VerifyReport r = verify_manifest(a.model);
  if (!r.found) {
    std::cout << "no manifest (" << r.manifest << "): checking the structure only; write one from known-good "
              << "files with `vlrt verify --write " << a.model << "`\n";
  } else if (!r.other_model.empty()) {
    fail(a.model, ": ", r.problems());
  } else {
    std::cout << "manifest: " << r.manifest << "\n";
    for (auto& f : r.files) std::cout << "  " << f.describe() << "\n";
    if (!r.ok()) fail(a.model, ": ", r.problems(false));
  }
  // The files are the ones published (or there is no manifest); the loader checks the rest.
  Model m = load_onnx(a.model);
  check_initializers_finite(m);
  int64_t params = 0;
  for (auto& [name, t] : m.graph.initializers) params += t.numel();
  std::cout << "structure: OK (" << m.graph.nodes.size() << " nodes, " << m.graph.initializers.size()
            << " initializers, " << params << " parameters, none all NaN/Inf)\n";
}

}  // namespace

void add_verify_command(CLI::App& app) {
  static VerifyArgs a;
  auto* cmd = app.add_subcommand(
      "verify",
      "Check a model's files (size, SHA-256) against MODEL.manifest.json, or write it with --write");
  cmd->add_option("model", a.model, "ONNX model file")->required();
  cmd->add_flag("--write", a.write, "write MODEL.manifest.json for the model, its external data and vocab");
  cmd->add_option("--vocab", a.vocab,
                  "vocab file to list in the manifest (default: vocab.txt beside the model)")
      ->needs("--write");
  cmd->callback([] { a.write ? write(a) : verify(a); });
}

}  // namespace vlrt
