// Option parsing and formatting shared by the commands.
#include <cstdio>
#include <iostream>
#include <random>

#include "apps/commands.h"
#include "backends/backend.h"
#include "core/dispatch.h"
#include "core/error.h"

namespace vlrt {

std::pair<std::string, std::string> parse_name_value(const std::string& arg, const char* what) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    fail("expected ", what, " as NAME=VALUE, got '", arg, "'");
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

std::pair<std::string, Shape> parse_shape_arg(const std::string& arg) {
  auto [name, spec] = parse_name_value(arg, "an input shape");
  Shape shape;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t next = spec.find_first_of("x,", pos);
    std::string tok = spec.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    try {
      size_t used = 0;
      long long v = std::stoll(tok, &used);
      if (used != tok.size() || v < 0) throw std::invalid_argument(tok);
      shape.push_back(v);
    } catch (const std::exception&) {
      fail("bad dimension '", tok, "' in shape '", spec, "' for input '", name, "' (expected e.g. 1x3x224x224)");
    }
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return {name, shape};
}

void add_device_options(CLI::App* cmd, DeviceArgs& args) {
  cmd->add_option("--devices", args.devices,
                  "devices in order of preference, e.g. opencl:0,cpu; a node goes to the first that can run it "
                  "(cpu:1 is a simulated second CPU device)")
      ->capture_default_str();
  cmd->add_option("--memory", args.memory,
                  "DEVICE=SIZE caps a device's memory (e.g. opencl:0=2GiB); the model is split across the "
                  "listed devices when it does not fit");
  cmd->add_option(
         "--precision", args.precision,
         "fp32, or bf16: on a CPU with AVX512-BF16, Conv, MatMul and Gemm with constant weights multiply "
         "in bfloat16 with float32 sums, their weights held in bfloat16 (half the bytes); elsewhere they "
         "stay float32, with a warning. Other ops and all values between nodes stay float32")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
}

void add_loop_limit_option(CLI::App* cmd, int64_t& max_loop_iterations) {
  cmd->add_option("--max-loop-iterations", max_loop_iterations,
                  "the most iterations a Loop in the model may run: a larger trip count is refused before "
                  "running, a longer conditional loop is stopped (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

bool bf16_products_available() {
  static const bool available = create_backend(Device{}, 1)->use_bf16_products(true);
  return available;
}

PlanOptions plan_options(const DeviceArgs& args) {
  PlanOptions o;
  o.devices.clear();
  size_t pos = 0;
  while (pos <= args.devices.size()) {
    size_t comma = args.devices.find(',', pos);
    std::string d = args.devices.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!d.empty()) {
      Device dev = parse_device(d);
      for (auto& seen : o.devices)
        if (seen == dev) fail("--devices lists ", d, " twice");
      o.devices.push_back(dev);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (o.devices.empty()) fail("--devices is empty; give e.g. --devices cpu");
  for (auto& m : args.memory) {
    auto [dev, bytes] = parse_memory_cap(m);
    o.memory_caps[parse_device(dev).str()] = bytes;
  }
  o.bf16_products = args.precision == "bf16";
  if (o.bf16_products) {
    bool cpu_listed = false;
    for (auto& d : o.devices) cpu_listed = cpu_listed || d.kind == Device{}.kind;
    if (!cpu_listed)
      fail("--precision bf16 chooses the CPU's kernels; --devices ", args.devices, " lists no cpu");
    if (!bf16_products_available())
      std::cerr << "warning: --precision bf16: this CPU has no bfloat16 kernels (they need AVX512-BF16), or "
                   "VLRT_REFERENCE_KERNELS is set; Conv, MatMul and Gemm compute in float32\n";
  }
  return o;
}

std::map<std::string, std::pair<DType, Shape>> input_signature(const Model& model,
                                                               const std::vector<std::string>& shape_args,
                                                               const char* shape_option) {
  std::map<std::string, Shape> given;
  for (auto& s : shape_args) {
    auto [name, shape] = parse_shape_arg(s);
    bool known = false;
    for (auto& d : model.graph.inputs) known = known || d.name == name;
    if (!known) fail(shape_option, " ", name, ": the model has no input of that name");
    given[name] = shape;
  }
  std::map<std::string, std::pair<DType, Shape>> sig;
  for (auto& d : model.graph.inputs) {
    if (d.kind != ValueKind::tensor)
      unsupported("input '", d.name, "' is a ", d.describe(), "; planning from shapes alone takes tensor inputs only");
    Shape shape;
    if (given.count(d.name)) {
      shape = given[d.name];
    } else {
      if (!d.has_shape)
        fail("input '", d.name, "' has no declared shape; give it with ", shape_option, " ", d.name, "=1x...");
      for (auto& dim : d.dims) {
        if (dim.value < 0)
          fail("input '", d.name, "' is ", d.describe(), "; give its shape with ", shape_option, " ", d.name, "=1x...");
        shape.push_back(dim.value);
      }
    }
    sig[d.name] = {d.dtype, shape};
  }
  return sig;
}

namespace {

// Random values for one input: floats in [-1, 1), integers 0 or 1 (valid ids, positions,
// token types and masks of text models), bool masks all true.
Tensor random_input(DType dtype, const Shape& shape, std::mt19937& rng) {
  Tensor t(dtype, shape);
  if (dtype == DType::boolean) {
    std::fill_n(t.data<bool>(), t.numel(), true);
  } else if (dtype == DType::f16) {
    std::uniform_real_distribution<float> d(-1, 1);
    auto p = static_cast<uint16_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); i++) p[i] = float_to_half(d(rng));
  } else {
    dispatch_numeric(dtype, [&]<class T>() {
      T* p = t.data<T>();
      if constexpr (std::is_floating_point_v<T>) {
        std::uniform_real_distribution<double> d(-1, 1);
        for (int64_t i = 0; i < t.numel(); i++) p[i] = T(d(rng));
      } else {
        std::uniform_int_distribution<int> d(0, 1);
        for (int64_t i = 0; i < t.numel(); i++) p[i] = T(d(rng));
      }
    });
  }
  return t;
}

}  // namespace

void add_random_inputs(const Model& model, const std::vector<std::string>& shape_args, TensorMap& inputs,
                       const char* shape_option) {
  std::mt19937 rng(1234);
  std::vector<std::string> shapes = shape_args;
  for (auto& [name, t] : inputs) {  // the values' shapes, in --input's NAMExSHAPE form
    std::string spec;
    for (int64_t d : t.shape()) spec += cat(spec.empty() ? "" : "x", d);
    if (!spec.empty()) shapes.push_back(name + "=" + spec);
  }
  for (auto& [name, ds] : input_signature(model, shapes, shape_option))
    if (!inputs.count(name)) inputs[name] = random_input(ds.first, ds.second, rng);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    u++;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::function<void()> comparing_command(std::function<int()> compare) {
  return [compare] {
    int rc = 0;
    try {
      rc = compare();
    } catch (const Error& e) {
      std::cerr << "error: " << e.what() << "\n";
      rc = 2;
    }
    if (rc) throw CLI::RuntimeError(rc);
  };
}

}  // namespace vlrt
