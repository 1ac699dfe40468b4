// What the fusion passes (fuse_*.cpp) share: a graph being rewritten, with its users and
// producers, its constants, and the shapes every value has whatever the symbolic input sizes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/backend.h"
#include "graph/graph.h"
#include "passes/shape_inference.h"

namespace vlrt {

// Shapes that hold for every input size: the graph is shape-inferred twice, with every symbolic
// input dimension set to one probe size and then to another, and a fact is taken only when both
// agree. Empty (no facts) when an input has no declared shape or every pair of probe sizes fails.
class ShapeFacts {
 public:
  ShapeFacts() = default;
  ShapeFacts(const Model& model, Backend& host);

  // The value's shape when it is the same under both probes (no symbolic axis).
  std::optional<Shape> static_shape(const std::string& v) const;
  // The last k axes of the value when they are the same under both probes.
  std::optional<Shape> trailing_shape(const std::string& v, size_t k) const;
  // The value's rank, when known.
  std::optional<size_t> rank(const std::string& v) const;
  DType dtype(const std::string& v) const;  // undefined when unknown
  // a and b have equal shapes under both probes.
  bool same_shape(const std::string& a, const std::string& b) const;
  // Under both probes, a and b have the same size on each of `axes` (both ranks known).
  bool same_dims(const std::string& a, const std::string& b, const std::vector<size_t>& axes) const;
  // The size of one axis of v when it is the same under both probes.
  std::optional<int64_t> dim(const std::string& v, size_t axis) const;

 private:
  const ValueInfo* info(int probe, const std::string& v) const;
  std::optional<InferredGraph> probes_[2];
};

// A graph under rewriting. A pass replaces the last node of a pattern by the fused node (so every
// input of the fused node is computed before it) and removes the others; finish() compacts the
// node list, re-sorts it and drops initializers nothing reads any more.
class FusionGraph {
 public:
  FusionGraph(Model& model, const ShapeFacts& facts);

  Model& model;
  const ShapeFacts& facts;

  size_t size() const { return model.graph.nodes.size(); }
  bool alive(size_t i) const { return alive_[i]; }
  Node& node(size_t i) { return model.graph.nodes[i]; }
  // The live node producing v, or nullptr (a graph input or an initializer).
  Node* producer(const std::string& v);
  int producer_index(const std::string& v) const;
  // The live nodes reading v (a node reading it twice is listed twice).
  std::vector<size_t> users(const std::string& v) const;
  // v is read by exactly one live node, and is neither a graph output nor read by a subgraph.
  bool single_use(const std::string& v) const;
  // v is a graph output or read by a subgraph: it must stay.
  bool pinned(const std::string& v) const { return pinned_.count(v) != 0; }
  // The initializer named v, or nullptr.
  const Tensor* constant(const std::string& v) const;
  // The float16 or bfloat16 initializer that v is a Cast to float32 of (a weight stored in half
  // precision whose Cast folding left, passes/half_weights.h), or "" when v is something else.
  std::string half_weight_source(const std::string& v) const;
  // A constant holding one value (any shape of one element): that value.
  std::optional<double> scalar(const std::string& v) const;

  // A value name made from `base` that no initializer or node output has yet.
  std::string unique_name(const std::string& base) const;
  // Adds an initializer named after `base`, unique in the graph; returns its name.
  std::string add_constant(const std::string& base, const Tensor& t);
  // Adds a node (finish() puts it in order).
  void add(Node n);
  void remove(size_t i);
  // Removes the node that makes v when no node reads v any more and v must not stay.
  void remove_if_unread(const std::string& v);
  // Puts `fused` in node i's place.
  void replace(size_t i, Node fused);
  // Puts `fused` in place of all of `nodes`: at the last of them, the others removed.
  void replace_all(std::vector<size_t> nodes, Node fused);
  void finish();

