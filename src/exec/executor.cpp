#include "exec/executor.h"

#include <chrono>
#include <cstring>

#include "exec/run_node.h"
#include "ops/op_schema.h"

namespace vlrt {

void check_on_device(const Node& node, const Device& device, const std::vector<const Tensor*>& inputs) {
  for (size_t i = 0; i < inputs.size(); i++) {
    if (!inputs[i] || inputs[i]->device() == device) continue;
    fail("internal error (a bug in the plan, please report it): ", node.label(), " runs on ", device.str(),
         " but its input '", i < node.inputs.size() ? node.inputs[i] : "?", "' (", inputs[i]->describe(),
         ") is on ", inputs[i]->device().str(), "; a transfer step is missing");
  }
}

Executor::Executor(const Model& model, int threads) : model_(model), threads_(threads) {}

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

Tensor Executor::arena_tensor(const Device& d, const Allocation& a, DType dtype, const Shape& shape,
                              const std::string& what) {
  size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  if (a.dynamic || bytes == 0) return Tensor(dtype, shape, backend(d).allocate(bytes), 0);
  if (bytes > a.bytes)
    fail("internal error: ", what, " needs ", bytes, " bytes on ", d.str(), " but the plan reserved ",
         a.bytes);
  Arena& arena = arenas_[d.str()];
  size_t end = a.offset + bytes;
  if (!arena.buffer || arena.buffer->bytes < end)
    fail("internal error: ", what, " at offset ", a.offset, " exceeds the arena of ", d.str());
  arena.high_water = std::max(arena.high_water, (end + 63) / 64 * 64);
  return Tensor(dtype, shape, arena.buffer, a.offset);
}

const Tensor& Executor::constant_on(const std::string& name, const Tensor& host_value, const Device& d,
                                    bool per_run) {
  Backend& b = backend(d);
  if (b.host_visible() && d.index == 0) return host_value;
  auto& cache = (per_run ? run_constants_ : device_constants_)[d.str()];
  auto it = cache.find(name);
  if (it != cache.end() && it->second.shape() == host_value.shape() &&
      it->second.dtype() == host_value.dtype())
    return it->second;
  Tensor t(host_value.dtype(), host_value.shape(), b.allocate(host_value.nbytes()), 0);
  b.copy_from_host(host_value, t);
  return cache[name] = t;
}

TensorMap Executor::run(const InferredGraph& inferred, const Plan& plan, const TensorMap& inputs) {
  const Graph& g = model_.graph;
  int64_t opset = model_.opset();
  run_constants_.clear();
  for (auto& dp : plan.devices) {
    Arena& a = arenas_[dp.device.str()];
    if (dp.peak_activation_bytes && (!a.buffer || a.buffer->bytes < dp.peak_activation_bytes))
      a.buffer = backend(dp.device).allocate(dp.peak_activation_bytes);
  }
  auto constant = [&](const std::string& name, const Device& d) -> const Tensor& {
    auto init = g.initializers.find(name);
    if (init != g.initializers.end()) return constant_on(name, init->second, d, false);
    return constant_on(name, *inferred.values.at(name).value, d, true);
  };
  auto is_constant = [&](const std::string& name) {
    if (g.initializers.count(name)) return true;
    auto it = inferred.values.find(name);
    return it != inferred.values.end() && it->second.value.has_value();
  };

  std::unordered_map<std::string, Tensor> env;
  for (auto& [name, t] : inputs) env[value_key(name, Device{})] = t;

  for (size_t si = 0; si < plan.steps.size(); si++) {
    const Step& s = plan.steps[si];
    if (s.kind == Step::Kind::copy) {
      const Tensor& src = env.at(value_key(s.value, s.from));
      std::string key = value_key(s.value, s.device);
      Tensor dst = arena_tensor(s.device, plan.allocations.at(key), src.dtype(), src.shape(),
                                cat("copy of '", s.value, "'"));
      Backend& from = backend(s.from);
      Backend& to = backend(s.device);
      if (from.host_visible()) {
        to.copy_from_host(src, dst);
      } else if (to.host_visible()) {
        from.copy_to_host(src, dst);
      } else {
        Tensor staging(src.dtype(), src.shape());
        from.copy_to_host(src, staging);
        to.copy_from_host(staging, dst);
      }
      env[key] = dst;
      transfers_executed_++;
    } else {
      const Node& node = g.nodes[s.node];
      std::vector<const Tensor*> ins(node.inputs.size(), nullptr);
      for (size_t i = 0; i < node.inputs.size(); i++) {
        const std::string& in = node.inputs[i];
        if (in.empty()) continue;
        if (is_constant(in)) {
          ins[i] = &constant(in, s.device);
          continue;
        }
        auto it = env.find(value_key(in, s.device));
        if (it == env.end()) {
          // Not where the plan says: find it anywhere, so the device check names it.
          for (auto& [k, t] : env)
            if (k.rfind(in + "@", 0) == 0) it = env.find(k);
          if (it == env.end()) fail("internal error: ", node.label(), ": input '", in, "' is not available");
        }
        ins[i] = &it->second;
      }
      check_on_device(node, s.device, ins);

      const OpSchema* schema = find_schema(node.domain, node.op_type);
      std::vector<ValueInfo> out_info;
      bool dynamic = false;
      for (auto& o : node.outputs) dynamic = dynamic || (!o.empty() && !inferred.values.at(o).shape_known);
      if (dynamic) {  // shapes depend on data: infer from the real inputs (on the host)
        std::vector<ValueInfo> vi(ins.size());
        std::vector<const ValueInfo*> vp(ins.size(), nullptr);
        for (size_t i = 0; i < ins.size(); i++) {
          if (!ins[i]) continue;
          vi[i].dtype = ins[i]->dtype();
          vi[i].shape = ins[i]->shape();
          vi[i].shape_known = true;
          if (backend(s.device).host_visible()) vi[i].value = *ins[i];
          vp[i] = &vi[i];
        }
        out_info = infer_node(node, opset, vp);
      }
      std::vector<Tensor> outs(node.outputs.size());
      std::vector<Tensor*> out_ptrs(node.outputs.size(), nullptr);
      bool kernel_needed = false;
      for (size_t i = 0; i < node.outputs.size(); i++) {
        const std::string& o = node.outputs[i];
        if (o.empty()) continue;
        const ValueInfo& info = dynamic ? out_info[i] : inferred.values.at(o);
        const Allocation& a = plan.allocations.at(value_key(o, s.device));
        if (i == 0 && schema->alias_input >= 0) {
          outs[0] = ins[schema->alias_input]->reshaped(info.shape);
          continue;
        }
        outs[i] =
            arena_tensor(s.device, a, info.dtype, info.shape, cat("output '", o, "' of ", node.label()));
        out_ptrs[i] = &outs[i];
        kernel_needed = true;
      }
      if (kernel_needed) {
        try {
          auto t0 = std::chrono::steady_clock::now();
          backend(s.device).execute(node, opset, ins, out_ptrs);
          if (profile_) {
            backend(s.device).synchronize();
            OpProfile& p = (*profile_)[node.op_type];
            p.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            p.calls++;
          }
        } catch (const Error& e) {
          std::string msg = e.what();
          if (msg.rfind(node.label(), 0) == 0) throw;
          throw Error(cat(node_context(node, ins), " on ", s.device.str(), ": ", msg));
        }
      }
      for (size_t i = 0; i < node.outputs.size(); i++)
        if (!node.outputs[i].empty()) env[value_key(node.outputs[i], s.device)] = std::move(outs[i]);
    }
    for (auto& k : plan.release_after[si]) env.erase(k);
  }
  for (auto& [name, b] : backends_) b->synchronize();

  TensorMap result;
  for (auto& o : g.outputs) {
    if (is_constant(o.name)) {
      auto init = g.initializers.find(o.name);
      result[o.name] =
          (init != g.initializers.end() ? init->second : *inferred.values.at(o.name).value).clone();
      continue;
    }
    auto it = env.find(value_key(o.name, Device{}));
    if (it == env.end()) fail("graph output '", o.name, "' was not produced");
    // Arena memory is reused by the next run: the caller gets its own copy.
    result[o.name] = it->second.clone();
  }
  return result;
}

}  // namespace vlrt
