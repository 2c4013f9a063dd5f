// fftconv CPU plan vs plain float64 loops of the DESIGN.md formula (direct sums, no FFT).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "strux/core.hpp"
#include "strux/fftconv.hpp"

namespace {

using strux::ConvMode;
using strux::ConvSolver;
using strux::FFTConvPlan;
using Vec = std::vector<double>;

struct Shape {
  int64_t B, H, L, Lk;
};

// Direct sum, float64. Empty vectors = absent optional input.
Vec ref_conv(const Shape& s, ConvMode mode, const Vec& v, const Vec& k) {
  Vec y(size_t(s.B * s.H * s.L), 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t t = 0; t < s.L; ++t) {
        double acc = 0;
        for (int64_t j = 0; j < s.Lk; ++j) {
          int64_t i = t - j;
          if (mode == ConvMode::Causal) {
            if (i < 0) break;
          } else {
            i = ((i % s.L) + s.L) % s.L;
          }
          acc += k[size_t(h * s.Lk + j)] * v[size_t((b * s.H + h) * s.L + i)];
        }
        y[size_t((b * s.H + h) * s.L + t)] = acc;
      }
  return y;
}

struct Inputs {
  Vec u, k, pre, post, skip;
};

Vec ref_forward(const Shape& s, ConvMode mode, const Inputs& x) {
  Vec v = x.u;
  if (!x.pre.empty())
    for (size_t i = 0; i < v.size(); ++i) v[i] *= x.pre[i];
  Vec y = ref_conv(s, mode, v, x.k);
  for (size_t i = 0; i < y.size(); ++i) {
    int64_t h = int64_t(i) / s.L % s.H;
    if (!x.skip.empty()) y[i] += x.skip[size_t(h)] * v[i];
    if (!x.post.empty()) y[i] *= x.post[i];
  }
  return y;
}

// Directional derivative of ref_forward at x along dx (product rule on the multilinear form).
Vec ref_jvp(const Shape& s, ConvMode mode, const Inputs& x, const Inputs& dx) {
  const size_t n = x.u.size();
  Vec v(n), dv(n);
  for (size_t i = 0; i < n; ++i) {
    double p = x.pre.empty() ? 1.0 : x.pre[i], dp = x.pre.empty() ? 0.0 : dx.pre[i];
    v[i] = x.u[i] * p;
    dv[i] = dx.u[i] * p + x.u[i] * dp;
  }
  Vec z = ref_conv(s, mode, v, x.k), dz1 = ref_conv(s, mode, v, dx.k), dz2 = ref_conv(s, mode, dv, x.k);
  Vec out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t h = int64_t(i) / s.L % s.H;
    double zi = z[i], dzi = dz1[i] + dz2[i];
    if (!x.skip.empty()) {
      zi += x.skip[size_t(h)] * v[i];
      dzi += dx.skip[size_t(h)] * v[i] + x.skip[size_t(h)] * dv[i];
    }
    out[i] = x.post.empty() ? dzi : dx.post[i] * zi + x.post[i] * dzi;
  }
  return out;
}

Vec randn(size_t n, std::mt19937_64& g) {
  std::normal_distribution<double> d;
  Vec v(n);
  for (auto& x : v) x = d(g);
  return v;
}

