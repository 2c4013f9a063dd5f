// The operator API (<strux/strux.hpp>) on the CPU: every operator's forward against a float64
// loop of the DESIGN.md formula, every backward by exact identities (<dy, y> = <dx, x> for each
// input y is linear in) or, for the nonlinear scan inputs, a float64 central difference; then
// describe(), workspace_bytes() and the argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <random>
#include <string>
#include <vector>

#include "api_test_util.hpp"
#include "strux/strux.hpp"

namespace {

using strux::DType;
using strux::View;
using cd = std::complex<double>;
namespace op = strux::op;

std::mt19937_64& rng() {
  static std::mt19937_64 g(2024);
  return g;
}

template <class T>
std::vector<T> randv(int64_t count, double scale = 1.0) {
  return strux::test::randn<T>(rng(), count, scale);
}

template <class T>
View vw(std::vector<T>& v, std::initializer_list<int64_t> shape) {
  return View(v.data(), shape);
}

template <class T>
double tol() {
  return std::is_same_v<T, float> || std::is_same_v<T, std::complex<float>> ? 2e-4 : 1e-10;
}

using strux::test::rel_err;

// Re <x, y> in float64.
template <class A, class B>
double dot(const std::vector<A>& x, const std::vector<B>& y) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += std::real(std::conj(cd(x[i])) * cd(y[i]));
  return s;
}

// a ≈ b relative to the larger of |a|, |b| and 1.
void near(double a, double b, double t, const char* what) {
  EXPECT_LE(std::abs(a - b), t * std::max({1.0, std::abs(a), std::abs(b)})) << what << ": " << a << " vs " << b;
}

// ---- fftconv ------------------------------------------------------------------------------------

template <class T>
void fftconv_case(int64_t B, int64_t H, int64_t L, int64_t Lk, strux::ConvMode mode, bool gates) {
  SCOPED_TRACE(testing::Message() << "B=" << B << " H=" << H << " L=" << L << " Lk=" << Lk << " circular="
                                  << (mode == strux::ConvMode::Circular) << " gates=" << gates);
  const DType dt = strux::dtype_of<T>::value;
  auto u = randv<T>(B * H * L), k = randv<T>(H * Lk), pre = randv<T>(B * H * L), post = randv<T>(B * H * L),
       skip = randv<T>(H), y = std::vector<T>(size_t(B * H * L));
  op::FFTConv conv({B, H, L, Lk, mode, dt});
  EXPECT_FALSE(conv.describe().empty());
  EXPECT_EQ(conv.workspace_bytes(), 0u);
  op::FFTConv::Forward f{vw(u, {B, H, L}), vw(k, {H, Lk}), vw(y, {B, H, L})};
  if (gates) f.pregate = vw(pre, {B, H, L}), f.postgate = vw(post, {B, H, L}), f.skip = vw(skip, {H});
  conv.forward(f);

  std::vector<double> ref(y.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t r = (b * H + h) * L;
      auto v = [&](int64_t t) { return double(u[r + t]) * (gates ? double(pre[r + t]) : 1.0); };
      for (int64_t t = 0; t < L; ++t) {
        double s = 0;
        for (int64_t q = 0; q < Lk; ++q) {
          if (mode == strux::ConvMode::Causal) {
            if (q <= t) s += double(k[h * Lk + q]) * v(t - q);
          } else {
            s += double(k[h * Lk + q]) * v(((t - q) % L + L) % L);
          }
        }
        if (gates) s = (s + double(skip[h]) * v(t)) * double(post[r + t]);
        ref[r + t] = s;
      }
    }
  EXPECT_LE(rel_err(ref, y), tol<T>());

  // y is linear in u, in (k, skip) together, in pregate and in postgate:
  // <dy, y> = <du, u> = <dk, k> + <dskip, skip> = <dpregate, pregate> = <dpostgate, postgate>.
  auto dy = randv<T>(B * H * L), du = std::vector<T>(u.size()), dk = std::vector<T>(k.size()),
       dpre = std::vector<T>(u.size()), dpost = std::vector<T>(u.size()), dskip = std::vector<T>(skip.size());
  op::FFTConv::Backward g{vw(dy, {B, H, L}), f.u, f.k, vw(du, {B, H, L}), vw(dk, {H, Lk})};
  if (gates) {
    g.pregate = f.pregate, g.postgate = f.postgate, g.skip = f.skip;
    g.dpregate = vw(dpre, {B, H, L}), g.dpostgate = vw(dpost, {B, H, L}), g.dskip = vw(dskip, {H});
  }
  conv.backward(g);
  const double yy = dot(dy, y), t = 10 * tol<T>();
  near(yy, dot(du, u), t, "<dy, y> vs <du, u>");
  near(yy, dot(dk, k) + (gates ? dot(dskip, skip) : 0.0), t, "<dy, y> vs <dk, k> + <dskip, skip>");
  if (gates) {
    near(yy, dot(dpre, pre), t, "<dy, y> vs <dpregate, pregate>");
    near(yy, dot(dpost, post), t, "<dy, y> vs <dpostgate, postgate>");
  }
}

