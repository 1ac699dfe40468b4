// Recurrent kernels: RNN, GRU, LSTM and com.microsoft.DynamicQuantizeLSTM. One reference loop,
// in double, over directions, batch items and the valid steps of each item.
#include <algorithm>

#include "backends/cpu/kernel.h"
#include "core/dispatch.h"
#include "ops/recurrent_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// Every operand in double and in the standard ONNX layout: W [nd, gates*hidden, input],
// R [nd, gates*hidden, hidden], B [nd, 2*gates*hidden], P [nd, 3*hidden]; absent ones are zero.
struct RnnProblem {
  RnnAttrs a;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, gates = 0;
  std::vector<double> x, w, r, b, p, h0, c0;
  std::vector<int64_t> lens;
};

struct RnnResult {
  std::vector<double> y, yh, yc;
};

double clipped(const RnnProblem& pb, double v) {
  return pb.a.clip ? std::clamp(v, -double(*pb.a.clip), double(*pb.a.clip)) : v;
}

// out[g] = W[g] . x + R[g] . h + Wb[g] + Rb[g] for every row g of one direction.
void gate_inputs(const RnnProblem& pb, int64_t d, const double* x, const double* h, std::vector<double>& xw,
                 std::vector<double>& hr) {
  const int64_t rows = pb.gates * pb.hidden;
  const double* w = pb.w.data() + d * rows * pb.input;
  const double* r = pb.r.data() + d * rows * pb.hidden;
  const double* b = pb.b.data() + d * 2 * rows;
  for (int64_t g = 0; g < rows; g++) {
    double sx = b[g], sh = b[rows + g];
    for (int64_t k = 0; k < pb.input; k++) sx += w[g * pb.input + k] * x[k];
    for (int64_t k = 0; k < pb.hidden; k++) sh += r[g * pb.hidden + k] * h[k];
    xw[g] = sx;
    hr[g] = sh;
  }
}

// One step of direction d: h (and c for an LSTM) updated in place.
void rnn_step(const RnnProblem& pb, int64_t d, const double* x, std::vector<double>& h,
              std::vector<double>& c) {
  const int64_t H = pb.hidden, rows = pb.gates * H;
  const RnnActivation* act = pb.a.activations.data() + d * rnn_activation_count(pb.a.kind);
  std::vector<double> xw(rows), hr(rows);
  gate_inputs(pb, d, x, h.data(), xw, hr);
  switch (pb.a.kind) {
    case RnnKind::rnn:
      for (int64_t j = 0; j < H; j++) h[j] = act[0](clipped(pb, xw[j] + hr[j]));
      break;
    case RnnKind::gru: {
      // Gates z, r, h. Without linear_before_reset the h gate's recurrent term is Rh . (r * h),
      // so it is computed here, once r is known, instead of taking Rh . h from hr.
      const double* rh = pb.r.data() + (d * rows + 2 * H) * H;
      std::vector<double> z(H), reset(H), rh_prev(H);
      for (int64_t j = 0; j < H; j++) {
        z[j] = act[0](clipped(pb, xw[j] + hr[j]));
        reset[j] = act[0](clipped(pb, xw[H + j] + hr[H + j]));
      }
      for (int64_t j = 0; j < H; j++) rh_prev[j] = reset[j] * h[j];
      std::vector<double> next(H);
      for (int64_t j = 0; j < H; j++) {
        double pre;
        if (pb.a.linear_before_reset) {
          pre = xw[2 * H + j] + reset[j] * hr[2 * H + j];
        } else {
          double s = pb.b[d * 2 * rows + rows + 2 * H + j];
          for (int64_t k = 0; k < H; k++) s += rh[j * H + k] * rh_prev[k];
          pre = xw[2 * H + j] + s;
        }
        double cand = act[1](clipped(pb, pre));
        next[j] = (1 - z[j]) * cand + z[j] * h[j];
      }
      h = next;
      break;
    }
    case RnnKind::lstm: {
      const double* p = pb.p.data() + d * 3 * H;  // i, o, f
      for (int64_t j = 0; j < H; j++) {
        double i = act[0](clipped(pb, xw[j] + hr[j] + p[j] * c[j]));
        double f = pb.a.input_forget
                       ? 1 - i
                       : act[0](clipped(pb, xw[2 * H + j] + hr[2 * H + j] + p[2 * H + j] * c[j]));
        double g = act[1](clipped(pb, xw[3 * H + j] + hr[3 * H + j]));
        c[j] = f * c[j] + i * g;
        double o = act[0](clipped(pb, xw[H + j] + hr[H + j] + p[H + j] * c[j]));
        h[j] = o * act[2](c[j]);
      }
      break;
    }
  }
}

