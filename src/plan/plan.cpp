#include "plan/plan.h"

#include <algorithm>
#include <set>

#include "ops/op_schema.h"

namespace vlrt {

namespace {

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

const Device kHost{};

struct Lifetime {
  int slot = -1;
  size_t bytes = 0;
  size_t first = 0, last = 0;  // step indices, inclusive
};

class Builder {
 public:
  Builder(const Model& m, const InferredGraph& inf, const PlanOptions& opt, const PlanHooks& hooks)
      : model_(m), inferred_(inf), options_(opt), hooks_(hooks) {}

  // Builds steps, slots, transfers and arenas for a given node placement.
  Plan build(const std::vector<Device>& placement) {
    Plan p;
    p.node_device = placement;
    add_lanes(p, placement);
    const Graph& g = model_.graph;
    std::map<std::pair<std::string, int>, int> slot_of;  // (value, lane) -> slot, while building
    std::map<std::string, size_t> home;                  // value -> lane that produced it
    auto add_slot = [&](const std::string& v, size_t lane) {
      Slot s;
      s.value = v;
      s.lane = lane;
      s.device = p.devices[lane].device;
      s.constant = is_constant(v);
      auto it = inferred_.values.find(v);
      if (it != inferred_.values.end()) {
        s.dtype = it->second.dtype;
        // Sequences and optionals are host values their kernel makes: never in an arena.
        s.dynamic = !it->second.shape_known || it->second.kind != ValueKind::tensor;
        if (!s.dynamic) s.shape = it->second.shape;
      }
      s.bytes = s.dynamic ? 0 : size_t(shape_numel(s.shape)) * dtype_size(s.dtype);
      p.slots.push_back(s);
      return slot_of[{v, int(lane)}] = int(p.slots.size() - 1);
    };
    for (auto& in : g.inputs) {
      int s = add_slot(in.name, host_lane_);
      p.slots[size_t(s)].input = true;
      p.inputs.push_back({in.name, s});
      home[in.name] = host_lane_;
    }
    auto need = [&](const std::string& v, size_t lane) {
      auto found = slot_of.find({v, int(lane)});
      if (found != slot_of.end()) return found->second;
      if (is_constant(v)) return add_slot(v, lane);
      auto it = home.find(v);
      if (it == home.end()) fail("value '", v, "' is used before it is produced");
      Step s;
      s.kind = Step::Kind::copy;
      s.from = p.devices[it->second].device;
      s.inputs = {slot_of.at({v, int(it->second)})};
      s.device = p.devices[lane].device;
      s.lane = lane;
      int dst = add_slot(v, lane);
      s.outputs = {dst};
      p.steps.push_back(s);
      p.transfers.push_back({v, s.from, s.device, p.slots[size_t(dst)].bytes});
      return dst;
    };

    for (size_t i = 0; i < g.nodes.size(); i++) {
      if (inferred_.folded[i]) continue;
      const Node& n = g.nodes[i];
      Step s;
      s.node = i;
      s.device = placement[i];
      s.lane = lane_of(p, placement[i]);
      for (auto& in : n.inputs) s.inputs.push_back(in.empty() ? -1 : need(in, s.lane));
      const OpSchema* schema = find_schema(n.domain, n.op_type);
      s.control_flow = schema && schema->control_flow;
      if (s.control_flow)
        for (auto& in : implicit_inputs(n)) s.inputs.push_back(need(in, s.lane));
      s.alias_input = schema ? schema->alias_input : -1;
      s.dynamic = schema && schema->data_dependent_shape;
      for (auto& out : n.outputs) {
        if (out.empty()) {
          s.outputs.push_back(-1);
          continue;
        }
        int o = add_slot(out, s.lane);
        s.dynamic = s.dynamic || p.slots[size_t(o)].dynamic;
        s.outputs.push_back(o);
        home[out] = s.lane;
      }
      p.steps.push_back(std::move(s));
    }
    for (auto& out : g.outputs) p.outputs.push_back(need(out.name, host_lane_));

    mark_prepared_state(p);
    plan_memory(p);
    summarize(p);
    return p;
  }

