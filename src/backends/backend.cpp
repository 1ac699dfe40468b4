#include "backends/backend.h"

namespace vlrt {

namespace {

std::vector<BackendInfo>& registry() {
  static std::vector<BackendInfo> r;
  return r;
}

std::string kinds_list() {
  std::string s;
  for (auto& b : registry()) s += cat(s.empty() ? "" : ", ", b.kind, ":N");
  return s;
}

}  // namespace

void register_backend(BackendInfo info) {
  VLRT_CHECK(!find_backend(info.kind), "backend '", info.kind, "' is registered twice");
  device_kind(info.kind);
  auto& r = registry();
  // cpu first: it is the host and the default device, whatever the link order.
  r.insert(info.kind == "cpu" ? r.begin() : r.end(), std::move(info));
}

const std::vector<BackendInfo>& registered_backends() { return registry(); }

const BackendInfo* find_backend(const std::string& kind) {
  for (auto& b : registry())
    if (b.kind == kind) return &b;
  return nullptr;
}

Device parse_device(const std::string& s) {
  size_t colon = s.find(':');
  std::string kind = s.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    std::string num = s.substr(colon + 1);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 4)
      fail("bad device '", s, "': the index after ':' must be a number, e.g. ", kind, ":0");
    index = std::stoi(num);
  }
  if (!find_backend(kind))
    fail("unknown device '", s, "'; this build has the devices ", kinds_list(),
         " (cpu:N, N >= 1, is a simulated second CPU device); `vlrt doctor` lists them");
  return Device{device_kind(kind), index};
}

std::vector<std::string> built_backends() {
  std::vector<std::string> kinds;
  for (auto& b : registry()) kinds.push_back(b.kind);
  return kinds;
}

std::shared_ptr<Backend> create_backend(const Device& d, int threads) {
  const std::string& kind = device_kind_name(d.kind);
  const BackendInfo* info = find_backend(kind);
  if (!info) unsupported("device ", d.str(), ": this vlrt build has no ", kind, " backend");
  BackendConfig config;
  config.threads = threads;
  return info->create(d.index, config);
}

std::vector<Tensor> run_node(Backend& b, const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs) {
  VLRT_CHECK(b.host_visible(), "run_node needs a backend whose memory the host reads, not ", b.device().str());
  std::vector<ValueInfo> in_info(inputs.size());
  std::vector<const ValueInfo*> in_ptrs(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); i++) {
    if (!inputs[i]) continue;
    in_info[i] = known_info(*inputs[i]);
    in_ptrs[i] = &in_info[i];
  }
  try {
    std::vector<ValueInfo> out_info = infer_node(node, opset, in_ptrs);
    const OpSchema* schema = find_schema(node.domain, node.op_type);
    std::vector<Tensor> outputs(node.outputs.size());
    std::vector<Tensor*> out_ptrs(node.outputs.size(), nullptr);
    bool kernel_needed = false;
    for (size_t i = 0; i < outputs.size(); i++) {
      if (node.outputs[i].empty()) continue;
      const Tensor* aliased = i == 0 && schema->alias_input >= 0 ? inputs[size_t(schema->alias_input)] : nullptr;
      if (aliased) {
        outputs[0] = aliased->is_tensor() ? aliased->reshaped(out_info[0].shape) : *aliased;
        continue;
      }
      if (!out_info[i].shape_known) fail("output ", i, " shape could not be inferred");
      const ValueInfo& o = out_info[i];
      if (o.kind != ValueKind::tensor) {  // made by the kernel
        out_ptrs[i] = &outputs[i];
        kernel_needed = true;
        continue;
      }
      outputs[i] = Tensor(o.dtype, o.shape, b.allocate(size_t(shape_numel(o.shape)) * dtype_size(o.dtype)), 0);
      out_ptrs[i] = &outputs[i];
      kernel_needed = true;
    }
    if (kernel_needed) {
      std::unique_ptr<KernelState> state = b.prepare(node, opset, in_ptrs);
      b.execute(node, opset, state.get(), inputs, out_ptrs);
      b.synchronize();
    }
    return outputs;
  } catch (const ShapeDeferred&) {
    fail(node_context(node, inputs), ": shape inference needs a value that is not available");
  } catch (const Error& e) {
    std::string msg = e.what();
    if (dynamic_cast<const Unsupported*>(&e) && msg.rfind(node.label(), 0) == 0) throw;
    if (msg.rfind(node.label(), 0) == 0) msg = msg.substr(node.label().size() + 2);
    rethrow_as(e, cat(node_context(node, inputs), ": ", msg));
  }
}

}  // namespace vlrt
