// vlrt conformance DIR: runs the ONNX backend node tests found under DIR and
// compares every output with the expected one.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "apps/commands.h"
#include "exec/session.h"
#include "io/files.h"
#include "load/onnx_loader.h"

namespace vlrt {

namespace fs = std::filesystem;

namespace {

struct ConformanceArgs {
  std::string dir;
  std::string filter;
  bool verbose = false;
  int threads = 2;
  double rtol = 1e-3;
  double atol = 1e-7;
  double min_pass_rate = 0;
};

enum class Outcome { passed, failed, skipped };

// Empty when equal within tolerance, else why not.
std::string compare(const std::string& name, const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  if (actual.dtype() != expected.dtype())
    return cat("output '", name, "' is ", actual.describe(), ", expected ", expected.describe());
  if (actual.shape() != expected.shape())
    return cat("output '", name, "' has shape ", shape_str(actual.shape()), ", expected ", shape_str(expected.shape()));
  std::vector<double> a = actual.to_double_vector(), e = expected.to_double_vector();
  bool exact = !dtype_is_float(expected.dtype());
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < a.size(); i++) {
    bool ok;
    if (std::isnan(e[i])) ok = std::isnan(a[i]);
    else if (std::isinf(e[i])) ok = a[i] == e[i];
    else if (exact) ok = a[i] == e[i];
    else ok = std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]);
    if (!ok) {
      if (!bad) first = i;
      bad++;
      worst = std::max(worst, std::abs(a[i] - e[i]));
    }
  }
  if (!bad) return "";
  return cat("output '", name, "': ", bad, " of ", a.size(), " values differ (first at index ", first, ": got ",
             a[first], ", expected ", e[first], "; max abs error ", worst, ")");
}

// compare() for any value kind: a sequence or an optional matches when its tensors do.
std::string compare_value(const std::string& name, const Tensor& actual, const Tensor& expected, double rtol,
                          double atol) {
  if (actual.kind() != expected.kind())
    return cat("output '", name, "' is ", actual.describe(), ", expected ", expected.describe());
  if (expected.is_tensor()) return compare(name, actual, expected, rtol, atol);
  if (actual.dtype() != expected.dtype() || actual.elements().size() != expected.elements().size())
    return cat("output '", name, "' is ", actual.describe(), ", expected ", expected.describe());
  for (size_t i = 0; i < expected.elements().size(); i++) {
    std::string why = compare_value(cat(name, "[", i, "]"), actual.elements()[i], expected.elements()[i], rtol, atol);
    if (!why.empty()) return why;
  }
  return "";
}

// The suite stores bfloat16 data as uint16 with the same bits.
Tensor as_declared_type(const Tensor& t, DType declared) {
  if (t.dtype() == DType::u16 && declared == DType::bf16) return Tensor(DType::bf16, t.shape(), t.buffer(), t.offset());
  return t;
}

// A value file of the suite: a TensorProto, or for a sequence or an optional declaration
// a SequenceProto or an OptionalProto. Files are in declaration order; a TensorProto
// names its value, which then wins.
std::pair<std::string, Tensor> read_value_file(const fs::path& file, const std::vector<ValueDecl>& declared, size_t i) {
  const ValueDecl* by_index = i < declared.size() ? &declared[i] : nullptr;
  ValueKind kind = by_index ? by_index->kind : ValueKind::tensor;
  std::string name;
  Tensor t = parse_value_proto(read_file(file.string()), kind, by_index ? by_index->dtype : DType::undefined,
                               file.parent_path().string(), &name);
  if (name.empty() && by_index) name = by_index->name;
  for (auto& d : declared)
    if (d.name == name) t = as_declared_type(t, d.dtype);
  return {name, t};
}

std::vector<std::string> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && e.path().extension() == ".pb") files.push_back(n);
  }
  // input_10.pb sorts after input_9.pb
  std::sort(files.begin(), files.end(), [&](const std::string& x, const std::string& y) {
    return std::stoi(x.substr(prefix.size())) < std::stoi(y.substr(prefix.size()));
  });
  return files;
}

