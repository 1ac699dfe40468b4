#include "ops/op_schema.h"

namespace vlrt {

InferContext::InferContext(const Node& node, int64_t opset, std::vector<const ValueInfo*> inputs)
    : node(node), opset(opset), outputs(node.outputs.size()), inputs_(std::move(inputs)) {}

const ValueInfo& InferContext::input(size_t i) const {
  if (!has_input(i)) fail("required input ", i, " is missing");
  return *inputs_[i];
}

DType InferContext::input_dtype(size_t i) const { return input(i).dtype; }

ValueKind InferContext::input_kind(size_t i) const { return input(i).kind; }

ValueInfo known_info(const Tensor& t) {
  ValueInfo v;
  v.dtype = t.dtype();
  v.shape = t.shape();
  v.shape_known = true;
  v.kind = t.kind();
  v.value = t;
  return v;
}

const Shape& InferContext::input_shape(size_t i) const {
  const ValueInfo& v = input(i);
  if (!v.shape_known) throw ShapeDeferred{};
  return v.shape;
}

const Tensor& InferContext::input_value(size_t i) const {
  const ValueInfo& v = input(i);
  if (!v.value) throw ShapeDeferred{};
  return *v.value;
}

const Tensor* InferContext::input_value_if_known(size_t i) const {
  if (!has_input(i)) return nullptr;
  return inputs_[i]->value ? &*inputs_[i]->value : nullptr;
}

void InferContext::set_output(size_t i, DType dtype, Shape shape) {
  VLRT_CHECK(i < outputs.size(), "output ", i, " does not exist (the node has ", outputs.size(), ")");
  for (int64_t d : shape) VLRT_CHECK(d >= 0, "inferred a negative dimension: ", shape_str(shape));
  outputs[i].dtype = dtype;
  outputs[i].shape = std::move(shape);
  outputs[i].shape_known = true;
}

void InferContext::set_output_value(size_t i, ValueKind kind, DType dtype) {
  set_output(i, dtype, {});
  outputs[i].kind = kind;
}

const SchemaTable& op_schemas() {
  static const SchemaTable table = [] {
    SchemaTable t;
    register_elementwise_schemas(t);
    register_linalg_schemas(t);
    register_normalization_schemas(t);
    register_reduction_schemas(t);
    register_spatial_schemas(t);
    register_tensor_schemas(t);
    register_loss_schemas(t);
    register_misc_schemas(t);
    register_control_flow_schemas(t);
    register_recurrent_schemas(t);
    register_contrib_schemas(t);
    register_signal_schemas(t);
    register_quantization_schemas(t);
    register_quantization_contrib_schemas(t);
    register_sequence_schemas(t);
    register_tfidf_schemas(t);
    register_fused_schemas(t);
    register_layout_schemas(t);
    return t;
  }();
  return table;
}

std::string op_key(const std::string& domain, const std::string& op_type) {
  if (domain.empty() || domain == "ai.onnx") return op_type;
  std::string key = domain;
  key += '.';
  key += op_type;
  return key;
}

const OpSchema* find_schema(const std::string& domain, const std::string& op_type) {
  auto& t = op_schemas();
  auto it = domain.empty() ? t.find(op_type) : t.find(op_key(domain, op_type));
  return it == t.end() ? nullptr : &it->second;
}

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
  if (!schema->non_tensor_values)
    for (size_t i = 0; i < inputs.size(); i++)
      if (inputs[i] && inputs[i]->kind != ValueKind::tensor)
        fail(node.label(), ": input '", node.inputs[i], "' is a ", value_kind_name(inputs[i]->kind), "; ",
             node.op_type, " takes tensors only");
  InferContext ctx(node, opset, inputs);
  try {
    schema->infer(ctx);
  } catch (const ShapeDeferred&) {
    throw;
  } catch (const Error& e) {
    rethrow_as(e, cat(node.label(), ": ", e.what()));
  }
  return std::move(ctx.outputs);
}

}  // namespace vlrt
