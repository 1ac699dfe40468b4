// --fp16 / --bf16: float32 weights stored in half precision, each read through a Cast
// back to float32, so that the file shrinks while compute stays float32.
#pragma once

#include <string>
#include <vector>

#include "quantize/rewrite.h"

namespace vlrt {

struct HalfOptions {
  DType dtype = DType::f16;  // f16 or bf16
  // Also the weights of numerically fragile readers (normalizations, Softmax, reductions,
  // the nodes that make graph outputs).
  bool all = false;
  std::vector<std::string> exclude;  // node names or op types whose weights stay float32
  int64_t min_elements = 16;         // smaller initializers stay float32
};

// A reader whose weights keep float32 unless HalfOptions::all: normalizations, Softmax,
// LogSoftmax and reductions.
bool is_precision_fragile(const Node& n);

// Stores each eligible float32 initializer (read only by top-level nodes that are neither
// fragile nor excluded, and with every value within the type's range) as `<name>_fp16`
// (`_bf16`) plus a Cast to float32 named like the original, placed first. Fails when the
// model is already quantized or already holds half-precision initializers.
QuantizeReport convert_weights_to_half(Model& model, const HalfOptions& options);

}  // namespace vlrt