 private:
  void index_node(size_t i);
  std::vector<bool> alive_;
  std::unordered_map<std::string, size_t> producers_;
  std::unordered_map<std::string, std::vector<size_t>> users_;
  std::unordered_set<std::string> pinned_;  // graph outputs and subgraph reads
};

// The report of one fusion pass: how many of each pattern it fused ("Conv+Add+Relu" -> 16).
using FusionCounts = std::map<std::string, size_t>;

// The passes, one per family (each in its own fuse_*.cpp), and the clean-up before them.
void drop_identities(FusionGraph& g, FusionCounts& counts);
void fuse_conv_batchnorm(FusionGraph& g, FusionCounts& counts);
void fuse_conv_affine(FusionGraph& g, FusionCounts& counts);
void fuse_conv_activation(FusionGraph& g, FusionCounts& counts);
void fuse_matmul(FusionGraph& g, FusionCounts& counts);
void fuse_dynamic_quant_matmul(FusionGraph& g, FusionCounts& counts);
// After it: the products of one A as one vlrt.DynamicQuantizeMatMuls, where the backend runs them
// as one integer product (Backend::fast_integer_products).
void merge_dynamic_quant_matmuls(FusionGraph& g, FusionCounts& counts);
void fuse_layer_norm(FusionGraph& g, FusionCounts& counts);
void fuse_gelu(FusionGraph& g, FusionCounts& counts);
void fuse_hard_swish(FusionGraph& g, FusionCounts& counts);
void fuse_attention(FusionGraph& g, FusionCounts& counts);
void fuse_weighted_sum(FusionGraph& g, FusionCounts& counts);
void fuse_deformable_sample(FusionGraph& g, FusionCounts& counts);
// Not a fusion but run with them, last: runs of convolutions keep their activations in blocks
// of `block` channels (conv_layout.cpp).
void block_conv_layout(FusionGraph& g, FusionCounts& counts, int64_t block);
// Also last: quantized convolutions and the ops between them channels-last (qlinear_channels_last.cpp).
void qlinear_channels_last(FusionGraph& g, FusionCounts& counts);

// Matching helpers the passes share.
// n is the standard-domain op `op` (false for null).
inline bool is_op(const Node* n, const char* op) { return n && is_op(*n, op); }
// v is a constant within 1e-4 (relative) of target.
bool near(std::optional<double> v, double target);
// The operand of a two-input node other than v ("" when both are v, or v is neither).
std::string other_input(const Node& n, const std::string& v);
// The only reader of v when it is op `op` and nothing else reads v (its index in *index);
// nullptr otherwise.
Node* only_user(FusionGraph& g, const std::string& v, const char* op, size_t* index);
// The producer of v when it is op `op` and v has no other reader (its index in *index); nullptr
// otherwise.
Node* sole_producer(FusionGraph& g, const std::string& v, const char* op, size_t* index);
// The axes of a ReduceSum, Unsqueeze, Squeeze...: opset 13's constant input 1, or the attribute
// before it; nothing when the input is not a constant.
std::optional<std::vector<int64_t>> axes_of(FusionGraph& g, const Node& n);
// The nodes computing the int64 value v (a Reshape's target shape: Shape, Slice, Concat, ...)
// that nothing but `reader` depends on, found backwards from v without passing `stop`: what
// becomes dead when `reader` goes.
std::vector<size_t> shape_computation(FusionGraph& g, const std::string& v, size_t reader,
                                      const std::string& stop);

// The activation node that follows value v as its only user, fusable into a kernel's epilogue:
// Relu, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Clip with constant bounds, com.microsoft
// Gelu and FastGelu (without bias), x * Sigmoid(x) (SiLU, two nodes), and a per-tensor
// QuantizeLinear + DequantizeLinear of one scale and zero point (QuantizeDequantize, two nodes:
// a QDQ model's fake quantization). Fills the activation
// attributes as FusedConv spells them and the nodes to remove; false when there is none.
struct FusableActivation {
  std::string name;                // "Relu", "SiLU", ...
  std::vector<float> params;       // activation_params
  std::vector<size_t> nodes;       // the activation's nodes; the last one produces `output`
  std::string output;
};
std::optional<FusableActivation> activation_after(FusionGraph& g, const std::string& v);
// Writes `attribute` (the name) and `attribute`_params into a fused node.
void set_activation(Node& n, const FusableActivation& a, const std::string& attribute = "activation");

}  // namespace vlrt
