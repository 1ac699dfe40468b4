#include "passes/fusion.h"

#include <cstdlib>

#include "passes/fusion_graph.h"

namespace vlrt {

FusionOptions FusionOptions::none() {
  FusionOptions o;
  o.drop_identity = o.conv_batchnorm = o.conv_affine = o.hard_swish = o.conv_activation = o.matmul =
      o.layer_norm = o.gelu = o.attention = o.weighted_sum = o.deformable_sample = o.dynamic_quant_matmul =
          o.conv_layout = o.qlinear_channels_last = o.half_weights = false;
  return o;
}

FusionReport fuse(Model& model, const FusionOptions& options, Backend& host) {
  using Pass = void (*)(FusionGraph&, FusionCounts&);
  // Order matters: Identity nodes go first, so no pattern has one in its middle; Gelu, HardSwish and
  // LayerNorm become single nodes before the passes that take an activation into an epilogue; attention takes
  // its MatMuls before the bias fusion looks at them.
  const std::pair<bool, Pass> passes[] = {
      {options.drop_identity, drop_identities},
      {options.layer_norm, fuse_layer_norm},
      {options.gelu, fuse_gelu},
      {options.hard_swish, fuse_hard_swish},
      {options.conv_batchnorm, fuse_conv_batchnorm},
      {options.conv_affine, fuse_conv_affine},
      {options.conv_activation, fuse_conv_activation},
      {options.attention, fuse_attention},
      {options.weighted_sum, fuse_weighted_sum},
      {options.deformable_sample, fuse_deformable_sample},
      {options.matmul, fuse_matmul},
      {options.dynamic_quant_matmul, fuse_dynamic_quant_matmul},
  };
  int64_t block = options.conv_layout ? host.conv_channel_block() : 0;
  bool channels_last = options.qlinear_channels_last && host.channels_last_integer_convs();
  bool any = block > 0 || channels_last;
  for (auto& [on, pass] : passes) any = any || on;
  FusionReport report;
  if (!any) return report;
  ShapeFacts facts(model, host);
  FusionGraph graph(model, facts);
  for (auto& [on, pass] : passes) {
    if (!on) continue;
    FusionCounts counts;
    pass(graph, counts);
    for (auto& [pattern, n] : counts) report.emplace_back(pattern, n);
  }
  if (options.dynamic_quant_matmul && host.fast_integer_products()) {
    FusionCounts counts;
    merge_dynamic_quant_matmuls(graph, counts);
    for (auto& [pattern, n] : counts) report.emplace_back(pattern, n);
  }
  if (block > 0) {  // last: it rewrites the convolutions the passes above made
    FusionCounts counts;
    block_conv_layout(graph, counts, block);
    for (auto& [pattern, n] : counts) report.emplace_back(pattern, n);
  }
  if (channels_last) {
    FusionCounts counts;
    qlinear_channels_last(graph, counts);
    for (auto& [pattern, n] : counts) report.emplace_back(pattern, n);
  }
  graph.finish();
  return report;
}

std::string describe(const FusionReport& report) {
  std::string s;
  for (auto& [pattern, n] : report) s += cat(s.empty() ? "" : ", ", n, " ", pattern);
  return s.empty() ? "nothing" : s;
}

}  // namespace vlrt
