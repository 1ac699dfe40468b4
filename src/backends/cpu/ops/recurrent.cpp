// Recurrent kernels: RNN, GRU, LSTM and com.microsoft.DynamicQuantizeLSTM. One reference loop,
// in double, over directions, steps and the batch items still inside their sequence. Float32
// RNN, GRU and LSTM also have a fast path (not under VLRT_REFERENCE_KERNELS=1): X's products with
// W for every step in one matrix product, each step's H with R as one product over the batch
// (float32 BLAS, its columns split among the pool's threads), one direction at a time; the gates
// are the reference's.
// DynamicQuantizeLSTM does ONNX Runtime's arithmetic: X (all steps at once) and H (all batch items
// of a step at once) are quantized to uint8 with dynamic parameters, multiplied with the integer
// weights exactly, and the sums scaled to float by a_scale * w_scale.
#include <algorithm>
#include <optional>

#include "backends/cpu/kernel.h"
#include "backends/cpu/ops/blas.h"
#include "backends/cpu/ops/quantization.h"
#include "core/dispatch.h"
#include "core/reference_mode.h"
#include "ops/recurrent_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// Every operand in double and in the standard ONNX layout: W [nd, gates*hidden, input],
// R [nd, gates*hidden, hidden], B [nd, 2*gates*hidden], P [nd, 3*hidden]; absent ones are zero.
// DynamicQuantizeLSTM's weights as stored: q [nd, k, rows] (integers), a zero point per direction
// (ONNX Runtime requires one value per direction) and a scale per direction or per row.
struct QuantizedWeights {
  int64_t k = 0, rows = 0;
  std::vector<int32_t> q;
  std::vector<int32_t> zero_point;  // [nd]
  std::vector<float> scale;         // [nd] or [nd * rows]
  bool per_row = false;
};

