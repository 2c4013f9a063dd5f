// The batch-size-last pair forward of pairs.hpp (pairs_forward_bsl, pairs_vec.hpp): every factor
// on tiles of batch columns, y written from the last pass (pairs.cpp has the batch-size-first
// kernels). As there, each tile's work is compiled three times (target_clones: AVX-512,
// AVX2 + FMA, baseline) over the 64-byte vectors of pairs_vec.hpp.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/checked_size.hpp"
#include "cpu/ks/pairs_vec.hpp"
#include "cpu/threads.hpp"

namespace strux::cpu::ks {

namespace {

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

}  // namespace

template <class T>
void pairs_forward_bsl(const Stages<T>& S, const T* x, T* y, int64_t batch, int nt) {
  const int64_t n = S.n;
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

template void pairs_forward_bsl<float>(const Stages<float>&, const float*, float*, int64_t, int);
template void pairs_forward_bsl<double>(const Stages<double>&, const double*, double*, int64_t, int);

}  // namespace strux::cpu::ks