  bool is_constant(const std::string& v) const {
    if (model_.graph.initializers.count(v)) return true;
    auto it = inferred_.values.find(v);
    return it != inferred_.values.end() && it->second.value.has_value();
  }

  bool shape_known(const std::string& v) const {
    auto it = inferred_.values.find(v);
    return it != inferred_.values.end() && it->second.shape_known;
  }

  bool is_tensor(const std::string& v) const {
    auto it = inferred_.values.find(v);
    return it == inferred_.values.end() || it->second.kind == ValueKind::tensor;
  }

 private:
  // Plan::devices: the listed devices in order, then the host where it is not listed
  // (graph inputs and outputs live there).
  void add_lanes(Plan& p, const std::vector<Device>& placement) {
    auto add = [&](const Device& d) {
      for (auto& dp : p.devices)
        if (dp.device == d) return;
      DevicePlan dp;
      dp.device = d;
      p.devices.push_back(dp);
    };
    for (auto& d : options_.devices) add(d);
    add(kHost);
    for (size_t i = 0; i < placement.size(); i++)
      if (!inferred_.folded[i]) add(placement[i]);
    host_lane_ = lane_of(p, kHost);
  }

  static size_t lane_of(const Plan& p, const Device& d) {
    for (size_t i = 0; i < p.devices.size(); i++)
      if (p.devices[i].device == d) return i;
    fail("internal error: device ", d.str(), " has no lane in the plan");
  }

  size_t alignment(const Device& d) const { return hooks_.alignment ? hooks_.alignment(d) : 64; }

  // Each run step's prepared-state bytes; a constant whose every reader on its device
  // holds it in prepared state is `replaced` (never copied there).
  void mark_prepared_state(Plan& p) {
    if (!hooks_.prepare_info) return;
    const Graph& g = model_.graph;
    std::vector<int> readers(p.slots.size(), 0), replacing(p.slots.size(), 0);
    for (auto& s : p.steps) {
      if (s.kind != Step::Kind::run) continue;
      if (s.control_flow) {  // runs no kernel: its inputs are read as they are
        for (int in : s.inputs)
          if (in >= 0) readers[size_t(in)]++;
        continue;
      }
      const Node& n = g.nodes[s.node];
      std::vector<const ValueInfo*> infos;
      for (auto& in : n.inputs) {
        auto it = in.empty() ? inferred_.values.end() : inferred_.values.find(in);
        infos.push_back(it == inferred_.values.end() ? nullptr : &it->second);
      }
      PrepareInfo info = hooks_.prepare_info(s.device, n, infos);
      s.prepared_bytes = info.bytes;
      s.kernel = info.kernel;
      for (int in : s.inputs)
        if (in >= 0) readers[size_t(in)]++;
      for (size_t k : info.replaced_inputs) {
        VLRT_CHECK(k < s.inputs.size() && s.inputs[k] >= 0 && p.slots[size_t(s.inputs[k])].constant,
                   n.label(), ": the backend of ", s.device.str(), " replaces input ", k,
                   ", which is not a constant");
        replacing[size_t(s.inputs[k])]++;
      }
    }
    for (int o : p.outputs) readers[size_t(o)]++;  // a graph output is read by the caller
    for (size_t i = 0; i < p.slots.size(); i++)
      p.slots[i].replaced = p.slots[i].constant && readers[i] > 0 && replacing[i] == readers[i];
  }

