// CPU kernels for DFT, STFT, the window functions and MelWeightMatrix. Transforms are
// plain O(n^2) sums in double with exact twiddles (k * j taken modulo n).
#include <cmath>
#include <numbers>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/dispatch.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

using std::numbers::pi;


// DFT of `in` (n_in complex values at stride `stride`, zero-padded or cut to n) into out[0..bins).
struct Dft {
  int64_t n;
  bool inverse;
  std::vector<double> cos_, sin_;
  Dft(int64_t n, bool inverse) : n(n), inverse(inverse), cos_(n), sin_(n) {
    for (int64_t k = 0; k < n; k++) {
      cos_[k] = std::cos(2 * pi * double(k) / double(n));
      sin_[k] = std::sin(2 * pi * double(k) / double(n));
    }
  }
  // x: re, im pairs, n_in of them; y: `bins` pairs.
  void operator()(const double* x, int64_t n_in, double* y, int64_t bins) const {
    int64_t m = std::min(n_in, n);
    double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / double(n) : 1.0;
    for (int64_t k = 0; k < bins; k++) {
      double re = 0, im = 0;
      for (int64_t j = 0; j < m; j++) {
        int64_t t = (k * j) % n;
        double c = cos_[t], s = sign * sin_[t];
        re += x[2 * j] * c - x[2 * j + 1] * s;
        im += x[2 * j] * s + x[2 * j + 1] * c;
      }
      y[2 * k] = re * scale;
      y[2 * k + 1] = im * scale;
    }
  }
};

void dft_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const Shape& s = x.shape();
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 1), x.rank());
  int64_t comps = s.back(), n_in = s[axis], bins = y.shape()[axis];
  int64_t n = ctx.has_input(1) ? ctx.input(1).to_int64_vector()[0] : n_in;
  int64_t outer = shape_numel(Shape(s.begin(), s.begin() + axis));
  int64_t inner = shape_numel(Shape(s.begin() + axis + 1, s.end() - 1));
  Dft dft(n, ctx.node.attr_int("inverse", 0) != 0);
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    ctx.pool.parallel_for(outer * inner, [&](int64_t begin, int64_t end) {
      std::vector<double> a(2 * n_in), b(2 * bins);
      for (int64_t task = begin; task < end; task++) {
        int64_t o = task / inner, i = task % inner;
        for (int64_t j = 0; j < n_in; j++) {
          const T* e = xp + ((o * n_in + j) * inner + i) * comps;
          a[2 * j] = double(e[0]);
          a[2 * j + 1] = comps == 2 ? double(e[1]) : 0.0;
        }
        dft(a.data(), n_in, b.data(), bins);
        for (int64_t k = 0; k < bins; k++) {
          T* e = yp + ((o * bins + k) * inner + i) * 2;
          e[0] = T(b[2 * k]);
          e[1] = T(b[2 * k + 1]);
        }
      }
    });
  });
}

void stft_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t batch = x.shape()[0], length = x.shape()[1], comps = x.shape()[2];
  int64_t step = ctx.input(1).to_int64_vector()[0];
  int64_t frames = y.shape()[1], bins = y.shape()[2];
  int64_t fl = ctx.has_input(2) ? ctx.input(2).shape()[0] : ctx.input(3).to_int64_vector()[0];
  std::vector<double> window(fl, 1.0);
  if (ctx.has_input(2)) window = ctx.input(2).to_double_vector();
  Dft dft(fl, false);
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    ctx.pool.parallel_for(batch * frames, [&](int64_t begin, int64_t end) {
      std::vector<double> a(2 * fl), b(2 * bins);
      for (int64_t task = begin; task < end; task++) {
        int64_t bi = task / frames, f = task % frames;
        const T* frame = xp + (bi * length + f * step) * comps;
        for (int64_t j = 0; j < fl; j++) {
          a[2 * j] = double(frame[j * comps]) * window[j];
          a[2 * j + 1] = comps == 2 ? double(frame[j * comps + 1]) * window[j] : 0.0;
        }
        dft(a.data(), fl, b.data(), bins);
        T* out = yp + task * bins * 2;
        for (int64_t k = 0; k < 2 * bins; k++) out[k] = T(b[k]);
      }
    });
  });
}