TEST(Api, FFTConv) {
  for (auto [B, H, L, Lk] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1}, {2, 3, 17, 5}, {1, 2, 31, 31}, {3, 1, 13, 20}}) {
    fftconv_case<float>(B, H, L, Lk, strux::ConvMode::Causal, false);
    fftconv_case<double>(B, H, L, Lk, strux::ConvMode::Causal, true);
    if (Lk <= L) {
      fftconv_case<float>(B, H, L, Lk, strux::ConvMode::Circular, true);
      fftconv_case<double>(B, H, L, Lk, strux::ConvMode::Circular, false);
    }
  }
}

// ---- block Toeplitz -----------------------------------------------------------------------------

template <class T>
void toeplitz_case(int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, strux::ToeplitzLayout layout) {
  SCOPED_TRACE(testing::Message() << "Nt=" << Nt << " Nd=" << Nd << " Nm=" << Nm << " R=" << R);
  const DType dt = strux::dtype_of<T>::value;
  const bool tm = layout == strux::ToeplitzLayout::TimeMajor;
  auto blocks = randv<T>(Nt * Nd * Nm), m = randv<T>(Nt * Nm * R), d = std::vector<T>(size_t(Nt * Nd * R));
  // Index of (time t, space i, rhs r) of a vector with n entries per step.
  auto at = [&](int64_t t, int64_t i, int64_t r, int64_t n) { return ((tm ? t * n + i : i * Nt + t) * R + r); };
  auto vec = [&](std::vector<T>& v, int64_t n) {
    return R == 1 ? (tm ? vw(v, {Nt, n}) : vw(v, {n, Nt})) : (tm ? vw(v, {Nt, n, R}) : vw(v, {n, Nt, R}));
  };
  op::BlockToeplitz F({Nt, Nd, Nm, R, layout, dt});
  F.set_blocks(vw(blocks, {Nt, Nd, Nm}));
  EXPECT_FALSE(F.describe().empty());
  F.forward({vec(m, Nm), vec(d, Nd)});
  std::vector<double> ref(d.size(), 0.0);
  for (int64_t i = 0; i < Nt; ++i)
    for (int64_t j = 0; j <= i; ++j)
      for (int64_t p = 0; p < Nd; ++p)
        for (int64_t q = 0; q < Nm; ++q)
          for (int64_t r = 0; r < R; ++r)
            ref[at(i, p, r, Nd)] += double(blocks[((i - j) * Nd + p) * Nm + q]) * double(m[at(j, q, r, Nm)]);
  EXPECT_LE(rel_err(ref, d), tol<T>());

  // <dd, F m> = <Fᵀ dd, m> = <dblocks, blocks>.
  auto dd = randv<T>(Nt * Nd * R), dm = std::vector<T>(m.size()), dblocks = std::vector<T>(blocks.size());
  F.backward({vec(dd, Nd), vec(dm, Nm), vec(m, Nm), vw(dblocks, {Nt, Nd, Nm})});
  near(dot(dd, d), dot(dm, m), 10 * tol<T>(), "<dd, F m> vs <F^T dd, m>");
  near(dot(dd, d), dot(dblocks, blocks), 10 * tol<T>(), "<dd, F m> vs <dblocks, blocks>");
}

