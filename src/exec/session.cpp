#include "exec/session.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include "ops/op_schema.h"
#include "passes/canonicalize.h"
#include "passes/control_flow.h"
#include "passes/half_weights.h"

namespace vlrt {

std::map<std::string, std::pair<DType, Shape>> signature_of(const TensorMap& inputs) {
  std::map<std::string, std::pair<DType, Shape>> sig;
  for (auto& [name, t] : inputs) sig[name] = {t.dtype(), t.shape()};
  return sig;
}

Session::Session(Model model, SessionOptions options)
    : model_(std::move(model)),
      options_(std::move(options)),
      executor_(model_, options_.threads, options_.max_loop_iterations, options_.host_backend),
      branch_cache_(options_.branch_cache_entries) {
  for (auto& name : options_.cached_inputs) {
    std::string names;
    bool declared = false;
    for (auto& d : model_.graph.inputs) {
      declared = declared || d.name == name;
      names += (names.empty() ? "" : ", ") + d.name;
    }
    if (!declared)
      fail(model_.path, ": the cached inputs name '", name, "', which is not an input of the model (", names, ")");
  }
  int64_t opset = model_.opset();
  if (opset > kMaxOpset)
    unsupported(model_.path, ": opset ", opset, " is newer than vlrt supports (", kMinOpset, "..", kMaxOpset,
                "); export the model with opset ", kMaxOpset, " or lower");
  // Before the passes: the convolutions' layout follows the kernels that will run them.
  if (options_.plan.bf16_products)
    for (auto& d : options_.plan.devices)
      if (d.kind == Device{}.kind) executor_.backend(d).use_bf16_products(true);
  check_supported();  // before the pass, so that messages name the model's own opset
  canonicalize(model_);
  // The fused ops have CPU kernels alone: the passes run when every listed device is a CPU.
  bool fuse_for_cpu = !reference_kernels_requested();
  for (auto& d : options_.plan.devices) fuse_for_cpu = fuse_for_cpu && d.kind == Device{}.kind;
  // Before folding, which would turn the weights' DequantizeLinear nodes into float constants.
  if (options_.fuse_qdq.value_or(host().fast_integer_products()) && fuse_for_cpu)
    qdq_fusion_ = fuse_qdq(model_);
  try {
    // Weights stored in half precision stay so where the fused products read them as stored.
    std::unordered_set<std::string> half_weights;
    if (fuse_for_cpu) half_weights = keep_half_weights(model_, options_.fusion, host());
    fold_constants(model_, host(), half_weights);
    while (inline_constant_ifs(model_) > 0) fold_constants(model_, host(), half_weights);
    if (fuse_for_cpu) fusion_report_ = fuse(model_, options_.fusion, host());
    if (!half_weights.empty()) fold_constants(model_, host());  // the Casts no product took
    FusionReport qdq;  // the QDQ rewrites first: they ran first
    for (auto& [rewrite, n] : qdq_fusion_) qdq.push_back({"QDQ " + rewrite, n});
    fusion_report_.insert(fusion_report_.begin(), qdq.begin(), qdq.end());
  } catch (const Error& e) {
    rethrow_as(e, cat(model_.path, ": ", e.what()));
  }
  if (options_.precision != Precision::fp32) hold_in_precision();
}

void Session::hold_in_precision() {
  for (auto& d : options_.plan.devices)
    if (d.kind != Device{}.kind)
      fail("precision ", precision_name(options_.precision), " is emulated on the CPU (values rounded after each ",
           "node): run it on cpu devices, not ", d.str());
  // Copies: the caller's model may share these buffers.
  for (auto& [name, t] : model_.graph.initializers) {
    if (t.dtype() != DType::f32) continue;
    Tensor rounded = t.clone();
    round_to_precision(rounded.data<float>(), size_t(rounded.numel()), options_.precision);
    t = std::move(rounded);
  }
  executor_.set_precision(options_.precision);
}

void Session::check_supported() {
  std::vector<Device> devices = options_.plan.devices;
  devices.push_back(Device{});
  int64_t opset = model_.opset();
  // Subgraph nodes run on the host; their own sessions check them again when made.
  std::function<void(const Node&, bool)> check = [&](const Node& n, bool nested) {
    auto op = [&] {
      return cat(n.label(), ": operator '", n.op_type, "'", n.domain.empty() ? "" : cat(" of domain '", n.domain, "'"),
                 " (opset ", opset, ")");
    };
    const OpSchema* schema = find_schema(n.domain, n.op_type);
    if (!schema)
      unsupported(model_.path, ": ", op(), " is not implemented by vlrt; `vlrt info` lists every unsupported op of a model");
    if (schema->control_flow) {
      for (auto& [attr, sub] : n.subgraphs())
        for (auto& inner : sub->nodes) check(inner, true);
      return;
    }
    std::string reasons;
    std::vector<Device> candidates = nested ? std::vector<Device>{Device{}} : devices;
    for (auto& d : candidates) {
      std::string why;
      if (executor_.backend(d).supports(n, {}, &why)) return;
      reasons += cat(reasons.empty() ? "" : "; ", d.str(), ": ", why);
    }
    unsupported(model_.path, ": ", op(), " runs on none of the devices (", reasons, ")");
  };
  for (auto& n : model_.graph.nodes) check(n, false);
}

int Session::threads() const {
  return options_.threads > 0 ? options_.threads : int(std::max(1u, std::thread::hardware_concurrency()));
}

void Session::check_inputs(const TensorMap& inputs) const {
  check_input_kinds(inputs);
  check_input_shapes(signature_of(inputs));
}

void Session::check_input_kinds(const TensorMap& inputs) const {
  // A sequence or an optional where a tensor is declared, or the reverse; an optional
  // input may be given its element directly.
  for (auto& d : model_.graph.inputs) {
    auto it = inputs.find(d.name);
    if (it == inputs.end() || d.dtype == DType::undefined) continue;
    ValueKind given = it->second.kind();
    ValueKind element = d.kind == ValueKind::optional_tensor     ? ValueKind::tensor
                        : d.kind == ValueKind::optional_sequence ? ValueKind::sequence
                                                                 : d.kind;
    if (given != d.kind && given != element)
      fail("input '", d.name, "' is a ", value_kind_name(given), " (", it->second.describe(),
           ") but the model expects ", d.describe());
  }
}

void Session::check_input_shapes(const std::map<std::string, std::pair<DType, Shape>>& inputs) const {
  const auto& declared = model_.graph.inputs;
  for (auto& [name, t] : inputs) {
    bool found = false;
    for (auto& d : declared) found = found || d.name == name;
    if (found) continue;
    std::string expected_names;
    for (auto& d : declared)
      expected_names += (expected_names.empty() ? "" : ", ") + d.name + ": " + d.describe();
    fail("unknown input '", name, "'; the model's inputs are ", expected_names);
  }
  auto first_warning = [this](const std::string& symbol) {
    std::lock_guard<std::mutex> lock(warned_mutex_);
    return warned_symbols_.insert(symbol).second;
  };
  std::map<std::string, std::pair<int64_t, std::string>> symbols;
  for (auto& d : declared) {
    auto it = inputs.find(d.name);
    if (it == inputs.end()) fail("missing input '", d.name, "' (expected ", d.describe(), ")");
    auto& [dtype, shape] = it->second;
    if (d.dtype != DType::undefined && dtype != d.dtype)
      fail("input '", d.name, "' is ", dtype_name(dtype), shape_str(shape), " but the model expects ",
           d.describe());
    if (!d.has_shape || !options_.check_declared_shapes || d.kind != ValueKind::tensor) continue;
    if (shape.size() != d.dims.size())
      fail("input '", d.name, "' has shape ", shape_str(shape), " (rank ", shape.size(), ") but the model expects ",
           d.describe(), " (rank ", d.dims.size(), ")");
    for (size_t i = 0; i < d.dims.size(); i++) {
      const Dim& dim = d.dims[i];
      if (dim.value >= 0 && dim.value != shape[i])
        fail("input '", d.name, "' has shape ", shape_str(shape), " but the model expects ", d.describe(),
             " (axis ", i, " must be ", dim.value, ")");
      // A symbol names a dimension, it does not bind two inputs together (ONNX Runtime runs
      // PP-OCR, whose H and W are both "?"): differing sizes are said once per session.
      if (dim.value < 0 && !dim.param.empty()) {
        auto [sit, inserted] = symbols.emplace(dim.param, std::make_pair(shape[i], d.name));
        if (!inserted && sit->second.first != shape[i] && first_warning(dim.param))
          std::fprintf(stderr, "vlrt: warning: dimension '%s' is %lld in input '%s' but %lld in input '%s'; "
                       "running with each size as given\n", dim.param.c_str(), (long long)sit->second.first,
                       sit->second.second.c_str(), (long long)shape[i], d.name.c_str());
      }
    }
  }
}

Session::Prepared& Session::prepare(const std::map<std::string, std::pair<DType, Shape>>& inputs,
                                    const std::map<std::string, ValueKind>& kinds) {
  auto kind_of = [&](const std::string& name) {
    auto given = kinds.find(name);
    if (given != kinds.end()) return given->second;
    for (auto& d : model_.graph.inputs)
      if (d.name == name) return d.kind;
    return ValueKind::tensor;
  };
  std::string key;
  for (auto& [name, ds] : inputs) {
    ValueKind kind = kind_of(name);
    key += name + ":" + (kind == ValueKind::tensor ? "" : value_kind_name(kind)) + dtype_name(ds.first) +
           shape_str(ds.second) + ";";
  }
  auto it = prepared_.find(key);
  if (it != prepared_.end()) return it->second;
  check_input_shapes(inputs);
  std::unordered_map<std::string, ValueInfo> in;
  for (auto& [name, ds] : inputs) {
    ValueInfo v;
    v.dtype = ds.first;
    v.kind = kind_of(name);
    if (v.kind == ValueKind::tensor) v.shape = ds.second;
    v.shape_known = true;
    in[name] = v;
  }
  Prepared p;
  p.key = key;
  p.inferred = infer_shapes(model_, in, host());
  p.plan = std::make_unique<Plan>(make_plan(model_, p.inferred, options_.plan, plan_hooks()));
  if (prepared_.size() >= 64) prepared_.clear();  // bound the cache for ever-changing shapes
  return prepared_[key] = std::move(p);
}

PlanHooks Session::plan_hooks() {
  PlanHooks hooks;
  hooks.supports = [this](const Device& d, const Node& n, const std::vector<DType>& dt, std::string* why) {
    return executor_.backend(d).supports(n, dt, why);
  };
  int64_t opset = model_.opset();
  hooks.prepare_info = [this, opset](const Device& d, const Node& n, const std::vector<const ValueInfo*>& in) {
    return executor_.backend(d).prepare_info(n, opset, in);
  };
  hooks.alignment = [this](const Device& d) { return executor_.backend(d).alignment(); };
  return hooks;
}

Plan Session::plan_with(const std::map<std::string, std::pair<DType, Shape>>& inputs, const PlanOptions& options) {
  return make_plan(model_, infer(inputs), options, plan_hooks());
}

const InferredGraph& Session::infer(const std::map<std::string, std::pair<DType, Shape>>& inputs) {
  return prepare(inputs).inferred;
}

const Plan& Session::plan(const std::map<std::string, std::pair<DType, Shape>>& inputs) {
  return *prepare(inputs).plan;
}

TensorMap Session::run(const TensorMap& inputs) {
  check_input_kinds(inputs);  // the shapes are checked with each new signature, in prepare()
  std::map<std::string, ValueKind> kinds;
  for (auto& [name, t] : inputs)
    if (!t.is_tensor()) kinds[name] = t.kind();
  Prepared& p = prepare(signature_of(inputs), kinds);
  if (!p.state_made) {
    p.state = executor_.prepare(p.inferred, *p.plan);
    p.state_made = true;
  }
  if (options_.cached_inputs.empty()) return executor_.run(*p.plan, p.state, inputs);
  BranchRun run{&branch_of(p)};
  std::vector<Tensor> content;
  for (auto& name : options_.cached_inputs) content.push_back(inputs.at(name));
  auto cached = branch_cache_.find(p.key, content);
  BranchValues fresh;
  if (cached) {
    run.cached = cached.get();
  } else if (options_.branch_cache_entries > 0) {
    for (auto& t : content) fresh.inputs.push_back(t.clone());
    run.captured = &fresh;
  }
  TensorMap out = executor_.run(*p.plan, p.state, inputs, &run);
  branch_cache_.add_time(run.ms);
  if (!cached) branch_cache_.insert(p.key, std::move(fresh));
  return out;
}

const Branch& Session::branch_of(Prepared& p) {
  if (!p.branch_found) {
    p.branch = find_branch(*p.plan, options_.cached_inputs);
    p.branch_found = true;
  }
  return p.branch;
}

const Branch& Session::branch(const std::map<std::string, std::pair<DType, Shape>>& inputs) {
  return branch_of(prepare(inputs));
}

std::string Session::batch_symbol() const {
  for (auto& d : model_.graph.inputs)
    if (d.has_shape && !d.dims.empty() && d.dims[0].value < 0 && !d.dims[0].param.empty()) return d.dims[0].param;
  return "";
}

BatchSizing Session::size_batches(const std::map<std::string, std::pair<DType, Shape>>& inputs, int64_t limit) {
  std::string symbol = batch_symbol();
  if (symbol.empty()) return BatchSizing{};
  auto plan_for = [&](int64_t b) {
    auto sig = inputs;
    for (auto& d : model_.graph.inputs)
      if (d.has_shape && !d.dims.empty() && d.dims[0].param == symbol && sig.count(d.name))
        sig[d.name].second[0] = b;
    return plan(sig);
  };
  auto budget = [&](const Device& d) { return executor_.backend(d).memory_capacity(); };
  BatchSizing s = vlrt::size_batches(plan_for, budget, limit);
  s.symbol = symbol;
  return s;
}

}  // namespace vlrt