  // Which slots share memory: views point into their input, and an in-place output
  // takes over a same-sized input whose last reader is its node. Fills `root` (the slot
  // owning the memory, -1 for owners) and each slot's alias_of.
  void share_memory(Plan& p, std::vector<int>& root) const {
    size_t n_slots = p.slots.size();
    std::vector<bool> output(n_slots, false), shared(n_slots, false);
    for (int o : p.outputs) output[size_t(o)] = true;
    std::vector<size_t> last_read(n_slots, 0);
    for (size_t si = 0; si < p.steps.size(); si++)
      for (int in : p.steps[si].inputs)
        if (in >= 0) last_read[size_t(in)] = si;
    for (size_t si = 0; si < p.steps.size(); si++) {
      const Step& s = p.steps[si];
      if (s.kind == Step::Kind::copy) continue;
      if (s.alias_input >= 0 && s.outputs[0] >= 0 && s.inputs[size_t(s.alias_input)] >= 0) {
        int src = s.inputs[size_t(s.alias_input)];
        p.slots[size_t(s.outputs[0])].alias_of = src;
        if (!p.slots[size_t(src)].constant) {
          root[size_t(s.outputs[0])] = src;
          shared[size_t(src)] = true;
        }
      }
      const Node& n = model_.graph.nodes[s.node];
      const OpSchema* schema = find_schema(n.domain, n.op_type);
      if (!schema || !schema->in_place || s.outputs.empty() || s.outputs[0] < 0) continue;
      Slot& out = p.slots[size_t(s.outputs[0])];
      if (out.dynamic || out.alias_of >= 0) continue;
      for (int in : s.inputs) {
        if (in < 0) continue;
        const Slot& is = p.slots[size_t(in)];
        // Only a value that owns its memory alone: a view of it may still be read later.
        if (is.constant || is.input || is.dynamic || root[size_t(in)] >= 0 || shared[size_t(in)] ||
            output[size_t(in)] || is.bytes != out.bytes || last_read[size_t(in)] != si)
          continue;
        root[size_t(s.outputs[0])] = in;
        out.alias_of = in;
        break;
      }
    }
  }

  // Each memory owner's lifetime in steps (a view or in-place output extends its owner's),
  // and each step's release list.
  std::map<int, Lifetime> lifetimes(Plan& p, const std::vector<int>& root) const {
    size_t n_slots = p.slots.size(), end = p.steps.size();
    std::vector<size_t> first(n_slots, 0), last(n_slots, 0);
    std::vector<bool> produced(n_slots, false);
    for (size_t si = 0; si < p.steps.size(); si++) {
      for (int in : p.steps[si].inputs)
        if (in >= 0 && !p.slots[size_t(in)].constant) last[size_t(in)] = si;
      for (int o : p.steps[si].outputs)
        if (o >= 0) {
          first[size_t(o)] = last[size_t(o)] = si;
          produced[size_t(o)] = true;
        }
    }
    // Graph outputs stay alive to the end (they are copied out after the run).
    for (int o : p.outputs)
      if (produced[size_t(o)] || p.slots[size_t(o)].input) last[size_t(o)] = end;
    std::map<int, Lifetime> owners;
    for (size_t k = 0; k < n_slots; k++) {
      if (!produced[k]) continue;
      int r = int(k);
      while (root[size_t(r)] >= 0) r = root[size_t(r)];
      Lifetime& lt = owners[r];
      if (lt.slot < 0) lt = Lifetime{r, p.slots[size_t(r)].bytes, first[size_t(r)], last[size_t(r)]};
      lt.last = std::max(lt.last, last[k]);
    }
    for (size_t k = 0; k < n_slots; k++)
      if ((produced[k] || p.slots[k].input) && last[k] < end && !p.slots[k].constant)
        p.steps[last[k]].release.push_back(int(k));
    return owners;
  }

