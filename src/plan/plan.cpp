#include "plan/plan.h"

#include <algorithm>
#include <set>
#include <unordered_set>

#include "ops/op_schema.h"

namespace vlrt {

namespace {

constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

const Device kHost{};

// Ops whose kernels read each input element only at its own output index, so the
// output may take over the memory of a same-shaped input that dies at this node.
const std::unordered_set<std::string> kInPlaceOps = {
    "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs", "Erf", "Reciprocal", "Floor", "Ceil",
    "HardSwish", "HardSigmoid", "LeakyRelu", "Gelu", "Softplus", "Add", "Sub", "Mul", "Div"};

struct Lifetime {
  std::string key;
  Device device;
  size_t bytes = 0;
  size_t first = 0, last = 0;  // step indices, inclusive
};

class Builder {
 public:
  Builder(const Model& m, const InferredGraph& inf, const PlanOptions& opt)
      : model_(m), inferred_(inf), options_(opt) {}

  // Builds steps, transfers and arenas for a given node placement.
  Plan build(const std::vector<Device>& placement) {
    Plan p;
    p.node_device = placement;
    const Graph& g = model_.graph;
    std::unordered_map<std::string, Device> home;
    for (auto& in : g.inputs) home[in.name] = kHost;
    std::unordered_set<std::string> available;  // value@device present
    for (auto& in : g.inputs) available.insert(value_key(in.name, kHost));
    std::map<std::string, std::set<std::string>> weights;

    auto need = [&](const std::string& v, const Device& d) {
      if (is_constant(v)) {
        weights[d.str()].insert(v);
        return;
      }
      std::string key = value_key(v, d);
      if (available.count(key)) return;
      auto it = home.find(v);
      if (it == home.end()) fail("value '", v, "' is used before it is produced");
      Step s;
      s.kind = Step::Kind::copy;
      s.value = v;
      s.from = it->second;
      s.device = d;
      p.steps.push_back(s);
      p.transfers.push_back({v, it->second, d, value_bytes(v)});
      available.insert(key);
    };

    for (size_t i = 0; i < g.nodes.size(); i++) {
      if (inferred_.folded[i]) continue;
      const Node& n = g.nodes[i];
      const Device& d = placement[i];
      for (auto& in : n.inputs)
        if (!in.empty()) need(in, d);
      Step s;
      s.kind = Step::Kind::run;
      s.node = i;
      s.device = d;
      p.steps.push_back(s);
      for (auto& out : n.outputs) {
        if (out.empty()) continue;
        home[out] = d;
        available.insert(value_key(out, d));
      }
    }
    for (auto& out : g.outputs)
      if (!is_constant(out.name)) need(out.name, kHost);

    for (auto& [dev, names] : weights) p.weights[dev] = std::vector<std::string>(names.begin(), names.end());
    plan_memory(p);
    summarize(p);
    return p;
  }

  bool is_constant(const std::string& v) const {
    if (model_.graph.initializers.count(v)) return true;
    auto it = inferred_.values.find(v);
    return it != inferred_.values.end() && it->second.value.has_value();
  }

  size_t value_bytes(const std::string& v) const {
    auto it = inferred_.values.find(v);
    if (it == inferred_.values.end() || !it->second.shape_known) return 0;
    return size_t(shape_numel(it->second.shape)) * dtype_size(it->second.dtype);
  }

  bool shape_known(const std::string& v) const {
    auto it = inferred_.values.find(v);
    return it != inferred_.values.end() && it->second.shape_known;
  }