struct RnnProblem {
  RnnAttrs a;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, gates = 0;
  std::vector<double> x, w, r, b, p, h0, c0;
  std::vector<int64_t> lens;
  std::optional<QuantizedWeights> qw, qr;  // DynamicQuantizeLSTM: W and R used in integer form
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

// One step of direction d from the gate inputs xw and hr: h (and c for an LSTM) updated in place.
void rnn_step(const RnnProblem& pb, int64_t d, const std::vector<double>& xw, const std::vector<double>& hr,
              std::vector<double>& h, std::vector<double>& c) {
  const int64_t H = pb.hidden, rows = pb.gates * H;
  const RnnActivation* act = pb.a.activations.data() + d * rnn_activation_count(pb.a.kind);
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

// y[m * rows + g] = float(sum_k (qa[m, k] - za) * (qw[d, k, g] - zw[d])) * float(a_scale * w_scale[g]) for
// the m rows of a (m x k), all quantized to uint8 with one set of dynamic parameters: ONNX Runtime's
// quantized GEMM of its recurrent kernels.
std::vector<float> quantized_products(const QuantizedWeights& w, int64_t d, const std::vector<float>& a, int64_t m) {
  const DynamicQuant aq = dynamic_quant_params(a.data(), int64_t(a.size()));
  std::vector<int32_t> qa(a.size());
  for (size_t i = 0; i < a.size(); i++) qa[i] = int32_t(quantize_value<uint8_t>(a[i] / aq.scale, aq.zero_point));
  std::vector<float> multiplier(size_t(w.rows));
  for (int64_t g = 0; g < w.rows; g++)
    multiplier[size_t(g)] = aq.scale * w.scale[size_t(w.per_row ? d * w.rows + g : d)];
  const int32_t zw = w.zero_point[size_t(d)];
  const int32_t* qw = w.q.data() + d * w.k * w.rows;
  std::vector<float> y(size_t(m * w.rows));
  std::vector<int64_t> acc(size_t(w.rows));
  for (int64_t r = 0; r < m; r++) {
    std::fill(acc.begin(), acc.end(), 0);
    for (int64_t k = 0; k < w.k; k++) {
      const int64_t av = qa[size_t(r * w.k + k)] - aq.zero_point;
      if (av == 0) continue;
      for (int64_t g = 0; g < w.rows; g++) acc[size_t(g)] += av * (qw[k * w.rows + g] - zw);
    }
    for (int64_t g = 0; g < w.rows; g++)
      y[size_t(r * w.rows + g)] = float(int32_t(acc[size_t(g)])) * multiplier[size_t(g)];
  }
  return y;
}

// The rows of X, as float, that ONNX Runtime quantizes together for direction d: every batch item at
// steps 0 .. steps-1 (in time order; the reverse direction reads the same values reordered).
std::vector<float> input_rows(const RnnProblem& pb, int64_t steps) {
  const bool l1 = pb.a.layout == 1;
  std::vector<float> rows(size_t(steps * pb.batch * pb.input));
  for (int64_t t = 0; t < steps; t++)
    for (int64_t n = 0; n < pb.batch; n++) {
      const double* x = pb.x.data() + (l1 ? n * pb.seq + t : t * pb.batch + n) * pb.input;
      std::copy_n(x, pb.input, rows.begin() + (t * pb.batch + n) * pb.input);
    }
  return rows;
}

// The state of one direction while its steps run: h and c per batch item and, for
// DynamicQuantizeLSTM, X's products with W for every step (row t * batch + n).
struct DirectionState {
  std::vector<std::vector<double>> h, c;
  std::vector<float> x_products;
};

// Gate inputs xw and hr (biases included) of every batch item still inside its sequence at step s.
void step_gate_inputs(const RnnProblem& pb, int64_t d, int64_t s, const DirectionState& st,
                      std::vector<std::vector<double>>& xw, std::vector<std::vector<double>>& hr) {
  const int64_t N = pb.batch, rows = pb.gates * pb.hidden;
  const bool reverse = pb.a.direction == "reverse" || d == 1, l1 = pb.a.layout == 1;
  auto length = [&](int64_t n) { return pb.lens.empty() ? pb.seq : pb.lens[size_t(n)]; };
  auto time_of = [&](int64_t n) { return reverse ? length(n) - 1 - s : s; };
  if (!pb.qr) {
    for (int64_t n = 0; n < N; n++)
      if (s < length(n))
        gate_inputs(pb, d, pb.x.data() + (l1 ? n * pb.seq + time_of(n) : time_of(n) * N + n) * pb.input,
                    st.h[size_t(n)].data(), xw[size_t(n)], hr[size_t(n)]);
    return;
  }
  // ONNX Runtime quantizes the previous step's output rows of the whole batch together: an item's
  // last hidden state still counts at the step after its end, later its row is zero.
  std::vector<float> h(size_t(N * pb.hidden), 0.0f);
  for (int64_t n = 0; n < N; n++)
    if (s <= length(n)) std::copy(st.h[size_t(n)].begin(), st.h[size_t(n)].end(), h.begin() + n * pb.hidden);
  const std::vector<float> h_products = quantized_products(*pb.qr, d, h, N);
  const double* b = pb.b.data() + d * 2 * rows;
  for (int64_t n = 0; n < N; n++) {
    if (s >= length(n)) continue;
    const float* xp = st.x_products.data() + (time_of(n) * N + n) * rows;
    for (int64_t g = 0; g < rows; g++) {
      xw[size_t(n)][size_t(g)] = double(xp[g] + h_products[size_t(n * rows + g)]) + b[g] + b[rows + g];
      hr[size_t(n)][size_t(g)] = 0.0;
    }
  }
}

RnnResult run_rnn(const RnnProblem& pb) {
  const int64_t nd = pb.a.num_directions, S = pb.seq, N = pb.batch, H = pb.hidden, rows = pb.gates * H;
  const bool l1 = pb.a.layout == 1;
  auto length = [&](int64_t n) { return pb.lens.empty() ? S : pb.lens[size_t(n)]; };
  int64_t steps = 0;
  for (int64_t n = 0; n < N; n++) steps = std::max(steps, length(n));
  RnnResult res;
  res.y.assign(size_t(S * nd * N * H), 0.0);
  res.yh.assign(size_t(nd * N * H), 0.0);
  res.yc.assign(size_t(nd * N * H), 0.0);
  std::vector<std::vector<double>> xw(static_cast<size_t>(N), std::vector<double>(static_cast<size_t>(rows)));
  std::vector<std::vector<double>> hr = xw;
  for (int64_t d = 0; d < nd; d++) {
    const bool reverse = pb.a.direction == "reverse" || d == 1;
    auto state_at = [&](int64_t n) { return (l1 ? n * nd + d : d * N + n) * H; };
    DirectionState st;
    st.h.assign(size_t(N), std::vector<double>(size_t(H), 0.0));
    st.c = st.h;
    for (int64_t n = 0; n < N; n++) {
      if (!pb.h0.empty()) std::copy_n(pb.h0.begin() + state_at(n), H, st.h[size_t(n)].begin());
      if (!pb.c0.empty()) std::copy_n(pb.c0.begin() + state_at(n), H, st.c[size_t(n)].begin());
    }
    if (pb.qw) st.x_products = quantized_products(*pb.qw, d, input_rows(pb, steps), steps * N);
    for (int64_t s = 0; s < steps; s++) {
      step_gate_inputs(pb, d, s, st, xw, hr);
      for (int64_t n = 0; n < N; n++) {
        if (s >= length(n)) continue;
        const int64_t t = reverse ? length(n) - 1 - s : s;
        rnn_step(pb, d, xw[size_t(n)], hr[size_t(n)], st.h[size_t(n)], st.c[size_t(n)]);
        std::copy(st.h[size_t(n)].begin(), st.h[size_t(n)].end(),
                  res.y.begin() + (l1 ? (n * S + t) * nd + d : (t * nd + d) * N + n) * H);
      }
    }
    for (int64_t n = 0; n < N; n++) {
      if (length(n) == 0) continue;  // as onnxruntime: no step, zero final state
      std::copy(st.h[size_t(n)].begin(), st.h[size_t(n)].end(), res.yh.begin() + state_at(n));
      std::copy(st.c[size_t(n)].begin(), st.c[size_t(n)].end(), res.yc.begin() + state_at(n));
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

// y [m, n] = a [m, k] times b [n, k] transposed (W and R rows as ONNX stores them), the n
// columns split among the pool's threads in blocks of 64: each thread reads the same rows of b
// at every step, which stay in its cache.
void products_nt(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* y,
                 ThreadPool& pool) {
  constexpr int64_t kColumns = 64;
  pool.parallel_for(ceil_div(n, kColumns), [&](int64_t begin, int64_t end) {
    const int64_t j0 = begin * kColumns, j1 = std::min(n, end * kColumns);
    blas_sgemm(false, true, m, j1 - j0, k, 1.f, a, k, b + j0 * k, k, 0.f, y + j0, n);
  });
}

// One direction of the fast path; writes its parts of res. The products are float32 BLAS, on
// the pool's threads; the state and the gates are the reference's (rnn_step, in double).
void run_direction_f32(const RnnProblem& pb, int64_t d, const std::vector<float>& x, const float* w_all,
                       const float* r_all, RnnResult& res, ThreadPool& pool) {
  const int64_t nd = pb.a.num_directions, S = pb.seq, N = pb.batch, H = pb.hidden, rows = pb.gates * H;
  const bool reverse = pb.a.direction == "reverse" || d == 1, l1 = pb.a.layout == 1;
  auto length = [&](int64_t n) { return pb.lens.empty() ? S : pb.lens[size_t(n)]; };
  auto state_at = [&](int64_t n) { return (l1 ? n * nd + d : d * N + n) * H; };
  const double* b = pb.b.data() + d * 2 * rows;
  // xw[t * N + n] = W x for every step at once; hr = R h, one step at a time.
  std::vector<float> xw(size_t(S * N * rows)), hr(size_t(N * rows)), h_rows(size_t(N * H));
  products_nt(S * N, rows, pb.input, x.data(), w_all + d * rows * pb.input, xw.data(), pool);
  std::vector<std::vector<double>> h(size_t(N), std::vector<double>(size_t(H), 0.0)), c = h;
  for (int64_t n = 0; n < N; n++) {
    if (!pb.h0.empty()) std::copy_n(pb.h0.begin() + state_at(n), H, h[size_t(n)].begin());
    if (!pb.c0.empty()) std::copy_n(pb.c0.begin() + state_at(n), H, c[size_t(n)].begin());
  }
  std::vector<double> xw_row(static_cast<size_t>(rows)), hr_row(static_cast<size_t>(rows));
  int64_t steps = 0;
  for (int64_t n = 0; n < N; n++) steps = std::max(steps, length(n));
  for (int64_t s = 0; s < steps; s++) {
    for (int64_t n = 0; n < N; n++) std::copy(h[size_t(n)].begin(), h[size_t(n)].end(), h_rows.begin() + n * H);
    products_nt(N, rows, H, h_rows.data(), r_all + d * rows * H, hr.data(), pool);
    for (int64_t n = 0; n < N; n++) {
      if (s >= length(n)) continue;
      const int64_t t = reverse ? length(n) - 1 - s : s;
      for (int64_t g = 0; g < rows; g++) {
        xw_row[size_t(g)] = double(xw[size_t((t * N + n) * rows + g)]) + b[g];
        hr_row[size_t(g)] = double(hr[size_t(n * rows + g)]) + b[rows + g];
      }
      rnn_step(pb, d, xw_row, hr_row, h[size_t(n)], c[size_t(n)]);
      std::copy(h[size_t(n)].begin(), h[size_t(n)].end(),
                res.y.begin() + (l1 ? (n * S + t) * nd + d : (t * nd + d) * N + n) * H);
    }
  }
  for (int64_t n = 0; n < N; n++) {
    if (length(n) == 0) continue;  // as onnxruntime: no step, zero final state
    std::copy(h[size_t(n)].begin(), h[size_t(n)].end(), res.yh.begin() + state_at(n));
    std::copy(c[size_t(n)].begin(), c[size_t(n)].end(), res.yc.begin() + state_at(n));
  }
}

RnnResult run_rnn_f32(const RnnProblem& pb, const float* w, const float* r, ThreadPool& pool) {
  const int64_t nd = pb.a.num_directions, S = pb.seq, N = pb.batch, H = pb.hidden, I = pb.input;
  RnnResult res;
  res.y.assign(size_t(S * nd * N * H), 0.0);
  res.yh.assign(size_t(nd * N * H), 0.0);
  res.yc.assign(size_t(nd * N * H), 0.0);
  std::vector<float> x(size_t(S * N * I));  // time-major rows t * N + n
  for (int64_t t = 0; t < S; t++)
    for (int64_t n = 0; n < N; n++)
      std::copy_n(pb.x.begin() + (pb.a.layout == 1 ? n * S + t : t * N + n) * I, I, x.begin() + (t * N + n) * I);
  // The directions one after the other, each on every thread: two directions at once would need
  // both R in cache (8 MiB for a bidirectional LSTM of 512), one at a time each thread keeps its
  // rows of one.
  for (int64_t d = 0; d < nd; d++) run_direction_f32(pb, d, x, w, r, res, pool);
  return res;
}

void recurrent_kernel(KernelContext& ctx) {
  RnnProblem pb = rnn_problem(ctx, ctx.input(2).shape()[2]);
  if (ctx.input(0).dtype() == DType::f32 && ctx.input(1).dtype() == DType::f32 &&
      ctx.input(2).dtype() == DType::f32 && !reference_kernels_requested() && pb.seq * pb.batch * pb.input * pb.hidden > 0) {
    // A GRU without linear_before_reset takes its h gate's recurrent term from R in rnn_step.
    if (pb.a.kind == RnnKind::gru && !pb.a.linear_before_reset) pb.r = ctx.input(2).to_double_vector();
    write_outputs(ctx, run_rnn_f32(pb, ctx.input(1).data<float>(), ctx.input(2).data<float>(), ctx.pool));
    return;
  }
  pb.w = ctx.input(1).to_double_vector();
  pb.r = ctx.input(2).to_double_vector();
  write_outputs(ctx, run_rnn(pb));
}

// Weight input `at` of DynamicQuantizeLSTM (q [nd, k, rows]) with its scale (input scale_at) and zero
// point (scale_at + 1). As in ONNX Runtime, one zero point per direction applies: uint8 weights must have equal
// zero points within a direction, int8 weights zero ones.
QuantizedWeights quantized_weights(const KernelContext& ctx, size_t at, size_t scale_at, const char* name) {
  const Tensor& q = ctx.input(at);
  QuantizedWeights w;
  const int64_t nd = q.dim(0);
  w.k = q.dim(1);
  w.rows = q.dim(2);
  for (double v : q.to_double_vector()) w.q.push_back(int32_t(v));
  w.scale = float_values(ctx, scale_at);
  w.per_row = int64_t(w.scale.size()) == nd * w.rows && w.rows > 1;
  VLRT_CHECK(int64_t(w.scale.size()) == (w.per_row ? nd * w.rows : nd), name, "_scale has ", w.scale.size(),
             " values; expected ", nd, " (per direction) or ", nd * w.rows, " (per row)");
  std::vector<int32_t> zp = zero_point_values(ctx, scale_at + 1);
  const int64_t per_direction = int64_t(zp.size()) / nd;
  VLRT_CHECK(per_direction >= 1 && int64_t(zp.size()) == nd * per_direction, name, "_zero_point has ", zp.size(),
             " values for ", nd, " directions");
  for (int64_t d = 0; d < nd; d++) {
    const int32_t first = zp[size_t(d * per_direction)];
    for (int64_t i = 0; i < per_direction; i++)
      VLRT_CHECK(zp[size_t(d * per_direction + i)] == first && (q.dtype() == DType::u8 || first == 0), name,
                 "_zero_point of direction ", d,
                 " must be one value (uint8 weights) or zero (int8 weights), as ONNX Runtime requires");
    w.zero_point.push_back(first);
  }
  return w;
}

void dynamic_quantize_lstm_kernel(KernelContext& ctx) {
  RnnProblem pb = rnn_problem(ctx, ctx.input(2).shape()[1]);
  pb.qw = quantized_weights(ctx, 1, 8, "W");
  pb.qr = quantized_weights(ctx, 2, 10, "R");
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
