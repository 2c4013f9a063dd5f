// The pair kernels of pairs.hpp: radix-2 factors on blocks of batch rows, positions as lanes.
//
// As in tiles.cpp, the build targets x86-64-v2, so each block's work is compiled three times
// (target_clones: AVX-512, AVX2 + FMA, baseline); the 64-byte vectors (pairs_vec.hpp) are GCC
// vector types, one zmm register in the AVX-512 clone, two ymm / four xmm in the others. The
// batch-size-last forward is pairs_bsl.cpp.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/checked_size.hpp"
#include "cpu/ks/pairs.hpp"
#include "cpu/ks/pairs_vec.hpp"
#include "cpu/threads.hpp"
#include "strux/core.hpp"

namespace strux::cpu::ks {

namespace {

// Rows per block: the block (rows x N) within 16 KiB, so it stays in a 32-48 KiB L1 next to
// the weight vectors streaming through; the backward's per-factor inputs (P blocks) sit in L2.
constexpr int64_t kBlockBytes = int64_t(16) << 10;

// Lane t takes lane t ^ D (the partner position of a factor with d = D < V). GCC's
// __builtin_shuffle (GCC >= 4.7; __builtin_shufflevector only from GCC 12), clang's
// __builtin_shufflevector.
#if defined(__clang__)
#define STRUX_SWAP16(v, D)                                                                                   \
  __builtin_shufflevector(v, v, 0 ^ D, 1 ^ D, 2 ^ D, 3 ^ D, 4 ^ D, 5 ^ D, 6 ^ D, 7 ^ D, 8 ^ D, 9 ^ D, 10 ^ D, \
                          11 ^ D, 12 ^ D, 13 ^ D, 14 ^ D, 15 ^ D)
#define STRUX_SWAP8(v, D) __builtin_shufflevector(v, v, 0 ^ D, 1 ^ D, 2 ^ D, 3 ^ D, 4 ^ D, 5 ^ D, 6 ^ D, 7 ^ D)
#else
typedef int32_t vi32 __attribute__((vector_size(64)));
typedef int64_t vi64 __attribute__((vector_size(64)));
#define STRUX_SWAP16(v, D)                                                                                  \
  __builtin_shuffle(v, vi32{0 ^ D, 1 ^ D, 2 ^ D, 3 ^ D, 4 ^ D, 5 ^ D, 6 ^ D, 7 ^ D, 8 ^ D, 9 ^ D, 10 ^ D, \
                            11 ^ D, 12 ^ D, 13 ^ D, 14 ^ D, 15 ^ D})
#define STRUX_SWAP8(v, D) __builtin_shuffle(v, vi64{0 ^ D, 1 ^ D, 2 ^ D, 3 ^ D, 4 ^ D, 5 ^ D, 6 ^ D, 7 ^ D})
#endif
template <int D>
STRUX_INLINE vf swap(vf v) {
  return STRUX_SWAP16(v, D);
}
template <int D>
STRUX_INLINE vd swap(vd v) {
  return STRUX_SWAP8(v, D);
}
#undef STRUX_SWAP16
#undef STRUX_SWAP8

// ---- forward: dst[p] = wd[p] src[p] + wo[p] src[p ^ d] on every row of the block ------------
// src may be dst (in place: each pair is read before it is written).

template <class T, int D>  // d = D < V: pairs of lanes
STRUX_INLINE void fwd_lanes(const T* __restrict wd, const T* __restrict wo, const T* src, T* dst, int64_t n,
                            int64_t rows) {
  for (int64_t p = 0; p < n; p += kV<T>) {
    const Vec<T> a = ld(wd + p), b = ld(wo + p);
    for (int64_t r = 0; r < rows; ++r) {
      const Vec<T> x = ld(src + r * n + p);
      st(dst + r * n + p, a * x + b * swap<D>(x));
    }
  }
}

template <class T>  // d >= V (a multiple of V): pairs of vectors
STRUX_INLINE void fwd_vecs(int64_t d, const T* __restrict wd, const T* __restrict wo, const T* src, T* dst,
                           int64_t n, int64_t rows) {
  for (int64_t base = 0; base < n; base += 2 * d)
    for (int64_t p = base; p < base + d; p += kV<T>) {
      const int64_t q = p + d;
      const Vec<T> a0 = ld(wd + p), b0 = ld(wo + p), a1 = ld(wd + q), b1 = ld(wo + q);
      for (int64_t r = 0; r < rows; ++r) {
        const Vec<T> x0 = ld(src + r * n + p), x1 = ld(src + r * n + q);
        st(dst + r * n + p, a0 * x0 + b0 * x1);
        st(dst + r * n + q, a1 * x1 + b1 * x0);
      }
    }
}

// Two vector stages d1 != d2 (both >= V) in one pass: the quad of vectors at p, p + d1, p + d2,
// p + d1 + d2 is closed under both, so it goes through both in registers.
template <class T>
STRUX_INLINE void fwd_vecs2(int64_t d1, int64_t d2, const T* __restrict w1, const T* __restrict w2, const T* src,
                            T* dst, int64_t n, int64_t rows) {
  const int64_t lo = std::min(d1, d2), hi = std::max(d1, d2);
  for (int64_t q = 0; q < n / 4; q += kV<T>) {
    const int64_t p0 = spread(spread(q, lo), hi), p1 = p0 + d1, p2 = p0 + d2, p3 = p1 + d2;
    const Vec<T> a0 = ld(w1 + p0), a1 = ld(w1 + p1), a2 = ld(w1 + p2), a3 = ld(w1 + p3);
    const Vec<T> b0 = ld(w1 + n + p0), b1 = ld(w1 + n + p1), b2 = ld(w1 + n + p2), b3 = ld(w1 + n + p3);
    const Vec<T> c0 = ld(w2 + p0), c1 = ld(w2 + p1), c2 = ld(w2 + p2), c3 = ld(w2 + p3);
    const Vec<T> e0 = ld(w2 + n + p0), e1 = ld(w2 + n + p1), e2 = ld(w2 + n + p2), e3 = ld(w2 + n + p3);
    for (int64_t r = 0; r < rows; ++r) {
      const T* sr = src + r * n;
      T* dr = dst + r * n;
      const Vec<T> x0 = ld(sr + p0), x1 = ld(sr + p1), x2 = ld(sr + p2), x3 = ld(sr + p3);
      const Vec<T> y0 = a0 * x0 + b0 * x1, y1 = a1 * x1 + b1 * x0;  // pairs under d1
      const Vec<T> y2 = a2 * x2 + b2 * x3, y3 = a3 * x3 + b3 * x2;
      st(dr + p0, c0 * y0 + e0 * y2);  // pairs under d2
      st(dr + p2, c2 * y2 + e2 * y0);
      st(dr + p1, c1 * y1 + e1 * y3);
      st(dr + p3, c3 * y3 + e3 * y1);
    }
  }
}

template <class T>
STRUX_INLINE void fwd_stage(int64_t d, const T* wd, const T* wo, const T* src, T* dst, int64_t n, int64_t rows) {
  if (d >= kV<T>) fwd_vecs<T>(d, wd, wo, src, dst, n, rows);
  else if (d == 1) fwd_lanes<T, 1>(wd, wo, src, dst, n, rows);
  else if (d == 2) fwd_lanes<T, 2>(wd, wo, src, dst, n, rows);
  else if (d == 4) fwd_lanes<T, 4>(wd, wo, src, dst, n, rows);
  else if constexpr (kV<T> > 8) fwd_lanes<T, 8>(wd, wo, src, dst, n, rows);
}

// ---- backward of one factor: G = whether g' = g K is wanted, DW = whether dW is -------------
// gd[p] = wd[p] gs[p] + wt[p] gs[p ^ d] (wt[p] = wo[p ^ d]), and per position, summed over the
// block's rows and added to the accumulators: dwd[p] += gs[p] a[p], dwo[p] += gs[p] a[p ^ d]
// (a: the factor's input). gs may be gd.

template <class T, int D, bool G, bool DW>
STRUX_INLINE void bwd_lanes(const T* __restrict wd, const T* __restrict wt, const T* __restrict a, const T* gs,
                            T* gd, T* __restrict dwd, T* __restrict dwo, int64_t n, int64_t rows) {
  for (int64_t p = 0; p < n; p += kV<T>) {
    const Vec<T> A = ld(wd + p), B = ld(wt + p);
    Vec<T> sd = {}, so = {};
    for (int64_t r = 0; r < rows; ++r) {
      const Vec<T> g = ld(gs + r * n + p);
      if constexpr (DW) {
        const Vec<T> x = ld(a + r * n + p);
        sd += g * x;
        so += g * swap<D>(x);
      }
      if constexpr (G) st(gd + r * n + p, A * g + B * swap<D>(g));
    }
    if constexpr (DW) {
      st(dwd + p, ld(dwd + p) + sd);
      st(dwo + p, ld(dwo + p) + so);
    }
  }
}

template <class T, bool G, bool DW>
STRUX_INLINE void bwd_vecs(int64_t d, const T* __restrict wd, const T* __restrict wt, const T* __restrict a,
                           const T* gs, T* gd, T* __restrict dwd, T* __restrict dwo, int64_t n, int64_t rows) {
  for (int64_t base = 0; base < n; base += 2 * d)
    for (int64_t p = base; p < base + d; p += kV<T>) {
      const int64_t q = p + d;
      const Vec<T> A0 = ld(wd + p), B0 = ld(wt + p), A1 = ld(wd + q), B1 = ld(wt + q);
      Vec<T> sd0 = {}, so0 = {}, sd1 = {}, so1 = {};
      for (int64_t r = 0; r < rows; ++r) {
        const Vec<T> g0 = ld(gs + r * n + p), g1 = ld(gs + r * n + q);
        if constexpr (DW) {
          const Vec<T> x0 = ld(a + r * n + p), x1 = ld(a + r * n + q);
          sd0 += g0 * x0;
          so0 += g0 * x1;
          sd1 += g1 * x1;
          so1 += g1 * x0;
        }
        if constexpr (G) {
          st(gd + r * n + p, A0 * g0 + B0 * g1);
          st(gd + r * n + q, A1 * g1 + B1 * g0);
        }
      }
      if constexpr (DW) {
        st(dwd + p, ld(dwd + p) + sd0);
        st(dwo + p, ld(dwo + p) + so0);
        st(dwd + q, ld(dwd + q) + sd1);
        st(dwo + q, ld(dwo + q) + so1);
      }
    }
}

template <class T, bool G, bool DW>
STRUX_INLINE void bwd_stage(int64_t d, const T* wd, const T* wt, const T* a, const T* gs, T* gd, T* dwd, T* dwo,
                            int64_t n, int64_t rows) {
  if (d >= kV<T>) bwd_vecs<T, G, DW>(d, wd, wt, a, gs, gd, dwd, dwo, n, rows);
  else if (d == 1) bwd_lanes<T, 1, G, DW>(wd, wt, a, gs, gd, dwd, dwo, n, rows);
  else if (d == 2) bwd_lanes<T, 2, G, DW>(wd, wt, a, gs, gd, dwd, dwo, n, rows);
  else if (d == 4) bwd_lanes<T, 4, G, DW>(wd, wt, a, gs, gd, dwd, dwo, n, rows);
  else if constexpr (kV<T> > 8) bwd_lanes<T, 8, G, DW>(wd, wt, a, gs, gd, dwd, dwo, n, rows);
}


// Consecutive lane stages d = Ds... (a butterfly's first log2(V) factors: 1, 2, 4, 8) in one
// pass: each vector is loaded once, goes through all of them in registers, stored once.
// w: the first one's wd (stage g's wd at w + 2 g n, wo at w + (2 g + 1) n).
// With PF (the pass that reads x), each vector also prefetches the same place of the next block
// of x and y (pfx, pfy): from memory, x is read ~2x slower than a plain copy without it (the
// block's passes leave the hardware prefetchers idle between blocks).
template <class T, bool PF, int... Ds>
STRUX_INLINE void fwd_lane_run(const T* __restrict w, const T* src, T* dst, int64_t n, int64_t rows,
                               const T* pfx = nullptr, T* pfy = nullptr) {
  constexpr int K = sizeof...(Ds);
  for (int64_t p = 0; p < n; p += kV<T>) {
    Vec<T> a[K], b[K];
    for (int g = 0; g < K; ++g) a[g] = ld(w + 2 * g * n + p), b[g] = ld(w + (2 * g + 1) * n + p);
    for (int64_t r = 0; r < rows; ++r) {
      if constexpr (PF) {
        __builtin_prefetch(pfx + r * n + p, 0, 3);
        __builtin_prefetch(pfy + r * n + p, 1, 3);
      }
      Vec<T> x = ld(src + r * n + p);
      int g = 0;
      ((x = a[g] * x + b[g] * swap<Ds>(x), ++g), ...);
      st(dst + r * n + p, x);
    }
  }
}

// Whether stages s .. s + k - 1 have d = 1, 2, 4, ... (k of them).
inline bool lane_run(const int64_t* d, int64_t s, int64_t P, int64_t k) {
  if (s + k > P) return false;
  for (int64_t g = 0; g < k; ++g)
    if (d[s + g] != int64_t(1) << g) return false;
  return true;
}

// next_rows: the rows of the block after this one (0: none), prefetched by the first pass.
template <class T>
STRUX_INLINE void chain_fwd(const Stages<T>& S, const T* x, T* y, int64_t rows, int64_t next_rows) {
  const int64_t n = S.n;
  for (int64_t s = 0; s < S.P;) {
    const T* src = s == 0 ? x : y;
    const T* w = S.w + 2 * s * n;
    const bool pf = s == 0 && next_rows >= rows;  // the next block covers this one's shape
    if constexpr (kV<T> == 16) {
      if (lane_run(S.d, s, S.P, 4)) {
        if (pf) fwd_lane_run<T, true, 1, 2, 4, 8>(w, src, y, n, rows, x + rows * n, y + rows * n);
        else fwd_lane_run<T, false, 1, 2, 4, 8>(w, src, y, n, rows);
        s += 4;
        continue;
      }
    }
    if (lane_run(S.d, s, S.P, 3)) {
      if (pf) fwd_lane_run<T, true, 1, 2, 4>(w, src, y, n, rows, x + rows * n, y + rows * n);
      else fwd_lane_run<T, false, 1, 2, 4>(w, src, y, n, rows);
      s += 3;
      continue;
    }
    if (s + 1 < S.P && S.d[s] >= kV<T> && S.d[s + 1] >= kV<T> && S.d[s] != S.d[s + 1]) {
      fwd_vecs2<T>(S.d[s], S.d[s + 1], w, w + 2 * n, src, y, n, rows);
      s += 2;
      continue;
    }
    fwd_stage<T>(S.d[s], w, w + n, src, y, n, rows);
    s += 1;
  }
}

// acts[s] (s >= 1) receive the inputs of stage s (stage 0's is x); g: the cotangent rows
// (dx's rows or scratch); dW: 2 n accumulators per stage (dwd, dwo), used where want_dw[s].
template <class T>
STRUX_INLINE void chain_bwd(const Stages<T>& S, const T* x, const T* dy, T* const* acts, T* g, bool want_dx,
                            T* dW, const unsigned char* want_dw, int64_t rows) {
  const int64_t n = S.n;
  for (int64_t s = 1; s < S.P; ++s)
    fwd_stage<T>(S.d[s - 1], S.w + 2 * (s - 1) * n, S.w + (2 * s - 1) * n, s == 1 ? x : acts[s - 1], acts[s], n,
                 rows);
  const T* gs = dy;
  for (int64_t s = S.P - 1; s >= 0; --s) {
    const T* a = s == 0 ? x : acts[s];
    const T *wd = S.w + 2 * s * n, *wt = S.wt + s * n;
    T *dwd = dW + 2 * s * n, *dwo = dwd + n;
    const bool G = s > 0 || want_dx, DW = want_dw[s] != 0;
    if (G && DW) bwd_stage<T, true, true>(S.d[s], wd, wt, a, gs, g, dwd, dwo, n, rows);
    else if (G) bwd_stage<T, true, false>(S.d[s], wd, wt, a, gs, g, dwd, dwo, n, rows);
    else if (DW) bwd_stage<T, false, true>(S.d[s], wd, wt, a, gs, g, dwd, dwo, n, rows);
    gs = g;
  }
}

#define STRUX_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
STRUX_CLONES void block_fwd(const Stages<float>& S, const float* x, float* y, int64_t rows, int64_t next) {
  chain_fwd(S, x, y, rows, next);
}
STRUX_CLONES void block_fwd(const Stages<double>& S, const double* x, double* y, int64_t rows, int64_t next) {
  chain_fwd(S, x, y, rows, next);
}
STRUX_CLONES void block_bwd(const Stages<float>& S, const float* x, const float* dy, float* const* acts, float* g,
                            bool want_dx, float* dW, const unsigned char* want_dw, int64_t rows) {
  chain_bwd(S, x, dy, acts, g, want_dx, dW, want_dw, rows);
}
STRUX_CLONES void block_bwd(const Stages<double>& S, const double* x, const double* dy, double* const* acts,
                            double* g, bool want_dx, double* dW, const unsigned char* want_dw, int64_t rows) {
  chain_bwd(S, x, dy, acts, g, want_dx, dW, want_dw, rows);
}
#undef STRUX_CLONES

// Per stage (application order): d, and wd | wo per position; wt (backward) wo[p ^ d].
template <class T>
struct Packed {
  std::vector<int64_t> d;
  std::vector<T> w, wt;
};

template <class T>
Packed<T> pack(const std::vector<KSPattern>& ps, const T* const* w, bool transposed) {
  const int64_t P = int64_t(ps.size()), n = ps[0].cols();
  Packed<T> pk;
  pk.d.resize(size_t(P));
  pk.w.resize(size_t(2 * P * n));
  if (transposed) pk.wt.resize(size_t(P * n));
  for (int64_t s = 0; s < P; ++s) {
    const int64_t q = P - 1 - s;
    const KSPattern& f = ps[size_t(q)];
    const int64_t d = f.d;
    pk.d[size_t(s)] = d;
    T* wd = pk.w.data() + 2 * s * n;
    T* wo = wd + n;
    for (int64_t i = 0; i < f.a; ++i)
      for (int64_t k = 0; k < 2; ++k)
        for (int64_t j = 0; j < d; ++j) {
          const int64_t pos = i * 2 * d + k * d + j;
          wd[pos] = w[q][((i * 2 + k) * 2 + k) * d + j];
          wo[pos] = w[q][((i * 2 + k) * 2 + (1 - k)) * d + j];
        }
    if (transposed)
      for (int64_t pos = 0; pos < n; ++pos) pk.wt[size_t(s * n + pos)] = wo[pos ^ d];
  }
  return pk;
}

template <class T>
int64_t block_rows(int64_t n, int64_t batch) {
  return std::max<int64_t>(1, std::min<int64_t>(batch, kBlockBytes / (n * int64_t(sizeof(T)))));
}

}  // namespace

bool pairs_suit(const std::vector<KSPattern>& ps, KSLayout layout, int64_t elem_size) {
  if (ps.empty()) return false;
  const int64_t lanes = 64 / elem_size;
  for (const KSPattern& p : ps)
    if (p.b != 2 || p.c != 2 || (p.d & (p.d - 1)) != 0) return false;
  return layout == KSLayout::BatchLast || ps[0].cols() % lanes == 0;  // N = 2 a d for every factor
}

template <class T>
void pairs_forward(const std::vector<KSPattern>& ps, KSLayout layout, const T* x, const T* const* w, T* y,
                   int64_t batch) {
  static TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const Team team(tuner);
  const int nt = num_threads();
  const Packed<T> pk = pack(ps, w, false);
  const int64_t n = ps[0].cols();
  const Stages<T> S{int64_t(ps.size()), n, pk.d.data(), pk.w.data(), nullptr};
  if (layout == KSLayout::BatchFirst) {
    const int64_t rb = block_rows<T>(n, batch), nb = (batch + rb - 1) / rb;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 8)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t r0 = b * rb;
      block_fwd(S, x + r0 * n, y + r0 * n, std::min(rb, batch - r0), std::max<int64_t>(0, std::min(rb, batch - r0 - rb)));
    }
    return;
  }
  pairs_forward_bsl(S, x, y, batch, nt);
}

