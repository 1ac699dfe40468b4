// DFT, STFT, HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix against their
// definitions (the conformance suite covers the spec's own examples).
#include <cmath>
#include <complex>
#include <numbers>

#include "op_test_util.h"

namespace vlrt::test {
namespace {

using cd = std::complex<double>;
using std::numbers::pi;

// The DFT of x zero-padded or cut to n, by its definition.
std::vector<cd> naive_dft(const std::vector<cd>& x, int64_t n, bool inverse) {
  std::vector<cd> y(n);
  for (int64_t k = 0; k < n; k++)
    for (int64_t j = 0; j < std::min<int64_t>(n, int64_t(x.size())); j++)
      y[k] += x[j] * std::polar(1.0, (inverse ? 2 : -2) * pi * double(k * j) / double(n));
  if (inverse)
    for (auto& v : y) v /= double(n);
  return y;
}

Tensor complex_tensor(const std::vector<cd>& v, Shape s) {
  std::vector<float> f;
  for (auto c : v) {
    f.push_back(float(c.real()));
    f.push_back(float(c.imag()));
  }
  return f32(f, s);
}

TEST(Signal, DftRealOnesidedWithPaddingAlongAxis1) {
  std::vector<float> x = {1, -2, 3, 0.5f, 4};
  Tensor in = f32(x, {1, 5, 1});
  Tensor y = run_op("DFT", {in, i64({8}, {})}, {{"onesided", attr_i(1)}})[0];
  std::vector<cd> xc(x.begin(), x.end());
  auto want = naive_dft(xc, 8, false);
  want.resize(5);
  expect_close(y, complex_tensor(want, {1, 5, 2}), 1e-5);
}

TEST(Signal, DftComplexInverseOnAnInnerAxisUndoesTheForward) {
  // [batch 1, 3 signals of length 4 along axis 2? no: axis 1 of length 4, inner 2], complex.
  std::vector<float> v;
  for (int i = 0; i < 16; i++) v.push_back(float((i * 7) % 5) - 2.0f);
  Tensor x = f32(v, {1, 4, 2, 2});
  Tensor fwd = run_op("DFT", {x}, {{"axis", attr_i(1)}})[0];
  for (int inner = 0; inner < 2; inner++) {
    std::vector<cd> sig;
    for (int j = 0; j < 4; j++) sig.push_back({v[(j * 2 + inner) * 2], v[(j * 2 + inner) * 2 + 1]});
    auto want = naive_dft(sig, 4, false);
    for (int k = 0; k < 4; k++) {
      EXPECT_NEAR(fwd.data<float>()[(k * 2 + inner) * 2], want[k].real(), 1e-5);
      EXPECT_NEAR(fwd.data<float>()[(k * 2 + inner) * 2 + 1], want[k].imag(), 1e-5);
    }
  }
  Tensor back = run_op("DFT", {fwd}, {{"axis", attr_i(-3)}, {"inverse", attr_i(1)}})[0];
  expect_close(back, x, 1e-5);
}

TEST(Signal, DftRefusesBadForms) {
  Tensor x = f32({1, 2, 3, 4}, {1, 4, 1});
  EXPECT_THROW(run_op("DFT", {x}, {{"onesided", attr_i(1)}, {"inverse", attr_i(1)}}), Error);
  EXPECT_THROW(run_op("DFT", {x}, {{"axis", attr_i(2)}}), Error);
  EXPECT_THROW(run_op("DFT", {f32({1, 2, 3}, {1, 1, 3})}), Error);
  EXPECT_THROW(run_op("DFT", {x, i64({0}, {})}), Error);
}

TEST(Signal, StftFramesWindowAndOnesidedBins) {
  std::vector<float> s;
  for (int i = 0; i < 10; i++) s.push_back(std::sin(float(i)) + 0.25f * float(i));
  Tensor sig = f32(s, {1, 10, 1});
  std::vector<float> w = {0.5f, 1, 1, 0.5f};
  Tensor y = run_op("STFT", {sig, i64({3}, {}), f32(w, {4})}, {})[0];
  ASSERT_EQ(y.shape(), (Shape{1, 3, 3, 2}));  // frames at 0, 3, 6; 4 / 2 + 1 bins
  for (int f = 0; f < 3; f++) {
    std::vector<cd> frame;
    for (int j = 0; j < 4; j++) frame.push_back(double(s[f * 3 + j]) * double(w[j]));
    auto want = naive_dft(frame, 4, false);
    for (int k = 0; k < 3; k++) {
      EXPECT_NEAR(y.data<float>()[(f * 3 + k) * 2], want[k].real(), 1e-5);
      EXPECT_NEAR(y.data<float>()[(f * 3 + k) * 2 + 1], want[k].imag(), 1e-5);
    }
  }
  Tensor full = run_op("STFT", {sig, i64({3}, {}), Tensor(), i64({4}, {})}, {{"onesided", attr_i(0)}})[0];
  EXPECT_EQ(full.shape(), (Shape{1, 3, 4, 2}));
  EXPECT_THROW(run_op("STFT", {sig, i64({3}, {}), f32(w, {4}), i64({5}, {})}), Error);
  EXPECT_THROW(run_op("STFT", {sig, i64({3}, {})}), Error);
}

TEST(Signal, WindowsPeriodicSymmetricAndOutputType) {
  Tensor hann = run_op("HannWindow", {i64({4}, {})})[0];
  expect_close(hann, f32({0, 0.5f, 1, 0.5f}, {4}));
  Tensor hamming =
      run_op("HammingWindow", {i64({3}, {})}, {{"periodic", attr_i(0)}, {"output_datatype", attr_i(11)}})[0];
  double a = 25.0 / 46.0;
  expect_close(hamming, Tensor::from_vector<double>({2 * a - 1, 1, 2 * a - 1}, {3}), 1e-12);
  Tensor blackman = run_op("BlackmanWindow", {i64({5}, {})}, {{"periodic", attr_i(0)}})[0];
  expect_close(blackman, f32({0, 0.34f, 1, 0.34f, 0}, {5}), 1e-6);
  Tensor ints =
      run_op("HannWindow", {Tensor::from_vector<int32_t>({4}, {})}, {{"output_datatype", attr_i(7)}})[0];
  EXPECT_EQ(ints.dtype(), DType::i64);
  EXPECT_EQ(ints.to_int64_vector(), (std::vector<int64_t>{0, 0, 1, 0}));
  Tensor half = run_op("HannWindow", {i64({4}, {})}, {{"output_datatype", attr_i(10)}})[0];
  EXPECT_EQ(half.dtype(), DType::f16);
  EXPECT_THROW(run_op("HannWindow", {i64({-1}, {})}), Error);
  EXPECT_THROW(run_op("HannWindow", {i64({4}, {})}, {{"output_datatype", attr_i(9)}}), Error);
}

TEST(Signal, MelWeightMatrixRowsAreTriangles) {
  Tensor m = run_op("MelWeightMatrix",
                    {i64({4}, {}), i64({32}, {}), i64({8000}, {}), f32({0}, {}), f32({4000}, {})})[0];
  ASSERT_EQ(m.shape(), (Shape{17, 4}));
  // Each filter rises to 1 at its centre bin and falls back to 0.
  for (int f = 0; f < 4; f++) {
    double peak = 0;
    for (int b = 0; b < 17; b++) peak = std::max(peak, double(m.data<float>()[b * 4 + f]));
    EXPECT_DOUBLE_EQ(peak, 1.0) << "filter " << f;
  }
  EXPECT_THROW(run_op("MelWeightMatrix",
                      {i64({4}, {}), i64({32}, {}), i64({8000}, {}), f32({0}, {}), f32({9000}, {})}),
               Error);
}

}  // namespace
}  // namespace vlrt::test