  // Greedy by size: the biggest values first, each at the lowest offset free during its life.
  void place_in_arenas(Plan& p, std::map<int, Lifetime>& owners) const {
    std::map<size_t, std::vector<Lifetime*>> by_lane;
    for (auto& [k, lt] : owners) {
      const Slot& s = p.slots[size_t(k)];
      if (!s.dynamic && s.alias_of < 0) by_lane[s.lane].push_back(&lt);
    }
    for (auto& [lane, lts] : by_lane) {
      size_t align = alignment(p.devices[lane].device);
      std::sort(lts.begin(), lts.end(), [&](const Lifetime* a, const Lifetime* b) {
        return a->bytes != b->bytes ? a->bytes > b->bytes
                                    : p.slots[size_t(a->slot)].value < p.slots[size_t(b->slot)].value;
      });
      std::vector<const Lifetime*> placed;
      for (Lifetime* lt : lts) {
        std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping lifetimes
        for (const Lifetime* o : placed) {
          if (o->last < lt->first || lt->last < o->first) continue;
          const Slot& os = p.slots[size_t(o->slot)];
          busy.push_back({os.offset, os.offset + align_up(os.bytes, align)});
        }
        std::sort(busy.begin(), busy.end());
        size_t offset = 0, need = align_up(lt->bytes, align);
        for (auto& [b, e] : busy) {
          if (offset + need <= b) break;
          offset = std::max(offset, e);
        }
        p.slots[size_t(lt->slot)].offset = offset;
        placed.push_back(lt);
      }
    }
  }

  void plan_memory(Plan& p) {
    std::vector<int> root(p.slots.size(), -1);
    share_memory(p, root);
    std::map<int, Lifetime> owners = lifetimes(p, root);
    place_in_arenas(p, owners);
    // Views and in-place outputs sit at their owner's offset.
    for (size_t k = 0; k < p.slots.size(); k++) {
      int r = int(k);
      while (root[size_t(r)] >= 0) r = root[size_t(r)];
      if (r != int(k)) p.slots[k].offset = p.slots[size_t(r)].offset;
    }
  }

  void summarize(Plan& p) {
    const Graph& g = model_.graph;
    for (auto& dp : p.devices) {
      auto cap = options_.memory_caps.find(dp.device.str());
      dp.cap = cap == options_.memory_caps.end() ? 0 : cap->second;
    }
    std::set<std::string> resident_charged;
    p.resident_devices.clear();
    for (auto& s : p.steps) {
      if (s.kind != Step::Kind::run) continue;
      DevicePlan& dp = p.devices[s.lane];
      const std::string& op = g.nodes[s.node].op_type;
      for (int in : s.inputs) {  // a resident input counts where its data is first read
        if (in < 0 || op == "Shape" || op == "Size") continue;
        const std::string& value = p.slots[size_t(in)].value;
        auto resident = options_.resident_inputs.find(value);
        if (resident != options_.resident_inputs.end() && resident_charged.insert(value).second) {
          dp.resident_bytes += resident->second;
          p.resident_devices[value] = dp.device;
        }
      }
      dp.nodes++;
      dp.ops[g.nodes[s.node].op_type]++;
      if (s.control_flow) count_subgraph_ops(g.nodes[s.node], dp.ops);
      dp.prepared_bytes += s.prepared_bytes;
      if (!s.kernel.empty()) dp.kernels[s.kernel]++;
    }
    for (auto& s : p.slots) {
      DevicePlan& dp = p.devices[s.lane];
      size_t align = alignment(dp.device);
      if (s.constant) {
        if (!s.replaced) dp.weight_bytes += align_up(s.bytes, align);
      } else if (s.dynamic) {
        dp.dynamic_values++;
      } else if (s.alias_of < 0 && !s.input) {
        dp.peak_activation_bytes = std::max(dp.peak_activation_bytes, s.offset + align_up(s.bytes, align));
      }
    }
  }

  // Ops inside a node's subgraphs (nested ones too) count where the node runs.
  static void count_subgraph_ops(const Node& n, std::map<std::string, int>& ops) {
    for (auto& [attr, sub] : n.subgraphs())
      for (auto& inner : sub->nodes) {
        ops[inner.op_type]++;
        count_subgraph_ops(inner, ops);
      }
  }

