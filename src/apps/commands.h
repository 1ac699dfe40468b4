// Subcommands of the vlrt program; each file registers one.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "exec/executor.h"
#include "graph/graph.h"
#include "passes/fusion.h"
#include "plan/batch.h"
#include "plan/plan.h"

namespace vlrt {

void add_info_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_conformance_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_detect_command(CLI::App& app);
void add_segment_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_tag_command(CLI::App& app);
void add_label_command(CLI::App& app);
void add_verify_command(CLI::App& app);
void add_fetch_command(CLI::App& app);
void add_doctor_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_loadtest_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_check_dynamic_command(CLI::App& app);
void add_quantize_command(CLI::App& app);

// --devices and --memory, shared by run, bench and plan.
struct DeviceArgs {
  std::string devices = "cpu";
  std::vector<std::string> memory;
  std::string precision = "fp32";  // fp32 or bf16 (PlanOptions::bf16_products)
};
void add_device_options(CLI::App* cmd, DeviceArgs& args);
// --max-loop-iterations N: the most iterations a model's Loop may run (0: no limit).
void add_loop_limit_option(CLI::App* cmd, int64_t& max_loop_iterations);
PlanOptions plan_options(const DeviceArgs& args);
// Whether the CPU backend multiplies in bfloat16 here (PlanOptions::bf16_products): AVX512-BF16,
// and not VLRT_REFERENCE_KERNELS=1.
bool bf16_products_available();

// "NAME=1x3x224x224" or "NAME=1,3,224,224" -> name and shape.
std::pair<std::string, Shape> parse_shape_arg(const std::string& arg);
// Input dtypes and shapes: declared fixed dims, with NAME=SHAPE arguments for the
// rest; fails naming an input whose dynamic dims are not given (and `shape_option`, the
// command's option for NAME=SHAPE).
std::map<std::string, std::pair<DType, Shape>> input_signature(const Model& model,
                                                               const std::vector<std::string>& shape_args,
                                                               const char* shape_option = "--input");
// Fills every model input missing from `inputs` with seeded random values (the same on every
// call): floats in [-1, 1), integers 0 or 1, bools true. Shapes: the given values' shapes, then
// NAME=SHAPE arguments, then the declared fixed dims (`vlrt bench` and `vlrt check`).
// The callback of a command that compares (check, check-dynamic): `compare` returns 0 (agree) or
// 1 (differ); a vlrt error is printed and exits 2, so that 1 keeps meaning "the values differ".
std::function<void()> comparing_command(std::function<int()> compare);
void add_random_inputs(const Model& model, const std::vector<std::string>& shape_args, TensorMap& inputs,
                       const char* shape_option = "--input");
// "NAME=path" -> name and path.
std::pair<std::string, std::string> parse_name_value(const std::string& arg, const char* what);
// The plan as `vlrt plan --json` prints it (and Python's InferenceSession.plan() returns it).
nlohmann::json plan_json(const std::string& model, const std::map<std::string, std::pair<DType, Shape>>& sig,
                         const Plan& plan, const BatchSizing& batches, const FusionReport& fused);
// "12.3 MB", "512 B"
std::string human_bytes(double bytes);

}  // namespace vlrt
