// Recurrent kernels: RNN, GRU, LSTM and com.microsoft.DynamicQuantizeLSTM. One reference loop,
// in double, over directions, steps and the batch items still inside their sequence. Float32
// RNN, GRU and LSTM also have a fast path (not under VLRT_REFERENCE_KERNELS=1): X's products with
// W of every step and direction at once, then each step's H with R over the batch (float32 dot
// products of rows, the rows split among the pool's threads), one direction at a time. An LSTM
// with the default activations computes its gates in float32 too, each thread those of its own
// hidden units; other gates are the reference's, in double.
// DynamicQuantizeLSTM does ONNX Runtime's arithmetic: X (all steps at once) and H (all batch items
// of a step at once) are quantized to uint8 with dynamic parameters, multiplied with the integer
// weights exactly, and the sums scaled to float by a_scale * w_scale.
#include <algorithm>
#include <cstring>
#include <optional>

#include "backends/cpu/kernel.h"
#include "backends/cpu/ops/quantization.h"
#include "backends/cpu/row_kernels.h"
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

// The steps of batch item n: its sequence_lens entry, or the whole sequence.
int64_t sequence_length(const RnnProblem& pb, int64_t n) {
  return pb.lens.empty() ? pb.seq : pb.lens[size_t(n)];
}

// The most steps any batch item takes.
int64_t longest_sequence(const RnnProblem& pb) {
  int64_t steps = 0;
  for (int64_t n = 0; n < pb.batch; n++) steps = std::max(steps, sequence_length(pb, n));
  return steps;
}

// The time that step s of direction d reads and writes for batch item n: the reverse direction
// runs from the end of the item's sequence.
int64_t time_of_step(const RnnProblem& pb, int64_t d, int64_t n, int64_t s) {
  const bool reverse = pb.a.direction == "reverse" || d == 1;
  return reverse ? sequence_length(pb, n) - 1 - s : s;
}

// Where the input of batch item n at time t starts in X.
int64_t input_offset(const RnnProblem& pb, int64_t n, int64_t t) {
  return (pb.a.layout == 1 ? n * pb.seq + t : t * pb.batch + n) * pb.input;
}

// Where the state of batch item n of direction d starts in initial_h, initial_c, Y_h and Y_c.
int64_t state_offset(const RnnProblem& pb, int64_t d, int64_t n) {
  return (pb.a.layout == 1 ? n * pb.a.num_directions + d : d * pb.batch + n) * pb.hidden;
}

// Where the output of batch item n of direction d at time t starts in Y.
int64_t output_offset(const RnnProblem& pb, int64_t d, int64_t n, int64_t t) {
  const int64_t nd = pb.a.num_directions;
  return (pb.a.layout == 1 ? (n * pb.seq + t) * nd + d : (t * nd + d) * pb.batch + n) * pb.hidden;
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
  std::vector<float> rows(size_t(steps * pb.batch * pb.input));
  for (int64_t t = 0; t < steps; t++)
    for (int64_t n = 0; n < pb.batch; n++)
      std::copy_n(pb.x.begin() + input_offset(pb, n, t), pb.input,
                  rows.begin() + (t * pb.batch + n) * pb.input);
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
  if (!pb.qr) {
    for (int64_t n = 0; n < N; n++)
      if (s < sequence_length(pb, n))
        gate_inputs(pb, d, pb.x.data() + input_offset(pb, n, time_of_step(pb, d, n, s)),
                    st.h[size_t(n)].data(), xw[size_t(n)], hr[size_t(n)]);
    return;
  }
  // ONNX Runtime quantizes the previous step's output rows of the whole batch together: an item's
  // last hidden state still counts at the step after its end, later its row is zero.
  std::vector<float> h(size_t(N * pb.hidden), 0.0f);
  for (int64_t n = 0; n < N; n++)
    if (s <= sequence_length(pb, n))
      std::copy(st.h[size_t(n)].begin(), st.h[size_t(n)].end(), h.begin() + n * pb.hidden);
  const std::vector<float> h_products = quantized_products(*pb.qr, d, h, N);
  const double* b = pb.b.data() + d * 2 * rows;
  for (int64_t n = 0; n < N; n++) {
    if (s >= sequence_length(pb, n)) continue;
    const float* xp = st.x_products.data() + (time_of_step(pb, d, n, s) * N + n) * rows;
    for (int64_t g = 0; g < rows; g++) {
      xw[size_t(n)][size_t(g)] = double(xp[g] + h_products[size_t(n * rows + g)]) + b[g] + b[rows + g];
      hr[size_t(n)][size_t(g)] = 0.0;
    }
  }
}