  const Model& model_;
  const InferredGraph& inferred_;
  const PlanOptions& options_;
  const PlanHooks& hooks_;
  size_t host_lane_ = 0;
};

}  // namespace

const DevicePlan& Plan::device_plan(const Device& d) const {
  for (auto& dp : devices)
    if (dp.device == d) return dp;
  fail("device ", d.str(), " is not part of this plan");
}

int Plan::slot(const std::string& value, const Device& d) const {
  for (size_t i = 0; i < slots.size(); i++)
    if (slots[i].value == value && slots[i].device == d) return int(i);
  return -1;
}

namespace {

// The devices (indices into PlanOptions::devices, in preference order) that can run a
// node, and why the preferred one cannot. kAnyHost: only the host, though not listed.
constexpr size_t kAnyHost = size_t(-1);
struct Candidates {
  std::vector<size_t> able;
  std::string first_reason;
};

std::vector<Candidates> candidate_devices(const Model& model, const InferredGraph& inferred,
                                          const PlanOptions& options, const PlanHooks& hooks, const Builder& b) {
  const Graph& g = model.graph;
  std::vector<Candidates> c(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); i++) {
    if (inferred.folded[i]) continue;
    const Node& node = g.nodes[i];
    std::vector<DType> dtypes;
    const OpSchema* schema = find_schema(node.domain, node.op_type);
    bool dynamic = schema && schema->data_dependent_shape;
    for (auto& in : node.inputs) {
      auto it = in.empty() ? inferred.values.end() : inferred.values.find(in);
      dtypes.push_back(it == inferred.values.end() ? DType::undefined : it->second.dtype);
      if (!in.empty() && !b.is_constant(in) && !b.shape_known(in)) dynamic = true;
    }
    for (auto& out : node.outputs)
      if (!out.empty() && !b.shape_known(out)) dynamic = true;
    bool host_values = false;
    for (auto* names : {&node.inputs, &node.outputs})
      for (auto& v : *names) host_values = host_values || (!v.empty() && !b.is_tensor(v));
    if ((schema && schema->control_flow) || host_values) {
      for (size_t d = 0; d < options.devices.size(); d++)
        if (options.devices[d] == kHost) c[i].able.push_back(d);
      if (c[i].able.empty()) c[i].able.push_back(kAnyHost);
      c[i].first_reason = host_values ? cat(node.op_type, " reads or makes a sequence or an optional, host values")
                                      : cat(node.op_type, " runs its subgraphs on the host");
      continue;
    }
    std::string all_reasons;
    for (size_t d = 0; d < options.devices.size(); d++) {
      const Device& dev = options.devices[d];
      std::string why;
      // Values whose shape depends on data are computed where the host can read them.
      if (dynamic && !(dev == kHost)) why = "its output shape depends on data, so it runs on the host";
      else if (hooks.supports(dev, node, dtypes, &why)) {
        c[i].able.push_back(d);
        continue;
      }
      if (c[i].first_reason.empty()) c[i].first_reason = why;
      all_reasons += cat(all_reasons.empty() ? "" : "; ", dev.str(), ": ", why);
    }
    if (c[i].able.empty() && dynamic) c[i].able.push_back(kAnyHost);
    if (c[i].able.empty())
      unsupported(node.label(), ": no listed device can run it (", all_reasons,
                  "); add a device that can to --devices, e.g. cpu");
  }
  return c;
}

}  // namespace