template <class T>
std::vector<T> cast(const Vec& v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T>
const T* opt(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

template <class T>
double rel_err(const std::vector<T>& a, const Vec& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

template <class T>
double tol() {
  return std::is_same<T, float>::value ? 2e-5 : 1e-12;
}

Inputs make_inputs(const Shape& s, int gates, std::mt19937_64& g) {
  const size_t n = size_t(s.B * s.H * s.L);
  Inputs x;
  x.u = randn(n, g);
  x.k = randn(size_t(s.H * s.Lk), g);
  if (gates & 1) x.pre = randn(n, g);
  if (gates & 2) x.post = randn(n, g);
  if (gates & 4) x.skip = randn(size_t(s.H), g);
  return x;
}

const std::vector<Shape> kCausalShapes = {
    {1, 1, 1, 1}, {1, 1, 1, 5}, {2, 3, 97, 97}, {2, 3, 97, 13}, {3, 2, 16, 40}, {1, 1, 64, 1}, {2, 5, 30, 30},
    {4, 1, 11, 7}};
const std::vector<Shape> kCircularShapes = {{1, 1, 1, 1}, {2, 3, 97, 97}, {2, 3, 97, 13}, {3, 2, 16, 1}, {2, 5, 30, 29}};

template <class T>
void check_forward(ConvMode mode, const std::vector<Shape>& shapes, ConvSolver solver = ConvSolver::FFT) {
  std::mt19937_64 g(1234);
  for (const Shape& s : shapes)
    for (int gates = 0; gates < 8; ++gates) {
      Inputs x = make_inputs(s, gates, g);
      auto u = cast<T>(x.u), k = cast<T>(x.k), pre = cast<T>(x.pre), post = cast<T>(x.post), sk = cast<T>(x.skip);
      Inputs xr{Vec(u.begin(), u.end()), Vec(k.begin(), k.end()), Vec(pre.begin(), pre.end()),
                Vec(post.begin(), post.end()), Vec(sk.begin(), sk.end())};
      FFTConvPlan<T> plan(s.B, s.H, s.L, k.data(), s.Lk, mode, solver);
      std::vector<T> y(u.size());
      plan.forward(u.data(), opt(pre), opt(post), opt(sk), y.data());
      EXPECT_LT(rel_err(y, ref_forward(s, mode, xr)), tol<T>())
          << "B=" << s.B << " H=" << s.H << " L=" << s.L << " Lk=" << s.Lk << " gates=" << gates;
    }
}

// Dot-product test per input: <vjp(dy)_i, dx_i> == <dy, J_i dx_i>.
template <class T>
void check_backward(ConvMode mode, const std::vector<Shape>& shapes, ConvSolver solver = ConvSolver::FFT) {
  std::mt19937_64 g(99);
  for (const Shape& s : shapes)
    for (int gates = 0; gates < 8; ++gates) {
      Inputs x = make_inputs(s, gates, g);
      // round to T so the reference sees exactly what the plan sees
      auto rt = [](Vec v) { for (auto& e : v) e = double(T(e)); return v; };
      x = {rt(x.u), rt(x.k), rt(x.pre), rt(x.post), rt(x.skip)};
      Vec dyv = rt(randn(x.u.size(), g));
      auto u = cast<T>(x.u), k = cast<T>(x.k), pre = cast<T>(x.pre), post = cast<T>(x.post), sk = cast<T>(x.skip);
      auto dy = cast<T>(dyv);
      FFTConvPlan<T> plan(s.B, s.H, s.L, k.data(), s.Lk, mode, solver);
      std::vector<T> du(u.size()), dk(k.size()), dpre(pre.size()), dpost(post.size()), dskip(sk.size());
      plan.backward(dy.data(), u.data(), opt(pre), opt(post), opt(sk), du.data(), dk.data(),
                    dpre.empty() ? nullptr : dpre.data(), dpost.empty() ? nullptr : dpost.data(),
                    dskip.empty() ? nullptr : dskip.data());
      const Inputs zero{Vec(x.u.size()), Vec(x.k.size()), Vec(x.pre.size()), Vec(x.post.size()),
                        Vec(x.skip.size())};
      auto check = [&](const char* name, Vec Inputs::*member, const std::vector<T>& grad) {
        if ((x.*member).empty()) return;
        Inputs dx = zero;
        dx.*member = randn((x.*member).size(), g);
        Vec jv = ref_jvp(s, mode, x, dx);
        double lhs = 0, rhs = 0, scale = 0;
        for (size_t i = 0; i < grad.size(); ++i) {
          lhs += double(grad[i]) * (dx.*member)[i];
          scale += std::abs(double(grad[i]) * (dx.*member)[i]);
        }
        for (size_t i = 0; i < jv.size(); ++i) {
          rhs += dyv[i] * jv[i];
          scale += std::abs(dyv[i] * jv[i]);
        }
        EXPECT_NEAR(lhs, rhs, 10 * tol<T>() * scale) << name << " B=" << s.B << " H=" << s.H << " L=" << s.L
                                                        << " Lk=" << s.Lk << " gates=" << gates;
      };
      check("du", &Inputs::u, du);
      check("dk", &Inputs::k, dk);
      check("dpregate", &Inputs::pre, dpre);
      check("dpostgate", &Inputs::post, dpost);
      check("dskip", &Inputs::skip, dskip);
      if (mode == ConvMode::Causal)
        for (int64_t h = 0; h < s.H; ++h)
          for (int64_t j = s.L; j < s.Lk; ++j) EXPECT_EQ(dk[size_t(h * s.Lk + j)], T(0)) << "tap " << j << " >= L";
    }
}

TEST(FFTConv, CausalForwardFloat) { check_forward<float>(ConvMode::Causal, kCausalShapes); }
TEST(FFTConv, CausalForwardDouble) { check_forward<double>(ConvMode::Causal, kCausalShapes); }
TEST(FFTConv, CircularForwardFloat) { check_forward<float>(ConvMode::Circular, kCircularShapes); }
TEST(FFTConv, CircularForwardDouble) { check_forward<double>(ConvMode::Circular, kCircularShapes); }
TEST(FFTConv, CausalBackwardFloat) { check_backward<float>(ConvMode::Causal, kCausalShapes); }
TEST(FFTConv, CausalBackwardDouble) { check_backward<double>(ConvMode::Causal, kCausalShapes); }
TEST(FFTConv, CircularBackwardFloat) { check_backward<float>(ConvMode::Circular, kCircularShapes); }
TEST(FFTConv, CircularBackwardDouble) { check_backward<double>(ConvMode::Circular, kCircularShapes); }

// The direct solver (sums over the taps) on shapes with at most 64 taps used, some with Lk > L.
const std::vector<Shape> kDirectCausal = {{1, 1, 1, 1}, {1, 1, 1, 5}, {2, 3, 97, 64}, {2, 3, 97, 13}, {3, 2, 16, 40},
                                          {1, 1, 64, 1}, {2, 5, 30, 30}, {4, 1, 11, 7}, {2, 2, 2100, 33}};
const std::vector<Shape> kDirectCircular = {{1, 1, 1, 1}, {2, 3, 97, 64}, {2, 3, 97, 13}, {3, 2, 16, 1},
                                            {2, 5, 30, 29}, {2, 2, 2100, 4}};
TEST(FFTConvDirect, CausalForwardFloat) { check_forward<float>(ConvMode::Causal, kDirectCausal, ConvSolver::Direct); }
TEST(FFTConvDirect, CausalForwardDouble) { check_forward<double>(ConvMode::Causal, kDirectCausal, ConvSolver::Direct); }
TEST(FFTConvDirect, CircularForwardFloat) {
  check_forward<float>(ConvMode::Circular, kDirectCircular, ConvSolver::Direct);
}
TEST(FFTConvDirect, CircularForwardDouble) {
  check_forward<double>(ConvMode::Circular, kDirectCircular, ConvSolver::Direct);
}
TEST(FFTConvDirect, CausalBackwardFloat) { check_backward<float>(ConvMode::Causal, kDirectCausal, ConvSolver::Direct); }
TEST(FFTConvDirect, CausalBackwardDouble) {
  check_backward<double>(ConvMode::Causal, kDirectCausal, ConvSolver::Direct);
}
TEST(FFTConvDirect, CircularBackwardFloat) {
  check_backward<float>(ConvMode::Circular, kDirectCircular, ConvSolver::Direct);
}
TEST(FFTConvDirect, CircularBackwardDouble) {
  check_backward<double>(ConvMode::Circular, kDirectCircular, ConvSolver::Direct);
}

TEST(FFTConvDirect, Rule) {
  std::vector<float> k(3 * 100, 1.f);
  // automatic: direct up to kDirectAutoTaps taps used (causal taps beyond L do not count)
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 1000, k.data(), strux::kDirectAutoTaps).solver(), ConvSolver::Direct);
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 1000, k.data(), strux::kDirectAutoTaps + 1).solver(), ConvSolver::FFT);
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 8, k.data(), 100).solver(), ConvSolver::Direct);
  FFTConvPlan<float> d(1, 3, 1000, k.data(), 64, ConvMode::Circular, ConvSolver::Direct);
  EXPECT_EQ(d.nfft(), 0);
  EXPECT_EQ(d.filter_spectrum(), nullptr);
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 1000, k.data(), 4, ConvMode::Causal, ConvSolver::FFT).solver(), ConvSolver::FFT);
  try {
    FFTConvPlan<float>(1, 3, 1000, k.data(), 65, ConvMode::Causal, ConvSolver::Direct);
    ADD_FAILURE() << "65 taps forced direct";
  } catch (const strux::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'solver'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(strux::parse_conv_solver("direct"), ConvSolver::Direct);
  EXPECT_THROW(strux::parse_conv_solver("fast"), strux::ValueError);
}

