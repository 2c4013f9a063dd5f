// The short real DFTs of the circulant scans (src/cpu/scan/dft.hpp): both kernels (the radix-2
// FFT across rows, the GEMM) against a float64 DFT by its definition, for every power of two
// up to 64 and lengths between, row counts that leave part of a lane block, spectra strides
// with and without padding, and NaN staying in its own row.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <vector>

#include "api_test_util.hpp"
#include "cpu/scan/dft.hpp"
#include "strux/scan.hpp"

namespace {

using cd = std::complex<double>;

// X_f = sum_j x_j e^{-2 pi i j f / k}, f = 0 .. k/2.
std::vector<cd> naive_rfft(const double* x, int64_t k) {
  std::vector<cd> X(static_cast<size_t>(k / 2 + 1));
  for (int64_t f = 0; f <= k / 2; ++f)
    for (int64_t j = 0; j < k; ++j) X[size_t(f)] += x[j] * std::polar(1.0, -2.0 * M_PI * double((j * f) % k) / double(k));
  return X;
}

// Unnormalised c2r: x_j = sum over all k frequencies of the Hermitian extension (imaginary
// parts at 0 and k/2 ignored, as FFTW does).
std::vector<double> naive_irfft(const cd* X, int64_t k) {
  std::vector<double> x(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j)
    for (int64_t f = 0; f < k; ++f) {
      cd v = f <= k / 2 ? X[f] : std::conj(X[k - f]);
      if (f == 0 || 2 * f == k) v = v.real();
      x[size_t(j)] += (v * std::polar(1.0, 2.0 * M_PI * double((j * f) % k) / double(k))).real();
    }
  return x;
}

template <class T>
void check(int64_t k, bool radix2, int64_t rows, int64_t nfs) {
  SCOPED_TRACE(testing::Message() << "k=" << k << " radix2=" << radix2 << " rows=" << rows << " nfs=" << nfs
                                  << " bytes=" << sizeof(T));
  std::mt19937_64 g(uint64_t(k * 1000 + rows));
  strux::set_scan_dft_radix2(radix2);
  const auto* d = strux::cpu::scan::ShortDft<T>::get(k);
  ASSERT_NE(d, nullptr);
  const bool pow2 = (k & (k - 1)) == 0;
  EXPECT_EQ(d->radix2_fwd(), radix2 && pow2 && k >= 16);
  EXPECT_EQ(d->radix2_inv(), radix2 && pow2 && k >= 64);
  const double tol = sizeof(T) == 4 ? 2e-6 : 1e-14;
  const auto x = strux::test::randn<T>(g, rows * k);
  std::vector<std::complex<T>> X(size_t(rows * nfs), std::complex<T>(7, 7));
  d->forward(x.data(), rows * k, 1, rows, X.data(), nfs);
  double err = 0, ref = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> xr(x.begin() + r * k, x.begin() + (r + 1) * k);
    const auto want = naive_rfft(xr.data(), k);
    for (int64_t f = 0; f <= k / 2; ++f) {
      err = std::max(err, std::abs(cd(X[size_t(r * nfs + f)]) - want[size_t(f)]));
      ref = std::max(ref, std::abs(want[size_t(f)]));
    }
    EXPECT_EQ(X[size_t(r * nfs)].imag(), T(0));  // exact, like FFTW's r2c
    if (k % 2 == 0) EXPECT_EQ(X[size_t(r * nfs + k / 2)].imag(), T(0));
    for (int64_t f = k / 2 + 1; f < nfs; ++f) EXPECT_EQ(X[size_t(r * nfs + f)], std::complex<T>(0));
  }
  EXPECT_LE(err, tol * ref);

  // Inverse of arbitrary spectra (non-zero imaginary parts at 0 and k/2, to be ignored).
  const auto S = strux::test::randn<std::complex<T>>(g, rows * nfs);
  std::vector<T> y(size_t(rows * k), T(7));
  const T scale = T(0.5);
  d->inverse(S.data(), nfs, 1, rows, y.data(), rows * k, scale);
  err = ref = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<cd> Sr(S.begin() + r * nfs, S.begin() + r * nfs + k / 2 + 1);
    const auto want = naive_irfft(Sr.data(), k);
    for (int64_t j = 0; j < k; ++j) {
      err = std::max(err, std::abs(double(y[size_t(r * k + j)]) - 0.5 * want[size_t(j)]));
      ref = std::max(ref, std::abs(0.5 * want[size_t(j)]));
    }
  }
  EXPECT_LE(err, tol * double(k) * ref);

  // NaN in one row: that row's spectrum is NaN, every other row (same lanes block) is exact.
  if (rows >= 3) {
    auto xn = x;
    xn[size_t(k + k / 2)] = std::numeric_limits<T>::quiet_NaN();
    std::vector<std::complex<T>> Xn(X.size());
    d->forward(xn.data(), rows * k, 1, rows, Xn.data(), nfs);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t f = 0; f <= k / 2; ++f) {
        const auto v = Xn[size_t(r * nfs + f)];
        if (r == 1)
          EXPECT_TRUE(std::isnan(v.real()));
        else
          EXPECT_EQ(v, X[size_t(r * nfs + f)]);
      }
  }
}

TEST(ScanShortDft, BothKernelsMatchTheDefinition) {
  for (int64_t k : {1, 2, 3, 4, 8, 12, 16, 32, 48, 64})
    for (bool radix2 : {true, false})
      for (int64_t rows : {1, 3, 17, 40}) {
        const int64_t nf = k / 2 + 1;
        for (int64_t nfs : {nf, (nf + 1) / 2 * 2, (nf + 7) / 8 * 8 + 8}) {
          check<float>(k, radix2, rows, nfs);
          check<double>(k, radix2, rows, nfs);
        }
      }
  strux::set_scan_dft_radix2(true);
}

}  // namespace
