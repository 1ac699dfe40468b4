// Runs one node on the CPU: infer output shapes from the real inputs, allocate,
// call the kernel. Used by the executor, by constant folding and by op tests.
#pragma once

#include <vector>

#include "backends/cpu/kernel.h"
#include "ops/op_schema.h"

namespace vlrt {

// Output i is undefined (Tensor{}) where node.outputs[i] is empty.
// Errors are prefixed with the node's label and input shapes.
std::vector<Tensor> run_node_cpu(const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs,
                                 ThreadPool& pool);

// Calls the CPU kernel of `node` on allocated outputs (nullptr: output not used).
// float16/bfloat16 tensors are converted to float32 around kernels that ask for it.
void call_cpu_kernel(const Node& node, int64_t opset, ThreadPool& pool, const std::vector<const Tensor*>& inputs,
                     const std::vector<Tensor*>& outputs);

// Infer outputs of one node from what is known of its inputs. Errors are
// prefixed with the node's label; ShapeDeferred propagates.
std::vector<ValueInfo> infer_node(const Node& node, int64_t opset,
                                  const std::vector<const ValueInfo*>& inputs);

// "node 'x' (Add) with inputs a: float32[2,3], b: float32[4]: "
std::string node_context(const Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace vlrt
