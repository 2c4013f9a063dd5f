// Scan family: every plan against a dense float64 time loop of the DESIGN.md formula
// (matrices built from the index formula, not from FFTs), and every backward pass by the
// dot-product test <dh, J dx> == <J^T dh, dx> with J dx from the exact forward-mode
// derivative of the dense loop.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "api_test_util.hpp"
#include "strux/core.hpp"
#include "strux/scan.hpp"

namespace {

using cd = std::complex<double>;
using Mat = std::vector<cd>;  // n x n row-major

std::mt19937_64& rng() {
  static std::mt19937_64 g(12345);
  return g;
}
template <class S>
std::vector<S> randv(int64_t count, double scale = 1.0) {
  return strux::test::randn<S>(rng(), count, scale);
}
template <class S>
cd to_cd(S x) { return cd(x); }

// Dense reference: h_t = M_t h_{t-1} + u_t for one batch item; mats[t] is n x n.
std::vector<cd> dense_scan(const std::vector<Mat>& mats, const std::vector<cd>& u, const cd* h0, int64_t n) {
  const int64_t T = int64_t(mats.size());
  std::vector<cd> h(T * n), prev(n, 0.0);
  if (h0) prev.assign(h0, h0 + n);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      cd s = u[t * n + i];
      for (int64_t j = 0; j < n; ++j) s += mats[t][i * n + j] * prev[j];
      h[t * n + i] = s;
    }
    for (int64_t i = 0; i < n; ++i) prev[i] = h[t * n + i];
  }
  return h;
}
// Forward-mode derivative of dense_scan in direction (dM, du, dh0).
std::vector<cd> dense_jvp(const std::vector<Mat>& M, const std::vector<Mat>& dM, const std::vector<cd>& u,
                          const std::vector<cd>& du, const cd* h0, const cd* dh0, int64_t n) {
  const std::vector<cd> h = dense_scan(M, u, h0, n);
  const int64_t T = int64_t(M.size());
  std::vector<cd> dh(T * n), dprev(n, 0.0), prev(n, 0.0);
  if (dh0) dprev.assign(dh0, dh0 + n);
  if (h0) prev.assign(h0, h0 + n);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      cd s = du[t * n + i];
      for (int64_t j = 0; j < n; ++j) s += dM[t][i * n + j] * prev[j] + M[t][i * n + j] * dprev[j];
      dh[t * n + i] = s;
    }
    for (int64_t i = 0; i < n; ++i) { dprev[i] = dh[t * n + i]; prev[i] = h[t * n + i]; }
  }
  return dh;
}

Mat diag_mat(const cd* a, int64_t n) {
  Mat m(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) m[i * n + i] = a[i];
  return m;
}
Mat circ_mat(const double* a, int64_t n) {
  Mat m(n * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) m[i * n + j] = a[((i - j) % n + n) % n];
  return m;
}
Mat block_mat(const double* a, int64_t p, int64_t k) {  // a: (p, p, k)
  const int64_t n = p * k;
  Mat m(n * n);
  for (int64_t i = 0; i < p; ++i)
    for (int64_t j = 0; j < p; ++j)
      for (int64_t r = 0; r < k; ++r)
        for (int64_t c = 0; c < k; ++c)
          m[(i * k + r) * n + j * k + c] = a[(i * p + j) * k + ((r - c) % k + k) % k];
  return m;
}
// numpy.fft.irfft(a_hat, n) written out (imaginary parts at 0 and n/2 ignored).
std::vector<double> naive_irfft(const cd* ah, int64_t n) {
  std::vector<double> a(n);
  const double pi = std::acos(-1.0);
  for (int64_t m = 0; m < n; ++m) {
    double s = ah[0].real();
    for (int64_t k = 1; 2 * k < n; ++k) s += 2 * (ah[k] * std::polar(1.0, 2 * pi * double(k * m) / double(n))).real();
    if (n % 2 == 0) s += ah[n / 2].real() * ((m % 2) ? -1.0 : 1.0);
    a[m] = s / double(n);
  }
  return a;
}