TEST(Api, BlockToeplitz) {
  for (auto [Nt, Nd, Nm, R] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1}, {7, 3, 5, 1}, {13, 2, 1, 3}, {4, 1, 6, 2}}) {
    toeplitz_case<float>(Nt, Nd, Nm, R, strux::ToeplitzLayout::TimeMajor);
    toeplitz_case<double>(Nt, Nd, Nm, R, strux::ToeplitzLayout::SpaceMajor);
  }
}

// ---- ks -------------------------------------------------------------------------------------------

// y = x Kᵀ per batch item (float64), in the layout; K[i·b·d + k·d + j, i·c·d + l·d + j] = w[i, k, l, j].
template <class T>
std::vector<double> ks_ref(const strux::KSPattern& p, const std::vector<T>& w, const std::vector<double>& x,
                           int64_t batch, strux::KSLayout layout) {
  const int64_t M = p.rows(), N = p.cols();
  const bool bl = layout == strux::KSLayout::BatchLast;
  std::vector<double> y(size_t(M * batch), 0.0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < p.a; ++i)
      for (int64_t k = 0; k < p.b; ++k)
        for (int64_t l = 0; l < p.c; ++l)
          for (int64_t j = 0; j < p.d; ++j) {
            const int64_t r = i * p.b * p.d + k * p.d + j, c = i * p.c * p.d + l * p.d + j;
            y[bl ? r * batch + t : t * M + r] += double(w[((i * p.b + k) * p.c + l) * p.d + j]) * x[bl ? c * batch + t : t * N + c];
          }
  return y;
}

template <class T>
View act(std::vector<T>& v, int64_t n, int64_t batch, strux::KSLayout l) {
  return l == strux::KSLayout::BatchFirst ? vw(v, {batch, n}) : vw(v, {n, batch});
}

template <class T>
void ks_chain_case(const std::vector<strux::KSPattern>& pats, int64_t batch, strux::KSLayout layout) {
  SCOPED_TRACE(testing::Message() << pats.size() << " factors, first (" << pats[0].a << "," << pats[0].b << ","
                                  << pats[0].c << "," << pats[0].d << ") batch=" << batch);
  const DType dt = strux::dtype_of<T>::value;
  const int64_t N = pats.back().cols(), M = pats.front().rows();
  auto x = randv<T>(N * batch), y = std::vector<T>(size_t(M * batch)), dy = randv<T>(M * batch),
       dx = std::vector<T>(x.size());
  std::vector<std::vector<T>> w, dw;
  std::vector<View> wv, dwv;
  for (const auto& p : pats) {
    w.push_back(randv<T>(p.nnz()));
    dw.emplace_back(size_t(p.nnz()));
  }
  for (size_t i = 0; i < pats.size(); ++i) {
    wv.push_back(vw(w[i], {pats[i].a, pats[i].b, pats[i].c, pats[i].d}));
    dwv.push_back(vw(dw[i], {pats[i].a, pats[i].b, pats[i].c, pats[i].d}));
  }
  std::vector<double> ref(x.begin(), x.end());
  for (size_t i = pats.size(); i-- > 0;) ref = ks_ref(pats[i], w[i], ref, batch, layout);

  if (pats.size() == 1) {  // the factor operator, then the chain of one
    op::KSFactor K({pats[0], batch, layout, dt});
    EXPECT_FALSE(K.describe().empty());
    K.forward({act(x, N, batch, layout), wv[0], act(y, M, batch, layout)});
    EXPECT_LE(rel_err(ref, y), tol<T>());
    K.backward({act(dy, M, batch, layout), act(x, N, batch, layout), wv[0], act(dx, N, batch, layout), dwv[0]});
    near(dot(dy, y), dot(dx, x), 10 * tol<T>(), "<dy, y> vs <dx, x>");
    near(dot(dy, y), dot(dw[0], w[0]), 10 * tol<T>(), "<dy, y> vs <dw, w>");
    std::fill(y.begin(), y.end(), T(0));
  }
  op::KSChain C({pats, batch, layout, dt});
  EXPECT_FALSE(C.describe().empty());
  EXPECT_EQ(C.workspace_bytes(), 0u);
  C.forward({act(x, N, batch, layout), wv, act(y, M, batch, layout)});
  EXPECT_LE(rel_err(ref, y), tol<T>());
  C.backward({act(dy, M, batch, layout), act(x, N, batch, layout), wv, act(dx, N, batch, layout), dwv});
  near(dot(dy, y), dot(dx, x), 10 * tol<T>(), "chain <dy, y> vs <dx, x>");
  for (size_t i = 0; i < pats.size(); ++i) near(dot(dy, y), dot(dw[i], w[i]), 10 * tol<T>(), "chain <dy, y> vs <dw_p, w_p>");
}

