// The layout pass: two-dimensional float32 convolutions whose activations come from or go to
// another such convolution exchange them in blocks of channels (the layout oneDNN's kernels
// compute in), so a run of convolutions converts its activations only at its borders.
//
// Every eligible Conv or FusedConv becomes a vlrt.BlockedConv. A convolution's output is blocked
// when another eligible convolution reads it (as X or as the residual Z); that reader then takes
// it blocked. A blocked output that anything else reads, or that the graph returns, gets one
// vlrt.FromChannelBlocks back to its original name. A convolution reading a plain input takes it
// as it is (its kernel converts it), so no conversion node enters a region.
//
// A chain of elementwise ops by a one-element constant (Mul, Add, Sub, Div: a model's scalar
// affine between two convolutions) computes every value on its own, so it runs on the blocks as
// they are and stays inside the region, where the channels fill whole blocks (in a partial last
// block the constant would turn the zero padding channels into something else).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

bool is_conv(const Node& n) {
  return (n.domain.empty() && n.op_type == "Conv") || (n.domain == "com.microsoft" && n.op_type == "FusedConv");
}

// The constant weights of convolution n: float32, or as stored in half precision (the Cast to
// float32 that folding left, passes/half_weights.h); nullptr when they are computed.
const Tensor* weights(FusionGraph& g, const Node& n) {
  std::string half = g.half_weight_source(n.inputs[1]);
  return g.constant(half.empty() ? n.inputs[1] : half);
}

// A two-dimensional float32 convolution with constant weights and bias.
bool eligible(FusionGraph& g, const Node& n) {
  if (!is_conv(n) || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  const Tensor* w = weights(g, n);
  if (!w || !(w->dtype() == DType::f32 || dtype_is_half(w->dtype())) || w->rank() != 4 || w->numel() == 0)
    return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !g.constant(n.inputs[2])) return false;
  // X is float32 and two-dimensional: as inferred, or as the weights say (a Conv's X has their
  // rank, and their type unless they are stored in half precision, read through a Cast to
  // float32) where the shapes are not known.
  DType dtype = g.facts.dtype(n.inputs[0]);
  if (dtype == DType::undefined) dtype = g.half_weight_source(n.inputs[1]).empty() ? w->dtype() : DType::f32;
  return dtype == DType::f32 && g.facts.rank(n.inputs[0]).value_or(4) == size_t(4);
}

// The input slot through which node i reads v when it is a Mul, Add, Sub or Div of v by a
// one-element float32 constant of rank 4 at most (so the result has v's shape); nullopt otherwise.
std::optional<size_t> scalar_op_slot(FusionGraph& g, size_t i, const std::string& v) {
  const Node& n = g.node(i);
  bool elementwise = is_op(n, "Mul") || is_op(n, "Add") || is_op(n, "Sub") || is_op(n, "Div");
  if (!elementwise || n.inputs.size() != 2 || n.outputs.size() != 1) return std::nullopt;
  for (size_t slot = 0; slot < 2; slot++) {
    const Tensor* c = g.constant(n.inputs[1 - slot]);
    if (n.inputs[slot] == v && c && c->numel() == 1 && c->dtype() == DType::f32 && c->rank() <= 4)
      return slot;
  }
  return std::nullopt;
}

}  // namespace