template <class S>
double rel_err(const std::vector<S>& got, const std::vector<cd>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += std::norm(to_cd(got[i]) - want[i]);
    den += std::norm(want[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}
template <class S>
double tol_of() {
  return (std::is_same_v<S, float> || std::is_same_v<S, std::complex<float>>) ? 2e-5 : 1e-12;
}
template <class S>
std::vector<cd> widen(const S* x, int64_t count) {
  std::vector<cd> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = to_cd(x[i]);
  return v;
}
template <class S>
double re_dot(const std::vector<S>& x, const std::vector<S>& y) {  // Re sum conj(x) y
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += (std::conj(to_cd(x[i])) * to_cd(y[i])).real();
  return s;
}

struct Shape { int64_t B, T, n; };
const Shape kShapes[] = {{1, 1, 1}, {2, 7, 13}, {3, 5, 40}, {1, 4, 2}};

// ---- diag ----------------------------------------------------------------------------------
template <class S>
void diag_forward_case(const Shape& s, bool with_h0) {
  const int64_t B = s.B, T = s.T, n = s.n;
  auto a = randv<S>(B * T * n, 0.5), b = randv<S>(B * T * n), h0 = randv<S>(B * n);
  std::vector<S> h(B * T * n);
  strux::DiagScan<S> plan(B, T, n);
  plan.forward(a.data(), b.data(), with_h0 ? h0.data() : nullptr, h.data());
  std::vector<cd> want;
  for (int64_t bi = 0; bi < B; ++bi) {
    std::vector<Mat> M;
    for (int64_t t = 0; t < T; ++t) M.push_back(diag_mat(widen(a.data() + (bi * T + t) * n, n).data(), n));
    auto h0c = widen(h0.data() + bi * n, n);
    auto w = dense_scan(M, widen(b.data() + bi * T * n, T * n), with_h0 ? h0c.data() : nullptr, n);
    want.insert(want.end(), w.begin(), w.end());
  }
  EXPECT_LT(rel_err(h, want), tol_of<S>()) << "B=" << B << " T=" << T << " n=" << n << " h0=" << with_h0;
}

template <class S>
void diag_backward_case(const Shape& s, bool with_h0, bool with_last) {
  const int64_t B = s.B, T = s.T, n = s.n, N = B * T * n;
  auto a = randv<S>(N, 0.5), b = randv<S>(N), h0 = randv<S>(B * n);
  auto dh = randv<S>(N), dl = randv<S>(B * n);
  auto xa = randv<S>(N), xb = randv<S>(N), xh0 = randv<S>(B * n);
  std::vector<S> da(N), db(N), dh0(B * n);
  strux::DiagScan<S> plan(B, T, n);
  plan.backward(dh.data(), with_last ? dl.data() : nullptr, a.data(), b.data(), with_h0 ? h0.data() : nullptr,
                da.data(), db.data(), dh0.data());
  double lhs = 0;
  for (int64_t bi = 0; bi < B; ++bi) {
    std::vector<Mat> M, dM;
    for (int64_t t = 0; t < T; ++t) {
      M.push_back(diag_mat(widen(a.data() + (bi * T + t) * n, n).data(), n));
      dM.push_back(diag_mat(widen(xa.data() + (bi * T + t) * n, n).data(), n));
    }
    auto h0c = widen(h0.data() + bi * n, n), x0c = widen(xh0.data() + bi * n, n);
    auto j = dense_jvp(M, dM, widen(b.data() + bi * T * n, T * n), widen(xb.data() + bi * T * n, T * n),
                       with_h0 ? h0c.data() : nullptr, x0c.data(), n);
    for (int64_t i = 0; i < T * n; ++i) lhs += (std::conj(to_cd(dh[bi * T * n + i])) * j[i]).real();
    if (with_last)
      for (int64_t i = 0; i < n; ++i) lhs += (std::conj(to_cd(dl[bi * n + i])) * j[(T - 1) * n + i]).real();
  }
  const double rhs = re_dot(da, xa) + re_dot(db, xb) + re_dot(dh0, xh0);
  EXPECT_NEAR(lhs, rhs, 1e-10 * (std::abs(lhs) + 1)) << "B=" << B << " T=" << T << " n=" << n;
}

TEST(ScanDiag, ForwardMatchesDenseLoop) {
  for (const auto& s : kShapes)
    for (bool h0 : {false, true}) {
      diag_forward_case<float>(s, h0);
      diag_forward_case<double>(s, h0);
      diag_forward_case<std::complex<float>>(s, h0);
      diag_forward_case<std::complex<double>>(s, h0);
    }
}

TEST(ScanDiag, BackwardDotProduct) {
  for (const auto& s : kShapes)
    for (bool h0 : {false, true})
      for (bool last : {false, true}) {
        diag_backward_case<double>(s, h0, last);
        diag_backward_case<std::complex<double>>(s, h0, last);
      }
}

TEST(ScanDiag, NaNPropagates) {
  strux::DiagScan<double> plan(1, 3, 2);
  std::vector<double> a{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, b{1, std::nan(""), 1, 1, 1, 1}, h(6);
  plan.forward(a.data(), b.data(), nullptr, h.data());
  EXPECT_FALSE(std::isnan(h[0]));
  EXPECT_TRUE(std::isnan(h[1]) && std::isnan(h[3]) && std::isnan(h[5]));
  EXPECT_FALSE(std::isnan(h[2]) || std::isnan(h[4]));
}

// DiagLayout (time-last, reverse, a broadcast along batch / time) against the plain plan on
// materialised channels-last arrays: h, and the gradients (da summed over the broadcast axes).
template <class S>
void diag_layout_case(const strux::DiagLayout& L, int64_t B, int64_t T, int64_t n) {
  SCOPED_TRACE(testing::Message() << "time_last " << L.time_last << " reverse " << L.reverse << " a_batch "
                                  << L.a_batch << " a_time " << L.a_time << " B=" << B << " T=" << T << " n=" << n);
  const int64_t Ba = L.a_batch ? B : 1, Ta = L.a_time ? T : 1, N = B * T * n;
  auto a = randv<S>(Ba * Ta * n, 0.5), b = randv<S>(N), h0 = randv<S>(B * n), dh = randv<S>(N), dl = randv<S>(B * n);
  for (auto& v : a)  // |a| <= 0.95: a time-invariant a of modulus > 1 would overflow over T steps
    if (std::abs(v) > 0.95) v *= S(0.95 / std::abs(v));
  // Index of (b, t, c) in the caller's layout of an array with batch size bb and time size tt.
  auto at = [&](int64_t bb, int64_t tt, int64_t bi, int64_t t, int64_t c) {
    return L.time_last ? (bi * n + c) * tt + t : (bi * tt + t) * n + c;
  };
  // Plain (B, T, n) arrays in the kernel's time order (reversed when L.reverse).
  std::vector<S> ap(N), bp(N), dhp(N);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < n; ++c) {
        const int64_t q = L.reverse ? T - 1 - t : t, o = (bi * T + t) * n + c;
        ap[o] = a[at(Ba, Ta, L.a_batch ? bi : 0, L.a_time ? q : 0, c)];
        bp[o] = b[at(B, T, bi, q, c)];
        dhp[o] = dh[at(B, T, bi, q, c)];
      }
  std::vector<S> h(N), hp(N), da(a.size()), db(N), dh0(B * n), dap(N), dbp(N), dh0p(B * n);
  strux::DiagScan<S>(B, T, n, L).forward(a.data(), b.data(), h0.data(), h.data());
  strux::DiagScan<S>(B, T, n).forward(ap.data(), bp.data(), h0.data(), hp.data());
  strux::DiagScan<S>(B, T, n, L).backward(dh.data(), dl.data(), a.data(), b.data(), h0.data(), da.data(), db.data(),
                                   dh0.data());
  strux::DiagScan<S>(B, T, n).backward(dhp.data(), dl.data(), ap.data(), bp.data(), h0.data(), dap.data(), dbp.data(),
                                dh0p.data());
  std::vector<cd> want_h(N), want_db(N), want_da(a.size(), cd(0));
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < n; ++c) {
        const int64_t q = L.reverse ? T - 1 - t : t, o = (bi * T + t) * n + c;
        want_h[at(B, T, bi, q, c)] = to_cd(hp[o]);
        want_db[at(B, T, bi, q, c)] = to_cd(dbp[o]);
        want_da[at(Ba, Ta, L.a_batch ? bi : 0, L.a_time ? q : 0, c)] += to_cd(dap[o]);
      }
  EXPECT_LT(rel_err(h, want_h), tol_of<S>());
  EXPECT_LT(rel_err(db, want_db), tol_of<S>());
  EXPECT_LT(rel_err(da, want_da), tol_of<S>());
  EXPECT_LT(rel_err(dh0, widen(dh0p.data(), B * n)), tol_of<S>());
}

TEST(ScanDiag, LayoutsMatchThePlainPlan) {
  for (bool tl : {false, true})
    for (bool rev : {false, true})
      for (bool ab : {true, false})
        for (bool at : {true, false}) {
          const strux::DiagLayout L{tl, rev, ab, at};
          diag_layout_case<double>(L, 3, 70, 19);  // time-last: several tiles and channel blocks
          diag_layout_case<std::complex<float>>(L, 2, 133, 37);
          diag_layout_case<float>(L, 1, 9, 3);
          diag_layout_case<std::complex<double>>(L, 2, 40, 17);
        }
}

TEST(ScanErrors, BadSizesNameTheArgument) {
  try {
    strux::DiagScan<float>(0, 1, 1);
    FAIL() << "no throw";
  } catch (const strux::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'B'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(strux::CirculantScan<double>(1, 0, 4), strux::ValueError);
  EXPECT_THROW(strux::BlockCirculantScan<double>(1, 1, 0, 4), strux::ValueError);
  EXPECT_THROW(strux::BlockCirculantScan<double>(1, 1, 2, 0), strux::ValueError);
  EXPECT_THROW(strux::set_scan_time_block(-1), strux::ValueError);
}

// ---- circulant -----------------------------------------------------------------------------
template <class T>
void circ_case(int64_t B, int64_t TT, int64_t n, bool with_h0, bool fourier) {
  using C = std::complex<T>;
  const int64_t N = B * TT * n, nf = n / 2 + 1;
  auto a = randv<T>(N, 0.4), u = randv<T>(N), h0 = randv<T>(B * n);
  auto ah = randv<C>(B * TT * nf, 0.5);
  // spatial a used by the reference
  std::vector<double> aref(N);
  for (int64_t r = 0; r < B * TT; ++r) {
    if (fourier) {
      auto w = widen(ah.data() + r * nf, nf);
      auto x = naive_irfft(w.data(), n);
      for (int64_t i = 0; i < n; ++i) aref[r * n + i] = x[i];
    } else {
      for (int64_t i = 0; i < n; ++i) aref[r * n + i] = double(a[r * n + i]);
    }
  }
  strux::CirculantScan<T> plan(B, TT, n);
  std::vector<T> h(N);
  if (fourier)
    plan.forward_fourier(ah.data(), u.data(), with_h0 ? h0.data() : nullptr, h.data());
  else
    plan.forward(a.data(), u.data(), with_h0 ? h0.data() : nullptr, h.data());
  std::vector<cd> want;
  std::vector<std::vector<Mat>> Ms(B);
  for (int64_t bi = 0; bi < B; ++bi) {
    for (int64_t t = 0; t < TT; ++t) Ms[bi].push_back(circ_mat(aref.data() + (bi * TT + t) * n, n));
    auto h0c = widen(h0.data() + bi * n, n);
    auto w = dense_scan(Ms[bi], widen(u.data() + bi * TT * n, TT * n), with_h0 ? h0c.data() : nullptr, n);
    want.insert(want.end(), w.begin(), w.end());
  }
  EXPECT_LT(rel_err(h, want), tol_of<T>()) << "n=" << n << " T=" << TT << " fourier=" << fourier;

  if (!std::is_same_v<T, double>) return;
  // backward: dot-product test (float64 only)
  auto dh = randv<T>(N), dl = randv<T>(B * n), xu = randv<T>(N), x0 = randv<T>(B * n), xa = randv<T>(N);
  auto xah = randv<C>(B * TT * nf);
  std::vector<T> da(N), du(N), dh0(B * n);
  std::vector<C> dah(B * TT * nf);
  const T* h0p = with_h0 ? h0.data() : nullptr;
  if (fourier)
    plan.backward_fourier(dh.data(), dl.data(), ah.data(), u.data(), h0p, dah.data(), du.data(), dh0.data());
  else
    plan.backward(dh.data(), dl.data(), a.data(), u.data(), h0p, da.data(), du.data(), dh0.data());
  double lhs = 0;
  for (int64_t bi = 0; bi < B; ++bi) {
    std::vector<Mat> dM;
    for (int64_t t = 0; t < TT; ++t) {
      const int64_t r = bi * TT + t;
      if (fourier) {
        auto w = widen(xah.data() + r * nf, nf);
        auto x = naive_irfft(w.data(), n);
        dM.push_back(circ_mat(x.data(), n));
      } else {
        std::vector<double> x(xa.begin() + r * n, xa.begin() + (r + 1) * n);
        dM.push_back(circ_mat(x.data(), n));
      }
    }
    auto h0c = widen(h0.data() + bi * n, n), x0c = widen(x0.data() + bi * n, n);
    auto j = dense_jvp(Ms[bi], dM, widen(u.data() + bi * TT * n, TT * n), widen(xu.data() + bi * TT * n, TT * n),
                       with_h0 ? h0c.data() : nullptr, x0c.data(), n);
    for (int64_t i = 0; i < TT * n; ++i) lhs += dh[bi * TT * n + i] * j[i].real();
    for (int64_t i = 0; i < n; ++i) lhs += dl[bi * n + i] * j[(TT - 1) * n + i].real();
  }
  double rhs = re_dot(du, xu) + re_dot(dh0, x0);
  rhs += fourier ? re_dot(dah, xah) : re_dot(da, xa);
  EXPECT_NEAR(lhs, rhs, 1e-10 * (std::abs(lhs) + 1)) << "n=" << n << " T=" << TT << " fourier=" << fourier;
}

// Time blocks: 0 = automatic (one block at these sizes); 1, 2, 3 split T = 7 into several
// blocks, exercising the carried state and the checkpointed backward sweep.
TEST(ScanCirculant, ForwardAndBackwardMatchDense) {
  for (int64_t tb : {0, 1, 2, 3}) {
    strux::set_scan_time_block(tb);
    for (int64_t n : {1, 2, 7, 8, 13})
      for (bool h0 : {false, true})
        for (bool fourier : {false, true}) {
          circ_case<float>(2, 7, n, h0, fourier);
          circ_case<double>(2, 7, n, h0, fourier);
          circ_case<double>(1, 1, n, h0, fourier);
        }
  }
  strux::set_scan_time_block(0);
}

// ---- block circulant -----------------------------------------------------------------------
template <class T>
void block_case(int64_t B, int64_t TT, int64_t p, int64_t k, bool with_h0) {
  const int64_t n = p * k, N = B * TT * n, NA = B * TT * p * p * k;
  auto a = randv<T>(NA, 0.3), u = randv<T>(N), h0 = randv<T>(B * n);
  strux::BlockCirculantScan<T> plan(B, TT, p, k);
  std::vector<T> h(N);
  const T* h0p = with_h0 ? h0.data() : nullptr;
  plan.forward(a.data(), u.data(), h0p, h.data());
  std::vector<cd> want;
  std::vector<std::vector<Mat>> Ms(B);
  for (int64_t bi = 0; bi < B; ++bi) {
    for (int64_t t = 0; t < TT; ++t) {
      std::vector<double> x(a.begin() + (bi * TT + t) * p * p * k, a.begin() + (bi * TT + t + 1) * p * p * k);
      Ms[bi].push_back(block_mat(x.data(), p, k));
    }
    auto h0c = widen(h0.data() + bi * n, n);
    auto w = dense_scan(Ms[bi], widen(u.data() + bi * TT * n, TT * n), with_h0 ? h0c.data() : nullptr, n);
    want.insert(want.end(), w.begin(), w.end());
  }
  EXPECT_LT(rel_err(h, want), tol_of<T>()) << "p=" << p << " k=" << k;
  if (!std::is_same_v<T, double>) return;
  auto dh = randv<T>(N), dl = randv<T>(B * n), xu = randv<T>(N), x0 = randv<T>(B * n), xa = randv<T>(NA);
  std::vector<T> da(NA), du(N), dh0(B * n);
  plan.backward(dh.data(), dl.data(), a.data(), u.data(), h0p, da.data(), du.data(), dh0.data());
  double lhs = 0;
  for (int64_t bi = 0; bi < B; ++bi) {
    std::vector<Mat> dM;
    for (int64_t t = 0; t < TT; ++t) {
      std::vector<double> x(xa.begin() + (bi * TT + t) * p * p * k, xa.begin() + (bi * TT + t + 1) * p * p * k);
      dM.push_back(block_mat(x.data(), p, k));
    }
    auto h0c = widen(h0.data() + bi * n, n), x0c = widen(x0.data() + bi * n, n);
    auto j = dense_jvp(Ms[bi], dM, widen(u.data() + bi * TT * n, TT * n), widen(xu.data() + bi * TT * n, TT * n),
                       with_h0 ? h0c.data() : nullptr, x0c.data(), n);
    for (int64_t i = 0; i < TT * n; ++i) lhs += dh[bi * TT * n + i] * j[i].real();
    for (int64_t i = 0; i < n; ++i) lhs += dl[bi * n + i] * j[(TT - 1) * n + i].real();
  }
  const double rhs = re_dot(da, xa) + re_dot(du, xu) + re_dot(dh0, x0);
  EXPECT_NEAR(lhs, rhs, 1e-10 * (std::abs(lhs) + 1)) << "p=" << p << " k=" << k;
}

TEST(ScanBlockCirculant, ForwardAndBackwardMatchDense) {
  const int64_t pk[][2] = {{1, 1}, {1, 7}, {3, 1}, {2, 5}, {3, 4}, {2, 8}};
  for (int64_t tb : {0, 1, 2, 3}) {
    strux::set_scan_time_block(tb);
    for (auto& c : pk)
      for (bool h0 : {false, true}) {
        block_case<float>(2, 7, c[0], c[1], h0);
        block_case<double>(2, 7, c[0], c[1], h0);
        block_case<double>(1, 1, c[0], c[1], h0);
      }
  }
  strux::set_scan_time_block(0);
}

}  // namespace