TEST(Api, KSFactorAndChain) {
  using P = strux::KSPattern;
  for (auto layout : {strux::KSLayout::BatchFirst, strux::KSLayout::BatchLast}) {
    ks_chain_case<float>({P{1, 1, 1, 1}}, 1, layout);
    ks_chain_case<double>({P{2, 3, 5, 1}}, 7, layout);
    ks_chain_case<float>({P{1, 2, 3, 5}}, 3, layout);
    ks_chain_case<double>({P{3, 2, 2, 1}, P{1, 3, 2, 2}, P{2, 2, 1, 1}}, 5, layout);
    ks_chain_case<float>({P{1, 4, 2, 3}, P{2, 3, 3, 1}}, 11, layout);
  }
}

// ---- scans ----------------------------------------------------------------------------------------

// h_t = M_t h_{t-1} + u_t per batch item in float64, with M_t applied by `apply(b, t, h_prev, out)`.
template <class S, class Apply>
std::vector<cd> scan_ref(int64_t B, int64_t T, int64_t n, const std::vector<S>& u, const std::vector<S>* h0,
                         Apply apply) {
  std::vector<cd> h(static_cast<size_t>(B * T * n)), prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < n; ++i) prev[i] = h0 ? cd((*h0)[b * n + i]) : cd(0);
    for (int64_t t = 0; t < T; ++t) {
      apply(b, t, prev, next);
      for (int64_t i = 0; i < n; ++i) prev[i] = h[(b * T + t) * n + i] = next[i] + cd(u[(b * T + t) * n + i]);
    }
  }
  return h;
}

// The scan identities: h is linear in (u, h0), and da checked by a float64 central difference
// along a random direction (double instantiations only). run(a, h) runs the forward.
template <class S, class A, class Op, class RunFwd>
void scan_backward_checks(Op& sc, std::vector<A>& a, std::initializer_list<int64_t> ashape, std::vector<S>& u,
                          std::vector<S>& h0, std::vector<S>& h, int64_t B, int64_t T, int64_t n, RunFwd run) {
  auto dh = randv<S>(B * T * n), dh_last = randv<S>(B * n), du = std::vector<S>(u.size()),
       dh0 = std::vector<S>(h0.size());
  std::vector<A> da(a.size());
  op::ScanBackward g{vw(dh, {B, T, n}), View(a.data(), ashape), vw(u, {B, T, n}), View(da.data(), ashape),
                     vw(du, {B, T, n}), vw(h0, {B, n}), vw(h, {B, T, n}), vw(dh_last, {B, n}), vw(dh0, {B, n})};
  sc.backward(g);
  std::vector<S> h_last(size_t(B * n));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i) h_last[b * n + i] = h[(b * T + T - 1) * n + i];
  const double lhs = dot(dh, h) + dot(dh_last, h_last);
  near(lhs, dot(du, u) + dot(dh0, h0), 20 * tol<S>(), "<dh, h> vs <du, u> + <dh0, h0>");
  if constexpr (std::is_same_v<S, double> || std::is_same_v<S, cd>) {
    const double eps = 1e-6;
    auto v = randv<A>(int64_t(a.size()));
    auto ap = a, am = a;
    for (size_t i = 0; i < a.size(); ++i) ap[i] += A(eps) * v[i], am[i] -= A(eps) * v[i];
    auto hp = run(ap), hm = run(am);
    double fd = 0;
    for (size_t i = 0; i < hp.size(); ++i) fd += std::real(std::conj(cd(dh[i])) * (cd(hp[i]) - cd(hm[i])));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < n; ++i) {
        const size_t q = size_t((b * T + T - 1) * n + i);
        fd += std::real(std::conj(cd(dh_last[b * n + i])) * (cd(hp[q]) - cd(hm[q])));
      }
    near(fd / (2 * eps), dot(da, v), 1e-6, "central difference vs <da, v>");
  }
}

