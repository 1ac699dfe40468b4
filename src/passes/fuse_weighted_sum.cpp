// ReduceSum(Mul(A, W), axes = [-1]) as vlrt.WeightedSum(A, W): multi-scale deformable
// attention (GroundingDINO's encoder and decoder) sums its sampled values [.., 32, 22223, 16]
// by their weights [.., 1, 22223, 16], and the product, 16 times the size of the sum, is then
// never written.
#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

// The ReduceSum's axes (opset 13's input or the attribute before it) are exactly the last axis.
bool sums_last_axis(FusionGraph& g, const Node& sum, std::optional<size_t> rank) {
  std::optional<std::vector<int64_t>> axes = axes_of(g, sum);
  if (!axes || axes->size() != 1) return false;
  return (*axes)[0] == -1 || (rank && (*axes)[0] == int64_t(*rank) - 1);
}

void fuse_at(FusionGraph& g, size_t index, FusionCounts& counts) {
  const Node& sum = g.node(index);
  if (!is_op(sum, "ReduceSum") || sum.inputs.empty() || sum.outputs.size() != 1) return;
  size_t mul_index = 0;
  const Node* mul = sole_producer(g, sum.inputs[0], "Mul", &mul_index);
  if (!mul || mul->inputs.size() != 2) return;
  const std::string &a = mul->inputs[0], &w = mul->inputs[1];
  std::optional<size_t> rank = g.facts.rank(a);
  if (!rank || *rank == 0 || g.facts.rank(w) != rank || !sums_last_axis(g, sum, rank)) return;
  if (g.facts.dtype(a) != DType::f32 || g.facts.dtype(w) != DType::f32) return;
  // Both carry the whole summed axis: no broadcast along it.
  std::optional<Shape> a_last = g.facts.trailing_shape(a, 1), w_last = g.facts.trailing_shape(w, 1);
  if (!a_last || !w_last || *a_last != *w_last) return;
  Node fused;
  fused.name = sum.name;
  fused.domain = "vlrt";
  fused.op_type = "WeightedSum";
  fused.inputs = {a, w};
  fused.outputs = sum.outputs;
  fused.attrs["keepdims"].kind = Attribute::Kind::i;
  fused.attrs["keepdims"].i = sum.attr_int("keepdims", 1);
  g.replace_all({mul_index, index}, std::move(fused));
  counts["Mul+ReduceSum"]++;
}

}  // namespace

void fuse_weighted_sum(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fuse_at(g, i, counts);
}

}  // namespace vlrt
