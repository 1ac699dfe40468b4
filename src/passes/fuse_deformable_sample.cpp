// Multi-scale deformable attention as its PyTorch reference writes it, once fuse_weighted_sum has
// made its sum a vlrt.WeightedSum:
//   S_l = Unsqueeze(GridSample(X_l, Grid_l), axes = [-2])     [B, C, Q, 1, P] per level
//   A = Reshape(Concat(S_0, ..., S_{L-1}, axis = -2))          [B, C, Q, L * P]
//   Y = vlrt.WeightedSum(A, W)                                 W [B, 1, Q, L * P]
// becomes vlrt.DeformableSampleSum(W, X_0, Grid_0, ...): GroundingDINO's encoder samples
// [8, 32, 22223, 4] values per level and layer, and they are then never written.
#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

// The GridSample attributes the fused node carries: every level's must be the same.
struct Sampling {
  std::string mode, padding_mode;
  int64_t align_corners = 0;
  bool operator==(const Sampling&) const = default;
};

void fuse_at(FusionGraph& g, size_t index, FusionCounts& counts) {
  const Node& sum = g.node(index);
  if (!(sum.domain == "vlrt" && sum.op_type == "WeightedSum") || sum.inputs.size() != 2) return;
  const std::string &a = sum.inputs[0], &w = sum.inputs[1];
  size_t reshape_index = 0, concat_index = 0;
  const Node* reshape = sole_producer(g, a, "Reshape", &reshape_index);
  if (!reshape) return;
  const std::string& stacked = reshape->inputs[0];
  int concat_at = g.producer_index(stacked);
  if (concat_at < 0 || !is_op(g.node(size_t(concat_at)), "Concat") || g.pinned(stacked)) return;
  concat_index = size_t(concat_at);
  const Node* concat = &g.node(concat_index);
  if (concat->inputs.empty()) return;
  // The stacked samples may also be read by the Shape that computes the Reshape's target, and
  // that computation goes with the Reshape.
  std::vector<size_t> target =
      shape_computation(g, reshape->inputs.size() > 1 ? reshape->inputs[1] : "", reshape_index, stacked);
  for (size_t user : g.users(stacked))
    if (user != reshape_index && !std::count(target.begin(), target.end(), user)) return;
  int64_t axis = concat->attr_int("axis", 0);
  if (g.facts.rank(stacked) != 5 || (axis != 3 && axis != -2) || g.facts.rank(a) != 4 || g.facts.rank(w) != 4)
    return;
  // [B, C, Q, L, P] read as [B, C, Q, L * P]; W [B, 1, Q, L * P].
  const int64_t levels = int64_t(concat->inputs.size());
  std::optional<Shape> level_points = g.facts.trailing_shape(stacked, 2);
  if (!level_points || (*level_points)[0] != levels) return;
  const int64_t points = (*level_points)[1];
  if (g.facts.trailing_shape(a, 1) != Shape{levels * points} || !g.facts.same_dims(stacked, a, {0, 1, 2}))
    return;
  if (g.facts.dim(w, 1) != 1 || !g.facts.same_dims(w, a, {0, 2})) return;
  std::vector<size_t> nodes = {concat_index, reshape_index, index};
  nodes.insert(nodes.end(), target.begin(), target.end());
  std::vector<std::string> inputs = {w};
  std::optional<Sampling> sampling;
  for (const std::string& level : concat->inputs) {
    size_t unsqueeze_index = 0, sample_index = 0;
    const Node* unsqueeze = sole_producer(g, level, "Unsqueeze", &unsqueeze_index);
    if (!unsqueeze || g.facts.rank(unsqueeze->inputs[0]) != 4) return;
    std::optional<std::vector<int64_t>> axes = axes_of(g, *unsqueeze);
    if (!axes || axes->size() != 1 || ((*axes)[0] != 3 && (*axes)[0] != -2)) return;
    const Node* sample = sole_producer(g, unsqueeze->inputs[0], "GridSample", &sample_index);
    if (!sample || sample->inputs.size() != 2) return;
    Sampling s{sample->attr_string("mode", "bilinear"), sample->attr_string("padding_mode", "zeros"),
               sample->attr_int("align_corners", 0)};
    if ((s.mode != "bilinear" && s.mode != "linear") || (sampling && !(*sampling == s))) return;
    sampling = s;
    const std::string &x = sample->inputs[0], &grid = sample->inputs[1];
    if (g.facts.dtype(x) != DType::f32 || g.facts.dtype(grid) != DType::f32 || g.facts.rank(x) != 4) return;
    inputs.push_back(x);
    inputs.push_back(grid);
    nodes.push_back(unsqueeze_index);
    nodes.push_back(sample_index);
  }
  Node fused;
  fused.name = sum.name;
  fused.domain = "vlrt";
  fused.op_type = "DeformableSampleSum";
  fused.inputs = std::move(inputs);
  fused.outputs = sum.outputs;
  fused.attrs["mode"].kind = fused.attrs["padding_mode"].kind = Attribute::Kind::s;
  fused.attrs["mode"].s = "bilinear";
  fused.attrs["padding_mode"].s = sampling->padding_mode;
  fused.attrs["align_corners"].kind = fused.attrs["keepdims"].kind = Attribute::Kind::i;
  fused.attrs["align_corners"].i = sampling->align_corners;
  fused.attrs["keepdims"].i = sum.attr_int("keepdims", 1);
  g.replace_all(nodes, std::move(fused));
  counts["GridSample+Concat+WeightedSum"]++;
}

}  // namespace

void fuse_deformable_sample(FusionGraph& g, FusionCounts& counts) {
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i)) fuse_at(g, i, counts);
}

}  // namespace vlrt