template <class S>
void diag_case(int64_t B, int64_t T, int64_t n) {
  SCOPED_TRACE(testing::Message() << "diag " << strux::dtype_name(strux::dtype_of<S>::value) << " B=" << B << " T=" << T << " n=" << n);
  auto a = randv<S>(B * T * n, 0.5), u = randv<S>(B * T * n), h0 = randv<S>(B * n), h = std::vector<S>(u.size());
  op::DiagScan sc({B, T, n, strux::dtype_of<S>::value});
  EXPECT_FALSE(sc.describe().empty());
  auto run = [&](std::vector<S>& av) {
    std::vector<S> out(u.size());
    sc.forward({vw(av, {B, T, n}), vw(u, {B, T, n}), vw(out, {B, T, n}), vw(h0, {B, n})});
    return out;
  };
  h = run(a);
  auto ref = scan_ref(B, T, n, u, &h0, [&](int64_t b, int64_t t, const std::vector<cd>& p, std::vector<cd>& o) {
    for (int64_t i = 0; i < n; ++i) o[i] = cd(a[(b * T + t) * n + i]) * p[i];
  });
  EXPECT_LE(rel_err(ref, h), tol<S>());
  scan_backward_checks<S>(sc, a, {B, T, n}, u, h0, h, B, T, n, run);
}

// Spatial a (B, T, n) applied as circ(a_t): out[i] = Σ_j a[(i - j) mod n] p[j].
template <class R>
std::vector<cd> circ_ref(int64_t B, int64_t T, int64_t n, const std::vector<R>& a, const std::vector<R>& u,
                         const std::vector<R>& h0) {
  return scan_ref(B, T, n, u, &h0, [&](int64_t b, int64_t t, const std::vector<cd>& p, std::vector<cd>& o) {
    for (int64_t i = 0; i < n; ++i) {
      o[i] = 0;
      for (int64_t j = 0; j < n; ++j) o[i] += double(a[(b * T + t) * n + ((i - j) % n + n) % n]) * p[j];
    }
  });
}

template <class R>
void circulant_case(int64_t B, int64_t T, int64_t n) {
  SCOPED_TRACE(testing::Message() << "circulant B=" << B << " T=" << T << " n=" << n);
  using C = std::complex<R>;
  const DType dt = strux::dtype_of<R>::value;
  auto a = randv<R>(B * T * n, 0.3), u = randv<R>(B * T * n), h0 = randv<R>(B * n), h = std::vector<R>(u.size());
  const auto ref = circ_ref(B, T, n, a, u, h0);

  op::CirculantScan sc({B, T, n, false, dt});
  EXPECT_FALSE(sc.describe().empty());
  auto run = [&](std::vector<R>& av) {
    std::vector<R> out(u.size());
    sc.forward({vw(av, {B, T, n}), vw(u, {B, T, n}), vw(out, {B, T, n}), vw(h0, {B, n})});
    return out;
  };
  h = run(a);
  EXPECT_LE(rel_err(ref, h), tol<R>());
  scan_backward_checks<R>(sc, a, {B, T, n}, u, h0, h, B, T, n, run);

  // Fourier form: a_hat = rfft(a_t) by the DFT sum.
  const int64_t nf = n / 2 + 1;
  std::vector<C> ah(size_t(B * T * nf));
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t f = 0; f < nf; ++f) {
      cd s = 0;
      for (int64_t j = 0; j < n; ++j) s += double(a[bt * n + j]) * std::polar(1.0, -2 * M_PI * double(f * j) / double(n));
      ah[bt * nf + f] = C(s);
    }
  op::CirculantScan sf({B, T, n, true, dt});
  std::vector<R> hf(u.size());
  sf.forward({vw(ah, {B, T, nf}), vw(u, {B, T, n}), vw(hf, {B, T, n}), vw(h0, {B, n})});
  EXPECT_LE(rel_err(ref, hf), 10 * tol<R>());
  auto dh = randv<R>(B * T * n), du = std::vector<R>(u.size()), dh0 = std::vector<R>(h0.size());
  std::vector<C> dah(ah.size());
  sf.backward({vw(dh, {B, T, n}), vw(ah, {B, T, nf}), vw(u, {B, T, n}), vw(dah, {B, T, nf}), vw(du, {B, T, n}),
               vw(h0, {B, n}), View(), View(), vw(dh0, {B, n})});
  near(dot(dh, hf), dot(du, u) + dot(dh0, h0), 20 * tol<R>(), "fourier <dh, h> vs <du, u> + <dh0, h0>");
}

