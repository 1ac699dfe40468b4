// QDQ fusion: rewrites the DequantizeLinear -> op -> QuantizeLinear groups of a QDQ-quantized model
// into vlrt's integer ops, choosing the groups by ONNX Runtime's rules (its QDQ selectors and
// actions), so that a QDQ model computes what ONNX Runtime's default, optimized run computes:
//   Relu/Clip before a QuantizeLinear whose range makes them no-ops   removed
//   DQ x, DQ w (per tensor or per channel on axis 0), DQ int32 bias -> Conv -> Q   QLinearConv
//   DQ a, DQ b -> MatMul -> Q   QLinearMatMul (no Q: com.microsoft MatMulIntegerToFloat)
//   DQ a, DQ b, DQ int32 c -> Gemm -> Q   com.microsoft QGemm (no Q: float output)
//   DQ, DQ -> Add/Mul -> Q   com.microsoft QLinearAdd/QLinearMul
//   DQ -> AveragePool/GlobalAveragePool/LeakyRelu/Sigmoid -> Q   com.microsoft QLinear<op>
//   DQ... -> Concat -> Q   com.microsoft QLinearConcat
//   DQ -> Reshape/Transpose/Flatten/Squeeze/Unsqueeze/Expand/Tile/Gather/GatherElements/Slice/
//         MaxPool/ReduceMax/ReduceMin/Resize -> Q with equal parameters   the op on the 8-bit values
//   DQ -> Q with equal parameters   removed
// Every scale and zero point must be constant, activations uint8 (weights int8 or uint8), and the
// op's output read by its QuantizeLinear alone. A DequantizeLinear read by several nodes joins the
// group of each (ONNX Runtime gives each reader its own copy) and stays while a float reader remains.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "graph/graph.h"

namespace vlrt {

// Per rewrite, how many were made ("QLinearConv" -> 53, "uint8 MaxPool" -> 1).
using QdqFusionCounts = std::map<std::string, size_t>;

// Rewrites the model's main graph (subgraphs are left as written); call it before constant folding,
// which would turn the weights' DequantizeLinear nodes into float constants.
QdqFusionCounts fuse_qdq(Model& model);

// What the environment asks for: VLRT_FUSE_QDQ=0 no QDQ fusion, any other value QDQ fusion;
// nothing when it is unset or empty.
std::optional<bool> qdq_fusion_requested();

// "53 QLinearConv, 16 QLinearAdd" ("nothing" when empty).
std::string describe(const QdqFusionCounts& counts);

}  // namespace vlrt