 private:
  void plan_memory(Plan& p) {
    const Graph& g = model_.graph;
    std::unordered_set<std::string> graph_outputs;
    for (auto& o : g.outputs) graph_outputs.insert(value_key(o.name, kHost));
    std::unordered_set<std::string> graph_inputs;
    for (auto& in : g.inputs) graph_inputs.insert(value_key(in.name, kHost));

    // Every value a step produces, and the step that reads it last.
    std::unordered_map<std::string, size_t> first, last;
    std::unordered_map<std::string, std::string> root;  // alias / in-place -> owner of the memory
    std::unordered_set<std::string> shared;              // values that some view points into
    std::vector<std::string> order;
    auto find_root = [&](std::string k) {
      while (root.count(k)) k = root[k];
      return k;
    };
    p.release_after.assign(p.steps.size(), {});
    for (size_t si = 0; si < p.steps.size(); si++) {
      const Step& s = p.steps[si];
      if (s.kind == Step::Kind::copy) {
        last[value_key(s.value, s.from)] = si;
        std::string k = value_key(s.value, s.device);
        first[k] = si;
        last[k] = si;
        order.push_back(k);
        p.allocations[k].device = s.device;
        p.allocations[k].bytes = value_bytes(s.value);
        p.allocations[k].dynamic = !shape_known(s.value);
        continue;
      }
      const Node& n = g.nodes[s.node];
      for (auto& in : n.inputs)
        if (!in.empty() && !is_constant(in)) last[value_key(in, s.device)] = si;
      const OpSchema* schema = find_schema(n.domain, n.op_type);
      for (size_t oi = 0; oi < n.outputs.size(); oi++) {
        const std::string& out = n.outputs[oi];
        if (out.empty()) continue;
        std::string k = value_key(out, s.device);
        first[k] = si;
        last[k] = si;
        Allocation& a = p.allocations[k];
        a.device = s.device;
        a.bytes = value_bytes(out);
        a.dynamic = !shape_known(out);
        order.push_back(k);
        if (oi == 0 && schema && schema->alias_input >= 0 && !n.inputs[schema->alias_input].empty()) {
          const std::string& src = n.inputs[schema->alias_input];
          a.alias_of = is_constant(src) ? src : value_key(src, s.device);
          if (!is_constant(src)) {
            root[k] = a.alias_of;
            shared.insert(a.alias_of);
          }
        }
      }
      // In place: the output takes over a same-sized input whose last reader is this node.
      if (kInPlaceOps.count(n.op_type) && !n.outputs.empty() && !n.outputs[0].empty()) {
        std::string out = value_key(n.outputs[0], s.device);
        Allocation& a = p.allocations[out];
        for (auto& in : n.inputs) {
          if (in.empty() || is_constant(in) || a.dynamic || !a.alias_of.empty()) continue;
          std::string ik = value_key(in, s.device);
          // Only a value that owns its memory alone: a view of it may still be read later.
          if (root.count(ik) || shared.count(ik) || graph_outputs.count(ik) || !p.allocations.count(ik)) continue;
          if (p.allocations[ik].bytes != a.bytes || p.allocations[ik].dynamic) continue;
          if (will_be_read_later(p, si, in, s.device)) continue;
          root[out] = ik;
          a.alias_of = ik;
          break;
        }
      }
    }
    // Graph outputs stay alive to the end (they are copied out after the run).
    for (auto& k : graph_outputs)
      if (last.count(k)) last[k] = p.steps.size();

    // Lifetimes of memory owners: a view or in-place output extends its owner's life.
    std::unordered_map<std::string, Lifetime> owners;
    for (auto& k : order) {
      std::string r = find_root(k);
      if (!p.allocations.count(r) || graph_inputs.count(r)) continue;
      auto& lt = owners[r];
      if (lt.key.empty()) {
        lt.key = r;
        lt.device = p.allocations[r].device;
        lt.bytes = p.allocations[r].bytes;
        lt.first = first[r];
        lt.last = last[r];
      }
      lt.last = std::max(lt.last, last[k]);
    }
    for (auto& [k, si] : last)
      if (si < p.steps.size() && !graph_outputs.count(k)) p.release_after[si].push_back(k);

    // Greedy by size: the biggest values first, each at the lowest offset free during its life.
    std::map<std::string, std::vector<Lifetime*>> by_device;
    for (auto& [k, lt] : owners)
      if (!p.allocations[k].dynamic && p.allocations[k].alias_of.empty()) by_device[lt.device.str()].push_back(&lt);
    for (auto& [dev, lts] : by_device) {
      std::sort(lts.begin(), lts.end(), [](const Lifetime* a, const Lifetime* b) {
        return a->bytes != b->bytes ? a->bytes > b->bytes : a->key < b->key;
      });
      std::vector<const Lifetime*> placed;
      for (Lifetime* lt : lts) {
        std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping lifetimes
        for (const Lifetime* o : placed) {
          if (o->last < lt->first || lt->last < o->first) continue;
          const Allocation& oa = p.allocations[o->key];
          busy.push_back({oa.offset, oa.offset + align_up(oa.bytes)});
        }
        std::sort(busy.begin(), busy.end());
        size_t offset = 0, need = align_up(lt->bytes);
        for (auto& [b, e] : busy) {
          if (offset + need <= b) break;
          offset = std::max(offset, e);
        }
        p.allocations[lt->key].offset = offset;
        placed.push_back(lt);
      }
    }
    // Views and in-place outputs sit at their owner's offset.
    for (auto& k : order) {
      Allocation& a = p.allocations[k];
      if (a.alias_of.empty() || is_constant(a.alias_of)) continue;
      a.offset = p.allocations[find_root(k)].offset;
    }
  }

  bool will_be_read_later(const Plan& p, size_t si, const std::string& v, const Device& d) const {
    for (size_t j = si + 1; j < p.steps.size(); j++) {
      const Step& s = p.steps[j];
      if (s.kind == Step::Kind::copy) {
        if (s.value == v && s.from == d) return true;
        continue;
      }
      if (!(s.device == d)) continue;
      for (auto& in : model_.graph.nodes[s.node].inputs)
        if (in == v) return true;
    }
    for (auto& o : model_.graph.outputs)
      if (o.name == v) return true;
    return false;
  }

