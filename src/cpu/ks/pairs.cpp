// The pair kernels of pairs.hpp: radix-2 factors on blocks of batch rows, positions as lanes.
//
// As in tiles.cpp, the build targets x86-64-v2, so each block's work is compiled three times
// (target_clones: AVX-512, AVX2 + FMA, baseline); the 64-byte vectors below are GCC vector
// types, one zmm register in the AVX-512 clone, two ymm / four xmm in the others.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/checked_size.hpp"
#include "cpu/ks/pairs.hpp"
#include "cpu/threads.hpp"
#include "strux/core.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"  // 64-byte vectors pass only between inlined functions

namespace strux::cpu::ks {

namespace {

#define STRUX_INLINE [[gnu::always_inline]] inline

typedef float vf __attribute__((vector_size(64)));
typedef double vd __attribute__((vector_size(64)));
template <class T>
struct VecOf;
template <>
struct VecOf<float> {
  using type = vf;
};
template <>
struct VecOf<double> {
  using type = vd;
};
template <class T>
using Vec = typename VecOf<T>::type;
template <class T>
constexpr int64_t kV = 64 / int64_t(sizeof(T));  // lanes of a vector

// Rows per block: the block (rows x N) within 16 KiB, so it stays in a 32-48 KiB L1 next to
// the weight vectors streaming through; the backward's per-factor inputs (P blocks) sit in L2.
constexpr int64_t kBlockBytes = int64_t(16) << 10;

template <class T>
STRUX_INLINE Vec<T> ld(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
STRUX_INLINE void st(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof v);
}

// p with a zero bit inserted at bit log2(d) (d a power of two): the q-th p with p & d == 0.
STRUX_INLINE int64_t spread(int64_t q, int64_t d) { return ((q & ~(d - 1)) << 1) | (q & (d - 1)); }

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

// ---- batch-size-last: tiles of kCols batch columns, tile[p C + t] = x[p, t0 + t] --------------
// A row of x (N, batch) is one position, so a factor combines whole rows: with weights
// broadcast, the vectors run along the batch. Rows are batch values apart (16 KiB at batch
// 4096: they would share a few cache sets), so the passes between the first and the last run
// on contiguous scratch (C = 64 float values per position, N C in all: 256 KiB at N = 1024, in
// L2; 32 / 128 columns measured no better, bench/NOTES-cpu.md "ks pairs"); the first pass reads
// x and the last writes y directly. Two consecutive factors run per pass: the quad {p, p ^ d1,
// p ^ d2, p ^ d1 ^ d2} is closed under both, so its 4 C values go through both in registers.
template <class T>
constexpr int64_t kCols = 4 * kV<T>;

// Rows of x and y are far apart (1024 rows: more streams than the hardware prefetchers follow),
// so the pass that reads x fetches the rows of the pairs / quads kPfRows rows ahead, into L2
// only: rows 16 KiB apart share a handful of L1 sets, so lines fetched into L1 that far ahead are
// evicted before use (Zen 4: 32 rows ahead into L2 ran the whole product 0.75x the time of 64 rows
// into L1, bench/NOTES-cpu.md "ks bsl"). The row's last line too: x need not start on a line.
constexpr int64_t kPfRows = 32;
template <class T>
STRUX_INLINE void fetch_x(const T* p) {
  for (int64_t o = 0; o < kCols<T>; o += kV<T>) __builtin_prefetch(p + o, 0, 2);
  __builtin_prefetch(p + kCols<T> - 1, 0, 2);
}
template <class T>
STRUX_INLINE void fetch_y(T* p) {
  for (int64_t o = 0; o < kCols<T>; o += kV<T>) __builtin_prefetch(p + o, 1, 3);
}

// Where a pass writes: the tile, y (plain stores; its rows fetched for writing ahead), y with
// streaming stores where the tile's rows of y start on cache lines (the tile grid is laid so,
// pairs_forward): whole lines, written without first reading them (a third of the memory
// traffic) and without evicting the tile; or the tile, then y as whole lines (kToLines, below).
enum Dst { kToTile, kToY, kToYStream, kToLines };

// A vector to memory with streaming stores, 16 bytes at a time: SSE's movntps / movntpd exist
// in every clone (the AVX-512 clone extracts the four quarters of a register), and the 64-byte
// vector lands on one line either way. Ordered before the call returns by an sfence.
STRUX_INLINE void st_stream(float* p, vf v) {
  for (int i = 0; i < 4; ++i) {
    __m128 q;
    std::memcpy(&q, reinterpret_cast<const char*>(&v) + 16 * i, 16);
    _mm_stream_ps(p + 4 * i, q);
  }
}
STRUX_INLINE void st_stream(double* p, vd v) {
  for (int i = 0; i < 4; ++i) {
    __m128d q;
    std::memcpy(&q, reinterpret_cast<const char*>(&v) + 16 * i, 16);
    _mm_stream_pd(p + 2 * i, q);
  }
}
template <class T, int To>
STRUX_INLINE void put(T* p, Vec<T> v) {
  if constexpr (To == kToYStream) st_stream(p, v);
  else st(p, v);
}

// kToLines (ragged rows: y's rows start at different offsets in a line; tile_wide's full tiles):
// the last pass writes the tile and each row, once written, goes to y as whole lines with
// streaming stores, each line once. Row p's lines start h < V columns into the tile; the line
// across the tile's first column takes the previous tile's last V - h values from the row's carry
// slot (the V values before the row, left there by the same thread's previous tile). Without a
// previous / next tile in the run, the first h / last V - h values take plain stores (a line
// shared with another run or sticking out of y): bench/NOTES-cpu.md "ks bsl ragged".
template <class T>
struct Lines {
  T *y, *tile;              // y + t0 (row 0 at the tile's first column); row p at tile + p ts
  int64_t a, batch, ts;     // a: y + t0's offset in a line, in values
  bool prev, next;          // whether the run has a tile before / after this one
};
template <class T>
STRUX_INLINE void emit_row(const Lines<T>& L, int64_t p) {
  constexpr int64_t V = kV<T>, C = kCols<T>;
  T *r = L.tile + p * L.ts, *yr = L.y + p * L.batch;
  const int64_t h = (V - (L.a + p * L.batch) % V) % V;
  if (L.prev) st_stream(yr + h - V, ld(r + h - V));
  else std::memcpy(yr, r, size_t(h) * sizeof(T));
  for (int64_t k = 1; k < C / V; ++k) st_stream(yr + h + (k - 1) * V, ld(r + h + (k - 1) * V));
  if (L.next) st(r - V, ld(r + C - V));
  else std::memcpy(yr + h + C - V, r + h + C - V, size_t(V - h) * sizeof(T));
}

// One factor on the tile: rows p of the input at src + p ss, of the output at dst + p ds (the
// tile itself: stride C, in place; the first pass reads x and the last writes y directly).
template <class T, bool In, int To>  // In: src is x (prefetched); To: a Dst
STRUX_INLINE void cols_one(int64_t n, int64_t d, const T* __restrict wd, const T* __restrict wo, const T* src,
                           int64_t ss, T* dst, int64_t ds, const Lines<T>* ln) {
  constexpr int64_t kPf = kPfRows / 2;
  for (int64_t q = 0; q < n / 2; ++q) {
    const int64_t p0 = spread(q, d), p1 = p0 + d;
    if ((In || To == kToY) && q + kPf < n / 2) {
      const int64_t f0 = spread(q + kPf, d), f1 = f0 + d;
      if (In) fetch_x(src + f0 * ss), fetch_x(src + f1 * ss);
      if (To == kToY) fetch_y(dst + f0 * ds), fetch_y(dst + f1 * ds);
    }
    const T a0 = wd[p0], b0 = wo[p0], a1 = wd[p1], b1 = wo[p1];
    for (int64_t o = 0; o < kCols<T>; o += kV<T>) {
      const Vec<T> x0 = ld(src + p0 * ss + o), x1 = ld(src + p1 * ss + o);
      put<T, To>(dst + p0 * ds + o, a0 * x0 + b0 * x1);
      put<T, To>(dst + p1 * ds + o, a1 * x1 + b1 * x0);
    }
    if constexpr (To == kToLines) emit_row(*ln, p0), emit_row(*ln, p1);
  }
}

// Stage (d1; w1) then stage (d2; w2), d1 != d2, on each quad in registers.
template <class T, bool In, int To>
STRUX_INLINE void cols_two(int64_t n, int64_t d1, const T* __restrict wd1, const T* __restrict wo1, int64_t d2,
                           const T* __restrict wd2, const T* __restrict wo2, const T* src, int64_t ss, T* dst,
                           int64_t ds, const Lines<T>* ln) {
  constexpr int64_t kPf = kPfRows / 4;
  const int64_t lo = std::min(d1, d2), hi = std::max(d1, d2);
  for (int64_t q = 0; q < n / 4; ++q) {
    const int64_t p0 = spread(spread(q, lo), hi), p1 = p0 + d1, p2 = p0 + d2, p3 = p1 + d2;
    if ((In || To == kToY) && q + kPf < n / 4) {
      const int64_t f0 = spread(spread(q + kPf, lo), hi), f1 = f0 + d1, f2 = f0 + d2, f3 = f1 + d2;
      if (In) fetch_x(src + f0 * ss), fetch_x(src + f1 * ss), fetch_x(src + f2 * ss), fetch_x(src + f3 * ss);
      if (To == kToY) fetch_y(dst + f0 * ds), fetch_y(dst + f1 * ds), fetch_y(dst + f2 * ds), fetch_y(dst + f3 * ds);
    }
    for (int64_t o = 0; o < kCols<T>; o += kV<T>) {
      const Vec<T> x0 = ld(src + p0 * ss + o), x1 = ld(src + p1 * ss + o);
      const Vec<T> x2 = ld(src + p2 * ss + o), x3 = ld(src + p3 * ss + o);
      const Vec<T> y0 = wd1[p0] * x0 + wo1[p0] * x1, y1 = wd1[p1] * x1 + wo1[p1] * x0;  // pairs under d1
      const Vec<T> y2 = wd1[p2] * x2 + wo1[p2] * x3, y3 = wd1[p3] * x3 + wo1[p3] * x2;
      put<T, To>(dst + p0 * ds + o, wd2[p0] * y0 + wo2[p0] * y2);  // pairs under d2
      put<T, To>(dst + p2 * ds + o, wd2[p2] * y2 + wo2[p2] * y0);
      put<T, To>(dst + p1 * ds + o, wd2[p1] * y1 + wo2[p1] * y3);
      put<T, To>(dst + p3 * ds + o, wd2[p3] * y3 + wo2[p3] * y1);
    }
    if constexpr (To == kToLines) emit_row(*ln, p0), emit_row(*ln, p1), emit_row(*ln, p2), emit_row(*ln, p3);
  }
}

// The chain in application order: stage s is factor P-1-s (K_P first); its weights per
// position at w + 2 s n (wd) and w + (2 s + 1) n (wo); wt + s n: wo[p ^ d] (backward).
template <class T>
struct Stages {
  int64_t P, n;
  const int64_t* d;
  const T* w;
  const T* wt;
};

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

// One pass: k = 2 factors (cols_two) or 1 (cols_one) from stage s.
template <class T, bool In, int To>
STRUX_INLINE void cols_pass(const Stages<T>& S, int64_t s, int64_t k, const T* src, int64_t ss, T* dst, int64_t ds,
                            const Lines<T>* ln = nullptr) {
  const int64_t n = S.n;
  const T *wd = S.w + 2 * s * n, *wo = wd + n;
  if (k == 2) cols_two<T, In, To>(n, S.d[s], wd, wo, S.d[s + 1], wo + n, wo + 2 * n, src, ss, dst, ds, ln);
  else cols_one<T, In, To>(n, S.d[s], wd, wo, src, ss, dst, ds, ln);
}

// Every factor on one tile of kCols columns: x rows at x + p xs, y rows at y + p ys; passes in
// between run in `tile` (row stride kCols; Wide: kCols + V, room for the carry slots). stream: y's
// rows of the tile start on lines (streaming stores, the caller fences them). ln: kToLines.
template <class T, bool Wide>
STRUX_INLINE void chain_cols(const Stages<T>& S, const T* x, int64_t xs, T* y, int64_t ys, T* tile, bool stream,
                             const Lines<T>* ln) {
  constexpr int64_t C = Wide ? kCols<T> + kV<T> : kCols<T>;
  for (int64_t s = 0; s < S.P;) {
    const int64_t k = (s + 1 < S.P && S.d[s] != S.d[s + 1]) ? 2 : 1;
    const bool first = s == 0, last = s + k == S.P, lines = last && ln;
    const T* src = first ? x : tile;
    T* dst = last && !lines ? y : tile;
    const int64_t ss = first ? xs : C, ds = last && !lines ? ys : C;
    const bool in = src != tile, out = dst != tile;  // (a short tile runs in place on the tile)
    if (in) {
      if (lines) cols_pass<T, true, kToLines>(S, s, k, src, ss, dst, ds, ln);
      else if (!out) cols_pass<T, true, kToTile>(S, s, k, src, ss, dst, ds);
      else if (stream) cols_pass<T, true, kToYStream>(S, s, k, src, ss, dst, ds);
      else cols_pass<T, true, kToY>(S, s, k, src, ss, dst, ds);
    } else {
      if (lines) cols_pass<T, false, kToLines>(S, s, k, src, ss, dst, ds, ln);
      else if (!out) cols_pass<T, false, kToTile>(S, s, k, src, ss, dst, ds);
      else if (stream) cols_pass<T, false, kToYStream>(S, s, k, src, ss, dst, ds);
      else cols_pass<T, false, kToY>(S, s, k, src, ss, dst, ds);
    }
    s += k;
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
#define STRUX_TILES(T)                                                                                          \
  STRUX_CLONES void tile_cols(const Stages<T>& S, const T* x, int64_t xs, T* y, int64_t ys, T* tile, bool st) { \
    chain_cols<T, false>(S, x, xs, y, ys, tile, st, nullptr);                                                   \
  }                                                                                                             \
  STRUX_CLONES void tile_wide(const Stages<T>& S, const T* x, int64_t xs, T* tile, const Lines<T>* ln) {        \
    chain_cols<T, true>(S, x, xs, tile, 0, tile, false, ln);  /* y unused: the last pass by kToLines */         \
  }
STRUX_TILES(float)
STRUX_TILES(double)
#undef STRUX_TILES
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
  constexpr int64_t C = kCols<T>, V = kV<T>;
  // Where y's rows all start at the same offset in a cache line (the row length a whole number of
  // lines), the tile grid starts at the first column on a line boundary (`lead` columns before it
  // form a short tile), so every full tile writes whole lines of y with streaming stores. Other
  // batches (ragged rows) go out by kToLines, each thread on runs of consecutive tiles (the carry
  // between them): ~4 runs per thread, so the plain lines at runs' ends are few while a busy core
  // still gets less work; whole-line rows run 2 tiles at a time, as before.
  const uintptr_t line = 64, at = reinterpret_cast<uintptr_t>(y) % line;
  const bool whole = (batch * int64_t(sizeof(T))) % int64_t(line) == 0, on = at % sizeof(T) == 0;
  const bool stream = whole && on, ragged = !whole && on && batch >= C;
  const int64_t lead = stream ? std::min<int64_t>(batch, int64_t((line - at) % line / sizeof(T))) : 0;
  const int64_t ntiles = (lead > 0) + (batch - lead + C - 1) / C, ts = ragged ? C + V : C;
  const int64_t nruns = ragged ? std::min<int64_t>(ntiles, 4 * int64_t(nt)) : (ntiles + 1) / 2;
  std::vector<T> bufs(size_t(checked_count("batch", {int64_t(nt), n, ts})));  // before the region
#pragma omp parallel num_threads(nt)
  {
    T* tile = bufs.data() + int64_t(thread_index()) * n * ts + (ts - C);
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t run = 0; run < nruns; ++run) {
      const int64_t ta = ragged ? run * ntiles / nruns : 2 * run;
      const int64_t tb = ragged ? (run + 1) * ntiles / nruns : std::min(ntiles, 2 * run + 2);
      for (int64_t t = ta; t < tb; ++t) {
        const int64_t t0 = lead > 0 && t == 0 ? 0 : lead + (t - (lead > 0)) * C;
        const int64_t m = lead > 0 && t == 0 ? lead : std::min(C, batch - t0);
        if (m == C) {  // the first pass reads x, the last writes y (ragged: as lines)
          const Lines<T> ln{y + t0, tile, (int64_t(at / sizeof(T)) + t0) % V, batch, ts, t > ta,
                            t + 1 < tb && t0 + 2 * C <= batch};
          if (ragged) tile_wide(S, x + t0, batch, tile, &ln);
          else tile_cols(S, x + t0, batch, y + t0, batch, tile, stream);
          continue;
        }
        for (int64_t p = 0; p < n; ++p) {  // a short tile (lead, or the last): zero-padded scratch
          std::memcpy(tile + p * C, x + p * batch + t0, size_t(m) * sizeof(T));
          std::fill(tile + p * C + m, tile + (p + 1) * C, T(0));
        }
        tile_cols(S, tile, C, tile, C, tile, false);
        for (int64_t p = 0; p < n; ++p) std::memcpy(y + p * batch + t0, tile + p * C, size_t(m) * sizeof(T));
      }
    }
    _mm_sfence();  // this thread's streaming stores, before the region's closing barrier
  }
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