Outcome run_case(const fs::path& dir, const ConformanceArgs& a, std::string& reason) {
  try {
    Model model = load_onnx((dir / "model.onnx").string());
    for (auto& v : model.graph.inputs)
      if (v.dtype == DType::undefined) {
        reason = cat("input '", v.name, "' is not a tensor, a sequence or an optional of a supported type");
        return Outcome::skipped;
      }
    for (auto& v : model.graph.outputs)
      if (v.dtype == DType::undefined) {
        reason = cat("output '", v.name, "' is not a tensor, a sequence or an optional of a supported type");
        return Outcome::skipped;
      }
    std::vector<ValueDecl> declared_inputs = model.graph.inputs;
    std::vector<ValueDecl> declared_outputs = model.graph.outputs;
    SessionOptions options;
    options.threads = a.threads;
    options.check_declared_shapes = false;  // the test data is the truth
    Session session(std::move(model), options);
    std::vector<fs::path> sets;
    for (auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) {
      reason = "no test_data_set_* folder";
      return Outcome::failed;
    }
    for (auto& set : sets) {
      TensorMap inputs;
      auto in_files = sorted_files(set, "input_");
      for (size_t i = 0; i < in_files.size(); i++) {
        auto [name, t] = read_value_file(set / in_files[i], declared_inputs, i);
        inputs[name] = t;
      }
      TensorMap outputs = session.run(inputs);
      auto out_files = sorted_files(set, "output_");
      for (size_t i = 0; i < out_files.size(); i++) {
        auto [name, expected] = read_value_file(set / out_files[i], declared_outputs, i);
        auto it = outputs.find(name);
        if (it == outputs.end()) {
          reason = cat("no output named '", name, "'");
          return Outcome::failed;
        }
        reason = compare_value(name, it->second, expected, a.rtol, a.atol);
        if (!reason.empty()) return Outcome::failed;
      }
    }
    return Outcome::passed;
  } catch (const Unsupported& e) {
    reason = e.what();
    return Outcome::skipped;
  } catch (const Error& e) {
    reason = e.what();
    return Outcome::failed;
  }
}

void conformance(const ConformanceArgs& a) {
  if (!fs::is_directory(a.dir)) fail(a.dir, ": not a directory (expected the ONNX node test folder)");
  std::vector<fs::path> cases;
  for (auto& e : fs::directory_iterator(a.dir))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
        e.path().filename().string().find(a.filter) != std::string::npos)
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  if (cases.empty()) fail(a.dir, ": no test folders (each with a model.onnx) found",
                          a.filter.empty() ? "" : cat(" matching '", a.filter, "'"));
  int passed = 0, failed = 0, skipped = 0;
  for (auto& c : cases) {
    std::string reason;
    Outcome o = run_case(c, a, reason);
    std::string name = c.filename().string();
    if (o == Outcome::passed) {
      passed++;
      if (a.verbose) std::cout << "PASS " << name << "\n";
    } else if (o == Outcome::failed) {
      failed++;
      std::cout << "FAIL " << name << ": " << reason << "\n";
    } else {
      skipped++;
      if (a.verbose) std::cout << "SKIP " << name << ": " << reason << "\n";
    }
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  if (failed) throw Error(cat(failed, " conformance tests failed"));
  double rate = double(passed) / double(cases.size());
  if (rate < a.min_pass_rate)
    fail("passed ", passed, " of ", cases.size(), " tests (", rate * 100, "%), below the required ",
         a.min_pass_rate * 100, "%");
}

}  // namespace

void add_conformance_command(CLI::App& app) {
  static ConformanceArgs a;
  auto* cmd = app.add_subcommand("conformance",
                                 "Run ONNX backend node tests (folders with model.onnx and test_data_set_*) and "
                                 "compare outputs; skipped = op or type vlrt does not implement");
  cmd->add_option("dir", a.dir, "folder of test folders, e.g. the node tests of libonnx-testdata")->required();
  cmd->add_option("-f,--filter", a.filter, "only tests whose folder name contains this");
  cmd->add_flag("-v,--verbose", a.verbose, "also list passed and skipped tests with the reason");
  cmd->add_option("-t,--threads", a.threads, "worker threads");
  cmd->add_option("--rtol", a.rtol, "relative tolerance (default 1e-3)");
  cmd->add_option("--atol", a.atol, "absolute tolerance (default 1e-7)");
  cmd->add_option("--min-pass-rate", a.min_pass_rate, "fail unless this fraction of all tests passed (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->callback([] { conformance(a); });
}

}  // namespace vlrt