RnnResult run_rnn(const RnnProblem& pb) {
  const int64_t nd = pb.a.num_directions, S = pb.seq, N = pb.batch, H = pb.hidden, I = pb.input;
  const bool l1 = pb.a.layout == 1;
  RnnResult res;
  res.y.assign(size_t(S * nd * N * H), 0.0);
  res.yh.assign(size_t(nd * N * H), 0.0);
  res.yc.assign(size_t(nd * N * H), 0.0);
  for (int64_t d = 0; d < nd; d++) {
    const bool reverse = pb.a.direction == "reverse" || d == 1;
    for (int64_t n = 0; n < N; n++) {
      const int64_t state_at = (l1 ? n * nd + d : d * N + n) * H;
      std::vector<double> h(size_t(H), 0.0), c(size_t(H), 0.0);
      if (!pb.h0.empty()) std::copy_n(pb.h0.begin() + state_at, H, h.begin());
      if (!pb.c0.empty()) std::copy_n(pb.c0.begin() + state_at, H, c.begin());
      const int64_t len = pb.lens.empty() ? S : pb.lens[size_t(n)];
      for (int64_t s = 0; s < len; s++) {
        const int64_t t = reverse ? len - 1 - s : s;
        rnn_step(pb, d, pb.x.data() + (l1 ? n * S + t : t * N + n) * I, h, c);
        std::copy(h.begin(), h.end(), res.y.begin() + (l1 ? (n * S + t) * nd + d : (t * nd + d) * N + n) * H);
      }
      if (len == 0) continue;  // as onnxruntime: no step, zero final state
      std::copy(h.begin(), h.end(), res.yh.begin() + state_at);
      std::copy(c.begin(), c.end(), res.yc.begin() + state_at);
    }
  }
  return res;
}

std::vector<double> optional_doubles(const KernelContext& ctx, size_t i) {
  return ctx.has_input(i) ? ctx.input(i).to_double_vector() : std::vector<double>{};
}

// Everything but W and R, whose form differs between LSTM and DynamicQuantizeLSTM.
RnnProblem rnn_problem(const KernelContext& ctx, int64_t hidden) {
  RnnProblem pb;
  pb.a = rnn_attrs(ctx.node);
  pb.hidden = hidden;
  const Shape& xs = ctx.input(0).shape();
  pb.seq = pb.a.layout == 0 ? xs[0] : xs[1];
  pb.batch = pb.a.layout == 0 ? xs[1] : xs[0];
  pb.input = xs[2];
  pb.gates = rnn_gate_count(pb.a.kind);
  pb.x = ctx.input(0).to_double_vector();
  pb.b = optional_doubles(ctx, 3);
  if (pb.b.empty()) pb.b.assign(size_t(pb.a.num_directions * 2 * pb.gates * pb.hidden), 0.0);
  if (ctx.has_input(4)) {
    pb.lens = ctx.input(4).to_int64_vector();
    for (size_t n = 0; n < pb.lens.size(); n++)
      VLRT_CHECK(pb.lens[n] >= 0 && pb.lens[n] <= pb.seq, "sequence_lens[", n, "] = ", pb.lens[n],
                 " is outside [0, seq_length=", pb.seq, "]");
  }
  pb.h0 = optional_doubles(ctx, 5);
  if (pb.a.kind == RnnKind::lstm) {
    pb.c0 = optional_doubles(ctx, 6);
    pb.p = optional_doubles(ctx, 7);
    if (pb.p.empty()) pb.p.assign(size_t(pb.a.num_directions * 3 * pb.hidden), 0.0);
  }
  return pb;
}

void write_outputs(KernelContext& ctx, const RnnResult& res) {
  const std::vector<double>* parts[] = {&res.y, &res.yh, &res.yc};
  for (size_t i = 0; i < ctx.output_count() && i < 3; i++) {
    if (!ctx.has_output(i)) continue;
    ctx.output(i).assign_doubles(*parts[i]);
  }
}

void recurrent_kernel(KernelContext& ctx) {
  RnnProblem pb = rnn_problem(ctx, ctx.input(2).shape()[2]);
  pb.w = ctx.input(1).to_double_vector();
  pb.r = ctx.input(2).to_double_vector();
  write_outputs(ctx, run_rnn(pb));
}

// q [nd, k, rows] with scale and zero point [nd] or [nd, rows] -> (q - zero point) * scale as
// [nd, rows, k], the layout of LSTM's W and R.
std::vector<double> dequantize_transposed(const Tensor& q, const Tensor& scale, const Tensor& zero_point) {
  const int64_t nd = q.dim(0), k = q.dim(1), rows = q.dim(2);
  const bool per_channel = scale.shape().size() == 2;
  std::vector<double> v = q.to_double_vector(), s = scale.to_double_vector(),
                      z = zero_point.to_double_vector();
  std::vector<double> out(v.size());
  for (int64_t d = 0; d < nd; d++)
    for (int64_t g = 0; g < rows; g++) {
      const size_t c = size_t(per_channel ? d * rows + g : d);
      for (int64_t i = 0; i < k; i++)
        out[size_t((d * rows + g) * k + i)] = (v[size_t((d * k + i) * rows + g)] - z[c]) * s[c];
    }
  return out;
}

void dynamic_quantize_lstm_kernel(KernelContext& ctx) {
  RnnProblem pb = rnn_problem(ctx, ctx.input(2).shape()[1]);
  pb.w = dequantize_transposed(ctx.input(1), ctx.input(8), ctx.input(9));
  pb.r = dequantize_transposed(ctx.input(2), ctx.input(10), ctx.input(11));
  write_outputs(ctx, run_rnn(pb));
}

}  // namespace

void register_recurrent_kernels(CpuKernelTable& t) {
  t["RNN"] = {recurrent_kernel};
  t["GRU"] = {recurrent_kernel};
  t["LSTM"] = {recurrent_kernel};
  t["com.microsoft.DynamicQuantizeLSTM"] = {dynamic_quantize_lstm_kernel};
}

}  // namespace vlrt
