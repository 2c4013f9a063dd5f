// SpectralConvPlan (fftconv_spectral, CPU) vs a float64 direct DFT of the DESIGN.md formula,
// and its backward by linearity: the map is linear in each of u, k_hat, pregate, postgate
// (affine in skip), so <dy, y> equals the inner product of each gradient with its argument.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <random>
#include <vector>

#include "strux/core.hpp"
#include "strux/fftconv.hpp"

namespace {

using strux::ConvMode;
using strux::SpectralConvPlan;
using C = std::complex<double>;
using Vec = std::vector<double>;
using CVec = std::vector<C>;

struct Case {
  int64_t B, H, L, m;
  ConvMode mode;
};

int64_t nsize(const Case& c) { return c.mode == ConvMode::Causal ? 2 * c.L : c.L; }

// y = irfft(rfft(v, n) ⊙ K̂, n)[:L] as a direct sum: (1/n) Σ_f c_f Re(V_f K̂_f e^{2πi f t/n}).
Vec ref(const Case& c, const Vec& v, const CVec& kh) {
  const int64_t n = nsize(c), nf = n / 2 + 1;
  const double tau = 2 * M_PI / double(n);
  Vec y(static_cast<size_t>(c.B * c.H * c.L), 0.0);
  for (int64_t r = 0; r < c.B * c.H; ++r) {
    const int64_t h = r % c.H;
    for (int64_t f = 0; f < std::min(c.m, nf); ++f) {
      C V = 0;
      for (int64_t s = 0; s < c.L; ++s) V += v[size_t(r * c.L + s)] * std::polar(1.0, -tau * double(f * s % n));
      const C X = V * kh[size_t(h * c.m + f)];
      const double w = (f == 0 || (n % 2 == 0 && f == n / 2)) ? 1.0 : 2.0;
      for (int64_t t = 0; t < c.L; ++t)
        y[size_t(r * c.L + t)] += w / double(n) * std::real(X * std::polar(1.0, tau * double(f * t % n)));
    }
  }
  return y;
}

Vec randn(std::mt19937& g, int64_t count) {
  std::normal_distribution<double> d;
  Vec x(static_cast<size_t>(count), 0.0);
  for (auto& e : x) e = d(g);
  return x;
}

CVec crandn(std::mt19937& g, int64_t count) {
  std::normal_distribution<double> d;
  CVec x(static_cast<size_t>(count));
  for (auto& e : x) e = C(d(g), d(g));
  return x;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double cdot(const CVec& a, const CVec& b) {  // Σ Re(conj(a) b)
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::real(std::conj(a[i]) * b[i]);
  return s;
}

const Case kCases[] = {
    {2, 3, 1, 1, ConvMode::Circular}, {2, 3, 1, 2, ConvMode::Causal},  {1, 2, 7, 3, ConvMode::Causal},
    {2, 2, 7, 4, ConvMode::Circular}, {2, 3, 6, 4, ConvMode::Circular}, {3, 2, 12, 13, ConvMode::Causal},
    {2, 1, 13, 1, ConvMode::Causal},
};

TEST(SpectralConvPlan, ForwardMatchesDirectDFT) {
  std::mt19937 g(1);
  for (const Case& c : kCases) {
    const int64_t N = c.B * c.H * c.L;
    const Vec u = randn(g, N), pre = randn(g, N), post = randn(g, N), skip = randn(g, c.H);
    const CVec kh = crandn(g, c.H * c.m);
    SpectralConvPlan<double> plan(c.B, c.H, c.L, kh.data(), c.m, c.mode);
    EXPECT_EQ(plan.nfft(), nsize(c));
    Vec y(static_cast<size_t>(N)), v(static_cast<size_t>(N));
    plan.forward(u.data(), nullptr, nullptr, nullptr, y.data());
    Vec want = ref(c, u, kh);
    for (int64_t i = 0; i < N; ++i) EXPECT_NEAR(y[size_t(i)], want[size_t(i)], 1e-12) << "L=" << c.L;
    for (int64_t i = 0; i < N; ++i) v[size_t(i)] = u[size_t(i)] * pre[size_t(i)];
    want = ref(c, v, kh);
    plan.forward(u.data(), pre.data(), post.data(), skip.data(), y.data());
    for (int64_t i = 0; i < N; ++i) {
      const double z = (want[size_t(i)] + skip[size_t(i / c.L % c.H)] * v[size_t(i)]) * post[size_t(i)];
      EXPECT_NEAR(y[size_t(i)], z, 1e-12) << "L=" << c.L << " gated";
    }
  }
}

TEST(SpectralConvPlan, BackwardByLinearity) {
  std::mt19937 g(2);
  for (const Case& c : kCases) {
    const int64_t N = c.B * c.H * c.L;
    const Vec u = randn(g, N), pre = randn(g, N), post = randn(g, N), skip = randn(g, c.H), dy = randn(g, N);
    const CVec kh = crandn(g, c.H * c.m);
    SpectralConvPlan<double> plan(c.B, c.H, c.L, kh.data(), c.m, c.mode);
    Vec y(static_cast<size_t>(N)), y0(static_cast<size_t>(N)), du(static_cast<size_t>(N)), dpre(static_cast<size_t>(N)), dpost(static_cast<size_t>(N)), dskip(static_cast<size_t>(c.H));
    CVec dk(static_cast<size_t>(c.H * c.m));
    plan.forward(u.data(), pre.data(), post.data(), skip.data(), y.data());
    plan.forward(u.data(), pre.data(), post.data(), nullptr, y0.data());
    plan.backward(dy.data(), u.data(), pre.data(), post.data(), skip.data(), du.data(), dk.data(), dpre.data(),
                  dpost.data(), dskip.data());
    const double L1 = dot(dy, y), L0 = dot(dy, y0), tol = 1e-11 * (1 + std::abs(L1));
    EXPECT_NEAR(dot(du, u), L1, tol);
    EXPECT_NEAR(dot(dpre, pre), L1, tol);
    EXPECT_NEAR(dot(dpost, post), L1, tol);
    EXPECT_NEAR(dot(dskip, skip), L1 - L0, tol);
    // y without skip is linear in k_hat (the imaginary parts of bins 0 and n/2 have no effect,
    // and their gradient is 0)
    EXPECT_NEAR(cdot(dk, kh), L0, 1e-11 * (1 + std::abs(L0)));
    EXPECT_EQ(dk[0].imag(), 0.0);
  }
}

TEST(SpectralConvPlan, ChecksArguments) {
  const CVec kh(8);
  EXPECT_THROW(SpectralConvPlan<double>(1, 2, 4, kh.data(), 4, ConvMode::Circular), strux::ValueError);
  EXPECT_THROW(SpectralConvPlan<double>(1, 2, 4, kh.data(), 6, ConvMode::Causal), strux::ValueError);
  EXPECT_THROW(SpectralConvPlan<double>(1, 2, 4, nullptr, 2, ConvMode::Causal), strux::ValueError);
  EXPECT_THROW(SpectralConvPlan<double>(1, 2, 0, kh.data(), 2, ConvMode::Causal), strux::ValueError);
  EXPECT_NO_THROW(SpectralConvPlan<double>(1, 2, 4, kh.data(), 3, ConvMode::Circular));
  EXPECT_NO_THROW(SpectralConvPlan<double>(1, 2, 4, kh.data(), 5, ConvMode::Causal));
}

}  // namespace
