// --int8 static: the QDQ form onnxruntime's quantize_static writes. Around each MatMul, Gemm
// and Conv with a constant float32 weight:
//   x -> QuantizeLinear(x_scale, x_zero_point) -> DequantizeLinear -> node
//   W (int8, symmetric per output channel) -> DequantizeLinear(axis) -> node
//   bias (int32, scale x_scale * W_scale) -> DequantizeLinear -> node
//   node -> y -> QuantizeLinear -> DequantizeLinear -> y's readers
// Activations are uint8 with a scale and zero point from the range calibration saw. Each
// activation gets one pair however many nodes read it; the node keeps its output name, so
// `vlrt check` pairs the two models' values; graph outputs and values read inside subgraphs
// stay float32 as they are.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "quantize/dynamic_int8.h"

namespace vlrt {

// The smallest and largest value calibration saw.
struct ActivationRange {
  float lo = 0, hi = 0;
  void widen(float v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
};
using ActivationRanges = std::map<std::string, ActivationRange>;

// The activations whose ranges calibration must give: the activation inputs and the outputs
// (but graph outputs) of the nodes the rewrite will quantize, in graph order.
std::vector<std::string> static_int8_activations(const Model& model, const Int8Options& options);

// uint8 scale and zero point of a range, widened to hold 0 so that 0 is exact:
// scale = (hi - lo) / 255, zero point = round(-lo / scale) (scale 1 for an empty range).
std::pair<float, uint8_t> uint8_quantization(ActivationRange r);

// Rewrites the model as above. Fails when it is already quantized, when its opset is below 13
// (per-channel DequantizeLinear), or when an activation of static_int8_activations has no range.
QuantizeReport quantize_static_int8(Model& model, const Int8Options& options, const ActivationRanges& ranges);

}  // namespace vlrt
