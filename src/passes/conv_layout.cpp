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
// Some ops run on the blocks as they are and stay inside a region, where the channels fill whole
// blocks: an elementwise op by a one-element constant (Mul, Add, Sub, Div: a model's scalar affine
// between two convolutions; in a partial last block the constant would turn the zero padding
// channels into something else), and Split and Concat along the channels (YOLO's C2f blocks), which
// become the same op along the axis of blocks; and a squeeze-and-excitation gate: GlobalAveragePool
// (on the blocks, a mean over the spatial axes) and a Mul, Add or Sub of two blocked values with the
// same channels (the gate [N, C, 1, 1] broadcasts over H and W in blocks as it did plain). Such an
// op is blocked when a value it makes is wanted in blocks by a convolution, directly or through
// other such ops; its inputs are then wanted in blocks too.
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

// An elementwise Mul, Add or Sub of two values: where both are made in blocks of the same channel
// count, the op runs on the blocks as they are (a squeeze-and-excitation gate [N, C, 1, 1] is
// [N, C / block, 1, 1, block] and broadcasts over the spatial axes as before).
bool two_blocked_operands(const Node& n) {
  bool elementwise = is_op(n, "Mul") || is_op(n, "Add") || is_op(n, "Sub");
  return elementwise && n.inputs.size() == 2 && n.outputs.size() == 1;
}

// The channel axis of a rank-4 Split or Concat, as attribute `axis` gives it: whether it is axis 1.
bool along_channels(const Node& n) {
  int64_t axis = n.attr_int("axis", 0);
  return axis == 1 || axis == -3;
}

