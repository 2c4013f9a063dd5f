// The tile kernels of tiles.hpp: per-factor kernels on column-major tiles, the chain drivers.
//
// The build targets x86-64-v2 (SSE), so the per-tile work is compiled three times
// (target_clones: AVX-512, AVX2 + FMA, baseline) and the loader picks the clone the CPU runs;
// the loops over the R rows of a column are plain loops that each clone vectorises at its width.
#include <algorithm>
#include <cstring>

#include "core/checked_size.hpp"
#include "cpu/ks/tiles.hpp"
#include "cpu/ks/transpose.hpp"
#include "cpu/threads.hpp"
#include "strux/core.hpp"

namespace strux::cpu::ks {

namespace {

// Batch rows per tile: one 64-byte line of a column per 16 rows of float (8 of double); two
// lines per column balance the weight broadcasts against the tile's footprint.
template <class T>
constexpr int64_t kRows = 128 / int64_t(sizeof(T));

// Per-thread budget for the ping-pong tiles of the forward pass (bytes): an L2 of 1-2 MiB.
constexpr int64_t kTileBudget = int64_t(1) << 20;

#define STRUX_INLINE [[gnu::always_inline]] inline

// Y[(i b + k) d + j] = sum_l W_ij[k, l] X[(i c + l) d + j], each entry a column of R rows;
// wp packed as wp[((i d + j) b + k) c + l] = w[i, k, l, j]. B, C: compile-time b, c (0: p's).
template <class T, int64_t R, int B, int C>
STRUX_INLINE void factor_fwd(const KSPattern& p, const T* __restrict wp, const T* __restrict X,
                             T* __restrict Y) {
  const int64_t b = B ? B : p.b, c = C ? C : p.c, d = p.d;
  for (int64_t i = 0; i < p.a; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const T* wg = wp + (i * d + j) * b * c;
      const T* xg = X + (i * c * d + j) * R;
      T* yg = Y + (i * b * d + j) * R;
      for (int64_t k = 0; k < b; ++k) {
        const T* wk = wg + k * c;
        T* yk = yg + k * d * R;
        if constexpr (C > 0) {  // one pass, the sum over l unrolled in registers
          for (int64_t r = 0; r < R; ++r) {
            T s = wk[0] * xg[r];
            for (int64_t l = 1; l < C; ++l) s += wk[l] * xg[l * d * R + r];
            yk[r] = s;
          }
        } else {  // written straight into y (a copy out of a local array stalls on store forwarding)
          for (int64_t r = 0; r < R; ++r) yk[r] = wk[0] * xg[r];
          for (int64_t l = 1; l < c; ++l)
            for (int64_t r = 0; r < R; ++r) yk[r] += wk[l] * xg[l * d * R + r];
        }
      }
    }
}

// The transposed product G' = G K: G'[(i c + l) d + j] = sum_k W_ij[k, l] G[(i b + k) d + j].
template <class T, int64_t R, int B, int C>
STRUX_INLINE void factor_bwd(const KSPattern& p, const T* __restrict wp, const T* __restrict G,
                             T* __restrict Gx) {
  const int64_t b = B ? B : p.b, c = C ? C : p.c, d = p.d;
  for (int64_t i = 0; i < p.a; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const T* wg = wp + (i * d + j) * b * c;
      const T* gg = G + (i * b * d + j) * R;
      T* og = Gx + (i * c * d + j) * R;
      for (int64_t l = 0; l < c; ++l) {
        T* ol = og + l * d * R;
        if constexpr (B > 0) {
          for (int64_t r = 0; r < R; ++r) {
            T s = wg[l] * gg[r];
            for (int64_t k = 1; k < B; ++k) s += wg[k * c + l] * gg[k * d * R + r];
            ol[r] = s;
          }
        } else {
          for (int64_t r = 0; r < R; ++r) ol[r] = wg[l] * gg[r];
          for (int64_t k = 1; k < b; ++k)
            for (int64_t r = 0; r < R; ++r) ol[r] += wg[k * c + l] * gg[k * d * R + r];
        }
      }
    }
}

// Lanes of the dW accumulators: one 64-byte vector per weight, so that a tile's row sums add
// lane-wise and the horizontal sum is done once per call, not once per tile -- where the
// accumulators of all the factors stay within kLaneBudget (in L2 next to the tiles); else one
// lane (a horizontal sum per weight and tile).
template <class T>
constexpr int64_t kLanes = 64 / int64_t(sizeof(T));
constexpr int64_t kLaneBudget = int64_t(1) << 21;

// dW (packed like wp, V lanes per weight) += the tile's sums over rows of
// G[(i b + k) d + j] X[(i c + l) d + j], lane r % V taking row r.
template <class T, int64_t R, int B, int C, int64_t V>
STRUX_INLINE void factor_dw(const KSPattern& p, const T* __restrict G, const T* __restrict X, T* __restrict dW) {
  static_assert(R % V == 0, "tile rows must fill whole lanes");
  const int64_t b = B ? B : p.b, c = C ? C : p.c, d = p.d;
  for (int64_t i = 0; i < p.a; ++i)
    for (int64_t j = 0; j < d; ++j) {
      T* dg = dW + (i * d + j) * b * c * V;
      const T* gg = G + (i * b * d + j) * R;
      const T* xg = X + (i * c * d + j) * R;
      for (int64_t k = 0; k < b; ++k)
        for (int64_t l = 0; l < c; ++l) {
          const T* gk = gg + k * d * R;
          const T* xl = xg + l * d * R;
          T* acc = dg + (k * c + l) * V;
          for (int64_t r0 = 0; r0 < R; r0 += V)
            for (int64_t u = 0; u < V; ++u) acc[u] += gk[r0 + u] * xl[r0 + u];
        }
    }
}

// One kernel call of a factor, compile-time block sizes for the common radix-2/4 shapes.
enum class Op { Fwd, Bwd, Dw };

template <Op op, class T, int64_t R, int B, int C, int64_t V>
STRUX_INLINE void call(const KSPattern& p, const T* w, const T* in, const T* in2, T* out) {
  if constexpr (op == Op::Fwd) factor_fwd<T, R, B, C>(p, w, in, out);
  else if constexpr (op == Op::Bwd) factor_bwd<T, R, B, C>(p, w, in, out);
  else factor_dw<T, R, B, C, V>(p, in, in2, out);
}

template <Op op, class T, int64_t V = 1>
STRUX_INLINE void factor_op(const KSPattern& p, const T* w, const T* in, const T* in2, T* out) {
  constexpr int64_t R = kRows<T>;
  if (p.b == 2 && p.c == 2) call<op, T, R, 2, 2, V>(p, w, in, in2, out);
  else if (p.b == 4 && p.c == 4) call<op, T, R, 4, 4, V>(p, w, in, in2, out);
  else if (p.b == 8 && p.c == 8) call<op, T, R, 8, 8, V>(p, w, in, in2, out);
  else call<op, T, R, 0, 0, V>(p, w, in, in2, out);
}

template <class T>
struct Chain {
  const KSPattern* ps;
  int64_t P;
  const T* const* wp;  // packed weights per factor
  bool lanes = false;  // dW accumulators with kLanes lanes (else one)
};

// Forward through every factor on one tile: in `a` on entry; returns the buffer holding y.
template <class T>
STRUX_INLINE T* chain_fwd(const Chain<T>& ch, T* a, T* b) {
  for (int64_t q = ch.P - 1; q >= 0; --q) {
    factor_op<Op::Fwd, T>(ch.ps[q], ch.wp[q], a, nullptr, b);
    std::swap(a, b);
  }
  return a;
}

// Backward on one tile: acts[P-1] holds the x tile, g the dy tile. Fills acts[q] (input of
// factor q), accumulates dW[q] (packed; skipped where null), returns the dx tile (in g or g2;
// null when !want_dx).
template <class T>
STRUX_INLINE T* chain_bwd(const Chain<T>& ch, T* const* acts, T* g, T* g2, T* const* dW, bool want_dx) {
  for (int64_t q = ch.P - 1; q >= 1; --q) factor_op<Op::Fwd, T>(ch.ps[q], ch.wp[q], acts[q], nullptr, acts[q - 1]);
  for (int64_t q = 0; q < ch.P; ++q) {
    if (dW[q] && ch.lanes) factor_op<Op::Dw, T, kLanes<T>>(ch.ps[q], nullptr, g, acts[q], dW[q]);
    else if (dW[q]) factor_op<Op::Dw, T, 1>(ch.ps[q], nullptr, g, acts[q], dW[q]);
    if (q + 1 == ch.P && !want_dx) return nullptr;
    factor_op<Op::Bwd, T>(ch.ps[q], ch.wp[q], g, nullptr, g2);
    std::swap(g, g2);
  }
  return g;
}

#define STRUX_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
STRUX_CLONES float* tile_fwd(const Chain<float>& c, float* a, float* b) { return chain_fwd(c, a, b); }
STRUX_CLONES double* tile_fwd(const Chain<double>& c, double* a, double* b) { return chain_fwd(c, a, b); }
STRUX_CLONES float* tile_bwd(const Chain<float>& c, float* const* acts, float* g, float* g2, float* const* dW,
                             bool want_dx) {
  return chain_bwd(c, acts, g, g2, dW, want_dx);
}
STRUX_CLONES double* tile_bwd(const Chain<double>& c, double* const* acts, double* g, double* g2,
                              double* const* dW, bool want_dx) {
  return chain_bwd(c, acts, g, g2, dW, want_dx);
}
#undef STRUX_CLONES

// Packed weights of every factor: wp[((i d + j) b + k) c + l] = w[i, k, l, j].
template <class T>
std::vector<T> pack_all(const std::vector<KSPattern>& ps, const T* const* w, std::vector<int64_t>& off) {
  off.assign(ps.size() + 1, 0);
  for (size_t q = 0; q < ps.size(); ++q) off[q + 1] = off[q] + ps[q].nnz();
  std::vector<T> out(size_t(off.back()));
  for (size_t q = 0; q < ps.size(); ++q) {
    const KSPattern& p = ps[q];
    T* o = out.data() + off[q];
    for (int64_t i = 0; i < p.a; ++i)
      for (int64_t k = 0; k < p.b; ++k)
        for (int64_t l = 0; l < p.c; ++l)
          for (int64_t j = 0; j < p.d; ++j)
            o[((i * p.d + j) * p.b + k) * p.c + l] = w[q][((i * p.b + k) * p.c + l) * p.d + j];
  }
  return out;
}

// Forward only: two consecutive factors K_q (applied first, (a1, b1, c1, d1)) and K_{q-1}
// ((a2, b2, c2, d2)) with a2 = a1 b1 and d1 = c2 d2 -- consecutive butterfly stages -- are one
// KS factor (a1, b1 b2, c1 c2, d2) whose weights are single products
//   W[i1, (k1, k2), (l1, l2), j2] = w_{q-1}[i1 b1 + k1, k2, l2, j2] w_q[i1, k1, l1, l2 d2 + j2].
// For radix 2 the merged 4 x 4 blocks take exactly the FMAs of the two stages, in half the
// passes over the tile. Merged only up to 4 x 4 blocks (beyond, the dense block costs more
// FMAs than the stages). The backward pass needs every stage's input, so it does not merge.
struct Merged {
  std::vector<KSPattern> ps;       // K_1 first, like the input
  std::vector<int64_t> first, second;  // per merged factor: input factor indices (second = -1: alone)
};

inline Merged merge_pairs(const std::vector<KSPattern>& ps) {
  Merged m;
  for (int64_t q = int64_t(ps.size()) - 1; q >= 0; --q) {
    const KSPattern& f = ps[size_t(q)];
    if (q >= 1) {
      const KSPattern& g = ps[size_t(q - 1)];
      if (g.a == f.a * f.b && f.d == g.c * g.d && f.b * g.b <= 4 && f.c * g.c <= 4) {
        m.ps.push_back({f.a, f.b * g.b, f.c * g.c, g.d});
        m.first.push_back(q);
        m.second.push_back(q - 1);
        --q;
        continue;
      }
    }
    m.ps.push_back(f);
    m.first.push_back(q);
    m.second.push_back(-1);
  }
  std::reverse(m.ps.begin(), m.ps.end());
  std::reverse(m.first.begin(), m.first.end());
  std::reverse(m.second.begin(), m.second.end());
  return m;
}

// Packed weights of the merged factors (layout of pack_all).
template <class T>
std::vector<T> pack_merged(const Merged& m, const std::vector<KSPattern>& ps, const T* const* w,
                           std::vector<int64_t>& off) {
  off.assign(m.ps.size() + 1, 0);
  for (size_t q = 0; q < m.ps.size(); ++q) off[q + 1] = off[q] + m.ps[q].nnz();
  std::vector<T> out(size_t(off.back()));
  for (size_t q = 0; q < m.ps.size(); ++q) {
    const KSPattern& M = m.ps[q];
    T* o = out.data() + off[q];
    const KSPattern& f = ps[size_t(m.first[q])];
    const T* wf = w[m.first[q]];
    if (m.second[q] < 0) {
      for (int64_t i = 0; i < f.a; ++i)
        for (int64_t k = 0; k < f.b; ++k)
          for (int64_t l = 0; l < f.c; ++l)
            for (int64_t j = 0; j < f.d; ++j)
              o[((i * f.d + j) * f.b + k) * f.c + l] = wf[((i * f.b + k) * f.c + l) * f.d + j];
      continue;
    }
    const KSPattern& g = ps[size_t(m.second[q])];
    const T* wg = w[m.second[q]];
    for (int64_t i1 = 0; i1 < f.a; ++i1)
      for (int64_t j2 = 0; j2 < g.d; ++j2)
        for (int64_t k1 = 0; k1 < f.b; ++k1)
          for (int64_t k2 = 0; k2 < g.b; ++k2)
            for (int64_t l1 = 0; l1 < f.c; ++l1)
              for (int64_t l2 = 0; l2 < g.c; ++l2) {
                const T a2 = wg[(((i1 * f.b + k1) * g.b + k2) * g.c + l2) * g.d + j2];
                const T a1 = wf[((i1 * f.b + k1) * f.c + l1) * f.d + l2 * g.d + j2];
                o[((i1 * M.d + j2) * M.b + k1 * g.b + k2) * M.c + l1 * g.c + l2] = a2 * a1;
              }
  }
  return out;
}

// Batch-size-last rows are batch values apart (a short run of each, rows 16 KiB apart at batch
// 4096: the hardware prefetchers stay idle), so the copies fetch the run kAhead rows ahead into
// L2 (each line of it, the last too: it need not start on one). The whole tile backward of
// butterfly(1024, 2), batch 4096, ran 0.83-0.88x, a radix-4 forward 0.69-0.87x
// (bench/NOTES-cpu.md "ks bsl").
constexpr int64_t kAhead = 32;
template <int RW, class T>
STRUX_INLINE void fetch_run(const T* p, int64_t n) {
  constexpr int64_t kLine = 64 / int64_t(sizeof(T));
  for (int64_t o = 0; o < n; o += kLine) __builtin_prefetch(p + o, RW, 2);
  __builtin_prefetch(p + n - 1, RW, 2);
}

// Tile <-> activation rows t0 .. t0 + n (n <= R; a short tile's other columns are zero).
template <class T>
void load_tile(const T* x, int64_t width, int64_t batch, KSLayout layout, int64_t t0, int64_t n, T* tile) {
  constexpr int64_t R = kRows<T>;
  if (n < R)
    for (int64_t q = 0; q < width; ++q) std::fill(tile + q * R + n, tile + (q + 1) * R, T(0));
  if (layout == KSLayout::BatchFirst)
    transpose(x + t0 * width, width, tile, R, n, width);  // tile[q R + r] = x[(t0 + r) width + q]
  else
    for (int64_t q = 0; q < width; ++q) {
      if (q + kAhead < width) fetch_run<0>(x + (q + kAhead) * batch + t0, n);
      std::memcpy(tile + q * R, x + q * batch + t0, size_t(n) * sizeof(T));
    }
}

template <class T>
void store_tile(const T* tile, int64_t width, int64_t batch, KSLayout layout, int64_t t0, int64_t n, T* y) {
  constexpr int64_t R = kRows<T>;
  if (layout == KSLayout::BatchFirst)  // y[(t0 + r) width + q] = tile[q R + r], 4 rows of y at a time
    for (int64_t r0 = 0; r0 < n; r0 += 4)  // (all of one row before the next: no 4 KiB-strided sweep)
      transpose(tile + r0, R, y + (t0 + r0) * width, width, width, std::min<int64_t>(4, n - r0));
  else
    for (int64_t q = 0; q < width; ++q) {
      if (q + kAhead < width) fetch_run<1>(y + (q + kAhead) * batch + t0, n);
      std::memcpy(y + q * batch + t0, tile + q * R, size_t(n) * sizeof(T));
    }
}

int64_t widest(const std::vector<KSPattern>& ps) {
  int64_t m = 0;
  for (const KSPattern& p : ps) m = std::max({m, p.rows(), p.cols()});
  return m;
}

}  // namespace

bool tiles_suit(const std::vector<KSPattern>& ps, int64_t elem_size) {
  for (const KSPattern& p : ps)
    if (p.b > 8 || p.c > 8) return false;
  return 2 * widest(ps) * (128 / elem_size) * elem_size <= kTileBudget;
}

template <class T>
void tiles_forward(const std::vector<KSPattern>& ps, KSLayout layout, const T* x, const T* const* w, T* y,
                   int64_t batch) {
  constexpr int64_t R = kRows<T>;
  static TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const Team team(tuner);
  const int nt = num_threads();
  const Merged mg = merge_pairs(ps);
  std::vector<int64_t> off;
  const std::vector<T> wpk = pack_merged(mg, ps, w, off);
  std::vector<const T*> wp(mg.ps.size());
  for (size_t q = 0; q < mg.ps.size(); ++q) wp[q] = wpk.data() + off[q];
  const Chain<T> ch{mg.ps.data(), int64_t(mg.ps.size()), wp.data()};
  const int64_t W = widest(ps), N = ps.back().cols(), M = ps.front().rows();
  const int64_t ntiles = (batch + R - 1) / R;
  std::vector<T> bufs(size_t(checked_count("batch", {int64_t(nt), 2 * W * R})));  // before the region
#pragma omp parallel num_threads(nt)
  {
    T* b0 = bufs.data() + int64_t(thread_index()) * 2 * W * R;
    T* b1 = b0 + W * R;
#pragma omp for schedule(dynamic, 4)
    for (int64_t t = 0; t < ntiles; ++t) {
      const int64_t t0 = t * R, n = std::min(R, batch - t0);
      load_tile(x, N, batch, layout, t0, n, b0);
      const T* out = tile_fwd(ch, b0, b1);
      store_tile(out, M, batch, layout, t0, n, y);
    }
  }
}

template <class T>
void tiles_backward(const std::vector<KSPattern>& ps, KSLayout layout, const T* dy, const T* x, const T* const* w,
                    T* dx, T* const* dw, int64_t batch) {
  constexpr int64_t R = kRows<T>;
  const int64_t P = int64_t(ps.size());
  bool any_dw = false;
  for (int64_t q = 0; dw && q < P; ++q) any_dw = any_dw || dw[q];
  if (!dx && !any_dw) return;
  static TeamTuner tuner;
  const Team team(tuner);
  const int nt = num_threads();
  std::vector<int64_t> off;
  const std::vector<T> wpk = pack_all(ps, w, off);
  std::vector<const T*> wp(static_cast<size_t>(P));
  for (int64_t q = 0; q < P; ++q) wp[q] = wpk.data() + off[q];
  Chain<T> ch{ps.data(), P, wp.data()};
  const int64_t W = widest(ps), N = ps.back().cols(), M = ps.front().rows();
  const int64_t ntiles = (batch + R - 1) / R;
  // Per thread: the inputs of every factor and two cotangent tiles.
  std::vector<int64_t> act_off(size_t(P) + 1, 0);
  for (int64_t q = 0; q < P; ++q) act_off[q + 1] = act_off[q] + ps[q].cols() * R;
  const int64_t per_thread = act_off[P] + 2 * W * R;
  // dW: one packed accumulator per part; a part is a fixed contiguous run of tiles summed in
  // order, and the parts are added in order at the end. Without dW every tile is a part.
  const int64_t nparts = any_dw ? std::min<int64_t>(partition_threads(), ntiles) : ntiles;
  const int64_t nnz_all = off[P];
  const int nrun = int(std::min<int64_t>(nt, nparts));
  // Everything the region uses is allocated before it (an exception may not leave a region).
  std::vector<T> bufs(size_t(checked_count("batch", {int64_t(nrun), per_thread})));
  const bool lanes = nnz_all * kLanes<T> * int64_t(sizeof(T)) <= kLaneBudget;
  const int64_t V = lanes ? kLanes<T> : 1;
  ch.lanes = lanes;
  std::vector<T> acc(any_dw ? size_t(checked_count("batch", {nparts, nnz_all, V})) : 0, T(0));
  std::vector<T*> ptrs(size_t(2 * P * nrun), nullptr);  // per thread: acts[P], dW[P]
#pragma omp parallel num_threads(nrun)
  {
    T* base = bufs.data() + int64_t(thread_index()) * per_thread;
    T** acts = ptrs.data() + int64_t(thread_index()) * 2 * P;
    T** dW = acts + P;
    for (int64_t q = 0; q < P; ++q) acts[q] = base + act_off[q];
    T* g = base + act_off[P];
    T* g2 = g + W * R;
#pragma omp for schedule(dynamic)
    for (int64_t part = 0; part < nparts; ++part) {
      for (int64_t q = 0; q < P; ++q)
        dW[q] = (any_dw && dw[q]) ? acc.data() + (part * nnz_all + off[q]) * V : nullptr;
      const int64_t first = part * ntiles / nparts, last = (part + 1) * ntiles / nparts;
      for (int64_t t = first; t < last; ++t) {
        const int64_t t0 = t * R, n = std::min(R, batch - t0);
        load_tile(x, N, batch, layout, t0, n, acts[P - 1]);
        load_tile(dy, M, batch, layout, t0, n, g);
        const T* gx = tile_bwd(ch, acts, g, g2, dW, dx != nullptr);
        if (dx) store_tile(gx, N, batch, layout, t0, n, dx);
      }
    }
  }
  if (!any_dw) return;
  for (int64_t q = 0; q < P; ++q) {
    if (!dw[q]) continue;
    const KSPattern& p = ps[q];
    for (int64_t i = 0; i < p.a; ++i)
      for (int64_t k = 0; k < p.b; ++k)
        for (int64_t l = 0; l < p.c; ++l)
          for (int64_t j = 0; j < p.d; ++j) {
            const int64_t e = off[q] + ((i * p.d + j) * p.b + k) * p.c + l;
            T s = 0;
            for (int64_t part = 0; part < nparts; ++part)
              for (int64_t u = 0; u < V; ++u) s += acc[(part * nnz_all + e) * V + u];
            dw[q][((i * p.b + k) * p.c + l) * p.d + j] = s;
          }
  }
}

template void tiles_forward<float>(const std::vector<KSPattern>&, KSLayout, const float*, const float* const*,
                                   float*, int64_t);
template void tiles_forward<double>(const std::vector<KSPattern>&, KSLayout, const double*, const double* const*,
                                    double*, int64_t);
template void tiles_backward<float>(const std::vector<KSPattern>&, KSLayout, const float*, const float*,
                                    const float* const*, float*, float* const*, int64_t);
template void tiles_backward<double>(const std::vector<KSPattern>&, KSLayout, const double*, const double*,
                                     const double* const*, double*, double* const*, int64_t);

}  // namespace strux::cpu::ks