// The blocks solver (overlap-save): one block ({2, 3, 97, 64}, Lk > L), blocks that fill the row
// exactly (Lk = 5: N = 256, S = 252, L = 504) or end in a partial one (L = 505, 1000, 2100, 5000).
const std::vector<Shape> kBlocksCausal = {{1, 1, 1, 1},   {1, 1, 1, 5},    {2, 3, 97, 64},  {3, 2, 16, 40},
                                          {2, 2, 504, 5}, {2, 2, 505, 5},  {1, 3, 1000, 1}, {2, 2, 2100, 33},
                                          {1, 2, 5000, 100}};
const std::vector<Shape> kBlocksCircular = {{1, 1, 1, 1},   {2, 3, 97, 64},  {2, 2, 504, 5},
                                            {2, 2, 505, 5}, {2, 2, 2100, 33}, {1, 2, 5000, 100}};
TEST(FFTConvBlocks, CausalForwardFloat) { check_forward<float>(ConvMode::Causal, kBlocksCausal, ConvSolver::Blocks); }
TEST(FFTConvBlocks, CausalForwardDouble) {
  check_forward<double>(ConvMode::Causal, kBlocksCausal, ConvSolver::Blocks);
}
TEST(FFTConvBlocks, CircularForwardFloat) {
  check_forward<float>(ConvMode::Circular, kBlocksCircular, ConvSolver::Blocks);
}
TEST(FFTConvBlocks, CircularForwardDouble) {
  check_forward<double>(ConvMode::Circular, kBlocksCircular, ConvSolver::Blocks);
}
TEST(FFTConvBlocks, CausalBackwardFloat) {
  check_backward<float>(ConvMode::Causal, kBlocksCausal, ConvSolver::Blocks);
}
TEST(FFTConvBlocks, CausalBackwardDouble) {
  check_backward<double>(ConvMode::Causal, kBlocksCausal, ConvSolver::Blocks);
}
TEST(FFTConvBlocks, CircularBackwardFloat) {
  check_backward<float>(ConvMode::Circular, kBlocksCircular, ConvSolver::Blocks);
}
TEST(FFTConvBlocks, CircularBackwardDouble) {
  check_backward<double>(ConvMode::Circular, kBlocksCircular, ConvSolver::Blocks);
}

