// Semantics of the linear-algebra family that shape inference and every backend share:
// how MatMul pairs its operands, how an Einsum equation names axes, and how Conv and
// ConvTranspose read their attributes and pad.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace vlrt {

// How MatMul's operands pair up: numpy promotion of 1-D operands ([K] is [1,K] as A and [K,1]
// as B) and broadcasting of the batch axes. When A's batch runs over one shared B (the Linear
// layer case) it is folded into A's rows: m grows and there is one product.
struct MatMulDims {
  int64_t m = 0, k = 0, n = 0;
  int64_t count = 1;                          // products
  Shape batch;                                // their batch shape (empty when folded)
  std::vector<int64_t> a_strides, b_strides;  // per batch axis, in elements (0: broadcast)
};
MatMulDims matmul_dims(Shape a, Shape b);
// numpy.matmul's output shape: 1-D operands are promoted to matrices and the added axis removed again;
// fails naming both shapes when they do not pair.
Shape matmul_output_shape(const Shape& a, const Shape& b);

// Einsum terms with every axis named: letters keep their ASCII code, the dims an
// ellipsis stands for get 256 + position (right-aligned across operands, as in numpy).
struct EinsumLabels {
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
};

// Labels of `eq` for inputs of these ranks; fails naming the equation when it is malformed
// or does not fit them.
EinsumLabels einsum_labels(std::string eq, const std::vector<size_t>& ranks);

// A per-axis attribute (strides, pads ...) of `len` values, each `fallback` when absent;
// fails when the count is wrong or a value is below `min`.
std::vector<int64_t> spatial_attr(const Node& n, const char* name, size_t len, int64_t fallback, int64_t min);

// Attributes shared by Conv and ConvTranspose.
struct ConvAttrs {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: all begins, then all ends
  std::string auto_pad;

  bool same_pad() const { return auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"; }
  // The kernel's span on spatial axis i, dilation included.
  int64_t kernel_extent(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

// Reads and validates the attributes against X [N,C,D1,...] and the weight W [.,.,K1,...].
ConvAttrs conv_attrs(const Node& n, const Shape& x, const Shape& w);

// The output shape of Conv (and of ConvInteger, QLinearConv) with input X and weight W [M, C/group, K1, ...];
// fails when W and group do not fit X or the padded input is smaller than the kernel.
Shape conv_output_shape(const Node& n, const Shape& x, const Shape& w);

// Padding before spatial axis i of a Conv whose input has `in` elements there and its output `out`.
int64_t conv_pad_begin(const ConvAttrs& a, size_t i, int64_t in, int64_t out);
// For ConvTranspose (`in` is X's size on the axis, `out` is Y's): what is trimmed from the start of
// its full output.
int64_t conv_transpose_pad_begin(const ConvAttrs& a, size_t i, int64_t in, int64_t out,
                                 int64_t output_padding, bool has_output_shape);

// Conv or ConvTranspose geometry with the spatial rank padded to 3 (leading axes of size 1).
// For Conv `in` is the input and `out` the output; ConvTranspose computes the adjoint, so its
// roles are the same: `in` is X's spatial shape, `out` is Y's.
struct ConvGeometry {
  int64_t batch = 0, c = 0, m = 0, group = 1;  // input channels, output channels
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pad[3] = {0, 0, 0};  // pad: at the start
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};

// The geometry of node `n` (Conv, or ConvTranspose when `transpose`) with input X, weight W
// and output Y of these shapes.
ConvGeometry conv_geometry(const Node& n, const Shape& x, const Shape& w, const Shape& y, bool transpose);

}  // namespace vlrt
