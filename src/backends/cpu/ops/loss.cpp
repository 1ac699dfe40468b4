// Loss kernels. Inputs are viewed as [N, C, D] with D the product of the trailing axes.
#include <cmath>
#include <limits>
#include <optional>

#include "backends/cpu/kernel.h"
#include "core/dispatch.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

struct LossView {
  int64_t n, c, d;
};

LossView loss_view(const Tensor& x) {
  return {x.dim(0), x.dim(1), x.numel() / std::max<int64_t>(1, x.dim(0) * x.dim(1))};
}

// loss[b, j] = -logp[b, target[b, j], j] * weight[target]; ignored targets count neither
// towards the loss nor towards the mean's weight sum.
template <class T>
void nll_loss(const KernelContext& ctx, const T* logp, LossView v, Tensor& out) {
  std::vector<int64_t> target = ctx.input(1).to_int64_vector();
  std::vector<double> weight = ctx.has_input(2) ? ctx.input(2).to_double_vector() : std::vector<double>{};
  std::optional<int64_t> ignore;
  if (ctx.node.has_attr("ignore_index")) ignore = ctx.node.attr_int("ignore_index", 0);
  std::string reduction = ctx.node.attr_string("reduction", "mean");
  T* po = out.data<T>();
  double sum = 0, weight_sum = 0;
  for (int64_t b = 0; b < v.n; b++) {
    for (int64_t j = 0; j < v.d; j++) {
      int64_t i = b * v.d + j, t = target[size_t(i)];
      double loss = 0, w = 0;
      if (!ignore || t != *ignore) {
        VLRT_CHECK(t >= 0 && t < v.c, "target value ", t, " at flat index ", i, " is not a class in [0, ",
                   v.c, ")", ignore ? cat(" nor ignore_index ", *ignore) : std::string());
        w = weight.empty() ? 1.0 : weight[size_t(t)];
        loss = -double(logp[(b * v.c + t) * v.d + j]) * w;
      }
      if (reduction == "none") po[i] = T(loss);
      sum += loss;
      weight_sum += w;
    }
  }
  if (reduction == "sum") po[0] = T(sum);
  if (reduction == "mean") po[0] = T(sum / weight_sum);
}

void nll_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  dispatch_float(x.dtype(), [&]<class T>() { nll_loss<T>(ctx, x.data<T>(), loss_view(x), ctx.output(0)); });
}

void sce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LossView v = loss_view(x);
  dispatch_float(x.dtype(), [&]<class T>() {
    Tensor scratch;
    if (!ctx.has_output(1)) scratch = Tensor(x.dtype(), x.shape());
    Tensor& log_prob = ctx.has_output(1) ? ctx.output(1) : scratch;
    const T* px = x.data<T>();
    T* pl = log_prob.data<T>();
    // log_softmax over the class axis, D columns of one batch item at a time.
    ctx.pool.parallel_for(v.n, [&](int64_t b0, int64_t b1) {
      std::vector<double> m(v.d), s(v.d);
      for (int64_t b = b0; b < b1; b++) {
        const T* xb = px + b * v.c * v.d;
        T* lb = pl + b * v.c * v.d;
        std::fill(m.begin(), m.end(), -std::numeric_limits<double>::infinity());
        std::fill(s.begin(), s.end(), 0.0);
        for (int64_t i = 0; i < v.c; i++)
          for (int64_t j = 0; j < v.d; j++) m[j] = std::max(m[j], double(xb[i * v.d + j]));
        for (int64_t i = 0; i < v.c; i++)
          for (int64_t j = 0; j < v.d; j++) s[j] += std::exp(xb[i * v.d + j] - m[j]);
        for (int64_t j = 0; j < v.d; j++) s[j] = m[j] + std::log(s[j]);
        for (int64_t i = 0; i < v.c; i++)
          for (int64_t j = 0; j < v.d; j++) lb[i * v.d + j] = T(xb[i * v.d + j] - s[j]);
      }
    });
    nll_loss<T>(ctx, pl, v, ctx.output(0));
  });
}

}  // namespace

void register_loss_kernels(CpuKernelTable& t) {
  t["NegativeLogLikelihoodLoss"] = {nll_kernel};
  t["SoftmaxCrossEntropyLoss"] = {sce_kernel};
}

}  // namespace vlrt