void block_conv_layout(FusionGraph& g, FusionCounts& counts, int64_t block) {
  std::vector<size_t> convs;
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i) && eligible(g, g.node(i))) convs.push_back(i);
  std::unordered_set<size_t> conv_set(convs.begin(), convs.end());
  // Whether convolution `reader` takes value v in the activation slots (X, Z).
  auto reads_activation = [&](size_t reader, const std::string& v) {
    const Node& n = g.node(reader);
    return conv_set.count(reader) && (n.inputs[0] == v || (n.inputs.size() > 3 && n.inputs[3] == v));
  };
  // The blocked values: outputs of eligible convolutions read as an activation by another one,
  // directly or through a chain of scalar ops (whose values are blocked too).
  std::unordered_map<std::string, std::string> blocked_name;  // plain name -> blocked name
  std::unordered_map<std::string, int64_t> channels;
  std::unordered_map<size_t, size_t> chain_slot;  // a chain's node -> the slot reading the blocks
  for (size_t i : convs) {
    const std::string& y = g.node(i).outputs[0];
    const int64_t c = weights(g, g.node(i))->dim(0);
    std::vector<std::pair<size_t, size_t>> chain;  // node, slot
    std::string end = y;
    while (c % block == 0 && g.single_use(end)) {
      size_t u = g.users(end)[0];
      std::optional<size_t> slot = scalar_op_slot(g, u, end);
      if (!slot) break;
      chain.emplace_back(u, *slot);
      end = g.node(u).outputs[0];
    }
    std::vector<size_t> readers = g.users(end);
    if (std::none_of(readers.begin(), readers.end(), [&](size_t u) { return reads_activation(u, end); }))
      continue;
    blocked_name[y] = g.unique_name(cat(y, "_c", block));
    channels[y] = c;
    for (auto& [u, slot] : chain) {
      const std::string& v = g.node(u).outputs[0];
      blocked_name[v] = g.unique_name(cat(v, "_c", block));
      channels[v] = c;
      chain_slot[u] = slot;
    }
  }
  if (blocked_name.empty()) return;
  std::vector<Node> conversions;
  for (auto& [plain, blocked] : blocked_name) {
    bool plain_reader = g.pinned(plain);
    for (size_t u : g.users(plain)) {
      const Node& n = g.node(u);
      auto chain = chain_slot.find(u);
      for (size_t k = 0; k < n.inputs.size(); k++)
        if (n.inputs[k] == plain && !(conv_set.count(u) && (k == 0 || k == 3)) &&
            !(chain != chain_slot.end() && chain->second == k))
          plain_reader = true;
    }
    if (!plain_reader) continue;
    Node back;
    back.op_type = "FromChannelBlocks";
    back.domain = "vlrt";
    back.name = cat(plain, "_from_blocks");
    back.inputs = {blocked};
    back.outputs = {plain};
    back.attrs["block"] = int_attribute(block);
    back.attrs["channels"] = int_attribute(channels[plain]);
    conversions.push_back(std::move(back));
  }
  auto blocked_as = [&](std::string& v) -> int64_t {
    auto it = blocked_name.find(v);
    if (it == blocked_name.end()) return 0;
    v = it->second;
    return block;
  };
  const std::string pattern = cat("Conv in blocks of ", block, " channels");
  for (size_t i : convs) {
    Node n = g.node(i);
    int64_t src = blocked_as(n.inputs[0]), sum = n.inputs.size() > 3 ? blocked_as(n.inputs[3]) : 0,
            dst = blocked_as(n.outputs[0]);
    if (!src && !sum && !dst) continue;
    // Weights stored in half precision stay so: BlockedConv reads them as stored.
    const std::string w = n.inputs[1], half_w = g.half_weight_source(w);
    if (!half_w.empty()) n.inputs[1] = half_w;
    counts[half_w.empty() ? pattern
                          : cat(pattern, " (", dtype_name(g.constant(half_w)->dtype()), " weight)")]++;
    n.op_type = "BlockedConv";
    n.domain = "vlrt";
    n.attrs["src_block"] = int_attribute(src);
    n.attrs["sum_block"] = int_attribute(sum);
    n.attrs["dst_block"] = int_attribute(dst);
    g.replace(i, std::move(n));
    g.remove_if_unread(w);
  }
  for (auto& [u, slot] : chain_slot) {
    Node n = g.node(u);
    n.inputs[slot] = blocked_name.at(n.inputs[slot]);
    n.outputs[0] = blocked_name.at(n.outputs[0]);
    counts[cat(n.op_type, " by a scalar in blocks of ", block, " channels")]++;
    g.replace(u, std::move(n));
  }
  for (Node& n : conversions) g.add(std::move(n));
  if (!conversions.empty()) counts["conversion from blocks"] += conversions.size();
}

}  // namespace vlrt