TEST(FFTConvBlocks, SizesAndNames) {
  std::vector<float> k(3 * 5000, 1.f);
  FFTConvPlan<float> a(1, 3, 100000, k.data(), 32, ConvMode::Causal, ConvSolver::Blocks);
  EXPECT_EQ(a.solver(), ConvSolver::Blocks);
  EXPECT_EQ(a.nfft(), 256);  // the block size: max(4, 8, 16 x 32 taps, 256) by the cost model
  EXPECT_NE(a.filter_spectrum(), nullptr);
  // never beyond the one transform of the whole padded row
  FFTConvPlan<float> b(1, 3, 100, k.data(), 5000, ConvMode::Causal, ConvSolver::Blocks);
  EXPECT_EQ(b.nfft(), 200);  // good_fft_size(100 + 100 - 1)
  EXPECT_EQ(strux::parse_conv_solver("blocks"), ConvSolver::Blocks);
  // automatic: blocks from kBlocksAutoMinLength where N <= nfft / kBlocksAutoRatio, after direct
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 16384, k.data(), 17).solver(), ConvSolver::Blocks);
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 16384, k.data(), 16).solver(), ConvSolver::Direct);
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 16383, k.data(), 17).solver(), ConvSolver::FFT);
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 16384, k.data(), 17, ConvMode::Circular).solver(), ConvSolver::Blocks);
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 16384, k.data(), 4096).solver(), ConvSolver::FFT);  // N 16384
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 16384, k.data(), 1024).solver(), ConvSolver::FFT);  // N 4096, nfft 17496
  EXPECT_EQ(FFTConvPlan<float>(1, 3, 65536, k.data(), 1024).solver(), ConvSolver::Blocks);  // 8192, 67200
  EXPECT_STREQ(strux::conv_solver_name(ConvSolver::Blocks), "blocks");
}

