// KS factor and chain plans against a dense float64 K built from the DESIGN.md formula.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "strux/ks.hpp"
#include "strux/strux.hpp"

namespace {

using strux::KSChainPlan;
using strux::KSLayout;
using strux::KSPattern;
using strux::KSPlan;
using strux::KSSolver;

std::vector<double> randn(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> dist;
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(rng);
  return v;
}

// Dense K (M × N), row-major: K[i·b·d + k·d + j, i·c·d + l·d + j] = w[i, k, l, j].
std::vector<double> dense(const KSPattern& p, const std::vector<double>& w) {
  const int64_t M = p.rows(), N = p.cols();
  std::vector<double> K(size_t(M * N), 0.0);
  for (int64_t i = 0; i < p.a; ++i)
    for (int64_t k = 0; k < p.b; ++k)
      for (int64_t l = 0; l < p.c; ++l)
        for (int64_t j = 0; j < p.d; ++j)
          K[(i * p.b * p.d + k * p.d + j) * N + i * p.c * p.d + l * p.d + j] =
              w[((i * p.b + k) * p.c + l) * p.d + j];
  return K;
}

// Element (row r, batch t) of an activation of width n in a layout.
inline int64_t at(KSLayout L, int64_t r, int64_t t, int64_t n, int64_t batch) {
  return L == KSLayout::BatchLast ? r * batch + t : t * n + r;
}

// out = op(K) applied to each batch element of in: K (M × N); trans uses Kᵀ.
std::vector<double> apply(const std::vector<double>& K, int64_t M, int64_t N, bool trans,
                          const std::vector<double>& in, int64_t batch, KSLayout L) {
  const int64_t nin = trans ? M : N, nout = trans ? N : M;
  std::vector<double> out(size_t(nout * batch), 0.0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t r = 0; r < nout; ++r) {
      double s = 0;
      for (int64_t q = 0; q < nin; ++q)
        s += (trans ? K[q * N + r] : K[r * N + q]) * in[at(L, q, t, nin, batch)];
      out[at(L, r, t, nout, batch)] = s;
    }
  return out;
}

double rel_err(const std::vector<double>& ref, const std::vector<double>& got) {
  double num = 0, den = 0;
  for (size_t q = 0; q < ref.size(); ++q) {
    num += (ref[q] - got[q]) * (ref[q] - got[q]);
    den += ref[q] * ref[q];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

template <class T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T>
std::vector<double> widen(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

template <class T>
double tol() {
  return std::is_same<T, float>::value ? 2e-5 : 1e-12;
}

const KSPattern kPatterns[] = {{1, 1, 1, 1}, {2, 2, 2, 2}, {3, 5, 7, 2}, {1, 4, 4, 1},
                               {4, 1, 3, 5}, {2, 3, 1, 1}, {1, 6, 2, 9}, {5, 2, 3, 1}};
const int64_t kBatches[] = {1, 7, 130};
const KSLayout kLayouts[] = {KSLayout::BatchFirst, KSLayout::BatchLast};

// Forward and both gradients of one factor against the dense reference.
template <class T>
void check_factor(const KSPattern& p, KSLayout L, int64_t batch, std::mt19937_64& rng,
                  KSSolver solver = KSSolver::Automatic) {
  SCOPED_TRACE(testing::Message() << "pattern (" << p.a << "," << p.b << "," << p.c << "," << p.d
                                  << ") layout " << int(L) << " batch " << batch << " solver " << int(solver));
  const int64_t M = p.rows(), N = p.cols();
  const auto w = randn(p.nnz(), rng), x = randn(N * batch, rng), dy = randn(M * batch, rng);
  const auto K = dense(p, w);
  const KSPlan<T> plan(p, L, solver);

  const auto wt = cast<T>(w), xt = cast<T>(x), dyt = cast<T>(dy);
  std::vector<T> y(size_t(M * batch), T(NAN)), dx(size_t(N * batch), T(NAN)), dw(size_t(p.nnz()), T(NAN));
  plan.forward(xt.data(), wt.data(), y.data(), batch);
  EXPECT_LT(rel_err(apply(K, M, N, false, x, batch, L), widen(y)), tol<T>());

  plan.backward(dyt.data(), xt.data(), wt.data(), dx.data(), dw.data(), batch);
  EXPECT_LT(rel_err(apply(K, M, N, true, dy, batch, L), widen(dx)), tol<T>());
  // dw[i,k,l,j] = Σ_t dy[t, row] x[t, col] over the entry's (row, col).
  std::vector<double> dw_ref(size_t(p.nnz()), 0.0);
  for (int64_t i = 0; i < p.a; ++i)
    for (int64_t k = 0; k < p.b; ++k)
      for (int64_t l = 0; l < p.c; ++l)
        for (int64_t j = 0; j < p.d; ++j) {
          const int64_t r = i * p.b * p.d + k * p.d + j, c = i * p.c * p.d + l * p.d + j;
          double s = 0;
          for (int64_t t = 0; t < batch; ++t) s += dy[at(L, r, t, M, batch)] * x[at(L, c, t, N, batch)];
          dw_ref[((i * p.b + k) * p.c + l) * p.d + j] = s;
        }
  EXPECT_LT(rel_err(dw_ref, widen(dw)), tol<T>());

  // Either gradient alone gives the same values.
  std::vector<T> dw2(dw.size(), T(NAN)), dx2(dx.size(), T(NAN));
  plan.backward(dyt.data(), xt.data(), wt.data(), nullptr, dw2.data(), batch);
  plan.backward(dyt.data(), xt.data(), wt.data(), dx2.data(), nullptr, batch);
  EXPECT_EQ(widen(dw2), widen(dw));
  EXPECT_EQ(widen(dx2), widen(dx));
}

template <class T>
void sweep_factors() {
  std::mt19937_64 rng(7);
  for (const auto& p : kPatterns)
    for (auto L : kLayouts)
      for (int64_t batch : kBatches) check_factor<T>(p, L, batch, rng);
}

TEST(KSFactor, Float64) { sweep_factors<double>(); }
TEST(KSFactor, Float32) { sweep_factors<float>(); }

// Large enough that work items are split into several batch chunks per group.
TEST(KSFactor, ManyChunks) {
  std::mt19937_64 rng(11);
  for (auto L : kLayouts) {
    check_factor<double>({2, 8, 8, 16}, L, 600, rng);
    check_factor<float>({1, 16, 24, 1}, L, 1500, rng);
    check_factor<float>({2, 6, 9, 12}, L, 300, rng);  // SSE transpose blocks plus edges
    check_factor<double>({3, 5, 7, 6}, L, 301, rng);
  }
}

template <class T>
void check_chain(const std::vector<KSPattern>& ps, KSLayout L, int64_t batch, std::mt19937_64& rng,
                 KSSolver solver = KSSolver::Automatic) {
  SCOPED_TRACE(testing::Message() << "chain of " << ps.size() << " layout " << int(L) << " batch " << batch
                                  << " solver " << int(solver));
  // Dense K = K_1 ⋯ K_P.
  std::vector<std::vector<double>> ws;
  std::vector<double> K;
  int64_t M = ps[0].rows(), N = 0;
  for (size_t q = 0; q < ps.size(); ++q) {
    ws.push_back(randn(ps[q].nnz(), rng));
    auto Kq = dense(ps[q], ws.back());
    if (q == 0) {
      K = Kq;
      N = ps[0].cols();
      continue;
    }
    const int64_t n2 = ps[q].cols();
    std::vector<double> P(size_t(M * n2), 0.0);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t m = 0; m < N; ++m)
        for (int64_t s = 0; s < n2; ++s) P[r * n2 + s] += K[r * N + m] * Kq[m * n2 + s];
    K = P;
    N = n2;
  }
  const auto x = randn(N * batch, rng), dy = randn(M * batch, rng);
  std::vector<std::vector<T>> wt;
  std::vector<const T*> wp;
  for (auto& w : ws) wt.push_back(cast<T>(w));
  for (auto& w : wt) wp.push_back(w.data());

  KSChainPlan<T> plan(ps, L, 0, solver);
  const auto xt = cast<T>(x), dyt = cast<T>(dy);
  std::vector<T> y(size_t(M * batch), T(NAN)), dx(size_t(N * batch), T(NAN));
  plan.forward(xt.data(), wp.data(), y.data(), batch);
  EXPECT_LT(rel_err(apply(K, M, N, false, x, batch, L), widen(y)), tol<T>());

  // Weight gradients against single factors fed with the dense-reference activations.
  std::vector<std::vector<T>> dw;
  std::vector<T*> dwp;
  for (auto& p : ps) dw.emplace_back(size_t(p.nnz()), T(NAN));
  for (auto& v : dw) dwp.push_back(v.data());
  plan.backward(dyt.data(), xt.data(), wp.data(), dx.data(), dwp.data(), batch);
  EXPECT_LT(rel_err(apply(K, M, N, true, dy, batch, L), widen(dx)), tol<T>());
  // Dot-product test per factor: <dw_q, δw> == <dy, d/dε chain(w_q + ε δw)> (linear in w_q).
  for (size_t q = 0; q < ps.size(); ++q) {
    auto dl = randn(ps[q].nnz(), rng);
    std::vector<std::vector<T>> w2 = wt;
    w2[q] = cast<T>(dl);
    std::vector<const T*> w2p;
    for (auto& w : w2) w2p.push_back(w.data());
    std::vector<T> y2(y.size());
    plan.forward(xt.data(), w2p.data(), y2.data(), batch);
    double lhs = 0, rhs = 0, scale = 0;
    for (size_t e = 0; e < dl.size(); ++e) lhs += double(dw[q][e]) * dl[e];
    for (size_t e = 0; e < y2.size(); ++e) {
      rhs += dy[e] * double(y2[e]);
      scale += std::abs(dy[e] * double(y2[e]));
    }
    EXPECT_LT(std::abs(lhs - rhs) / scale, 10 * tol<T>()) << "factor " << q;
  }
}

TEST(KSChain, MonarchAndButterfly) {
  std::mt19937_64 rng(3);
  const std::vector<std::vector<KSPattern>> chains = {
      {{1, 4, 4, 4}, {4, 4, 4, 1}},                // Monarch, N = 16
      {{1, 2, 2, 4}, {2, 2, 2, 2}, {4, 2, 2, 1}},  // butterfly, N = 8
      {{3, 5, 2, 1}, {1, 3, 3, 2}},                // rectangular: 15 × 6 then 6 × 6
      {{2, 3, 5, 7}},                              // a single factor
      {{1, 1, 1, 1}, {1, 1, 1, 1}}};
  for (const auto& ps : chains)
    for (auto L : kLayouts)
      for (int64_t batch : {int64_t(1), int64_t(9)}) {
        check_chain<double>(ps, L, batch, rng);
        check_chain<float>(ps, L, batch, rng);
      }
}

// Every CPU solver, forced, on the shapes of its kernels: radix-2/4 blocks, b != c, edges of
// the tiles (batch 1, a prime, more than one tile), blocks too large for the automatic rule.
TEST(KSFactor, EverySolver) {
  std::mt19937_64 rng(13);
  const KSPattern ps[] = {{2, 2, 2, 2}, {1, 4, 4, 8}, {4, 8, 8, 1}, {3, 5, 7, 2}, {1, 13, 11, 1}, {2, 1, 3, 5}};
  for (const auto& p : ps)
    for (auto L : kLayouts)
      for (int64_t batch : {int64_t(1), int64_t(37), int64_t(131)})
        for (auto s : {KSSolver::Gemm, KSSolver::Tiles}) {
          check_factor<double>(p, L, batch, rng, s);
          check_factor<float>(p, L, batch, rng, s);
        }
  EXPECT_TRUE(KSPlan<float>({2, 2, 2, 2}).tiles());
  EXPECT_TRUE(KSPlan<float>({4, 8, 8, 1}).tiles());
  EXPECT_FALSE(KSPlan<float>({3, 5, 9, 2}).tiles());
  EXPECT_FALSE(KSPlan<float>({2, 2, 2, 2}, KSLayout::BatchFirst, KSSolver::Gemm).tiles());
  EXPECT_THROW(KSPlan<float>({2, 2, 2, 2}, KSLayout::BatchFirst, KSSolver::Fused), strux::ValueError);
}

// butterfly(N, 2) as the builders give it: (2^i, 2, 2, N / 2^(i+1)), K_1 first.
std::vector<KSPattern> butterfly(int64_t n, int64_t radix) {
  std::vector<KSPattern> ps;
  for (int64_t a = 1; a < n; a *= radix) ps.push_back({a, radix, radix, n / (a * radix)});
  return ps;
}

TEST(KSChain, EverySolver) {
  std::mt19937_64 rng(17);
  const std::vector<std::vector<KSPattern>> chains = {
      butterfly(64, 2),                            // 6 stages: merged pairs in the fused forward
      butterfly(32, 2),                            // 5 stages: one left unmerged
      butterfly(64, 4),                            // radix 4
      {{1, 4, 4, 4}, {4, 4, 4, 1}},                // Monarch, N = 16
      {{1, 2, 3, 4}, {3, 2, 2, 2}, {6, 2, 1, 1}},  // rectangular small blocks, no merge
      {{3, 2, 2, 1}, {1, 3, 2, 2}},                // a butterfly-like pair with merged blocks over 4
      {{2, 2, 2, 1}, {1, 2, 1, 2}},                // a merged pair with b != c
      {{3, 5, 2, 1}, {1, 3, 3, 2}}};               // blocks over 8 x 8 forced onto tiles
  for (const auto& ps : chains)
    for (auto L : kLayouts)
      for (int64_t batch : {int64_t(1), int64_t(37), int64_t(70)})
        for (auto s : {KSSolver::Fused, KSSolver::Factors, KSSolver::Gemm}) {
          check_chain<double>(ps, L, batch, rng, s);
          check_chain<float>(ps, L, batch, rng, s);
        }
  EXPECT_TRUE(KSChainPlan<float>(butterfly(1024, 4)).fused());
  EXPECT_FALSE(KSChainPlan<float>(butterfly(1024, 2)).fused());  // radix 2: the pair kernels
  EXPECT_FALSE(KSChainPlan<float>({{1, 32, 32, 32}, {32, 32, 32, 1}}).fused());
  EXPECT_FALSE(KSChainPlan<float>(butterfly(1 << 16, 4)).fused());  // tiles over the cache budget
}

// The radix-2 pair kernels (solver Pairs): vectors of positions (bsf: d below, at and above one
// vector's lanes, N of one vector), batch rows in blocks (1, a prime, several blocks), tiles of
// batch columns (bsl: short and several tiles), factors in any order of d, a repeated d (no
// quad), a != a power of two, a single factor; then the automatic rule and the refusals.
TEST(KSChain, Pairs) {
  std::mt19937_64 rng(19);
  const std::vector<std::vector<KSPattern>> both = {
      butterfly(16, 2), butterfly(256, 2), butterfly(32, 2),
      {{2, 2, 2, 4}, {8, 2, 2, 1}, {4, 2, 2, 2}},   // d = 4, 1, 2 (K_P first: 2, 1, 4)
      {{8, 2, 2, 1}, {8, 2, 2, 1}, {4, 2, 2, 2}}};  // d = 1 twice in a row
  for (const auto& ps : both)
    for (auto L : kLayouts)
      for (int64_t batch : {int64_t(1), int64_t(37), int64_t(130)}) {
        check_chain<double>(ps, L, batch, rng, KSSolver::Pairs);
        check_chain<float>(ps, L, batch, rng, KSSolver::Pairs);
      }
  const std::vector<KSPattern> a3 = {{3, 2, 2, 4}, {6, 2, 2, 2}, {12, 2, 2, 1}};  // N = 24
  for (int64_t batch : {int64_t(1), int64_t(70)}) {
    check_chain<double>(a3, KSLayout::BatchFirst, batch, rng, KSSolver::Pairs);  // 3 vectors of 8
    check_chain<double>(a3, KSLayout::BatchLast, batch, rng, KSSolver::Pairs);
    check_chain<float>(a3, KSLayout::BatchLast, batch, rng, KSSolver::Pairs);
    check_chain<float>({{1, 2, 2, 1}}, KSLayout::BatchLast, batch, rng, KSSolver::Pairs);
  }
  EXPECT_TRUE(KSChainPlan<float>(butterfly(1024, 2)).pairs());
  EXPECT_TRUE(KSChainPlan<double>(butterfly(1024, 2), KSLayout::BatchLast).pairs());
  EXPECT_FALSE(KSChainPlan<float>(a3).pairs());  // bsf float32: 24 is not a whole vector
  EXPECT_TRUE(KSChainPlan<float>(a3).fused());
  EXPECT_FALSE(KSChainPlan<float>(butterfly(1024, 2), KSLayout::BatchFirst, 0, KSSolver::Fused).pairs());
  EXPECT_THROW(KSChainPlan<float>(a3, KSLayout::BatchFirst, 0, KSSolver::Pairs), strux::ValueError);
  EXPECT_THROW(KSChainPlan<float>(butterfly(64, 4), KSLayout::BatchLast, 0, KSSolver::Pairs), strux::ValueError);
  EXPECT_THROW(KSChainPlan<double>({{1, 2, 2, 3}, {3, 2, 2, 1}}, KSLayout::BatchLast, 0, KSSolver::Pairs),
               strux::ValueError);  // d = 3
  EXPECT_THROW(KSPlan<float>({2, 2, 2, 2}, KSLayout::BatchFirst, KSSolver::Pairs), strux::ValueError);
}

// Batch-size-last pairs where y's rows are whole cache lines (batch a multiple of 64 bytes):
// the tile grid starts at y's first line boundary (the columns before it a short tile) and the
// full tiles write y with streaming stores. y at every kind of offset in a line (x at another),
// a batch of one line, several tiles, tiles and a short one at the end; odd and even numbers of
// passes; a NaN in one batch column reaches that column only; nothing outside y is written.
// With bitwise, every column also equals the same chain run on that column alone (batch 1:
// a short tile through scratch, the plain path) bit for bit.
template <class T>
void check_pairs_bsl(std::mt19937_64& rng, const std::vector<int64_t>& batches, const std::vector<int64_t>& offs,
                     bool bitwise) {
  constexpr int64_t kLine = 64 / int64_t(sizeof(T));
  const std::vector<std::vector<KSPattern>> chains = {
      butterfly(64, 2), butterfly(32, 2), {{2, 2, 2, 4}, {8, 2, 2, 1}, {4, 2, 2, 2}}};
  for (const auto& ps : chains)
    for (int64_t batch : batches)
      for (int64_t off : offs) {
        SCOPED_TRACE(testing::Message() << "N " << ps.back().cols() << " batch " << batch << " y offset " << off);
        const int64_t n = ps.back().cols();
        std::vector<double> K;
        std::vector<std::vector<T>> wt;
        std::vector<const T*> wp;
        for (size_t q = 0; q < ps.size(); ++q) {
          const auto w = randn(ps[q].nnz(), rng);
          wt.push_back(cast<T>(w));
          const auto Kq = dense(ps[q], w);
          if (q == 0) {
            K = Kq;
            continue;
          }
          std::vector<double> P(size_t(n * n), 0.0);
          for (int64_t r = 0; r < n; ++r)
            for (int64_t m = 0; m < n; ++m)
              for (int64_t c = 0; c < n; ++c) P[r * n + c] += K[r * n + m] * Kq[m * n + c];
          K = P;
        }
        for (auto& w : wt) wp.push_back(w.data());
        auto x = randn(n * batch, rng);
        KSChainPlan<T> plan(ps, KSLayout::BatchLast, 0, KSSolver::Pairs);
        std::vector<T> cols(size_t(n * batch));  // column by column, batch 1
        for (int64_t t = 0; bitwise && t < batch; ++t) {
          std::vector<T> xc(static_cast<size_t>(n)), yc(static_cast<size_t>(n));
          for (int64_t r = 0; r < n; ++r) xc[size_t(r)] = T(x[size_t(r * batch + t)]);
          plan.forward(xc.data(), wp.data(), yc.data(), 1);
          for (int64_t r = 0; r < n; ++r) cols[size_t(r * batch + t)] = yc[size_t(r)];
        }
        const int64_t nan_col = (off * 7 + 3) % batch;
        // Buffers with room to place x and y at any offset from a 64-byte boundary, y guarded.
        std::vector<T> xbuf(size_t(n * batch + 2 * kLine)), ybuf(size_t(n * batch + 4 * kLine), T(7));
        auto line_start = [](T* p) {
          const uintptr_t a = reinterpret_cast<uintptr_t>(p);
          return reinterpret_cast<T*>((a + 63) / 64 * 64);
        };
        T* xp = line_start(xbuf.data()) + (off + 3) % kLine;
        T* yp = line_start(ybuf.data()) + kLine + off;
        for (int pass = 0; pass < 2; ++pass) {
          if (pass == 1) x[size_t((n / 2) * batch + nan_col)] = NAN;
          for (int64_t e = 0; e < n * batch; ++e) xp[e] = T(x[size_t(e)]);
          plan.forward(xp, wp.data(), yp, batch);
          for (T* g = ybuf.data(); g < yp; ++g) ASSERT_EQ(*g, T(7)) << "written before y";
          for (T* g = yp + n * batch; g < ybuf.data() + ybuf.size(); ++g) ASSERT_EQ(*g, T(7)) << "written after y";
          const std::vector<double> got(yp, yp + n * batch);
          if (pass == 0) {
            EXPECT_LT(rel_err(apply(K, n, n, false, x, batch, KSLayout::BatchLast), got), tol<T>());
            for (int64_t e = 0; bitwise && e < n * batch; ++e)
              ASSERT_EQ(std::memcmp(yp + e, &cols[size_t(e)], sizeof(T)), 0)
                  << "row " << e / batch << " column " << e % batch << " differs from the batch-1 result";
            continue;
          }
          bool hit = false;
          for (int64_t r = 0; r < n; ++r)
            for (int64_t t = 0; t < batch; ++t) {
              if (t == nan_col) hit = hit || std::isnan(got[size_t(r * batch + t)]);
              else ASSERT_FALSE(std::isnan(got[size_t(r * batch + t)])) << "row " << r << " column " << t;
            }
          EXPECT_TRUE(hit) << "the NaN in column " << nan_col << " reached no output";
        }
      }
}

TEST(KSChain, PairsBatchLastWholeLines) {
  std::mt19937_64 rng(23);
  for (int64_t v : {int64_t(16), int64_t(8)}) {  // values per line, float32 / float64
    const std::vector<int64_t> batches = {v, 4 * v, 9 * v}, offs = {0, 1, v / 2 + 1, v - 1};
    if (v == 16) check_pairs_bsl<float>(rng, batches, offs, false);
    else check_pairs_bsl<double>(rng, batches, offs, false);
  }
}

// Ragged rows (a row of y not whole lines, so its rows start at different offsets in a line):
// batches below a line, a tile and a short one, and runs of several tiles (the carry between
// tiles), batch % 16 in {1, 4, 7, 15}; y at every offset in a line; bit for bit the batch-1
// result, within the float64 dense product's tolerance, NaN local, nothing outside y written.
TEST(KSChain, PairsBatchLastRaggedRows) {
  std::mt19937_64 rng(29);
  const std::vector<int64_t> batches = {1, 4, 7, 15, 65, 16 * 9 + 4, 16 * 40 + 7, 16 * 70 + 15, 16 * 70 + 1};
  std::vector<int64_t> o32(16), o64(8);
  for (int64_t k = 0; k < 16; ++k) o32[size_t(k)] = k;
  for (int64_t k = 0; k < 8; ++k) o64[size_t(k)] = k;
  check_pairs_bsl<float>(rng, batches, o32, true);
  check_pairs_bsl<double>(rng, batches, o64, true);
}

TEST(KSChain, GrowsWorkspace) {
  std::mt19937_64 rng(5);
  KSChainPlan<double> plan({{1, 3, 3, 3}, {3, 3, 3, 1}}, KSLayout::BatchFirst, 2);
  for (int64_t batch : {int64_t(2), int64_t(40), int64_t(3)}) {
    auto w0 = randn(27, rng), w1 = randn(27, rng), x = randn(9 * batch, rng);
    const double* w[] = {w0.data(), w1.data()};
    std::vector<double> y(size_t(9 * batch)), t(size_t(9 * batch)), y1(size_t(9 * batch));
    plan.forward(x.data(), w, y.data(), batch);
    KSPlan<double>({3, 3, 3, 1}).forward(x.data(), w1.data(), t.data(), batch);
    KSPlan<double>({1, 3, 3, 3}).forward(t.data(), w0.data(), y1.data(), batch);
    EXPECT_LT(rel_err(y1, y), 1e-14);
  }
}

TEST(KSFactor, NaNPropagatesOnlyAlongSupport) {
  const KSPattern p{2, 3, 2, 2};  // N = 8, M = 12
  std::vector<double> w(size_t(p.nnz()), 1.0), x(size_t(p.cols() * 2), 1.0), y(size_t(p.rows() * 2));
  x[5] = NAN;  // batch 0, column 5: i = 1, l = 0, j = 1
  KSPlan<double>(p).forward(x.data(), w.data(), y.data(), 2);
  for (int64_t r = 0; r < p.rows(); ++r) {
    const bool hit = r / (p.b * p.d) == 1 && r % p.d == 1;
    EXPECT_EQ(std::isnan(y[r]), hit) << "row " << r;
    EXPECT_FALSE(std::isnan(y[p.rows() + r]));
  }
}

TEST(KSErrors, BadArguments) {
  EXPECT_THROW(KSPlan<float>({0, 1, 1, 1}), strux::ValueError);
  EXPECT_THROW(KSPlan<float>({1, 1, -2, 1}), strux::ValueError);
  EXPECT_THROW(strux::ks_layout("bsx"), strux::ValueError);
  EXPECT_EQ(strux::ks_layout("bsl"), KSLayout::BatchLast);
  EXPECT_THROW(KSChainPlan<double>({{1, 2, 3, 1}, {1, 2, 3, 1}}), strux::ValueError);
  EXPECT_THROW(KSChainPlan<double>(std::vector<KSPattern>{}), strux::ValueError);
  float x = 0, w = 0, y = 0;
  EXPECT_THROW(KSPlan<float>({1, 1, 1, 1}).forward(&x, &w, &y, 0), strux::ValueError);
  try {
    KSChainPlan<double>({{1, 2, 2, 1}, {1, 2, 2, 1}, {1, 3, 2, 1}});
    FAIL() << "no throw";
  } catch (const strux::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'patterns'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("entries 1 and 2"), std::string::npos);
  }
}

}  // namespace

// The CPU solver tables through the operator API: options.solver picks the path, describe()
// names it, an unknown name is a ValueError naming 'options.solver'.
TEST(KSSolvers, OperatorOptions) {
  namespace op = strux::op;
  const auto ps = butterfly(64, 2);
  const op::KSChain pairs({ps, 32}, strux::Options{""});
  EXPECT_NE(pairs.describe().find("radix-2 pairs"), std::string::npos) << pairs.describe();
  const op::KSChain forced({ps, 32}, strux::Options{"pairs"});
  EXPECT_NE(forced.describe().find("radix-2 pairs"), std::string::npos) << forced.describe();
  const op::KSChain fused({ps, 32}, strux::Options{"fused"});
  EXPECT_NE(fused.describe().find("fused"), std::string::npos) << fused.describe();
  const op::KSChain gemm({ps, 32}, strux::Options{"gemm"});
  EXPECT_NE(gemm.describe().find("gemm"), std::string::npos) << gemm.describe();
  const op::KSFactor tiles({KSPattern{4, 2, 2, 8}, 32}, strux::Options{"tiles"});
  EXPECT_NE(tiles.describe().find("tile"), std::string::npos) << tiles.describe();
  try {
    op::KSChain bad({ps, 32}, strux::Options{"tiles"});
    ADD_FAILURE() << "expected a ValueError";
  } catch (const strux::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("options.solver"), std::string::npos) << e.what();
  }
}
