#include "pipelines/vlm/decoder_outputs.h"

#include <limits>

#include "core/error.h"
#include "pipelines/vlm/model_folder.h"

namespace vlrt::vlm {

namespace {

Node node(std::string name, std::string op, std::vector<std::string> inputs, std::vector<std::string> outputs) {
  Node n;
  n.name = std::move(name);
  n.op_type = std::move(op);
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

std::string constant(Graph& g, const std::string& name, std::vector<int64_t> values) {
  int64_t n = int64_t(values.size());
  g.initializers[name] = Tensor::from_vector<int64_t>(values, {n});
  return name;
}

// Renames the value `output` produces to `output + "/all"` (its readers too) and makes
// `output` a Slice of it along `axis` from `starts` to the end.
void slice_output(Graph& g, const std::string& output, int64_t axis, const std::string& starts) {
  std::string all = output + "/all";
  bool produced = false;
  for (Node& n : g.nodes) {
    for (auto& o : n.outputs)
      if (o == output) o = all, produced = true;
    for (auto& i : n.inputs)
      if (i == output) i = all;
  }
  if (!produced) fail("the decoder's output '", output, "' is made by no node");
  std::string ax = constant(g, output + "/axis", {axis});
  std::string end = constant(g, output + "/end", {std::numeric_limits<int64_t>::max()});
  g.nodes.push_back(node(output + "/new", "Slice", {all, starts, end, ax}, {output}));
  for (ValueDecl& out : g.outputs)  // the sliced axis is no longer the declared one
    if (out.name == output && size_t(axis) < out.dims.size()) out.dims[size_t(axis)] = Dim{};
}

}  // namespace

void keep_new_positions(Model& decoder, int64_t layers) {
  Graph& g = decoder.graph;
  // S: the step's tokens, as a 1-D tensor of one element, negated.
  g.nodes.push_back(node("vlrt/embeds_shape", "Shape", {"inputs_embeds"}, {"vlrt/embeds_shape"}));
  constant(g, "vlrt/one", {1});
  g.nodes.push_back(node("vlrt/tokens", "Gather", {"vlrt/embeds_shape", "vlrt/one"}, {"vlrt/tokens"}));
  g.nodes.push_back(node("vlrt/minus_tokens", "Neg", {"vlrt/tokens"}, {"vlrt/minus_tokens"}));
  for (int64_t l = 0; l < layers; l++)
    for (const std::string& present : {present_key_name(l), present_value_name(l)})
      slice_output(g, present, 2, "vlrt/minus_tokens");
  slice_output(g, "logits", 1, constant(g, "vlrt/last", {-1}));
}

}  // namespace vlrt::vlm