template <class T>
void pairs_backward(const std::vector<KSPattern>& ps, const T* dy, const T* x, const T* const* w, T* dx,
                    T* const* dw, int64_t batch) {
  const int64_t P = int64_t(ps.size());
  std::vector<unsigned char> want(size_t(P), 0);  // per stage s (factor P-1-s)
  bool any_dw = false;
  for (int64_t q = 0; dw && q < P; ++q) {
    want[size_t(P - 1 - q)] = dw[q] != nullptr;
    any_dw = any_dw || dw[q];
  }
  if (!dx && !any_dw) return;
  static TeamTuner tuner;
  const Team team(tuner);
  const int nt = num_threads();
  const Packed<T> pk = pack(ps, w, true);
  const int64_t n = ps[0].cols(), rb = block_rows<T>(n, batch), nb = (batch + rb - 1) / rb;
  const Stages<T> S{P, n, pk.d.data(), pk.w.data(), pk.wt.data()};
  // dW: one accumulator set (2 n per stage) per part; a part is a fixed contiguous run of
  // blocks summed in order, and the parts are added in order at the end (dw does not depend
  // on the team that ran it). Without dW every block is a part.
  const int64_t nparts = any_dw ? std::min<int64_t>(partition_threads(), nb) : nb;
  const int nrun = int(std::min<int64_t>(nt, nparts));
  // Per thread: the inputs of stages 1..P-1 and, without dx, a cotangent block.
  const int64_t per_thread = checked_count("batch", {P, rb, n});
  // Everything the region uses is allocated before it (an exception may not leave a region).
  std::vector<T> bufs(size_t(checked_count("batch", {int64_t(nrun), per_thread})));
  std::vector<T> acc(any_dw ? size_t(checked_count("batch", {nparts, 2 * P, n})) : 0, T(0));
  std::vector<T*> ptrs(size_t(P * nrun), nullptr);
  const unsigned char* want_dw = want.data();
#pragma omp parallel num_threads(nrun)
  {
    T* base = bufs.data() + int64_t(thread_index()) * per_thread;
    T** acts = ptrs.data() + int64_t(thread_index()) * P;
    for (int64_t s = 1; s < P; ++s) acts[s] = base + (s - 1) * rb * n;
    T* gbuf = base + (P - 1) * rb * n;
#pragma omp for schedule(dynamic)
    for (int64_t part = 0; part < nparts; ++part) {
      T* dW = any_dw ? acc.data() + part * 2 * P * n : nullptr;
      for (int64_t b = part * nb / nparts, last = (part + 1) * nb / nparts; b < last; ++b) {
        const int64_t r0 = b * rb;
        block_bwd(S, x + r0 * n, dy + r0 * n, acts, dx ? dx + r0 * n : gbuf, dx != nullptr, dW, want_dw,
                  std::min(rb, batch - r0));
      }
    }
  }
  if (!any_dw) return;
  for (int64_t q = 0; q < P; ++q) {
    if (!dw[q]) continue;
    const KSPattern& f = ps[size_t(q)];
    const int64_t s = P - 1 - q, d = f.d;
    for (int64_t i = 0; i < f.a; ++i)
      for (int64_t k = 0; k < 2; ++k)
        for (int64_t j = 0; j < d; ++j) {
          const int64_t pos = i * 2 * d + k * d + j;
          T sd = 0, so = 0;
          for (int64_t part = 0; part < nparts; ++part) {
            sd += acc[size_t((part * 2 * P + 2 * s) * n + pos)];
            so += acc[size_t((part * 2 * P + 2 * s + 1) * n + pos)];
          }
          dw[q][((i * 2 + k) * 2 + k) * d + j] = sd;
          dw[q][((i * 2 + k) * 2 + (1 - k)) * d + j] = so;
        }
  }
}

template void pairs_forward<float>(const std::vector<KSPattern>&, KSLayout, const float*, const float* const*,
                                   float*, int64_t);
template void pairs_forward<double>(const std::vector<KSPattern>&, KSLayout, const double*, const double* const*,
                                    double*, int64_t);
template void pairs_backward<float>(const std::vector<KSPattern>&, const float*, const float*, const float* const*,
                                    float*, float* const*, int64_t);
template void pairs_backward<double>(const std::vector<KSPattern>&, const double*, const double*,
                                     const double* const*, double*, double* const*, int64_t);

}  // namespace strux::cpu::ks
