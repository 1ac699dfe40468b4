// vlrt bench MODEL: latency and memory on random inputs.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "exec/session.h"
#include "integrity/load_model.h"
#include "io/npy.h"

namespace vlrt {

namespace {

struct BenchArgs {
  std::string model;
  std::vector<std::string> shapes;
  std::vector<std::string> values;
  int runs = 10;
  int warmup = 2;
  int threads = 0;
  bool json = false;
  bool profile = false;
  bool rounds_stdin = false;
  bool no_verify_hash = false;
  DeviceArgs device_args;
  int64_t max_loop_iterations = kDefaultMaxLoopIterations;
};

// This process's peak resident memory: VmHWM, which starts afresh at exec (getrusage's
// ru_maxrss keeps the parent's peak across fork and exec).
int64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return int64_t(ru.ru_maxrss) * 1024;
}

double profile_ms(const Profile& profile) {
  double ms = 0;
  for (auto& [op, p] : profile) ms += p.ms;
  return ms;
}

std::vector<std::pair<std::string, OpProfile>> slowest_first(const Profile& profile) {
  std::vector<std::pair<std::string, OpProfile>> rows(profile.begin(), profile.end());
  std::sort(rows.begin(), rows.end(), [](auto& x, auto& y) { return x.second.ms > y.second.ms; });
  return rows;
}

// Op types by kernel time, largest first, then the nodes that take the most.
void print_profile(const Profile& by_op, const Profile& by_node, int runs) {
  if (by_op.empty()) return;
  double total = profile_ms(by_op);
  std::printf("  kernel time per run by op type (%.2f ms in all):\n", total / runs);
  for (auto& [op, p] : slowest_first(by_op))
    std::printf("    %-24s %8.3f ms %5.1f%%  %6.0f calls\n", op.c_str(), p.ms / runs, 100 * p.ms / total,
                double(p.calls) / runs);
  auto nodes = slowest_first(by_node);
  size_t shown = std::min<size_t>(nodes.size(), 10);
  std::printf("  the %zu slowest of %zu nodes (--json lists all):\n", shown, nodes.size());
  for (size_t i = 0; i < shown; i++)
    std::printf("    %8.3f ms %5.1f%%  %s\n", nodes[i].second.ms / runs, 100 * nodes[i].second.ms / total,
                nodes[i].first.c_str());
}

std::vector<double> timed_runs(Session& session, const TensorMap& inputs, int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; i++) {
    auto t0 = std::chrono::steady_clock::now();
    session.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return ms;
}

// For tools that alternate runtimes on one machine: each line on stdin is a run count;
// the answer is one JSON line with that many run times. At the end of input, the peak RSS.
void serve_rounds(Session& session, const TensorMap& inputs) {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    int runs = std::stoi(line);
    if (runs < 1) fail("--rounds-stdin: a round needs at least one run, got '", line, "'");
    std::cout << nlohmann::json{{"ms", timed_runs(session, inputs, runs)}}.dump() << std::endl;
  }
  std::cout << nlohmann::json{{"peak_rss_bytes", peak_rss_bytes()}}.dump() << std::endl;
}

