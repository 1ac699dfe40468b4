// vlrt check MODEL --devices cpu,opencl:0 | vlrt check MODEL_A MODEL_B: the first node where two
// runs on the same inputs part ways, and the worst ones.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "exec/compare_runs.h"
#include "integrity/load_model.h"
#include "io/npy.h"

namespace vlrt {

namespace {

struct CheckArgs {
  std::vector<std::string> models;
  std::string devices;
  std::vector<std::string> inputs;
  std::vector<std::string> shapes;
  Tolerance tol;
  std::string precision;
  bool fused = false;
  std::string json;
  int threads = 0;
  int64_t max_loop_iterations = kDefaultMaxLoopIterations;
  bool no_verify_hash = false;
};

// One side of the comparison: a model on a device, in a precision.
struct Side {
  std::string model;
  Device device;
  Precision precision = Precision::fp32;
  std::string label() const {
    return cat(model, " on ", device.str(), precision == Precision::fp32 ? "" : cat(" in ", precision_name(precision)));
  }
};

// --precision A,B (empty: both fp32).
std::pair<Precision, Precision> precisions_of(const std::string& list) {
  if (list.empty()) return {Precision::fp32, Precision::fp32};
  size_t comma = list.find(',');
  std::vector<std::string> names = {list.substr(0, comma)};
  if (comma != std::string::npos) names.push_back(list.substr(comma + 1));
  std::vector<Precision> p;
  for (auto& name : names) {
    std::optional<Precision> parsed = parse_precision(name);
    if (!parsed) fail("--precision: unknown precision '", name, "'; the choices are fp32, fp16 and bf16");
    p.push_back(*parsed);
  }
  if (p.size() != 2) fail("--precision: give the precisions of A and B, e.g. fp32,bf16; got '", list, "'");
  return {p[0], p[1]};
}

// The two sides from the models, --devices and --precision: one model on two devices or in two
// precisions, or two models on one device each (both on the one listed).
std::pair<Side, Side> sides_of(const CheckArgs& a) {
  if (a.models.empty() || a.models.size() > 2)
    fail(
        "give one model and two devices (vlrt check MODEL --devices cpu,opencl:0), one model and two "
        "precisions (vlrt check MODEL --precision fp32,bf16) or two models (vlrt check MODEL_A MODEL_B)");
  auto [pa, pb] = precisions_of(a.precision);
  DeviceArgs listed;
  listed.devices = a.devices.empty() ? "cpu" : a.devices;
  std::vector<Device> devices = plan_options(listed).devices;
  if (devices.size() > 2)
    fail("--devices: give one device for both sides or one for each, got '", a.devices, "'");
  if (a.models.size() == 1 && pa == pb && devices.size() != 2)
    fail("one model is compared across two devices or two precisions: give --devices A,B (e.g. cpu,opencl:0) ",
         "or --precision A,B (e.g. fp32,bf16), got '", listed.devices, "'");
  const std::string& model_b = a.models.back();
  return {{a.models[0], devices.front(), pa}, {model_b, devices.back(), pb}};
}

// Both models must take the same inputs: the same names, dtypes and fixed dims.
void check_same_inputs(const Model& a, const Model& b) {
  auto describe_all = [](const Model& m) {
    std::string s;
    for (auto& d : m.graph.inputs) s += cat(s.empty() ? "" : ", ", d.name, ": ", d.describe());
    return s;
  };
  auto differ = [&](const std::string& what) {
    fail("the models take different inputs (", what, "): ", a.path, " takes ", describe_all(a), "; ", b.path,
         " takes ", describe_all(b), ". vlrt check runs both on the same inputs");
  };
  if (a.graph.inputs.size() != b.graph.inputs.size()) differ("not as many");
  for (auto& da : a.graph.inputs) {
    auto it = std::find_if(b.graph.inputs.begin(), b.graph.inputs.end(),
                           [&](auto& d) { return d.name == da.name; });
    if (it == b.graph.inputs.end()) differ(cat("'", da.name, "' is in the first alone"));
    const ValueDecl& db = *it;
    bool dims_agree = !da.has_shape || !db.has_shape || da.dims.size() == db.dims.size();
    for (size_t i = 0; dims_agree && da.has_shape && db.has_shape && i < da.dims.size(); i++)
      dims_agree = da.dims[i].value < 0 || db.dims[i].value < 0 || da.dims[i].value == db.dims[i].value;
    if (da.dtype != db.dtype || da.kind != db.kind || !dims_agree)
      differ(cat("'", da.name, "' is ", da.describe(), " in one and ", db.describe(), " in the other"));
  }
}

// bf16 on a CPU that multiplies in bf16: computed as `vlrt run --precision bf16` does. fp16, and bf16
// elsewhere, are emulated (every value rounded).
bool bf16_products(const Side& s) {
  return s.precision == Precision::bf16 && s.device.kind == Device{}.kind && bf16_products_available();
}

SessionOptions session_options(const CheckArgs& a, const Side& side) {
  SessionOptions o;
  o.threads = a.threads;
  o.plan.devices = {side.device};
  if (bf16_products(side))
    o.plan.bf16_products = true;
  else
    o.precision = side.precision;
  o.max_loop_iterations = a.max_loop_iterations;
  if (!a.fused) {
    o.fusion = FusionOptions::none();
    o.fuse_qdq = false;
  }
  return o;
}

std::string precision_note(const Side& s, const char* which) {
  if (s.precision == Precision::fp32) return "";
  if (bf16_products(s))
    return cat(which,
               " multiplies in bf16 as vlrt run --precision bf16 does (Conv, MatMul and Gemm round their ",
               "inputs and weights to bf16 and sum in float32); every other value is float32\n");
  return cat(which, " holds its weights and every value a node makes in ", precision_name(s.precision),
             " (rounded after each node; kernels compute in float32)\n");
}

std::string flags_of(const NodeComparison& r, const Side& a, const Side& b) {
  std::string f;
  auto add = [&](const std::string& s) { f += (f.empty() ? "" : " ") + s; };
  if (r.diff.dtype_a != r.diff.dtype_b)
    add(cat("dtype:", dtype_name(r.diff.dtype_a), "/", dtype_name(r.diff.dtype_b)));
  else if (r.diff.shape_a != r.diff.shape_b)
    add(cat("shape:", shape_str(r.diff.shape_a), "/", shape_str(r.diff.shape_b)));
  else if (!r.within)
    add("OVER");
  if (r.diff.nan_a) add("nan-in-A");
  if (r.diff.nan_b) add("nan-in-B");
  if (r.device_a != a.device.str()) add("A-on-" + r.device_a);
  if (r.device_b != b.device.str()) add("B-on-" + r.device_b);
  return f;
}

std::string number(double v, bool comparable) {
  if (!comparable) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

void print_rows(const RunComparison& c, const std::vector<size_t>& which, const Side& a, const Side& b) {
  std::vector<std::vector<std::string>> cells{
      {"#", "node", "op", "output", "shape", "max abs", "max rel", "flags"}};
  for (size_t i : which) {
    const NodeComparison& r = c.rows[i];
    cells.push_back({std::to_string(i + 1), r.node.empty() ? "-" : r.node, r.op_type, r.value,
                     shape_str(r.diff.shape_a), number(r.diff.max_abs, r.diff.comparable),
                     number(r.diff.max_rel, r.diff.comparable), flags_of(r, a, b)});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (auto& row : cells)
    for (size_t k = 0; k < row.size(); k++) width[k] = std::max(width[k], row[k].size());
  for (auto& row : cells) {
    std::string line = " ";
    for (size_t k = 0; k < row.size(); k++) {
      bool right = k == 0 || k == 5 || k == 6;  // the index and the numbers
      std::string pad(width[k] - row[k].size(), ' ');
      line += ' ';
      line += right ? pad + row[k] : row[k] + pad;
    }
    std::cout << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
  }
}

nlohmann::json row_json(const NodeComparison& r, size_t index, const Side& a, const Side& b) {
  nlohmann::json j = {{"index", index + 1},
                      {"node", r.node},
                      {"op", r.op_type},
                      {"output", r.value},
                      {"shape_a", r.diff.shape_a},
                      {"shape_b", r.diff.shape_b},
                      {"dtype_a", dtype_name(r.diff.dtype_a)},
                      {"dtype_b", dtype_name(r.diff.dtype_b)},
                      {"device_a", r.device_a},
                      {"device_b", r.device_b},
                      {"within_tolerance", r.within},
                      {"flags", flags_of(r, a, b)}};
  // JSON has no infinity: an error made infinite by a NaN on one side is written as null.
  auto finite_or_null = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  if (r.diff.comparable) {
    j["max_abs"] = finite_or_null(r.diff.max_abs);
    j["max_rel"] = finite_or_null(r.diff.max_rel);
    j["max_abs_a"] = r.diff.peak_a;
  }
  return j;
}

void write_json(const std::string& path, const CheckArgs& a, const RunComparison& c, const Side& sa,
                const Side& sb) {
  nlohmann::json j = {{"a", {{"model", sa.model}, {"device", sa.device.str()}, {"precision", precision_name(sa.precision)}}},
                      {"b", {{"model", sb.model}, {"device", sb.device.str()}, {"precision", precision_name(sb.precision)}}},
                      {"fused", a.fused},
                      {"atol", a.tol.atol},
                      {"rtol", a.tol.rtol},
                      {"non_tensor_skipped", c.non_tensor_skipped},
                      {"only_in_a", c.only_a},
                      {"only_in_b", c.only_b}};
  j["rows"] = nlohmann::json::array();
  for (size_t i = 0; i < c.rows.size(); i++) j["rows"].push_back(row_json(c.rows[i], i, sa, sb));
  j["first_over"] = c.first_over < 0 ? nlohmann::json()
                                     : row_json(c.rows[size_t(c.first_over)], size_t(c.first_over), sa, sb);
  j["worst"] = nlohmann::json::array();
  for (size_t i : c.worst(10)) j["worst"].push_back(i + 1);
  std::ofstream f(path);
  if (!f) fail("--json: cannot write '", path, "'");
  f << j.dump(2) << "\n";
}

// 0: every value within tolerance; 1: some value is not.
int check(const CheckArgs& a) {
  auto [sa, sb] = sides_of(a);
  TensorMap inputs;
  for (auto& arg : a.inputs) {
    auto [name, path] = parse_name_value(arg, "--input");
    if (inputs.count(name)) fail("input '", name, "' is given twice");
    inputs[name] = read_npy(path);
  }
  LoadOptions load{.verify_hash = !a.no_verify_hash};
  Model model_a = load_model(sa.model, load);
  Model model_b = sa.model == sb.model ? model_a : load_model(sb.model, load);
  if (sa.model != sb.model) check_same_inputs(model_a, model_b);
  size_t given = inputs.size();
  add_random_inputs(model_a, a.shapes, inputs, "--shape");
  Session session_a(std::move(model_a), session_options(a, sa));
  Session session_b(std::move(model_b), session_options(a, sb));
  if (sa.model != sb.model && shared_value_names(session_a.model().graph, session_b.model().graph) == 0)
    fail("the models ", sa.model, " and ", sb.model,
         " have no node output names in common: vlrt check pairs "
         "values by name, so compare a model with a copy made by a tool that keeps the names (a quantizer, "
         "an editor)");

  RunComparison c = compare_runs(session_a, session_b, inputs, a.tol);
  std::cout << "A: " << sa.label() << "\nB: " << sb.label() << "\n"
            << (a.fused ? "fusion on (fused nodes replace the ones they matched)\n"
                        : "fusion off (every node as written; --fused keeps the fusion passes)\n")
            << precision_note(sa, "A") << precision_note(sb, "B") << "inputs: " << given << " given, " << inputs.size() - given << " random (seeded)\n"
            << "tolerance: max|a-b| <= " << a.tol.atol << " + " << a.tol.rtol << " * max|a|\n\n";
  std::vector<size_t> all(c.rows.size());
  for (size_t i = 0; i < all.size(); i++) all[i] = i;
  print_rows(c, all, sa, sb);
  size_t over = 0;
  for (auto& r : c.rows) over += !r.within;
  std::cout << "\ncompared " << c.rows.size() << " values, " << over
            << " out of tolerance; not compared: " << c.non_tensor_skipped << " sequences or optionals, "
            << c.only_a << " made by A alone, " << c.only_b << " by B alone\n";
  if (c.first_over < 0) {
    std::cout << "first out of tolerance: none\n";
  } else {
    const NodeComparison& r = c.rows[size_t(c.first_over)];
    std::cout << "first out of tolerance: #" << c.first_over + 1 << " node '" << r.node << "' (" << r.op_type
              << ") output '" << r.value << "': " << flags_of(r, sa, sb) << ", max abs "
              << number(r.diff.max_abs, r.diff.comparable) << ", max rel "
              << number(r.diff.max_rel, r.diff.comparable) << "\n";
  }
  std::cout << "worst by relative error:\n";
  print_rows(c, c.worst(10), sa, sb);
  if (!a.json.empty()) write_json(a.json, a, c, sa, sb);
  return c.first_over < 0 ? 0 : 1;
}

}  // namespace

void add_check_command(CLI::App& app) {
  static CheckArgs a;
  auto* cmd = app.add_subcommand(
      "check",
      "Run one model on two devices or in two precisions, or two models whose value names match (fp32 and a "
      "quantized or edited "
      "copy), on the same inputs, and compare every intermediate value both runs make: a table in the "
      "topological order of A (node, op, output, shape, max abs error, max relative error, flags), the first "
      "node out of tolerance and the ten worst.\n"
      "max abs = max |a-b| over the elements; max rel = max abs / max |a| (the error relative to the "
      "tensor's largest magnitude, so that one element near zero does not dominate). A value is out of "
      "tolerance (OVER) when max abs > atol + rtol * max |a|, when its shape or dtype differs (a row, "
      "flagged), or when one side has a NaN the other has not.\n"
      "Both sides run with fusion off, so that every node and value name of the model is in the table; "
      "--fused keeps the fusion passes (fused values are then missing or renamed). Nodes folded into "
      "constants at load are not rows. Sequences and optionals are counted, not compared.\n"
      "The first run's values wait for the second's in memory up to 2 GiB, the others in a temporary "
      "file in $TMPDIR (else /tmp) that is removed at exit: a large model's unfused values can take "
      "tens of GiB of disk there.\n"
      "Exit code: 0 every value within tolerance, 1 some value out of tolerance, 2 a usage or model error.");
  cmd->add_option("models", a.models, "MODEL (with --devices A,B) or MODEL_A MODEL_B")->expected(1, 2);
  cmd->add_option("--devices", a.devices,
                  "one model: the two devices to compare, e.g. cpu,opencl:0; two models: the device of both "
                  "(default cpu) or one for each");
  cmd->add_option("-i,--input", a.inputs,
                  "NAME=FILE.npy; inputs not given are random (seeded, as vlrt bench)");
  cmd->add_option("--shape", a.shapes,
                  "NAME=SHAPE (e.g. images=1x3x224x224) for random inputs with dynamic dims");
  cmd->add_option("--atol", a.tol.atol, "absolute tolerance")->capture_default_str();
  cmd->add_option("--rtol", a.tol.rtol, "relative tolerance (times max |a| of the value)")
      ->capture_default_str();
  cmd->add_option(
      "--precision", a.precision,
      "precisions of A and B, e.g. fp32,bf16 or fp32,fp16 (CPU devices). bf16 on a CPU with "
      "AVX512-BF16: what vlrt run --precision bf16 computes (Conv, MatMul and Gemm in bf16, float32 "
      "sums). fp16, and bf16 elsewhere: the side rounds its weights and every value a node makes to "
      "that type, computing in float32");
  cmd->add_flag("--fused", a.fused,
                "keep the fusion passes on (default: off, so that every node is compared)");
  cmd->add_option("--json", a.json,
                  "also write the table, the first node out of tolerance and the worst as JSON");
  cmd->add_option("-t,--threads", a.threads, "worker threads (default: all cores)");
  add_loop_limit_option(cmd, a.max_loop_iterations);
  cmd->add_flag("--no-verify-hash", a.no_verify_hash, "check only sizes against the model's manifest");
  cmd->callback(comparing_command([] { return check(a); }));
}

}  // namespace vlrt
