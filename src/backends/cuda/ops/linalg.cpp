// MatMul and Gemm on cuBLAS (float32, no TF32). Row-major products are column-major products
// of the transposes: C = A B row-major is C^T = B^T A^T, which is what cuBLAS reads in the same
// memory, so no operand is copied.
#include "backends/cuda/cublas_api.h"
#include "backends/cuda/kernel.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

bool float32_only(const Node& node, const std::vector<DType>& dtypes, std::string* why) {
  for (DType t : dtypes)
    if (t != DType::f32 && t != DType::undefined) {
      if (why) *why = cat(node.op_type, " on CUDA takes float32, got ", dtype_name(t));
      return false;
    }
  return true;
}

// C[m, n] = alpha * op(A) op(B) (+ beta * C), all row-major, on the backend's stream.
void gemm(CudaContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, const float* b, float* c, int batches = 1, int64_t stride_a = 0, int64_t stride_b = 0,
          int64_t stride_c = 0) {
  float beta = 0.f;
  cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  int lda = int(trans_a ? m : k), ldb = int(trans_b ? k : n);
  std::string what = cat(ctx.node.label(), ": cuBLAS SGEMM ", m, "x", n, "x", k);
  if (batches == 1) {
    cublas_check(cublas_api().sgemm(ctx.backend.cublas(), op_b, op_a, int(n), int(m), int(k), &alpha, b, ldb, a, lda, &beta,
                             c, int(n)),
                 what);
  } else {
    cublas_check(cublas_api().sgemm_strided_batched(ctx.backend.cublas(), op_b, op_a, int(n), int(m), int(k), &alpha, b, ldb,
                                           stride_b, a, lda, stride_a, &beta, c, int(n), stride_c, batches),
                 what);
  }
}

// ONNX MatMul with NumPy broadcasting of the batch axes.
void matmul(CudaContext& ctx) {
  const Tensor &A = *ctx.inputs[0], &B = *ctx.inputs[1];
  Tensor& Y = *ctx.outputs[0];
  if (Y.numel() == 0) return;
  Shape as = A.shape(), bs = B.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shapes(a_batch, b_batch);
  int64_t batches = shape_numel(batch);
  const float *a = A.data<float>(), *b = B.data<float>();
  float* y = Y.data<float>();
  if (k == 0) {
    cuda_check(cudaMemsetAsync(y, 0, Y.nbytes(), ctx.backend.stream()), ctx.node.label() + ": zeroing the output");
    return;
  }
  if (shape_numel(b_batch) == 1 && shape_numel(a_batch) == batches) {  // weights: one product of all rows
    gemm(ctx, false, false, batches * m, n, k, 1.f, a, b, y);
    return;
  }
  if (shape_numel(a_batch) == batches && shape_numel(b_batch) == batches && a_batch.size() == b_batch.size()) {
    gemm(ctx, false, false, m, n, k, 1.f, a, b, y, int(batches), m * k, k * n, m * n);
    return;
  }
  // Any other broadcast: one product per output batch, each operand's batch index by its own strides.
  Shape pa(batch.size() - a_batch.size(), 1), pb(batch.size() - b_batch.size(), 1);
  pa.insert(pa.end(), a_batch.begin(), a_batch.end());
  pb.insert(pb.end(), b_batch.begin(), b_batch.end());
  std::vector<int64_t> sa = contiguous_strides(pa), sb = contiguous_strides(pb), idx(batch.size(), 0);
  for (int64_t i = 0; i < batches; i++) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < batch.size(); d++) {
      if (pa[d] != 1) oa += idx[d] * sa[d];
      if (pb[d] != 1) ob += idx[d] * sb[d];
    }
    gemm(ctx, false, false, m, n, k, 1.f, a + oa * m * k, b + ob * k * n, y + i * m * n);
    for (size_t d = batch.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
}

bool gemm_supported(const Node& node, const std::vector<DType>& dtypes, std::string* why) {
  if (!float32_only(node, dtypes, why)) return false;
  bool with_c = node.inputs.size() > 2 && !node.inputs[2].empty();
  if (with_c && node.attr_float("beta", 1.f) != 0.f) {
    if (why) *why = "Gemm with C runs on the CPU until the CUDA backend has a broadcasting add";
    return false;
  }
  return true;
}

void gemm_op(CudaContext& ctx) {
  const Tensor &A = *ctx.inputs[0], &B = *ctx.inputs[1];
  Tensor& Y = *ctx.outputs[0];
  bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  int64_t m = Y.dim(0), n = Y.dim(1), k = ta ? A.dim(0) : A.dim(1);
  if (Y.numel() == 0) return;
  if (k == 0) {
    cuda_check(cudaMemsetAsync(Y.raw(), 0, Y.nbytes(), ctx.backend.stream()), ctx.node.label() + ": zeroing the output");
    return;
  }
  gemm(ctx, ta, tb, m, n, k, ctx.node.attr_float("alpha", 1.f), A.data<float>(), B.data<float>(), Y.data<float>());
}

}  // namespace

void register_cuda_linalg_ops(CudaOpTable& t) {
  t["MatMul"] = {float32_only, matmul};
  t["Gemm"] = {gemm_supported, gemm_op};
}

}  // namespace vlrt