template <class R>
void block_case(int64_t B, int64_t T, int64_t p, int64_t k) {
  SCOPED_TRACE(testing::Message() << "block B=" << B << " T=" << T << " p=" << p << " k=" << k);
  const int64_t n = p * k;
  auto a = randv<R>(B * T * p * p * k, 0.3 / double(p)), u = randv<R>(B * T * n), h0 = randv<R>(B * n),
       h = std::vector<R>(u.size());
  op::BlockCirculantScan sc({B, T, p, k, strux::dtype_of<R>::value});
  EXPECT_FALSE(sc.describe().empty());
  auto run = [&](std::vector<R>& av) {
    std::vector<R> out(u.size());
    sc.forward({View(av.data(), {B, T, p, p, k}), vw(u, {B, T, n}), vw(out, {B, T, n}), vw(h0, {B, n})});
    return out;
  };
  h = run(a);
  auto ref = scan_ref(B, T, n, u, &h0, [&](int64_t b, int64_t t, const std::vector<cd>& pv, std::vector<cd>& o) {
    for (int64_t i = 0; i < p; ++i)
      for (int64_t r = 0; r < k; ++r) {
        cd s = 0;
        for (int64_t j = 0; j < p; ++j)
          for (int64_t q = 0; q < k; ++q)
            s += double(a[(((b * T + t) * p + i) * p + j) * k + ((r - q) % k + k) % k]) * pv[j * k + q];
        o[i * k + r] = s;
      }
  });
  EXPECT_LE(rel_err(ref, h), tol<R>());
  scan_backward_checks<R>(sc, a, {B, T, p, p, k}, u, h0, h, B, T, n, run);
}

TEST(Api, Scans) {
  for (auto [B, T, n] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {2, 7, 5}, {1, 13, 4}, {3, 5, 2}}) {
    diag_case<float>(B, T, n);
    diag_case<double>(B, T, n);
    diag_case<std::complex<float>>(B, T, n);
    diag_case<cd>(B, T, n);
    circulant_case<float>(B, T, n);
    circulant_case<double>(B, T, n);
  }
  for (auto [B, T, p, k] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1}, {2, 5, 2, 3}, {1, 7, 3, 4}}) {
    block_case<float>(B, T, p, k);
    block_case<double>(B, T, p, k);
  }
}

// ---- errors ---------------------------------------------------------------------------------------

// Runs f, expects exception E whose message names `arg`.
template <class E, class F>
void expect_error(F f, const std::string& arg) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one naming '" << arg << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find("'" + arg + "'"), std::string::npos) << e.what();
  }
}