void bench(const BenchArgs& a) {
  Model model = load_model(a.model, {.verify_hash = !a.no_verify_hash});
  TensorMap inputs;
  for (auto& arg : a.values) {
    auto [name, path] = parse_name_value(arg, "--values");
    inputs[name] = read_npy(path);
  }
  add_random_inputs(model, a.shapes, inputs);

  SessionOptions options;
  options.threads = a.threads;
  options.plan = plan_options(a.device_args);
  options.max_loop_iterations = a.max_loop_iterations;
  Session session(std::move(model), options);
  for (int i = 0; i < a.warmup; i++) session.run(inputs);
  if (a.rounds_stdin) return serve_rounds(session, inputs);
  std::vector<double> ms = timed_runs(session, inputs, a.runs);
  Profile profile, node_profile;
  std::vector<double> overhead;  // per profiled run: wall time outside the kernels, ms
  std::vector<double> profiled_wall;
  if (a.profile) {  // separate runs: waiting for each kernel would slow the timed ones
    session.executor().set_profile(&profile, &node_profile);
    for (int i = 0; i < a.runs; i++) {
      double kernels_before = profile_ms(profile);
      auto t0 = std::chrono::steady_clock::now();
      session.run(inputs);
      double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      profiled_wall.push_back(wall);
      overhead.push_back(wall - (profile_ms(profile) - kernels_before));
    }
    session.executor().set_profile(nullptr);
    std::sort(overhead.begin(), overhead.end());
    std::sort(profiled_wall.begin(), profiled_wall.end());
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) { return ms[std::min(ms.size() - 1, size_t(p * double(ms.size() - 1) + 0.5))]; };
  int64_t peak = peak_rss_bytes();
  if (a.json) {
    nlohmann::json j = {{"model", a.model},      {"threads", session.threads()},
                        {"runs", a.runs},        {"min_ms", ms.front()},
                        {"median_ms", pct(0.5)}, {"p90_ms", pct(0.9)},
                        {"peak_rss_bytes", peak}};
    for (auto& [op, p] : profile)
      j["profile"][op] = {{"ms_per_run", p.ms / a.runs}, {"calls_per_run", double(p.calls) / a.runs}};
    for (auto& [node, p] : slowest_first(node_profile))
      j["node_profile"].push_back({{"node", node}, {"ms_per_run", p.ms / a.runs}});
    if (!overhead.empty()) {
      j["profiled_wall_ms"] = profiled_wall[profiled_wall.size() / 2];
      j["outside_kernels_ms"] = overhead[overhead.size() / 2];
    }
    std::cout << j.dump() << "\n";
  } else {
    std::printf("%s: %d runs, %d threads\n  min %.2f ms   median %.2f ms   p90 %.2f ms\n  peak RSS %s\n",
                a.model.c_str(), a.runs, session.threads(), ms.front(), pct(0.5), pct(0.9),
                human_bytes(double(peak)).c_str());
    print_profile(profile, node_profile, a.runs);
    if (!overhead.empty()) {
      double wall = profiled_wall[profiled_wall.size() / 2], outside = overhead[overhead.size() / 2];
      std::printf("  profiled runs: median wall %.2f ms, outside kernels %.3f ms per run (%.2f%% of wall)\n", wall,
                  outside, 100 * outside / wall);
    }
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  static BenchArgs a;
  auto* cmd =
      app.add_subcommand("bench", "Measure latency (min/median/p90) and peak memory on random inputs");
  cmd->add_option("model", a.model, "ONNX model file")->required();
  cmd->add_option("-i,--input", a.shapes,
                  "NAME=SHAPE (e.g. images=1x3x224x224) for inputs with dynamic dims");
  cmd->add_option("--values", a.values, "NAME=FILE.npy: run on these values (other inputs are random)");
  cmd->add_option("-n,--runs", a.runs, "timed runs")->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", a.warmup, "untimed runs first")->check(CLI::Range(0, 1000));
  cmd->add_option("-t,--threads", a.threads, "worker threads (default: all cores)");
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_flag(
      "--profile", a.profile,
      "after the timed runs, as many runs timing each kernel: time per op type and the slowest nodes");
  cmd->add_flag("--rounds-stdin", a.rounds_stdin,
                "after the warm-up, read run counts from stdin, one per line, and answer each with a JSON "
                "line of run times (for tools that alternate runtimes); the peak RSS at end of input");
  add_device_options(cmd, a.device_args);
  add_loop_limit_option(cmd, a.max_loop_iterations);
  cmd->add_flag("--no-verify-hash", a.no_verify_hash, "check only sizes against the model's manifest");
  cmd->callback([] { bench(a); });
}

}  // namespace vlrt