RnnResult run_rnn(const RnnProblem& pb) {
  const int64_t nd = pb.a.num_directions, S = pb.seq, N = pb.batch, H = pb.hidden, rows = pb.gates * H;
  const int64_t steps = longest_sequence(pb);
  RnnResult res;
  res.y.assign(size_t(S * nd * N * H), 0.0);
  res.yh.assign(size_t(nd * N * H), 0.0);
  res.yc.assign(size_t(nd * N * H), 0.0);
  std::vector<std::vector<double>> xw(static_cast<size_t>(N), std::vector<double>(static_cast<size_t>(rows)));
  std::vector<std::vector<double>> hr = xw;
  for (int64_t d = 0; d < nd; d++) {
    DirectionState st;
    st.h.assign(size_t(N), std::vector<double>(size_t(H), 0.0));
    st.c = st.h;
    for (int64_t n = 0; n < N; n++) {
      if (!pb.h0.empty()) std::copy_n(pb.h0.begin() + state_offset(pb, d, n), H, st.h[size_t(n)].begin());
      if (!pb.c0.empty()) std::copy_n(pb.c0.begin() + state_offset(pb, d, n), H, st.c[size_t(n)].begin());
    }
    if (pb.qw) st.x_products = quantized_products(*pb.qw, d, input_rows(pb, steps), steps * N);
    for (int64_t s = 0; s < steps; s++) {
      step_gate_inputs(pb, d, s, st, xw, hr);
      for (int64_t n = 0; n < N; n++) {
        if (s >= sequence_length(pb, n)) continue;
        rnn_step(pb, d, xw[size_t(n)], hr[size_t(n)], st.h[size_t(n)], st.c[size_t(n)]);
        std::copy(st.h[size_t(n)].begin(), st.h[size_t(n)].end(),
                  res.y.begin() + output_offset(pb, d, n, time_of_step(pb, d, n, s)));
      }
    }
    for (int64_t n = 0; n < N; n++) {
      if (sequence_length(pb, n) == 0) continue;  // as onnxruntime: no step, zero final state
      std::copy(st.h[size_t(n)].begin(), st.h[size_t(n)].end(), res.yh.begin() + state_offset(pb, d, n));
      std::copy(st.c[size_t(n)].begin(), st.c[size_t(n)].end(), res.yc.begin() + state_offset(pb, d, n));
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

typedef float f32x8 __attribute__((vector_size(32)));

inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float lanes_sum(f32x8 v) { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }

// Row g of r [*, k] times the rows n0 .. n0 + Items - 1 of h [*, k], rows g .. g + Rows - 1 at once:
// y[n * ldy + g] = r[g, :] . h[n, :].
template <int Rows, int Items>
inline void dot_tile(const float* r, int64_t k, int64_t g, const float* h, int64_t n0, float* y,
                     int64_t ldy) {
  f32x8 acc[Rows][Items] = {};
  const float* rg = r + g * k;
  const float* hn = h + n0 * k;
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    f32x8 hv[Items];
    for (int b = 0; b < Items; b++) hv[b] = load8(hn + b * k + i);
    for (int a = 0; a < Rows; a++) {
      f32x8 rv = load8(rg + a * k + i);
#if defined(__x86_64__)
      asm("" : "+x"(rv));  // one load for every item: GCC would fold it into each multiply-add
#endif
      for (int b = 0; b < Items; b++) acc[a][b] += rv * hv[b];
    }
  }
  for (int a = 0; a < Rows; a++)
    for (int b = 0; b < Items; b++) {
      float s = lanes_sum(acc[a][b]);
      for (int64_t e = i; e < k; e++) s += rg[a * k + e] * hn[b * k + e];
      y[(n0 + b) * ldy + g + a] = s;
    }
}

// y[n * ldy + g] = r[g, :] . h[n, :] for the rows g0 .. g1 of r [*, k] and the rows n of h [items, k]:
// a step's recurrent products (one item per batch entry: each row of R read once, at the speed R
// comes from the cache) and X's products with W (an item per step and batch entry).
void rows_dot_rows(const float* r, int64_t k, int64_t g0, int64_t g1, const float* h, int64_t items, float* y,
                   int64_t ldy) {
  int64_t g = g0;
  for (; g + 4 <= g1; g += 4) {
    int64_t n = 0;
    for (; n + 2 <= items; n += 2) dot_tile<4, 2>(r, k, g, h, n, y, ldy);
    for (; n < items; n++) dot_tile<4, 1>(r, k, g, h, n, y, ldy);
  }
  for (; g < g1; g++)
    for (int64_t n = 0; n < items; n++) dot_tile<1, 1>(r, k, g, h, n, y, ldy);
}

// Products of fewer multiply-adds run on the calling thread alone: handing them to the pool costs
// more than the other threads save (a voice detector's LSTM of 128 units).
constexpr int64_t kSplitMacs = 1 << 17;

// fn(g0, g1) over the rows [0, rows) in blocks of `block`, split among the pool's threads when the
// rows' products take `macs` multiply-adds or more.
template <class F>
void for_row_blocks(int64_t rows, int64_t block, int64_t macs, ThreadPool& pool, const F& fn) {
  const int64_t blocks = ceil_div(rows, block);
  pool.parallel_for(
      blocks, [&](int64_t begin, int64_t end) { fn(begin * block, std::min(rows, end * block)); },
      macs < kSplitMacs ? blocks : 1);
}

// The hidden units [j0, j1) of a step, one block of whole vectors per thread: the same thread takes
// the same units at every step, so the rows of R it reads stay in its cache.
template <class F>
void for_unit_blocks(int64_t hidden, int64_t macs, ThreadPool& pool, const F& fn) {
  for_row_blocks(hidden, std::max<int64_t>(8, ceil_div(ceil_div(hidden, pool.size()), 8) * 8), macs, pool,
                 fn);
}

// One direction of the fast path for RNN and GRU; writes its parts of res. xw holds X's products
// with W of every direction (row t * N + n, direction d at column d * rows); the recurrent products
// are float32 on the pool's threads, the state and the gates the reference's (rnn_step, in double).
void run_direction_f32(const RnnProblem& pb, int64_t d, const std::vector<float>& xw, const float* r_all,
                       RnnResult& res, ThreadPool& pool) {
  const int64_t nd = pb.a.num_directions, N = pb.batch, H = pb.hidden, rows = pb.gates * H;
  const double* b = pb.b.data() + d * 2 * rows;
  const float* r = r_all + d * rows * H;
  std::vector<float> hr(size_t(N * rows)), h_rows(size_t(N * H));
  std::vector<std::vector<double>> h(size_t(N), std::vector<double>(size_t(H), 0.0)), c = h;
  for (int64_t n = 0; n < N; n++) {
    if (!pb.h0.empty()) std::copy_n(pb.h0.begin() + state_offset(pb, d, n), H, h[size_t(n)].begin());
    if (!pb.c0.empty()) std::copy_n(pb.c0.begin() + state_offset(pb, d, n), H, c[size_t(n)].begin());
  }
  std::vector<double> xw_row(static_cast<size_t>(rows)), hr_row(static_cast<size_t>(rows));
  for (int64_t s = 0, steps = longest_sequence(pb); s < steps; s++) {
    for (int64_t n = 0; n < N; n++) std::copy(h[size_t(n)].begin(), h[size_t(n)].end(), h_rows.begin() + n * H);
    for_row_blocks(rows, 64, rows * H * N, pool, [&](int64_t g0, int64_t g1) {
      rows_dot_rows(r, H, g0, g1, h_rows.data(), N, hr.data(), rows);
    });
    for (int64_t n = 0; n < N; n++) {
      if (s >= sequence_length(pb, n)) continue;
      const int64_t t = time_of_step(pb, d, n, s);
      for (int64_t g = 0; g < rows; g++) {
        xw_row[size_t(g)] = double(xw[size_t((t * N + n) * nd * rows + d * rows + g)]) + b[g];
        hr_row[size_t(g)] = double(hr[size_t(n * rows + g)]) + b[rows + g];
      }
      rnn_step(pb, d, xw_row, hr_row, h[size_t(n)], c[size_t(n)]);
      std::copy(h[size_t(n)].begin(), h[size_t(n)].end(), res.y.begin() + output_offset(pb, d, n, t));
    }
  }
  for (int64_t n = 0; n < N; n++) {
    if (sequence_length(pb, n) == 0) continue;  // as onnxruntime: no step, zero final state
    std::copy(h[size_t(n)].begin(), h[size_t(n)].end(), res.yh.begin() + state_offset(pb, d, n));
    std::copy(c[size_t(n)].begin(), c[size_t(n)].end(), res.yc.begin() + state_offset(pb, d, n));
  }
}

// An LSTM whose gates the float32 path computes: the default activations (Sigmoid, Tanh, Tanh) in
// every direction, and the vector row kernels present.
bool float_lstm_gates(const RnnProblem& pb) {
  if (pb.a.kind != RnnKind::lstm || !row_kernels_f32()) return false;
  for (int64_t d = 0; d < pb.a.num_directions; d++) {
    const RnnActivation* act = pb.a.activations.data() + d * 3;
    if (act[0].kind != RnnActivationKind::sigmoid || act[1].kind != RnnActivationKind::tanh ||
        act[2].kind != RnnActivationKind::tanh)
      return false;
  }
  return true;
}

// The gates of LSTM units [0, u) of one batch item, all in float32: z holds the pre-activations
// i, o, f, c (rows 0, H, 2H, 3H from z, each u long) without the peephole terms; c and h are
// updated in place. p: the peepholes i, o, f of these units (rows 0, H, 2H), or nullptr.
void lstm_gates_f32(const RnnProblem& pb, float* z, int64_t H, int64_t u, const float* p, float* c, float* h,
                    const RowKernelsF32& rk) {
  float *zi = z, *zo = z + H, *zf = z + 2 * H, *zg = z + 3 * H;
  const float clip = pb.a.clip ? *pb.a.clip : 0.f;
  auto clipped = [&](float* v) {
    if (pb.a.clip) rk.unary(UnaryF32::clip, UnaryParams{-clip, clip}, v, v, u);
  };
  if (p)
    for (int64_t j = 0; j < u; j++) zi[j] += p[j] * c[j], zf[j] += p[2 * H + j] * c[j];
  clipped(zi);
  clipped(zg);
  rk.unary(UnaryF32::sigmoid, {}, zi, zi, u);
  rk.unary(UnaryF32::tanh, {}, zg, zg, u);
  if (pb.a.input_forget) {
    for (int64_t j = 0; j < u; j++) zf[j] = 1.f - zi[j];
  } else {
    clipped(zf);
    rk.unary(UnaryF32::sigmoid, {}, zf, zf, u);
  }
  for (int64_t j = 0; j < u; j++) c[j] = zf[j] * c[j] + zi[j] * zg[j];
  if (p)
    for (int64_t j = 0; j < u; j++) zo[j] += p[H + j] * c[j];
  clipped(zo);
  rk.unary(UnaryF32::sigmoid, {}, zo, zo, u);
  rk.unary(UnaryF32::tanh, {}, c, h, u);
  for (int64_t j = 0; j < u; j++) h[j] *= zo[j];
}

// One direction of an LSTM entirely in float32 (float_lstm_gates). Each thread takes a block of
// hidden units at every step: their four gate rows of R . h, then their gates, writing their part
// of the next h; the step ends when every block has.
void run_lstm_direction_f32(const RnnProblem& pb, int64_t d, const std::vector<float>& xw, const float* r_all,
                            RnnResult& res, ThreadPool& pool) {
  const int64_t nd = pb.a.num_directions, N = pb.batch, H = pb.hidden, rows = 4 * H;
  const float* r = r_all + d * rows * H;
  const RowKernelsF32& rk = *row_kernels_f32();
  std::vector<float> bias(static_cast<size_t>(rows)), peephole(static_cast<size_t>(3 * H));
  for (int64_t g = 0; g < rows; g++)
    bias[size_t(g)] = float(pb.b[size_t(d * 2 * rows + g)] + pb.b[size_t(d * 2 * rows + rows + g)]);
  bool has_peephole = false;
  for (int64_t j = 0; j < 3 * H; j++) {
    peephole[size_t(j)] = float(pb.p[size_t(d * 3 * H + j)]);
    has_peephole |= peephole[size_t(j)] != 0.f;
  }
  // h of the step before (read by every thread) and of this step (written by each for its units).
  std::vector<float> h(size_t(N * H), 0.f), next(size_t(N * H), 0.f), c(size_t(N * H), 0.f);
  std::vector<float> z(size_t(N * rows));
  for (int64_t n = 0; n < N; n++) {
    for (int64_t j = 0; j < H; j++) {
      if (!pb.h0.empty()) h[size_t(n * H + j)] = float(pb.h0[size_t(state_offset(pb, d, n) + j)]);
      if (!pb.c0.empty()) c[size_t(n * H + j)] = float(pb.c0[size_t(state_offset(pb, d, n) + j)]);
    }
  }
  for (int64_t s = 0, steps = longest_sequence(pb); s < steps; s++) {
    for_unit_blocks(H, rows * H * N, pool, [&](int64_t j0, int64_t j1) {
      for (int64_t q = 0; q < 4; q++)
        rows_dot_rows(r, H, q * H + j0, q * H + j1, h.data(), N, z.data(), rows);
      for (int64_t n = 0; n < N; n++) {
        if (s >= sequence_length(pb, n)) continue;
        const float* xn = xw.data() + (time_of_step(pb, d, n, s) * N + n) * nd * rows + d * rows;
        float* zn = z.data() + n * rows;
        for (int64_t q = 0; q < 4; q++)
          for (int64_t j = q * H + j0; j < q * H + j1; j++) zn[j] += xn[j] + bias[size_t(j)];
        lstm_gates_f32(pb, zn + j0, H, j1 - j0, has_peephole ? peephole.data() + j0 : nullptr,
                       c.data() + n * H + j0, next.data() + n * H + j0, rk);
      }
    });
    for (int64_t n = 0; n < N; n++) {
      if (s >= sequence_length(pb, n)) continue;  // a finished item keeps its last state
      std::copy_n(next.begin() + n * H, H, h.begin() + n * H);
      std::copy_n(h.begin() + n * H, H, res.y.begin() + output_offset(pb, d, n, time_of_step(pb, d, n, s)));
    }
  }
  for (int64_t n = 0; n < N; n++) {
    if (sequence_length(pb, n) == 0) continue;  // as onnxruntime: no step, zero final state
    std::copy_n(h.begin() + n * H, H, res.yh.begin() + state_offset(pb, d, n));
    std::copy_n(c.begin() + n * H, H, res.yc.begin() + state_offset(pb, d, n));
  }
}

RnnResult run_rnn_f32(const RnnProblem& pb, const float* w, const float* r, ThreadPool& pool) {
  const int64_t nd = pb.a.num_directions, S = pb.seq, N = pb.batch, H = pb.hidden, I = pb.input;
  RnnResult res;
  res.y.assign(size_t(S * nd * N * H), 0.0);
  res.yh.assign(size_t(nd * N * H), 0.0);
  res.yc.assign(size_t(nd * N * H), 0.0);
  const std::vector<float> x = input_rows(pb, S);  // time-major rows t * N + n
  // X's products with W of every direction in one product: W stacks the directions' rows.
  const int64_t rows = pb.gates * H;
  std::vector<float> xw(size_t(S * N * nd * rows));
  for_row_blocks(nd * rows, 64, nd * rows * I * S * N, pool, [&](int64_t g0, int64_t g1) {
    rows_dot_rows(w, I, g0, g1, x.data(), S * N, xw.data(), nd * rows);
  });
  // The directions one after the other, each on every thread: two directions at once would need
  // both R in cache (8 MiB for a bidirectional LSTM of 512), one at a time each thread keeps its
  // rows of one.
  const bool float_gates = float_lstm_gates(pb);
  for (int64_t d = 0; d < nd; d++) {
    if (float_gates)
      run_lstm_direction_f32(pb, d, xw, r, res, pool);
    else
      run_direction_f32(pb, d, xw, r, res, pool);
  }
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
