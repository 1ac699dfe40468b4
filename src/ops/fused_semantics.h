// Semantics of vlrt's fused ops (src/ops/fused.cpp defines them) that shape inference and the
// kernels share.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace vlrt {

// vlrt.Attention's geometry: the logical layout [batch..., S, D] of each operand.
struct AttentionDims {
  Shape batch;            // the batch axes shared by q, k, v
  int64_t sq, sk, d, dv;  // query and key lengths, head sizes of q/k and of v
  // Per operand (q, k, v): the element stride of each logical axis in the operand's memory.
  std::vector<int64_t> q_strides, k_strides, v_strides;
  std::vector<int64_t> out_perm;
  Shape output;  // Y's shape: the logical [batch..., Sq, Dv] permuted by out_perm
};
// Fails naming the operand whose rank, permutation or axes do not fit.
AttentionDims attention_dims(const Node& n, const Shape& q, const Shape& k, const Shape& v);

// vlrt.DynamicQuantizeMatMuls: how many products it makes, and product i as the
// com.microsoft DynamicQuantizeMatMul(A, B_i, B_scale_i, B_zero_point_i, Bias_i) node that computes
// it (input names as in n, "" where absent; output i).
size_t dynamic_product_count(const Node& n);
Node dynamic_product(const Node& n, size_t i);
// Of the node's inputs (ValueInfos or Tensors, nullptr where absent), product i's five as its
// DynamicQuantizeMatMul takes them: A, B_i, B_scale_i, B_zero_point_i, Bias_i.
template <class T>
std::vector<T*> dynamic_product_inputs(const std::vector<T*>& inputs, size_t i) {
  std::vector<T*> p = {inputs.empty() ? nullptr : inputs[0]};
  for (size_t k = 4 * i + 1; k < 4 * i + 5; k++) p.push_back(k < inputs.size() ? inputs[k] : nullptr);
  return p;
}

}  // namespace vlrt
