// A loaded model ready to run: canonicalizes and folds it once; validates inputs;
// per input signature infers shapes, plans placement and memory and prepares each
// node's backend state (cached); executes.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "exec/branch_cache.h"
#include "exec/control_flow.h"
#include "core/precision.h"
#include "exec/executor.h"
#include "graph/graph.h"
#include "passes/fusion.h"
#include "passes/fuse_qdq.h"
#include "passes/shape_inference.h"
#include "plan/batch.h"
#include "plan/plan.h"

namespace vlrt {

struct SessionOptions {
  int threads = 0;  // <= 0: all cores
  PlanOptions plan;
  // false: input shapes are not checked against the model's declared shapes
  // (the conformance runner: a few suite models declare shapes their data does not have).
  bool check_declared_shapes = true;
  // Fusion passes to run (all by default); none when VLRT_REFERENCE_KERNELS=1 is set, or when a
  // listed device is not a CPU (other backends do not run the fused ops yet).
  FusionOptions fusion;
  // QDQ groups run as integer ops, as ONNX Runtime runs them (passes/fuse_qdq.h). Unset: where
  // the CPU's 8-bit products are fast (Backend::fast_integer_products: VNNI). On AVX2 without
  // VNNI the exact integer products (int16 pairs) are no faster than float ones (a QDQ resnet50
  // ran about as fast fused as unfused there, the demo detector's small convolutions slower),
  // though in less memory (resnet50: 61 MiB peak against 241). VLRT_FUSE_QDQ=1 or 0 decides.
  // Never with VLRT_REFERENCE_KERNELS=1, or when a listed device is not the CPU.
  std::optional<bool> fuse_qdq = qdq_fusion_requested();
  // Graph inputs whose branch (the values that depend on them alone) is computed once per
  // distinct content and reused (exec/branch_cache.h); empty: none.
  std::vector<std::string> cached_inputs;
  size_t branch_cache_entries = 4;  // 0: the branch is found and timed, never cached
  // A Loop whose trip count is larger is refused before running, one whose condition holds longer
  // is stopped (0: no limit).
  int64_t max_loop_iterations = kDefaultMaxLoopIterations;
  // fp16 / bf16: weights and every value a top-level node makes are rounded to that type,
  // kernels compute in float32 (core/precision.h). CPU devices only.
  Precision precision = Precision::fp32;
  // The host backend to run on instead of one of its own: a control-flow body's session runs on
  // the enclosing session's, and so on its thread pool, not on more threads beside it.
  std::shared_ptr<Backend> host_backend;
};

class Session {
 public:
  Session(Model model, SessionOptions options = {});

  const Model& model() const { return model_; }
  // What the fusion passes fused when the session was made.
  const FusionReport& fusion_report() const { return fusion_report_; }
  // What the QDQ pass rewrote when the session was made.
  const QdqFusionCounts& qdq_fusion() const { return qdq_fusion_; }
  // Host threads the CPU backend uses.
  int threads() const;
  Executor& executor() { return executor_; }

  // Checks names, dtypes, ranks and fixed dimensions of the inputs against the model's
  // declaration; fails naming the input and the expected shape. A symbolic dimension
  // whose size differs between inputs is warned about on stderr once, not refused.
  void check_inputs(const TensorMap& inputs) const;
  // Same check for shapes alone (planning without data).
  void check_input_shapes(const std::map<std::string, std::pair<DType, Shape>>& inputs) const;
  // Same check for kinds alone: a sequence or an optional where a tensor is declared, or the reverse.
  void check_input_kinds(const TensorMap& inputs) const;

  // Shapes, folded values and the plan for inputs of these dtypes and shapes (cached).
  const InferredGraph& infer(const std::map<std::string, std::pair<DType, Shape>>& inputs);
  const Plan& plan(const std::map<std::string, std::pair<DType, Shape>>& inputs);
  // A plan for these inputs under other plan options (other caps, resident inputs), made
  // afresh and not kept: for sizing what would fit.
  Plan plan_with(const std::map<std::string, std::pair<DType, Shape>>& inputs, const PlanOptions& options);

  // Runs the whole graph; returns every graph output.
  TensorMap run(const TensorMap& inputs);
  // The cached branch of the plan for these inputs (options.cached_inputs), and what the
  // cache did so far.
  const Branch& branch(const std::map<std::string, std::pair<DType, Shape>>& inputs);
  BranchStats branch_stats() const { return branch_cache_.stats(); }

  // The name of the batch dimension (axis 0 of the inputs, symbolic), or "".
  std::string batch_symbol() const;
  // Planned memory for batch 1, 2, 4, ... of these inputs and the largest batch
  // that fits every device's budget (its --memory cap, else its capacity).
  BatchSizing size_batches(const std::map<std::string, std::pair<DType, Shape>>& inputs, int64_t limit = 1024);

 private:
  struct Prepared {
    InferredGraph inferred;
    std::unique_ptr<Plan> plan;
    PreparedPlan state;  // made at the first run of the plan
    bool state_made = false;
    std::string key;  // the input signature
    Branch branch;    // of options.cached_inputs, found when first asked for
    bool branch_found = false;
  };
  // `kinds`: inputs given as sequences or optionals (the others: as declared).
  Prepared& prepare(const std::map<std::string, std::pair<DType, Shape>>& inputs,
                    const std::map<std::string, ValueKind>& kinds = {});
  const Branch& branch_of(Prepared& p);
  PlanHooks plan_hooks();
  // Rounds the weights to options_.precision and has the executor round every value.
  void hold_in_precision();
  // Fails naming the node when no listed device (nor the host, for folding) runs its op.
  void check_supported();
  Backend& host() { return executor_.backend(Device{}); }

  Model model_;
  SessionOptions options_;
  FusionReport fusion_report_;
  QdqFusionCounts qdq_fusion_;
  Executor executor_;
  std::map<std::string, Prepared> prepared_;  // by input signature
  BranchCache branch_cache_;
  // Symbols whose sizes differed between inputs, warned about once; check_inputs runs on
  // server threads.
  mutable std::mutex warned_mutex_;
  mutable std::set<std::string> warned_symbols_;
};

// The dtype and shape of each tensor.
std::map<std::string, std::pair<DType, Shape>> signature_of(const TensorMap& inputs);

// Opset range whose semantics vlrt implements.
inline constexpr int64_t kMinOpset = 7;
inline constexpr int64_t kMaxOpset = 18;

}  // namespace vlrt
