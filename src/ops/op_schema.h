// Op semantics independent of any backend: input counts and shape/dtype inference.
//
// Adding an op: write its infer function in src/ops/<family>.cpp and add it to that
// file's register_* function; write its CPU kernel in src/backends/cpu/ops/<family>.cpp.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace vlrt {

// What is known about a value before it is computed. A sequence or an optional has
// no shape of its own: its dtype is its tensors' type, its shape is known and empty.
struct ValueInfo {
  DType dtype = DType::undefined;
  bool shape_known = false;
  Shape shape;
  // Known contents, on the host: initializers, folded constants, or the real value
  // at execution time.
  std::optional<Tensor> value;
  ValueKind kind = ValueKind::tensor;
};

// All that is known of a computed value: its kind, dtype, shape and the value itself.
ValueInfo known_info(const Tensor& t);

// Thrown by an infer function that needs a value or shape not known yet (e.g. the
// output shape of NonZero, or Reshape whose target shape depends on data). The
// shape-inference pass leaves such outputs unknown; execution infers them again
// with real values.
struct ShapeDeferred {};

class InferContext {
 public:
  InferContext(const Node& node, int64_t opset, std::vector<const ValueInfo*> inputs);

  const Node& node;
  const int64_t opset;

  // Number of inputs named by the node, including omitted optional ones.
  size_t input_count() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  DType input_dtype(size_t i) const;
  ValueKind input_kind(size_t i) const;
  // All that is known of an input (fails when it is omitted).
  const ValueInfo& input_info(size_t i) const { return input(i); }
  // Throws ShapeDeferred if not known yet.
  const Shape& input_shape(size_t i) const;
  // The input's contents; throws ShapeDeferred when not known before execution.
  const Tensor& input_value(size_t i) const;
  // nullptr when not known.
  const Tensor* input_value_if_known(size_t i) const;

  size_t output_count() const { return outputs.size(); }
  void set_output(size_t i, DType dtype, Shape shape);
  // A sequence or an optional output of tensors of `dtype`.
  void set_output_value(size_t i, ValueKind kind, DType dtype);

  std::vector<ValueInfo> outputs;

 private:
  const ValueInfo& input(size_t i) const;
  std::vector<const ValueInfo*> inputs_;
};

using InferFn = void (*)(InferContext&);

struct OpSchema {
  InferFn infer = nullptr;
  int min_inputs = 1;
  int max_inputs = 1;  // -1: variadic
  // >= 0: output 0 is a view of this input's memory (Reshape, Squeeze, Identity ...);
  // the executor aliases instead of running a kernel.
  int alias_input = -1;
  // The kernel reads each input element only at its own output index, so output 0 may
  // take over the memory of a same-sized input that dies at this node.
  bool in_place = false;
  // Output shapes depend on input data, not only on input shapes (NonZero, Unique ...):
  // known only when the node has run.
  bool data_dependent_shape = false;
  // Runs subgraphs (If, Loop, Scan): the executor runs it on the host, no backend kernel.
  bool control_flow = false;
  // Takes or makes sequences and optionals (the sequence and optional ops, Identity, If,
  // Loop); every other op is refused such inputs. Nodes that touch them run on the host.
  bool non_tensor_values = false;
};

// Keyed by op_key(): the op's name in the default ONNX domain ("Conv"), "domain.Name"
// in any other ("com.microsoft.FastGelu").
using SchemaTable = std::map<std::string, OpSchema>;

// The table key of an op of a domain.
std::string op_key(const std::string& domain, const std::string& op_type);

// All ops that vlrt knows.
const SchemaTable& op_schemas();
// nullptr when unknown.
const OpSchema* find_schema(const std::string& domain, const std::string& op_type);

// Infers the outputs of one node from what is known of its inputs. Errors are
// prefixed with the node's label; ShapeDeferred propagates.
std::vector<ValueInfo> infer_node(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs);

// "node 'x' (Add) with inputs a: float32[2,3], b: float32[4]"
std::string node_context(const Node& node, const std::vector<const Tensor*>& inputs);

// Family registration, one per file of src/ops/.
void register_elementwise_schemas(SchemaTable& t);
void register_linalg_schemas(SchemaTable& t);
void register_normalization_schemas(SchemaTable& t);
void register_reduction_schemas(SchemaTable& t);
void register_spatial_schemas(SchemaTable& t);
void register_tensor_schemas(SchemaTable& t);
void register_loss_schemas(SchemaTable& t);
void register_misc_schemas(SchemaTable& t);
void register_control_flow_schemas(SchemaTable& t);
void register_recurrent_schemas(SchemaTable& t);
void register_contrib_schemas(SchemaTable& t);
void register_signal_schemas(SchemaTable& t);
void register_quantization_schemas(SchemaTable& t);
void register_quantization_contrib_schemas(SchemaTable& t);
void register_sequence_schemas(SchemaTable& t);
void register_tfidf_schemas(SchemaTable& t);
void register_fused_schemas(SchemaTable& t);
void register_layout_schemas(SchemaTable& t);

}  // namespace vlrt