TEST(FFTConvDirect, NaNStaysInItsRow) {
  const Shape s{2, 2, 40, 7};
  std::mt19937_64 g(5);
  auto u = cast<float>(randn(size_t(s.B * s.H * s.L), g)), k = cast<float>(randn(size_t(s.H * s.Lk), g));
  const int64_t bad = (1 * s.H + 1) * s.L;
  u[size_t(bad + 10)] = std::numeric_limits<float>::quiet_NaN();
  FFTConvPlan<float> plan(s.B, s.H, s.L, k.data(), s.Lk, ConvMode::Causal, ConvSolver::Direct);
  std::vector<float> y(u.size());
  plan.forward(u.data(), nullptr, nullptr, nullptr, y.data());
  for (int64_t i = 0; i < int64_t(y.size()); ++i) {
    const int64_t t = i - bad;
    const bool hit = t >= 10 && t < 10 + s.Lk;  // exactly the outputs the taps reach
    EXPECT_EQ(std::isnan(y[size_t(i)]), hit) << i;
  }
}

TEST(FFTConv, FFTSize) {
  std::vector<double> k(3 * 100, 1.0);
  // causal: only min(Lk, L) taps; good_fft_size(L + taps - 1)
  FFTConvPlan<double> a(1, 3, 1000, k.data(), 100, ConvMode::Causal);
  EXPECT_EQ(a.nfft(), 1120);  // 1099 -> 2^5 5 7, not 2L
  EXPECT_EQ(a.taps_used(), 100);
  FFTConvPlan<double> b(1, 3, 16, k.data(), 100, ConvMode::Causal, ConvSolver::FFT);
  EXPECT_EQ(b.taps_used(), 16);
  EXPECT_EQ(b.nfft(), 32);  // 16 + 16 - 1 -> 32: taps beyond L are dropped
  FFTConvPlan<double> c(1, 3, 97, k.data(), 13, ConvMode::Circular, ConvSolver::FFT);
  EXPECT_EQ(c.nfft(), 97);  // circular: exactly L, even prime
  EXPECT_GE(c.spectrum_stride(), c.nfreq());
}

TEST(FFTConv, Errors) {
  std::vector<float> k(10, 1.f);
  EXPECT_THROW(FFTConvPlan<float>(1, 2, 4, k.data(), 5, ConvMode::Circular), strux::ValueError);
  EXPECT_THROW(FFTConvPlan<float>(0, 2, 4, k.data(), 5, ConvMode::Causal), strux::ValueError);
  EXPECT_THROW(FFTConvPlan<float>(1, 2, 0, k.data(), 5, ConvMode::Causal), strux::ValueError);
  EXPECT_THROW(FFTConvPlan<float>(1, 2, 4, k.data(), 0, ConvMode::Causal), strux::ValueError);
  EXPECT_THROW(strux::parse_conv_mode("full"), strux::ValueError);
  try {
    FFTConvPlan<float>(1, 2, 4, k.data(), 5, ConvMode::Circular);
  } catch (const strux::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'k'"), std::string::npos) << e.what();
  }
}

TEST(FFTConv, NaNPropagates) {
  const Shape s{2, 2, 33, 9};
  std::mt19937_64 g(5);
  auto u = cast<float>(randn(size_t(s.B * s.H * s.L), g)), k = cast<float>(randn(size_t(s.H * s.Lk), g));
  u[size_t((1 * s.H + 1) * s.L + 10)] = std::numeric_limits<float>::quiet_NaN();
  FFTConvPlan<float> plan(s.B, s.H, s.L, k.data(), s.Lk, ConvMode::Causal, ConvSolver::FFT);
  std::vector<float> y(u.size());
  plan.forward(u.data(), nullptr, nullptr, nullptr, y.data());
  for (int64_t t = 10; t < s.L; ++t) EXPECT_TRUE(std::isnan(y[size_t((1 * s.H + 1) * s.L + t)])) << t;
  for (int64_t t = 0; t < s.L; ++t) EXPECT_FALSE(std::isnan(y[size_t(t)])) << "other rows stay finite";
}

TEST(FFTConv, WithBatchSharesSpectrum) {
  std::vector<double> k = {1.0, 2.0, 3.0};
  FFTConvPlan<double> p(1, 1, 5, k.data(), 3, ConvMode::Causal, ConvSolver::FFT);
  auto q = p.with_batch(2);
  EXPECT_EQ(q.batch(), 2);
  EXPECT_EQ(q.filter_spectrum(), p.filter_spectrum());
  std::vector<double> u = {1, 0, 0, 0, 0, 0, 1, 0, 0, 0}, y(10);
  q.forward(u.data(), nullptr, nullptr, nullptr, y.data());
  const double want[10] = {1, 2, 3, 0, 0, 0, 1, 2, 3, 0};
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(y[size_t(i)], want[i], 1e-14) << i;
}

}  // namespace
