#include "exec/run_node.h"

#include <cstring>

namespace vlrt {

std::string node_context(const Node& node, const std::vector<const Tensor*>& inputs) {
  std::string s = node.label();
  if (!inputs.empty()) {
    s += " with inputs ";
    for (size_t i = 0; i < inputs.size(); i++) {
      if (i) s += ", ";
      s += (i < node.inputs.size() && !node.inputs[i].empty()) ? node.inputs[i] : std::string("<none>");
      if (inputs[i]) s += ": " + inputs[i]->describe();
    }
  }
  return s;
}

std::vector<ValueInfo> infer_node(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs) {
  const OpSchema* schema = find_schema(node.domain, node.op_type);
  if (!schema)
    unsupported(node.label(), ": operator '", node.op_type, "'",
                node.domain.empty() ? "" : cat(" of domain '", node.domain, "'"), " (opset ", opset,
                ") is not implemented by vlrt");
  int given = int(inputs.size());
  if (given < schema->min_inputs || (schema->max_inputs >= 0 && given > schema->max_inputs))
    fail(node.label(), ": has ", given, " inputs, the op takes ", schema->min_inputs, " to ",
         schema->max_inputs < 0 ? std::string("any number") : std::to_string(schema->max_inputs));
  InferContext ctx(node, opset, inputs);
  try {
    schema->infer(ctx);
  } catch (const ShapeDeferred&) {
    throw;
  } catch (const Unsupported& e) {
    throw Unsupported(cat(node.label(), ": ", e.what()));
  } catch (const Error& e) {
    throw Error(cat(node.label(), ": ", e.what()));
  }
  return std::move(ctx.outputs);
}

namespace {

bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; }

Tensor half_to_f32(const Tensor& t) {
  Tensor out(DType::f32, t.shape());
  auto src = static_cast<const uint16_t*>(t.raw());
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.numel(); i++)
    dst[i] = t.dtype() == DType::f16 ? half_to_float(src[i]) : bf16_to_float(src[i]);
  return out;
}

void f32_to_half(const Tensor& src, Tensor& dst) {
  const float* s = src.data<float>();
  auto d = static_cast<uint16_t*>(dst.raw());
  for (int64_t i = 0; i < src.numel(); i++)
    d[i] = dst.dtype() == DType::f16 ? float_to_half(s[i]) : float_to_bf16(s[i]);
}

}  // namespace

void call_cpu_kernel(const Node& node, int64_t opset, ThreadPool& pool, const std::vector<const Tensor*>& inputs,
                     const std::vector<Tensor*>& outputs) {
  const CpuKernel* kernel = find_cpu_kernel(node.domain, node.op_type);
  if (!kernel) unsupported(node.label(), ": the CPU backend has no kernel for ", node.op_type);
  bool convert = false;
  if (!kernel->handles_half) {
    for (auto* t : inputs) convert = convert || (t && is_half(t->dtype()));
    for (auto* t : outputs) convert = convert || (t && is_half(t->dtype()));
  }
  if (!convert) {
    KernelContext ctx(node, opset, pool, inputs, outputs);
    kernel->fn(ctx);
    return;
  }
  // float16/bfloat16 storage, float32 compute.
  std::vector<Tensor> conv_in(inputs.size()), conv_out(outputs.size());
  std::vector<const Tensor*> k_in = inputs;
  std::vector<Tensor*> k_out = outputs;
  for (size_t i = 0; i < inputs.size(); i++) {
    if (inputs[i] && is_half(inputs[i]->dtype())) {
      conv_in[i] = half_to_f32(*inputs[i]);
      k_in[i] = &conv_in[i];
    }
  }
  for (size_t i = 0; i < outputs.size(); i++) {
    if (outputs[i] && is_half(outputs[i]->dtype())) {
      conv_out[i] = Tensor(DType::f32, outputs[i]->shape());
      k_out[i] = &conv_out[i];
    }
  }
  KernelContext ctx(node, opset, pool, k_in, k_out);
  kernel->fn(ctx);
  for (size_t i = 0; i < outputs.size(); i++)
    if (conv_out[i].defined()) f32_to_half(conv_out[i], *outputs[i]);
}

std::vector<Tensor> run_node_cpu(const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs,
                                 ThreadPool& pool) {
  std::vector<ValueInfo> in_info(inputs.size());
  std::vector<const ValueInfo*> in_ptrs(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); i++) {
    if (!inputs[i]) continue;
    in_info[i].dtype = inputs[i]->dtype();
    in_info[i].shape = inputs[i]->shape();
    in_info[i].shape_known = true;
    in_info[i].value = *inputs[i];
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
      if (i == 0 && schema->alias_input >= 0) {
        outputs[0] = inputs[schema->alias_input]->reshaped(out_info[0].shape);
        continue;
      }
      if (!out_info[i].shape_known) fail("output ", i, " shape could not be inferred");
      outputs[i] = Tensor(out_info[i].dtype, out_info[i].shape);
      out_ptrs[i] = &outputs[i];
      kernel_needed = true;
    }
    if (kernel_needed) call_cpu_kernel(node, opset, pool, inputs, out_ptrs);
    return outputs;
  } catch (const ShapeDeferred&) {
    fail(node_context(node, inputs), ": shape inference needs a value that is not available");
  } catch (const Unsupported& e) {
    std::string msg = e.what();
    if (msg.rfind(node.label(), 0) == 0) throw;
    throw Unsupported(cat(node_context(node, inputs), ": ", msg));
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind(node.label(), 0) == 0) msg = msg.substr(node.label().size() + 2);
    throw Error(cat(node_context(node, inputs), ": ", msg));
  }
}

}  // namespace vlrt
