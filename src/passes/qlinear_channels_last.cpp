// The channels-last pass for quantized convolutions: two-dimensional QLinearConvs on uint8
// activations become com.microsoft QLinearConv with channels_last=1, whose X and Y lie as
// [N, H, W, C] (the layout the backend's integer convolutions compute in), so a network of them
// converts its activations only at its borders.
//
// Ops between such convolutions join where they run on channels-last values as ONNX Runtime's
// forms of them do: QLinearAdd and QLinearMul of two channels-last values of the same shape (an
// elementwise op of equal shapes is the same on either layout), uint8 or int8 MaxPool (as
// com.microsoft NhwcMaxPool) and QLinearGlobalAveragePool (channels_last=1) of a channels-last
// value. A convolution's X made elsewhere goes through a Transpose to [N, H, W, C]; a channels-last
// value that a node outside the region reads, or that the graph returns, comes back through a
// Transpose to its original name and layout.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/fusion_graph.h"

namespace vlrt {

namespace {

// A standard QLinearConv over two spatial axes, on uint8 activations, with constant weights.
bool eligible_conv(FusionGraph& g, const Node& n) {
  if (!is_op(n, "QLinearConv") || n.inputs.size() < 8 || n.outputs.size() != 1) return false;
  const Tensor* w = g.constant(n.inputs[3]);
  return w && w->rank() == 4 && g.facts.dtype(n.inputs[0]) == DType::u8 &&
         g.facts.rank(n.inputs[0]).value_or(0) == size_t(4);
}

bool is_contrib(const Node& n, const char* op) { return n.domain == "com.microsoft" && n.op_type == op; }

Node transpose(const std::string& from, const std::string& to, std::vector<int64_t> perm) {
  Node t;
  t.op_type = "Transpose";
  t.name = cat(to, "_transpose");
  t.inputs = {from};
  t.outputs = {to};
  t.attrs["perm"] = ints_attribute(std::move(perm));
  return t;
}

}  // namespace

void qlinear_channels_last(FusionGraph& g, FusionCounts& counts) {
  // Per node of the region, the input slots it reads channels-last.
  std::unordered_map<size_t, std::vector<size_t>> region;
  std::unordered_set<std::string> last;  // the values made channels-last
  for (size_t i = 0; i < g.size(); i++)
    if (g.alive(i) && eligible_conv(g, g.node(i))) {
      region[i] = {0};
      last.insert(g.node(i).outputs[0]);
    }
  if (region.empty()) return;
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < g.size(); i++) {
      if (!g.alive(i) || region.count(i)) continue;
      const Node& n = g.node(i);
      if (n.outputs.size() != 1) continue;
      std::vector<size_t> slots;
      if ((is_contrib(n, "QLinearAdd") || is_contrib(n, "QLinearMul")) && n.inputs.size() >= 7 &&
          last.count(n.inputs[0]) && last.count(n.inputs[3]) && g.facts.same_shape(n.inputs[0], n.inputs[3]))
        slots = {0, 3};
      else if (is_op(n, "MaxPool") && last.count(n.inputs[0]))
        slots = {0};
      else if (is_contrib(n, "QLinearGlobalAveragePool") && n.attr_int("channels_last", 0) == 0 &&
               last.count(n.inputs[0]))
        slots = {0};
      if (slots.empty()) continue;
      region[i] = slots;
      last.insert(n.outputs[0]);
      grew = true;
    }
  }
  std::unordered_map<std::string, std::string> renamed;  // value -> its channels-last name
  for (const std::string& v : last) renamed[v] = g.unique_name(v + "_nhwc");
  auto reads_last = [&](size_t u, size_t k) {
    auto it = region.find(u);
    return it != region.end() && std::find(it->second.begin(), it->second.end(), k) != it->second.end();
  };
  std::vector<Node> added;
  size_t to_last = 0;
  for (const std::string& v : last) {  // back to [N, C, H, W] for the readers outside
    bool plain_reader = g.pinned(v);
    for (size_t u : g.users(v)) {
      const Node& n = g.node(u);
      for (size_t k = 0; k < n.inputs.size(); k++) plain_reader |= n.inputs[k] == v && !reads_last(u, k);
    }
    if (plain_reader) added.push_back(transpose(renamed[v], v, {0, 3, 1, 2}));
  }
  for (auto& [i, slots] : region) {
    Node n = g.node(i);
    std::string& x = n.inputs[0];
    if (!renamed.count(x)) {  // a convolution's X made outside: to [N, H, W, C] once
      renamed[x] = g.unique_name(x + "_nhwc");
      added.push_back(transpose(x, renamed[x], {0, 2, 3, 1}));
      to_last++;
    }
    for (size_t k : slots) n.inputs[k] = renamed.at(n.inputs[k]);
    n.outputs[0] = renamed.at(n.outputs[0]);
    if (is_op(n, "MaxPool")) {
      n.op_type = "NhwcMaxPool";
      n.domain = "com.microsoft";
      n.attrs.erase("storage_order");
    } else {
      n.domain = "com.microsoft";
      n.attrs["channels_last"] = int_attribute(1);
    }
    counts[cat(n.op_type, " channels-last")]++;
    g.replace(i, std::move(n));
  }
  if (to_last > 0) counts["Transpose to channels-last"] += to_last;
  if (added.size() > to_last) counts["Transpose from channels-last"] += added.size() - to_last;
  for (Node& n : added) g.add(std::move(n));
}

}  // namespace vlrt
