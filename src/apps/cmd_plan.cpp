// vlrt plan MODEL: placement, transfers, per-device memory and the largest batch,
// computed before anything runs.
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "exec/session.h"
#include "integrity/load_model.h"
#include "apps/pipeline_options.h"
#include "pipelines/vlm/chat.h"

namespace vlrt {

namespace {

struct PlanArgs {
  std::string model;
  int64_t context = 0;
  std::vector<std::string> shapes;
  DeviceArgs device_args;
  bool json = false;
  int64_t batch_limit = 256;
  bool no_verify_hash = false;
};

std::string op_list(const std::map<std::string, int>& ops) {
  std::vector<std::pair<int, std::string>> sorted;
  for (auto& [op, n] : ops) sorted.push_back({-n, op});
  std::sort(sorted.begin(), sorted.end());
  std::string s;
  for (auto& [n, op] : sorted) s += cat(s.empty() ? "" : ", ", op, " ", -n);
  return s;
}

void print_plan(const std::string& model, const std::map<std::string, std::pair<DType, Shape>>& sig,
                const Plan& plan, const BatchSizing& batches, const FusionReport& fused) {
  std::cout << "plan for " << model << "\n  inputs:";
  for (auto& [name, ds] : sig) std::cout << " " << name << " " << dtype_name(ds.first) << shape_str(ds.second);
  std::cout << "\n  fused: " << describe(fused) << "\n\n";
  for (auto& dp : plan.devices) {
    std::cout << dp.device.str() << ": " << dp.nodes << " nodes, weights " << human_bytes(double(dp.weight_bytes))
              << ", activation peak " << human_bytes(double(dp.peak_activation_bytes)) << ", prepared state "
              << human_bytes(double(dp.prepared_bytes));
    if (dp.resident_bytes) std::cout << ", resident inputs (KV cache) " << human_bytes(double(dp.resident_bytes));
    if (dp.cap) std::cout << " (cap " << human_bytes(double(dp.cap)) << ")";
    if (dp.dynamic_values) std::cout << ", " << dp.dynamic_values << " values sized at run time";
    std::cout << "\n";
    if (!dp.ops.empty()) std::cout << "  " << op_list(dp.ops) << "\n";
    if (!dp.kernels.empty()) std::cout << "  prepared kernels: " << op_list(dp.kernels) << "\n";
  }
  std::cout << "\nfallbacks: " << (plan.fallbacks.empty() ? "none" : std::to_string(plan.fallbacks.size()))
            << "\n";
  for (auto& f : plan.fallbacks)
    std::cout << "  " << f.node << " (" << f.op_type << ") on " << f.placed.str() << " instead of "
              << f.preferred.str() << ": " << f.reason << "\n";
  size_t total = 0;
  for (auto& t : plan.transfers) total += t.bytes;
  std::cout << "\ntransfers: " << plan.transfers.size() << " (" << human_bytes(double(total)) << " per run)\n";
  for (auto& t : plan.transfers)
    std::cout << "  " << t.from.str() << " -> " << t.to.str() << "  " << t.value << "  " << human_bytes(double(t.bytes))
              << "\n";
  std::cout << "\n";
  if (batches.symbol.empty()) {
    std::cout << "batch: the model has no symbolic batch dimension\n";
    return;
  }
  std::cout << "batch '" << batches.symbol << "':";
  for (auto& p : batches.points)
    std::cout << " " << p.batch << "=" << human_bytes(double(p.bytes)) << (p.fits ? "" : "(too big)");
  std::cout << "\nmax batch: " << batches.max_batch << " (largest batch whose plan fits every device's budget)\n";
}

// A VLM folder: the decoder's decode step over the whole context with the KV cache on the
// devices that read it, the longest context and the largest batch that fit.
void plan_vlm(const PlanArgs& a) {
  vlm::Chat chat(a.model, chat_options(DeviceArgs{}, a.device_args, 1, a.context, !a.no_verify_hash));
  int64_t context = chat.context();
  vlm::CachePlan cache = chat.plan_cache(1, context);
  int64_t longest = chat.longest_context(1);
  BatchSizing batches;
  batches.symbol = "batch (sequences, each with its KV cache)";
  batches.max_batch = chat.largest_batch(context);
  auto sig = chat.decode_signature(1, context);
  const Plan& p = chat.decoder().plan(sig);
  const vlm::TextConfig& t = chat.folder().text;
  if (a.json) {
    nlohmann::json j = plan_json(chat.folder().decoder_model(), sig, p, batches, chat.decoder().fusion_report());
    nlohmann::json devices = nlohmann::json::object();
    for (auto& d : cache.devices)
      devices[d.device.str()] = {{"layers", d.layers}, {"cache_bytes", d.cache_bytes},
                                 {"decoder_bytes", d.decoder_bytes}, {"budget_bytes", d.budget}, {"fits", d.fits()}};
    j["kv_cache"] = {{"context", context}, {"bytes_per_token", cache.bytes_per_token}, {"devices", devices},
                     {"longest_context", longest}, {"largest_batch", batches.max_batch}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "VLM folder " << a.model << ": decoder of " << t.layers << " layers, " << t.kv_heads << " KV heads of "
            << t.head_dim << "; context " << context << " tokens\n"
            << "KV cache: " << human_bytes(double(cache.bytes_per_token)) << " per token and sequence, "
            << human_bytes(double(cache.bytes_per_token * size_t(context))) << " for the context\n";
  for (auto& d : cache.devices)
    std::cout << "  " << d.device.str() << ": " << d.layers << " layers' cache " << human_bytes(double(d.cache_bytes))
              << " + decoder " << human_bytes(double(d.decoder_bytes)) << " of " << human_bytes(double(d.budget))
              << (d.fits() ? ": fits" : ": does not fit") << "\n";
  std::cout << "longest context at batch 1: " << longest << " tokens (the model's limit: " << t.max_positions
            << ")\n\n";
  print_plan(chat.folder().decoder_model(), sig, p, batches, chat.decoder().fusion_report());
}

void plan(const PlanArgs& a) {
  if (vlm::is_model_folder(a.model)) return plan_vlm(a);
  Model model = load_model(a.model, {.verify_hash = !a.no_verify_hash});
  auto sig = input_signature(model, a.shapes);
  SessionOptions options;
  options.plan = plan_options(a.device_args);
  options.threads = 1;
  Session session(std::move(model), options);
  const Plan& p = session.plan(sig);
  BatchSizing batches = session.size_batches(sig, a.batch_limit);
  if (a.json) std::cout << plan_json(a.model, sig, p, batches, session.fusion_report()).dump(2) << "\n";
  else print_plan(a.model, sig, p, batches, session.fusion_report());
}

}  // namespace

nlohmann::json plan_json(const std::string& model, const std::map<std::string, std::pair<DType, Shape>>& sig,
                         const Plan& plan, const BatchSizing& batches, const FusionReport& fused) {
  nlohmann::json j;
  j["model"] = model;
  j["fused"] = nlohmann::json::object();
  for (auto& [pattern, n] : fused) j["fused"][pattern] = n;
  for (auto& [name, ds] : sig) j["inputs"][name] = cat(dtype_name(ds.first), shape_str(ds.second));
  j["devices"] = nlohmann::json::object();
  for (auto& dp : plan.devices) {
    j["devices"][dp.device.str()] = {{"nodes", dp.nodes},
                                     {"ops", dp.ops},
                                     {"weight_bytes", dp.weight_bytes},
                                     {"peak_activation_bytes", dp.peak_activation_bytes},
                                     {"prepared_bytes", dp.prepared_bytes},
                                     {"prepared_kernels", dp.kernels},
                                     {"resident_bytes", dp.resident_bytes},
                                     {"dynamic_values", dp.dynamic_values},
                                     {"cap_bytes", dp.cap}};
  }
  j["transfers"] = nlohmann::json::array();
  for (auto& t : plan.transfers)
    j["transfers"].push_back({{"value", t.value}, {"from", t.from.str()}, {"to", t.to.str()}, {"bytes", t.bytes}});
  j["fallbacks"] = nlohmann::json::array();
  for (auto& f : plan.fallbacks)
    j["fallbacks"].push_back({{"node", f.node},
                              {"op", f.op_type},
                              {"preferred", f.preferred.str()},
                              {"placed", f.placed.str()},
                              {"reason", f.reason}});
  j["batch_symbol"] = batches.symbol;
  j["max_batch"] = batches.symbol.empty() ? nlohmann::json(nullptr) : nlohmann::json(batches.max_batch);
  j["batch_peaks"] = nlohmann::json::array();
  for (auto& p : batches.points) j["batch_peaks"].push_back({{"batch", p.batch}, {"bytes", p.bytes}, {"fits", p.fits}});
  return j;
}

void add_plan_command(CLI::App& app) {
  static PlanArgs a;
  auto* cmd = app.add_subcommand(
      "plan", "Show where every node runs, every transfer, each device's memory and the largest batch that fits");
  cmd->add_option("model", a.model,
                  "ONNX model file, or a VLM folder (its decoder with the KV cache; --devices are the text devices)")
      ->required();
  cmd->add_option("--context", a.context, "a VLM folder's context in tokens (default: as vlrt chat)");
  cmd->add_option("-i,--input", a.shapes, "NAME=SHAPE (e.g. image=1x3x224x224) for inputs with dynamic dims");
  add_device_options(cmd, a.device_args);
  cmd->add_option("--batch-limit", a.batch_limit, "largest batch to consider")->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--json", a.json, "print the plan as one JSON document");
  cmd->add_flag("--no-verify-hash", a.no_verify_hash, "check manifest sizes only, not SHA-256");
  cmd->callback([] { plan(a); });
}

}  // namespace vlrt