  void summarize(Plan& p) {
    std::vector<Device> devs = options_.devices;
    auto add_dev = [&](const Device& d) {
      if (std::find(devs.begin(), devs.end(), d) == devs.end()) devs.push_back(d);
    };
    for (auto& s : p.steps) add_dev(s.device);
    for (auto& d : devs) {
      DevicePlan dp;
      dp.device = d;
      auto cap = options_.memory_caps.find(d.str());
      dp.cap = cap == options_.memory_caps.end() ? 0 : cap->second;
      for (auto& s : p.steps) {
        if (s.kind != Step::Kind::run || !(s.device == d)) continue;
        dp.nodes++;
        dp.ops[model_.graph.nodes[s.node].op_type]++;
      }
      auto w = p.weights.find(d.str());
      if (w != p.weights.end())
        for (auto& v : w->second) dp.weight_bytes += align_up(value_bytes(v));
      for (auto& [k, a] : p.allocations) {
        if (!(a.device == d)) continue;
        if (a.dynamic) dp.dynamic_values++;
        else if (a.alias_of.empty()) dp.peak_activation_bytes = std::max(dp.peak_activation_bytes, a.offset + align_up(a.bytes));
      }
      p.devices.push_back(dp);
    }
  }

  const Model& model_;
  const InferredGraph& inferred_;
  const PlanOptions& options_;
};

}  // namespace

const DevicePlan& Plan::device_plan(const Device& d) const {
  for (auto& dp : devices)
    if (dp.device == d) return dp;
  fail("device ", d.str(), " is not part of this plan");
}

Plan make_plan(const Model& model, const InferredGraph& inferred, const PlanOptions& options,
               const SupportsFn& supports) {
  VLRT_CHECK(!options.devices.empty(), "no devices to plan for");
  for (auto& [name, cap] : options.memory_caps) {
    bool listed = false;
    for (auto& d : options.devices) listed = listed || d.str() == name;
    if (!listed) fail("--memory names device '", name, "' which is not in the device list");
  }
  const Graph& g = model.graph;
  Builder b(model, inferred, options);
  size_t n = g.nodes.size();

  // For each node, the devices (in preference order) that can run it, and why the others cannot.
  std::vector<std::vector<size_t>> able(n);
  std::vector<std::string> first_reason(n);
  for (size_t i = 0; i < n; i++) {
    if (inferred.folded[i]) continue;
    const Node& node = g.nodes[i];
    std::vector<DType> dtypes;
    bool dynamic = false;
    for (auto& in : node.inputs) {
      auto it = in.empty() ? inferred.values.end() : inferred.values.find(in);
      dtypes.push_back(it == inferred.values.end() ? DType::undefined : it->second.dtype);
      if (!in.empty() && !b.is_constant(in) && !b.shape_known(in)) dynamic = true;
    }
    for (auto& out : node.outputs)
      if (!out.empty() && !b.shape_known(out)) dynamic = true;
    for (size_t d = 0; d < options.devices.size(); d++) {
      const Device& dev = options.devices[d];
      std::string why;
      // Values whose shape depends on data are computed where the host can read them.
      if (dynamic && !(dev == kHost)) why = "its output shape depends on data, so it runs on the host";
      else if (supports(dev, node, dtypes, &why)) {
        able[i].push_back(d);
        continue;
      }
      if (first_reason[i].empty()) first_reason[i] = why;
    }
    if (able[i].empty() && dynamic) able[i].push_back(size_t(-1));  // the host, even if not listed
    if (able[i].empty())
      unsupported(node.label(), ": no listed device can run it (", first_reason[i], ")");
  }
  auto device_at = [&](size_t idx) { return idx == size_t(-1) ? kHost : options.devices[idx]; };

  // Preferred placement: the first device that can run each node; with `min_device[i]`,
  // the first at or after it (the pipeline split).
  auto place = [&](const std::vector<size_t>& min_device) {
    std::vector<Device> placement(n, kHost);
    for (size_t i = 0; i < n; i++) {
      if (inferred.folded[i]) continue;
      size_t chosen = able[i].back();
      for (size_t d : able[i])
        if (d != size_t(-1) && d >= min_device[i]) {
          chosen = d;
          break;
        }
      placement[i] = device_at(chosen);
    }
    return placement;
  };
  auto fits = [&](const Plan& p, size_t d) {
    const DevicePlan& dp = p.device_plan(options.devices[d]);
    return dp.cap == 0 || dp.weight_bytes + dp.peak_activation_bytes <= dp.cap;
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
           dp.peak_activation_bytes, " bytes of activations but its cap is ", dp.cap,
           " bytes; raise --memory, add a device to --devices or use smaller inputs");
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (inferred.folded[i]) continue;
    const Device& preferred = options.devices[0];
    if (!(plan.node_device[i] == preferred)) {
      std::string reason = first_reason[i].empty() ? "memory cap of " + preferred.str() + " (pipeline split)"
                                                   : first_reason[i];
      plan.fallbacks.push_back({g.nodes[i].name, g.nodes[i].op_type, preferred, plan.node_device[i], reason});
    }
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
