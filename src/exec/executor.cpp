#include "exec/executor.h"

#include <algorithm>
#include <chrono>

#include "exec/control_flow.h"

namespace vlrt {

void check_on_device(const Node& node, const Device& device, const std::vector<const Tensor*>& inputs) {
  for (size_t i = 0; i < inputs.size(); i++) {
    if (!inputs[i] || inputs[i]->device() == device) continue;
    fail("internal error (a bug in the plan, please report it): ", node.label(), " runs on ", device.str(),
         " but its input '", i < node.inputs.size() ? node.inputs[i] : "?", "' (", inputs[i]->describe(),
         ") is on ", inputs[i]->device().str(), "; a transfer step is missing");
  }
}

Executor::Executor(const Model& model, int threads, int64_t max_loop_iterations,
                   std::shared_ptr<Backend> host)
    : model_(model), threads_(threads), max_loop_iterations_(max_loop_iterations) {
  if (host) backends_[Device{}.str()] = std::move(host);
}

Executor::~Executor() = default;

Backend& Executor::backend(const Device& d) {
  auto& b = backends_[d.str()];
  if (!b) b = create_backend(d, threads_);
  return *b;
}

size_t Executor::arena_high_water(const Device& d) const {
  auto it = arenas_.find(d.str());
  return it == arenas_.end() ? 0 : it->second.high_water;
}

void Executor::reset_high_water() {
  for (auto& [name, a] : arenas_) a.high_water = 0;
}

PreparedPlan Executor::prepare(const InferredGraph& inferred, const Plan& plan) {
  const Graph& g = model_.graph;
  PreparedPlan pp;
  pp.constants.resize(plan.slots.size());
  for (size_t k = 0; k < plan.slots.size(); k++) {
    const Slot& s = plan.slots[k];
    if (!s.constant || s.replaced) continue;
    auto init = g.initializers.find(s.value);
    bool initializer = init != g.initializers.end();
    const Tensor& host = initializer ? init->second : *inferred.values.at(s.value).value;
    Backend& b = backend(s.device);
    if (b.host_visible() && s.device.index == 0) {
      pp.constants[k] = host;
      continue;
    }
    // Weights stay on a device across plans (other input sizes); folded values are per plan.
    Tensor* cached = nullptr;
    if (initializer) {
      cached = &device_constants_[s.device.str()][s.value];
      if (cached->defined() && cached->shape() == host.shape() && cached->dtype() == host.dtype()) {
        pp.constants[k] = *cached;
        continue;
      }
    }
    Tensor t(host.dtype(), host.shape(), b.allocate(host.nbytes()), 0);
    b.copy_from_host(host, t);
    pp.constants[k] = t;
    if (cached) *cached = t;
  }
  pp.states.resize(plan.steps.size());
  // A weight every reader holds packed is evicted once the last of them is prepared (it is read
  // again from the model file only if another plan asks for it), so it is not held twice.
  std::vector<int> readers_to_prepare(plan.slots.size(), 0);
  for (auto& s : plan.steps)
    if (s.kind == Step::Kind::run && !s.control_flow)
      for (int k : s.inputs)
        if (k >= 0 && plan.slots[size_t(k)].replaced) readers_to_prepare[size_t(k)]++;
  auto evict_if_last = [&](int k) {
    if (k < 0 || !plan.slots[size_t(k)].replaced || --readers_to_prepare[size_t(k)] > 0) return;
    auto init = g.initializers.find(plan.slots[size_t(k)].value);
    if (init != g.initializers.end() && init->second.is_tensor() && init->second.defined())
      init->second.buffer()->evict();
  };
  for (size_t si = 0; si < plan.steps.size(); si++) {
    const Step& s = plan.steps[si];
    if (s.kind != Step::Kind::run || s.control_flow) continue;
    const Node& node = g.nodes[s.node];
    std::vector<const ValueInfo*> infos;
    for (auto& in : node.inputs) infos.push_back(in.empty() ? nullptr : &inferred.values.at(in));
    pp.states[si] = backend(s.device).prepare(node, model_.opset(), infos);
    size_t held = pp.states[si] ? pp.states[si]->bytes() : 0;
    if (held != s.prepared_bytes)
      fail("internal error: ", node.label(), " on ", s.device.str(), " prepared ", held,
           " bytes of state but the plan counted ", s.prepared_bytes);
    for (int k : s.inputs) evict_if_last(k);
  }
  return pp;
}

std::vector<Executor::Lane> Executor::bind_lanes(const Plan& plan) {
  std::vector<Lane> lanes;
  for (auto& dp : plan.devices) {
    Lane lane{&backend(dp.device), &arenas_[dp.device.str()]};
    Arena& a = *lane.arena;
    if (dp.peak_activation_bytes && (!a.buffer || a.buffer->bytes < dp.peak_activation_bytes))
      a.buffer = lane.backend->allocate(dp.peak_activation_bytes);
    lanes.push_back(lane);
  }
  return lanes;
}

const Tensor& Executor::slot_value(const PreparedPlan& prepared, int slot) const {
  return prepared.constants[size_t(slot)].defined() ? prepared.constants[size_t(slot)] : values_[size_t(slot)];
}

Tensor Executor::allocate(const Plan& plan, int slot, DType dtype, const Shape& shape, const char* what) {
  const Slot& s = plan.slots[size_t(slot)];
  Lane& lane = lanes_[s.lane];
  size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  if (s.dynamic || bytes == 0) {
    try {
      return Tensor(dtype, shape, lane.backend->allocate(bytes), 0);
    } catch (const Error& e) {
      rethrow_as(e, cat(what, " '", s.value, "' (", dtype_name(dtype), shape_str(shape), ") on ", s.device.str(), ": ",
                        e.what()));
    }
  }
  if (bytes > s.bytes)
    fail("internal error: ", what, " '", s.value, "' needs ", bytes, " bytes on ", s.device.str(),
         " but the plan reserved ", s.bytes);
  Arena& arena = *lane.arena;
  size_t end = s.offset + bytes;
  if (!arena.buffer || arena.buffer->bytes < end)
    fail("internal error: ", what, " '", s.value, "' at offset ", s.offset, " exceeds the arena of ", s.device.str());
  size_t align = lane.backend->alignment();
  arena.high_water = std::max(arena.high_water, (end + align - 1) / align * align);
  return Tensor(dtype, shape, arena.buffer, s.offset);
}

namespace {

void copy_through_host(Backend& from, Backend& to, const Tensor& src, Tensor& dst) {
  if (from.host_visible()) {
    to.copy_from_host(src, dst);
  } else if (to.host_visible()) {
    from.copy_to_host(src, dst);
  } else {
    Tensor staging(src.dtype(), src.shape());
    from.copy_to_host(src, staging);
    to.copy_from_host(staging, dst);
  }
}

}  // namespace

void Executor::run_copy(const Plan& plan, const PreparedPlan& prepared, const Step& s) {
  const Tensor& src = slot_value(prepared, s.inputs[0]);
  int dst_slot = s.outputs[0];
  Tensor dst = allocate(plan, dst_slot, src.dtype(), src.shape(), "copy of");
  Backend& from = *lanes_[plan.slots[size_t(s.inputs[0])].lane].backend;
  Backend& to = *lanes_[s.lane].backend;
  // Queued work on the source must be done before another device reads its data.
  if (!from.host_visible()) from.synchronize();
  bool same_kind = from.device().kind == to.device().kind;
  if (!same_kind || !to.copy_on_device(src, dst)) copy_through_host(from, to, src, dst);
  values_[size_t(dst_slot)] = std::move(dst);
  transfers_executed_++;
}

void Executor::run_node_step(const Plan& plan, const PreparedPlan& prepared, size_t step) {
  const Step& s = plan.steps[step];
  const Node& node = model_.graph.nodes[s.node];
  Backend& b = *lanes_[s.lane].backend;
  std::vector<const Tensor*> ins(s.inputs.size(), nullptr);
  for (size_t i = 0; i < s.inputs.size(); i++) {
    int k = s.inputs[i];
    if (k < 0 || plan.slots[size_t(k)].replaced) continue;
    ins[i] = &slot_value(prepared, k);
    if (!ins[i]->defined() && !plan.slots[size_t(k)].constant)
      fail("internal error: ", node.label(), ": input '", node.inputs[i], "' is not available");
  }
  check_on_device(node, s.device, ins);

  // Shapes that depend on data: infer them from the real inputs (values read on the host).
  std::vector<ValueInfo> dynamic_info;
  if (s.dynamic) {
    std::vector<ValueInfo> vi(ins.size());
    std::vector<const ValueInfo*> vp(ins.size(), nullptr);
    for (size_t i = 0; i < ins.size(); i++) {
      if (!ins[i]) continue;
      vi[i] = known_info(*ins[i]);
      if (!b.host_visible()) vi[i].value.reset();
      vp[i] = &vi[i];
    }
    dynamic_info = infer_node(node, model_.opset(), vp);
  }
  std::vector<Tensor*> outs(s.outputs.size(), nullptr);
  bool kernel_needed = false;
  for (size_t i = 0; i < s.outputs.size(); i++) {
    int k = s.outputs[i];
    if (k < 0) continue;
    const Slot& slot = plan.slots[size_t(k)];
    DType dtype = s.dynamic ? dynamic_info[i].dtype : slot.dtype;
    const Shape& shape = s.dynamic ? dynamic_info[i].shape : slot.shape;
    Tensor& out = values_[size_t(k)];
    if (i == 0 && s.alias_input >= 0) {
      const Tensor& in = *ins[size_t(s.alias_input)];
      out = in.is_tensor() ? in.reshaped(shape) : in;
      continue;
    }
    bool host_value = s.dynamic && dynamic_info[i].kind != ValueKind::tensor;
    try {
      out = host_value ? Tensor{} : allocate(plan, k, dtype, shape, "output");  // a sequence: the kernel makes it
    } catch (const Error& e) {
      rethrow_as(e, cat(node.label(), ": ", e.what()));
    }
    outs[i] = &out;
    kernel_needed = true;
  }
  if (!kernel_needed) return;
  try {
    auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    b.execute(node, model_.opset(), prepared.states[step].get(), ins, outs);
    if (profile_) {
      b.synchronize();
      add_profile(node,
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind(node.label(), 0) == 0) throw;
    rethrow_as(e, cat(node_context(node, ins), " on ", s.device.str(), ": ", msg));
  }
  if (precision_ == Precision::fp32) return;
  for (Tensor* out : outs)
    if (out && out->is_tensor() && out->dtype() == DType::f32)
      round_to_precision(out->data<float>(), size_t(out->numel()), precision_);
}

void Executor::add_profile(const Node& node, double ms) {
  auto add = [ms](OpProfile& p) {
    p.ms += ms;
    p.calls++;
  };
  if (profile_) add((*profile_)[node.op_type]);
  if (node_profile_) add((*node_profile_)[node.label()]);
}

void Executor::run_control_flow_step(const Plan& plan, const PreparedPlan& prepared, size_t step) {
  const Step& s = plan.steps[step];
  const Node& node = model_.graph.nodes[s.node];
  std::vector<const Tensor*> ins(s.inputs.size(), nullptr);
  for (size_t i = 0; i < s.inputs.size(); i++)
    if (s.inputs[i] >= 0) ins[i] = &slot_value(prepared, s.inputs[i]);
  check_on_device(node, s.device, ins);
  auto& runner = control_flow_[s.node];
  if (!runner) {
    backend(Device{});
    runner = std::make_unique<ControlFlowRunner>(model_, node, threads_, max_loop_iterations_,
                                                 backends_.at(Device{}.str()));
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> outs;
  try {
    outs = runner->run(ins);
  } catch (const Error& e) {
    std::string msg = e.what();
    rethrow_as(e, msg.rfind(node.label(), 0) == 0 ? msg : cat(node.label(), ": ", msg));
  }
  if (profile_)
    add_profile(node,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  for (size_t i = 0; i < s.outputs.size(); i++) {
    int k = s.outputs[i];
    if (k < 0) continue;
    const Slot& slot = plan.slots[size_t(k)];
    if (!slot.dynamic && (outs[i].shape() != slot.shape || outs[i].dtype() != slot.dtype))
      fail("internal error: ", node.label(), ": output '", slot.value, "' is ", outs[i].describe(),
           " but shape inference planned ", dtype_name(slot.dtype), shape_str(slot.shape));
    values_[size_t(k)] = std::move(outs[i]);
  }
}

TensorMap Executor::collect_outputs(const Plan& plan, const PreparedPlan& prepared) const {
  TensorMap result;
  for (size_t i = 0; i < plan.outputs.size(); i++) {
    const std::string& name = model_.graph.outputs[i].name;
    const Tensor& t = slot_value(prepared, plan.outputs[i]);
    if (!t.defined()) fail("graph output '", name, "' was not produced");
    // Arena memory is reused by the next run: the caller gets its own copy.
    result[name] = t.clone();
  }
  return result;
}

namespace {

// A host copy of a tensor on b's device, made after the work queued there.
Tensor host_copy(Backend& b, const Tensor& t) {
  if (b.host_visible()) return t.clone();
  b.synchronize();
  Tensor host(t.dtype(), t.shape());
  b.copy_to_host(t, host);
  return host;
}

}  // namespace

void Executor::observe_outputs(const Plan& plan, const Step& s) {
  const Node& node = model_.graph.nodes[s.node];
  Backend& b = *lanes_[s.lane].backend;
  for (int k : s.outputs) {
    if (k < 0) continue;
    const Tensor& t = values_[size_t(k)];
    if (!t.defined()) continue;
    observer_(node, plan.slots[size_t(k)].value, t.is_tensor() ? host_copy(b, t) : t);
  }
}

void Executor::restore_branch_values(const Plan& plan, const Step& s, const BranchValues& cached) {
  for (int k : s.outputs) {
    auto it = k < 0 ? cached.values.end() : cached.values.find(k);
    if (it == cached.values.end()) continue;
    // Outside the arena, the consumers' own copy: one may write in place.
    const Tensor& host = it->second;
    Backend& b = *lanes_[plan.slots[size_t(k)].lane].backend;
    Tensor t(host.dtype(), host.shape(), b.allocate(host.nbytes()), 0);
    b.copy_from_host(host, t);
    values_[size_t(k)] = std::move(t);
  }
}

void Executor::capture_branch_values(const Plan& plan, const Step& s, const Branch& branch, BranchValues& captured) {
  for (int k : s.outputs) {
    if (k < 0 || std::find(branch.boundary.begin(), branch.boundary.end(), k) == branch.boundary.end()) continue;
    const Tensor& t = values_[size_t(k)];
    if (!t.is_tensor()) {
      captured.complete = false;
      continue;
    }
    captured.values[k] = host_copy(*lanes_[plan.slots[size_t(k)].lane].backend, t);
  }
}

TensorMap Executor::run(const Plan& plan, const PreparedPlan& prepared, const TensorMap& inputs, BranchRun* branch) {
  lanes_ = bind_lanes(plan);
  values_.assign(plan.slots.size(), Tensor{});
  for (auto& [name, slot] : plan.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) fail("missing input '", name, "'");
    values_[size_t(slot)] = it->second;
  }
  for (size_t si = 0; si < plan.steps.size(); si++) {
    const Step& s = plan.steps[si];
    bool in_branch = branch && branch->branch->in_branch[si];
    auto t0 = in_branch ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (in_branch && branch->cached) {
      restore_branch_values(plan, s, *branch->cached);
    } else {
      if (s.kind == Step::Kind::copy) run_copy(plan, prepared, s);
      else if (s.control_flow) run_control_flow_step(plan, prepared, si);
      else run_node_step(plan, prepared, si);
      if (observer_ && s.kind == Step::Kind::run) observe_outputs(plan, s);
      if (in_branch && branch->captured) capture_branch_values(plan, s, *branch->branch, *branch->captured);
    }
    if (in_branch) {
      if (!lanes_[s.lane].backend->host_visible()) lanes_[s.lane].backend->synchronize();
      branch->ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    for (int k : s.release) values_[size_t(k)] = Tensor{};
  }
  for (auto& lane : lanes_) lane.backend->synchronize();
  TensorMap result = collect_outputs(plan, prepared);
  values_.clear();
  return result;
}

}  // namespace vlrt