// Generalized cosine window a0 - a1 cos(2 pi i / N) + a2 cos(4 pi i / N), N = size when
// periodic, size - 1 when symmetric.
void cosine_window(KernelContext& ctx, double a0, double a1, double a2) {
  Tensor& y = ctx.output(0);
  int64_t size = y.numel();
  bool periodic = ctx.node.attr_int("periodic", 1) != 0;
  double n = double(periodic ? size : size - 1);
  std::vector<double> v(size, 1.0);  // a symmetric window of one value is its centre, 1
  if (n > 0)
    for (int64_t i = 0; i < size; i++)
      v[i] = a0 - a1 * std::cos(2 * pi * double(i) / n) + a2 * std::cos(4 * pi * double(i) / n);
  y.assign_doubles(v);
}

void hann_window_kernel(KernelContext& ctx) { cosine_window(ctx, 0.5, 0.5, 0.0); }
void hamming_window_kernel(KernelContext& ctx) { cosine_window(ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0); }
void blackman_window_kernel(KernelContext& ctx) { cosine_window(ctx, 0.42, 0.5, 0.08); }

// Triangular filters between mel-spaced points, as the ONNX reference computes them: the
// num_mel_bins + 2 points are spaced by (high - low) / (num_mel_bins + 2) mels and mapped to
// the bin floor((dft_length + 1) * hz / sample_rate).
void mel_weight_matrix_kernel(KernelContext& ctx) {
  int64_t mel_bins = ctx.input(0).to_int64_vector()[0], dft_length = ctx.input(1).to_int64_vector()[0];
  int64_t sample_rate = ctx.input(2).to_int64_vector()[0];
  double low_hz = ctx.input(3).to_double_vector().at(0), high_hz = ctx.input(4).to_double_vector().at(0);
  VLRT_CHECK(sample_rate > 0, "sample_rate (input 2) must be positive, got ", sample_rate);
  VLRT_CHECK(low_hz >= 0 && low_hz < high_hz, "lower_edge_hertz ", low_hz,
             " must be in [0, upper_edge_hertz ", high_hz, ")");
  int64_t spec_bins = dft_length / 2 + 1;
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  double low_mel = to_mel(low_hz), step = (to_mel(high_hz) - low_mel) / double(mel_bins + 2);
  std::vector<int64_t> point(mel_bins + 2);
  for (int64_t i = 0; i < mel_bins + 2; i++) {
    double hz = 700.0 * (std::pow(10.0, (double(i) * step + low_mel) / 2595.0) - 1.0);
    point[i] = int64_t(std::floor(double(dft_length + 1) * hz / double(sample_rate)));
  }
  VLRT_CHECK(point.back() < spec_bins, "upper_edge_hertz ", high_hz, " maps to bin ", point.back(),
             " but a DFT of length ", dft_length, " has ", spec_bins,
             " bins (keep it at most sample_rate / 2)");
  std::vector<double> w(spec_bins * mel_bins, 0.0);
  for (int64_t m = 0; m < mel_bins; m++) {
    int64_t lo = point[m], mid = point[m + 1], hi = point[m + 2];
    if (mid == lo)
      w[mid * mel_bins + m] = 1;
    else
      for (int64_t j = lo; j <= mid; j++) w[j * mel_bins + m] = double(j - lo) / double(mid - lo);
    for (int64_t j = mid; j < hi; j++) w[j * mel_bins + m] = double(hi - j) / double(hi - mid);
  }
  ctx.output(0).assign_doubles(w);
}

}  // namespace

void register_signal_kernels(CpuKernelTable& t) {
  t["DFT"] = {dft_kernel};
  t["STFT"] = {stft_kernel};
  t["HannWindow"] = {hann_window_kernel};
  t["HammingWindow"] = {hamming_window_kernel};
  t["BlackmanWindow"] = {blackman_window_kernel};
  t["MelWeightMatrix"] = {mel_weight_matrix_kernel};
}

}  // namespace vlrt