// The channel counts of Split n's outputs when its input has `channels`; empty when not known.
std::vector<int64_t> split_sizes(FusionGraph& g, const Node& n, int64_t channels) {
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    const Tensor* sizes = g.constant(n.inputs[1]);
    if (!sizes || sizes->numel() != int64_t(n.outputs.size())) return {};
    return sizes->to_int64_vector();
  }
  const int64_t parts = int64_t(n.outputs.size());
  if (parts == 0 || channels % parts != 0) return {};  // uneven parts: the last is smaller
  return std::vector<int64_t>(size_t(parts), channels / parts);
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
  // The values that can be made in blocks, with their channel counts: every convolution's output,
  // and the outputs of the ops that run on whole blocks of such values.
  std::unordered_map<std::string, int64_t> channels;
  for (size_t i : convs) channels[g.node(i).outputs[0]] = weights(g, g.node(i))->dim(0);
  auto whole_blocks = [&](const std::string& v) {
    auto it = channels.find(v);
    return it != channels.end() && it->second % block == 0;
  };
  struct RegionOp {
    std::vector<size_t> slots;  // the inputs read in blocks
  };
  std::unordered_map<size_t, RegionOp> region_ops;
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < g.size(); i++) {
      if (!g.alive(i) || region_ops.count(i) || conv_set.count(i)) continue;
      const Node& n = g.node(i);
      RegionOp op;
      std::vector<int64_t> out_channels;
      if (is_op(n, "Split") && along_channels(n) && whole_blocks(n.inputs[0])) {
        out_channels = split_sizes(g, n, channels[n.inputs[0]]);
        int64_t sum = 0;
        for (int64_t c : out_channels) sum += c;
        if (out_channels.empty() || sum != channels[n.inputs[0]] ||
            std::any_of(out_channels.begin(), out_channels.end(), [&](int64_t c) { return c % block != 0; }))
          continue;
        op.slots = {0};
      } else if (is_op(n, "Concat") && along_channels(n) && !n.inputs.empty() && n.outputs.size() == 1) {
        int64_t sum = 0;
        bool all = true;
        for (auto& in : n.inputs) all = all && whole_blocks(in), sum += all ? channels[in] : 0;
        if (!all) continue;
        for (size_t k = 0; k < n.inputs.size(); k++) op.slots.push_back(k);
        out_channels = {sum};
      } else if (is_op(n, "GlobalAveragePool") && n.outputs.size() == 1 && whole_blocks(n.inputs[0])) {
        op.slots = {0};
        out_channels = {channels[n.inputs[0]]};
      } else if (two_blocked_operands(n) && whole_blocks(n.inputs[0]) && whole_blocks(n.inputs[1]) &&
                 channels.at(n.inputs[0]) == channels.at(n.inputs[1])) {
        op.slots = {0, 1};
        out_channels = {channels[n.inputs[0]]};
      } else {
        std::optional<size_t> slot;
        for (const std::string& in : n.inputs)
          if (!slot && whole_blocks(in)) slot = scalar_op_slot(g, i, in);
        if (!slot) continue;
        op.slots = {*slot};
        out_channels = {channels[n.inputs[*slot]]};
      }
      for (size_t k = 0; k < n.outputs.size(); k++) channels[n.outputs[k]] = out_channels[k];
      region_ops[i] = op;
      grew = true;
    }
  }
  // The blocked values: those a convolution reads as an activation, and back from there through
  // the region ops that make them (all of whose outputs are then made in blocks).
  std::unordered_set<std::string> blocked_values;
  std::vector<std::string> work;
  for (auto& [v, c] : channels) {
    std::vector<size_t> readers = g.users(v);
    if (std::any_of(readers.begin(), readers.end(), [&](size_t u) { return reads_activation(u, v); }))
      work.push_back(v);
  }
  std::unordered_set<size_t> blocked_ops;
  while (!work.empty()) {
    std::string v = work.back();
    work.pop_back();
    if (!blocked_values.insert(v).second) continue;
    int p = g.producer_index(v);
    if (p < 0 || !region_ops.count(size_t(p)) || !blocked_ops.insert(size_t(p)).second) continue;
    const Node& n = g.node(size_t(p));
    for (auto& out : n.outputs) work.push_back(out);
    for (size_t k : region_ops[size_t(p)].slots) work.push_back(n.inputs[k]);
  }
  if (blocked_values.empty()) return;
  std::unordered_map<std::string, std::string> blocked_name;  // plain name -> blocked name
  for (auto& v : blocked_values) blocked_name[v] = g.unique_name(cat(v, "_c", block));
  // Whether node u reads v (through slot k) in blocks.
  auto reads_blocks = [&](size_t u, size_t k) {
    if (conv_set.count(u)) return k == 0 || k == 3;
    if (!blocked_ops.count(u)) return false;
    const std::vector<size_t>& slots = region_ops[u].slots;
    return std::find(slots.begin(), slots.end(), k) != slots.end();
  };
  std::vector<Node> conversions;
  for (auto& [plain, blocked] : blocked_name) {
    bool plain_reader = g.pinned(plain);
    for (size_t u : g.users(plain)) {
      const Node& n = g.node(u);
      for (size_t k = 0; k < n.inputs.size(); k++)
        plain_reader |= n.inputs[k] == plain && !reads_blocks(u, k);
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
  for (size_t u : blocked_ops) {
    Node n = g.node(u);
    for (size_t k : region_ops[u].slots) blocked_as(n.inputs[k]);
    for (auto& out : n.outputs) blocked_as(out);
    std::string old_sizes;
    if (is_op(n, "Split") || is_op(n, "Concat")) {
      // [N, C / block, H, W, block]: the same op along the axis of blocks, in whole blocks.
      n.attrs["axis"] = int_attribute(1);
      if (is_op(n, "Split") && n.inputs.size() > 1 && !n.inputs[1].empty()) {
        std::vector<int64_t> sizes = g.constant(n.inputs[1])->to_int64_vector();
        for (int64_t& c : sizes) c /= block;
        old_sizes = n.inputs[1];
        n.inputs[1] = g.add_constant(cat(n.name, "_blocks"),
                                     Tensor::from_vector<int64_t>(sizes, {int64_t(sizes.size())}));
      }
      counts[cat(n.op_type, " in blocks of ", block, " channels")]++;
    } else if (is_op(n, "GlobalAveragePool")) {
      // [N, C / block, H, W, block]: the mean over axes 2 and 3, kept as size 1.
      n.op_type = "ReduceMean";
      n.attrs.clear();
      n.inputs.push_back(g.add_constant(cat(n.name, "_axes"), Tensor::from_vector<int64_t>({2, 3}, {2})));
      counts[cat("GlobalAveragePool in blocks of ", block, " channels")]++;
    } else if (n.inputs.size() == 2 && region_ops[u].slots.size() == 2) {
      counts[cat(n.op_type, " in blocks of ", block, " channels")]++;
    } else {
      counts[cat(n.op_type, " by a scalar in blocks of ", block, " channels")]++;
    }
    g.replace(u, std::move(n));
    if (!old_sizes.empty()) g.remove_if_unread(old_sizes);
  }
  for (Node& n : conversions) g.add(std::move(n));
  if (!conversions.empty()) counts["conversion from blocks"] += conversions.size();
}

}  // namespace vlrt
