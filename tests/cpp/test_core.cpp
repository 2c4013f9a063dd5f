// Core pieces every family stands on: FFT size choice, the FFTW wrapper, argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>

#include "cpu/fft.hpp"
#include "strux/core.hpp"

using namespace strux;

TEST(Core, GoodFftSizeIsSmoothAndMinimal) {
  for (int64_t n = 1; n < 2000; ++n) {
    int64_t m = cpu::good_fft_size(n);
    ASSERT_GE(m, n);
    int64_t r = m;
    for (int64_t p : {2, 3, 5, 7})
      while (r % p == 0) r /= p;
    ASSERT_EQ(r, 1) << m;
    for (int64_t q = n; q < m; ++q) ASSERT_NE(cpu::good_fft_size(q), q) << q;
  }
  EXPECT_THROW(cpu::good_fft_size(0), ValueError);
}

template <class T>
void check_real_fft(int64_t n, double tol) {
  auto fft = cpu::RealFFT<T>::get(n);
  EXPECT_EQ(fft.get(), cpu::RealFFT<T>::get(n).get()) << "plans are cached";
  cpu::AlignedBuffer<T> x(n), back(n);
  cpu::AlignedBuffer<std::complex<T>> X(fft->nfreq());
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> nd;
  for (int64_t i = 0; i < n; ++i) x[i] = T(nd(rng));
  std::vector<T> keep(x.data(), x.data() + n);
  fft->forward(x.data(), X.data());
  // Direct DFT at a few frequencies, in double.
  for (int64_t f : {int64_t(0), fft->nfreq() / 2, fft->nfreq() - 1}) {
    std::complex<double> s = 0;
    for (int64_t t = 0; t < n; ++t) s += double(keep[t]) * std::polar(1.0, -2 * M_PI * double(f * t % n) / double(n));
    EXPECT_NEAR(std::abs(std::complex<double>(X[f]) - s), 0.0, tol * std::sqrt(double(n)) * 4) << "n=" << n << " f=" << f;
  }
  fft->inverse(X.data(), back.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(double(back[i]) / double(n), double(keep[i]), tol * 10) << i;
}

TEST(Core, RealFftMatchesDirectDftFloat) {
  for (int64_t n : {1, 2, 7, 97, 256, 1000}) check_real_fft<float>(n, 1e-5);
}
TEST(Core, RealFftMatchesDirectDftDouble) {
  for (int64_t n : {1, 3, 13, 101, 512, 1024}) check_real_fft<double>(n, 1e-12);
}

TEST(Core, CheckArgNamesTheArgument) {
  try {
    check_arg(false, "k", "expected 2 dimensions, got ", 3);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'k'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("got 3"), std::string::npos);
  }
  EXPECT_THROW(check_positive(0, "L"), ValueError);
  EXPECT_EQ(shape_str({2, 3}), "(2, 3)");
}