TEST(Api, Errors) {
  const int64_t B = 2, H = 3, L = 8, Lk = 4;
  std::vector<float> u(B * H * L), k(H * Lk), y(B * H * L);
  std::vector<double> kd(H * Lk);
  op::FFTConv conv({B, H, L, Lk});
  expect_error<strux::TypeError>([&] { conv.forward({vw(u, {B, H, L}), vw(kd, {H, Lk}), vw(y, {B, H, L})}); }, "k");
  expect_error<strux::ValueError>([&] { conv.forward({vw(u, {B, H, L + 1}), vw(k, {H, Lk}), vw(y, {B, H, L})}); }, "u");
  expect_error<strux::ValueError>([&] { conv.forward({vw(u, {B, H, L}), vw(k, {H, Lk}), View()}); }, "y");
  expect_error<strux::ValueError>([&] { conv.forward({vw(u, {B, H, L}), vw(k, {H, Lk}), vw(y, {B, H * L})}); }, "y");
  View strided = vw(u, {B, H, L});
  strided.strides[2] = 2;
  expect_error<strux::ValueError>([&] { conv.forward({strided, vw(k, {H, Lk}), vw(y, {B, H, L})}); }, "u");
  View on_gpu = vw(u, {B, H, L});
  on_gpu.device = strux::Device::cuda(0);
  expect_error<strux::ValueError>([&] { conv.forward({on_gpu, vw(k, {H, Lk}), vw(y, {B, H, L})}); }, "u");
  // A workspace is accepted (the CPU backend needs none; test_api_cuda checks one too small).
  conv.forward({vw(u, {B, H, L}), vw(k, {H, Lk}), vw(y, {B, H, L})}, {y.data(), y.size() * sizeof(float)});
  expect_error<strux::ValueError>(
      [&] { conv.backward({vw(y, {B, H, L}), vw(u, {B, H, L}), vw(k, {H, Lk}), vw(u, {B, H, L}), vw(k, {H, Lk}), View(), View(), View(), vw(u, {B, H, L})}); },
      "dpregate");

  expect_error<strux::ValueError>([] { op::FFTConv({2, 3, 0, 4}); }, "problem.L");
  expect_error<strux::ValueError>([] { op::FFTConv({1, 1, 4, 5, strux::ConvMode::Circular}); }, "problem.Lk");
  expect_error<strux::TypeError>([] { op::FFTConv({1, 1, 4, 2, strux::ConvMode::Causal, DType::f16}); }, "problem.dtype");
  expect_error<strux::TypeError>([] { op::DiagScan({1, 2, 3, DType::bf16}); }, "problem.dtype");
  expect_error<strux::ValueError>([] { op::FFTConv({1, 1, 4, 2}, strux::Options{"no-such-solver"}); }, "options.solver");
  {  // the CPU solver table names "blocks", and describe() says what runs
    op::FFTConv blocks({1, 1, 4096, 40}, strux::Options{"blocks"});
    EXPECT_NE(blocks.describe().find("blocks"), std::string::npos) << blocks.describe();
    EXPECT_EQ(op::FFTConv({1, 1, 4096, 40}, strux::Options{"fft"}).describe().find("blocks"), std::string::npos);
  }
#ifndef STRUX_HAVE_CUDA
  expect_error<strux::ValueError>(
      [] { op::FFTConv({1, 1, 4, 2, strux::ConvMode::Causal, DType::f32, strux::Device::cuda(0)}); }, "problem.device");
#endif

  op::BlockToeplitz F({3, 2, 2});
  std::vector<float> m(6), d(6);
  expect_error<strux::ValueError>([&] { F.forward({vw(m, {3, 2}), vw(d, {3, 2})}); }, "blocks");
  std::vector<float> blocks(12);
  F.set_blocks(vw(blocks, {3, 2, 2}));
  F.forward({vw(m, {3, 2}), vw(d, {3, 2})});
  expect_error<strux::ValueError>([&] { F.forward({vw(m, {2, 3}), vw(d, {3, 2})}); }, "m");
  expect_error<strux::ValueError>([&] { F.backward({vw(d, {3, 2}), vw(m, {3, 2}), View(), vw(blocks, {3, 2, 2})}); }, "m");

  using P = strux::KSPattern;
  expect_error<strux::ValueError>([] { op::KSChain({{P{1, 2, 3, 1}, P{1, 2, 3, 1}}, 4}); }, "problem.patterns");
  expect_error<strux::ValueError>([] { op::KSFactor({P{1, 0, 3, 1}, 4}); }, "problem.pattern");
  op::KSChain C({{P{1, 2, 3, 1}, P{1, 3, 2, 1}}, 4});
  std::vector<float> x(8), yk(8), w0(6), w1(6);
  expect_error<strux::ValueError>([&] { C.forward({vw(x, {4, 2}), {vw(w0, {1, 2, 3, 1})}, vw(yk, {4, 2})}); }, "w");
  expect_error<strux::ValueError>(
      [&] { C.forward({vw(x, {4, 2}), {vw(w0, {1, 2, 3, 1}), vw(w1, {1, 2, 3, 1})}, vw(yk, {4, 2})}); }, "w[1]");

  op::CirculantScan cs({1, 2, 4, true});
  std::vector<float> a(8), us(8), hs(8);
  expect_error<strux::TypeError>([&] { cs.forward({vw(a, {1, 2, 4}), vw(us, {1, 2, 4}), vw(hs, {1, 2, 4})}); }, "a");
  EXPECT_EQ(std::string(strux::version()), strux::kVersion);
}

}  // namespace