Plan make_plan(const Model& model, const InferredGraph& inferred, const PlanOptions& options,
               const PlanHooks& hooks) {
  VLRT_CHECK(!options.devices.empty(), "no devices to plan for");
  for (auto& [name, cap] : options.memory_caps) {
    bool listed = false;
    for (auto& d : options.devices) listed = listed || d.str() == name;
    if (!listed) fail("--memory names device '", name, "' which is not in the device list");
  }
  const Graph& g = model.graph;
  Builder b(model, inferred, options, hooks);
  size_t n = g.nodes.size();
  std::vector<Candidates> candidates = candidate_devices(model, inferred, options, hooks, b);

  // Preferred placement: the first device that can run each node; with `min_device[i]`,
  // the first at or after it (the pipeline split).
  auto place = [&](const std::vector<size_t>& min_device) {
    std::vector<Device> placement(n, kHost);
    for (size_t i = 0; i < n; i++) {
      if (inferred.folded[i]) continue;
      const std::vector<size_t>& able = candidates[i].able;
      size_t chosen = able.back();
      for (size_t d : able)
        if (d != kAnyHost && d >= min_device[i]) {
          chosen = d;
          break;
        }
      placement[i] = chosen == kAnyHost ? kHost : options.devices[chosen];
    }
    return placement;
  };
  auto fits = [&](const Plan& p, size_t d) {
    const DevicePlan& dp = p.device_plan(options.devices[d]);
    return dp.cap == 0 || dp.total_bytes() <= dp.cap;
  };

  std::vector<size_t> min_device(n, 0);
  Plan plan = b.build(place(min_device));
  bool all_fit = true;
  for (size_t d = 0; d < options.devices.size(); d++) all_fit = all_fit && fits(plan, d);
  if (!all_fit) {
    // Pipeline split: device d takes the longest prefix of the remaining nodes that fits its cap.
    size_t start = 0;
    for (size_t d = 0; d + 1 < options.devices.size(); d++) {
      size_t lo = start, hi = n;  // largest end in [start, n] such that nodes [start, end) fit on d
      while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        std::vector<size_t> md(n, d + 1);
        for (size_t i = 0; i < start; i++) md[i] = min_device[i];
        for (size_t i = start; i < mid; i++) md[i] = d;
        if (fits(b.build(place(md)), d)) lo = mid;
        else hi = mid - 1;
      }
      for (size_t i = start; i < lo; i++) min_device[i] = d;
      for (size_t i = lo; i < n; i++) min_device[i] = d + 1;
      start = lo;
    }
    plan = b.build(place(min_device));
    for (size_t d = 0; d < options.devices.size(); d++) {
      if (fits(plan, d)) continue;
      const DevicePlan& dp = plan.device_plan(options.devices[d]);
      fail("the model does not fit: ", dp.device.str(), " needs ", dp.weight_bytes, " bytes of weights + ",
           dp.peak_activation_bytes, " bytes of activations + ", dp.prepared_bytes, " bytes of prepared state",
           dp.resident_bytes ? cat(" + ", dp.resident_bytes, " bytes of resident inputs (KV cache)") : "",
           " but its cap is ", dp.cap,
           " bytes; raise --memory, add a device to --devices or use smaller inputs");
    }
  }
  const Device& preferred = options.devices[0];
  for (size_t i = 0; i < n; i++) {
    if (inferred.folded[i] || plan.node_device[i] == preferred) continue;
    const std::string& why = candidates[i].first_reason;
    plan.fallbacks.push_back({g.nodes[i].name, g.nodes[i].op_type, preferred, plan.node_device[i],
                              why.empty() ? "memory cap of " + preferred.str() + " (pipeline split)" : why});
  }
  return plan;
}

size_t parse_bytes(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && (isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) i++;
  if (i == 0) fail("bad memory size '", s, "' (expected e.g. 512MiB or 2GiB)");
  double v = std::stod(s.substr(0, i));
  std::string unit = s.substr(i);
  static const std::map<std::string, double> units = {
      {"", 1},         {"B", 1},           {"KB", 1e3},        {"MB", 1e6},          {"GB", 1e9},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}};
  auto it = units.find(unit);
  if (it == units.end()) fail("bad memory unit '", unit, "' in '", s, "' (use B, KB, MB, GB, KiB, MiB or GiB)");
  return size_t(v * it->second);
}

std::pair<std::string, size_t> parse_memory_cap(const std::string& arg) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos) fail("expected --memory DEVICE=SIZE (e.g. opencl:0=2GiB), got '", arg, "'");
  return {arg.substr(0, eq), parse_bytes(arg.substr(eq + 1))};
}

}  // namespace vlrt
