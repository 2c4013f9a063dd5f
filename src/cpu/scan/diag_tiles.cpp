// Diagonal scans of time-last arrays (B, n, T) (DiagLayout::time_last), in place.
//
// Time is the unit stride here, so a channel's recurrence would be a serial chain of scalar
// FMAs. Instead each task takes W channels of one batch item and walks time in tiles of Lt
// steps: a tile of a and b (W rows of Lt contiguous values each) is transposed into L1 as Lt
// rows of W channels, the channels-last row kernels run over its rows in time order, and the
// result is transposed back: the arrays are read and written once, in runs of Lt values.
// Reverse time walks the tiles and their rows backwards. Backward, per task: a forward sweep
// stores the states shifted by one step (h_{t-1} at step t) into da (or db when a is
// broadcast), then a reverse sweep forms g, db and da tile by tile.
#include <algorithm>
#include <complex>
#include <cstring>
#include <vector>

#include "cpu/ks/transpose.hpp"
#include "cpu/scan/kernels.hpp"
#include "cpu/threads.hpp"
#include "strux/core.hpp"

namespace strux::cpu::scan {

namespace {

constexpr int64_t kW = 16;  // channels per task
template <class S>
constexpr int64_t tile_steps() {  // Lt: a tile of about 4 KiB
  return std::max<int64_t>(8, 4096 / (kW * int64_t(sizeof(S))));
}

// dst[q * ldd + r] = src[r * lds + q], r < R, q < C: moved as raw bits (4, 8 or 16 bytes).
template <class S>
void tr(const S* src, int64_t lds, S* dst, int64_t ldd, int64_t R, int64_t C) {
  if constexpr (sizeof(S) == 4) {
    ks::transpose(reinterpret_cast<const float*>(src), lds, reinterpret_cast<float*>(dst), ldd, R, C);
  } else if constexpr (sizeof(S) == 8) {
    ks::transpose(reinterpret_cast<const double*>(src), lds, reinterpret_cast<double*>(dst), ldd, R, C);
  } else {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t q = 0; q < C; ++q) dst[q * ldd + r] = src[r * lds + q];
  }
}

// One task's view of the arrays: channels [c0, c0 + w) of batch item b.
struct Task {
  int64_t T, n, Ta, b, c0, w;
  int64_t x;   // offset of (b, c0, 0) in the state-shaped arrays (channel stride T)
  int64_t ax;  // offset of (b or 0, c0, 0) in a / da (channel stride Ta)
};

Task make_task(int64_t T, int64_t n, const DiagLayout& L, int64_t b, int64_t c0) {
  const int64_t Ta = L.a_time ? T : 1;
  return {T, n, Ta, b, c0, std::min(kW, n - c0), (b * n + c0) * T, ((L.a_batch ? b : 0) * n + c0) * Ta};
}

// The tiles in logical time order: physical tile k covers [k Lt, min(T, (k + 1) Lt)).
struct Tiles {
  int64_t T, Lt, count;
  bool rev;
  int64_t phys(int64_t i) const { return rev ? count - 1 - i : i; }  // i-th tile in logical order
  int64_t p0(int64_t k) const { return k * Lt; }
  int64_t len(int64_t k) const { return std::min(Lt, T - k * Lt); }
};

// Rows of one tile in logical order: row index of the j-th logical step.
inline int64_t row_at(const Tiles& tl, int64_t len, int64_t j) { return tl.rev ? len - 1 - j : j; }

// A tile of a (time-varying: transposed; time-invariant: the channel values on every row).
template <class S>
void load_a(const S* a, const Task& k, bool a_time, int64_t p0, int64_t len, S* A) {
  if (a_time) return tr(a + k.ax + p0, k.T, A, kW, k.w, len);
  for (int64_t q = 0; q < len; ++q)
    for (int64_t r = 0; r < k.w; ++r) A[q * kW + r] = a[k.ax + r];
}

template <class S>
struct Scratch {
  std::vector<S> buf;
  int64_t per;
  Scratch(int nt, int64_t tile) : buf(size_t(int64_t(nt) * (4 * tile + 4 * kW))), per(4 * tile + 4 * kW) {}
  S* mine() { return buf.data() + int64_t(thread_index()) * per; }
};

}  // namespace

template <class S>
void diag_forward_time_last(int64_t B, int64_t T, int64_t n, const S* a, const S* b, const S* h0, S* h,
                            const DiagLayout& L) {
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  constexpr int64_t Lt = tile_steps<S>();
  const Tiles tl{T, Lt, (T + Lt - 1) / Lt, L.reverse};
  const int64_t nblk = (n + kW - 1) / kW;
  const int nt = num_threads();
  Scratch<S> scratch(nt, Lt * kW);
#pragma omp parallel num_threads(nt)
  {
    S* A = scratch.mine();
    S* X = A + Lt * kW;
    S* carry = X + Lt * kW;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < B * nblk; ++task) {
      const Task k = make_task(T, n, L, task / nblk, (task % nblk) * kW);
      const S* prev = h0 ? h0 + k.b * n + k.c0 : nullptr;
      if (!L.a_time) load_a(a, k, false, 0, Lt, A);
      for (int64_t i = 0; i < tl.count; ++i) {
        const int64_t kt = tl.phys(i), p0 = tl.p0(kt), len = tl.len(kt);
        if (L.a_time) load_a(a, k, true, p0, len, A);
        tr(b + k.x + p0, T, X, kW, k.w, len);
        for (int64_t j = 0; j < len; ++j) {
          const int64_t q = row_at(tl, len, j);
          if (prev) fma_inplace(A + q * kW, prev, X + q * kW, k.w);
          else add_times_zero(A + q * kW, X + q * kW, k.w);  // a_0 * 0: NaN when a_0 is not finite
          prev = X + q * kW;
        }
        copy_add<S>(prev, nullptr, carry, k.w);
        prev = carry;
        tr(X, kW, h + k.x + p0, T, len, k.w);
      }
    }
  }
}

template <class S>
void diag_backward_time_last(int64_t B, int64_t T, int64_t n, const S* dh, const S* dh_last, const S* a,
                             const S* b, const S* h0, S* da, S* db, S* dh0, const DiagLayout& L) {
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  constexpr int64_t Lt = tile_steps<S>();
  const Tiles tl{T, Lt, (T + Lt - 1) / Lt, L.reverse};
  const bool a_batch = L.a_batch || B == 1, full = a_batch && L.a_time;
  check_arg(full || db != dh, "db", "expected db apart from dh when a is broadcast");
  const int64_t nblk = (n + kW - 1) / kW, tasks = a_batch ? B * nblk : nblk;
  const int64_t dir = L.reverse ? -1 : 1;  // physical step of the logically next time step
  const int nt = num_threads();
  Scratch<S> scratch(nt, Lt * kW);
#pragma omp parallel num_threads(nt)
  {
    S* A = scratch.mine();
    S* G = A + Lt * kW;
    S* Hs = G + Lt * kW;
    S* D = Hs + Lt * kW;
    S* anext = D + Lt * kW;
    S* gnext = anext + kW;
    S* dacc = gnext + kW;
    S* hrow = dacc + kW;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t blk = task % nblk, b0 = a_batch ? task / nblk : 0, b1 = a_batch ? b0 + 1 : B;
      if (!L.a_time) fill_zero(dacc, kW);
      for (int64_t bi = b0; bi < b1; ++bi) {
        const Task k = make_task(T, n, L, bi, blk * kW);
        S* hs = full ? da : db;  // time-last like the states: hs at step t = h_{t-1}
        // Forward sweep: h_{-1} at the first logical step, then every h_t one step later.
        const int64_t pfirst = L.reverse ? T - 1 : 0;
        for (int64_t r = 0; r < k.w; ++r) hs[k.x + r * T + pfirst] = h0 ? h0[bi * n + k.c0 + r] : S(0);
        const S* prev = h0 ? h0 + bi * n + k.c0 : nullptr;
        if (!L.a_time) load_a(a, k, false, 0, Lt, A);
        for (int64_t i = 0; i < tl.count; ++i) {
          const int64_t kt = tl.phys(i), p0 = tl.p0(kt), len = tl.len(kt);
          if (L.a_time) load_a(a, k, true, p0, len, A);
          tr(b + k.x + p0, T, G, kW, k.w, len);
          for (int64_t j = 0; j < len; ++j) {
            const int64_t q = row_at(tl, len, j);
            if (prev) fma_inplace(A + q * kW, prev, G + q * kW, k.w);
            else add_times_zero(A + q * kW, G + q * kW, k.w);
            prev = G + q * kW;
          }
          copy_add<S>(prev, nullptr, hrow, k.w);
          prev = hrow;
          // Row q (physical p0 + q) goes to physical p0 + q + dir, where that is inside [0, T).
          const int64_t lo = (p0 + dir < 0) ? 1 : 0, hi = std::min(len, T - dir - p0);
          if (hi > lo) tr(G + lo * kW, kW, hs + k.x + p0 + lo + dir, T, hi - lo, k.w);
        }
        // Reverse sweep: g_t = dh_t + conj(a_{t+1}) g_{t+1}; db_t = g_t; da_t = g_t conj(h_{t-1}).
        bool have_next = false;
        for (int64_t i = tl.count - 1; i >= 0; --i) {
          const int64_t kt = tl.phys(i), p0 = tl.p0(kt), len = tl.len(kt);
          if (L.a_time) load_a(a, k, true, p0, len, A);
          tr(dh + k.x + p0, T, G, kW, k.w, len);
          tr(hs + k.x + p0, T, Hs, kW, k.w, len);
          for (int64_t j = len - 1; j >= 0; --j) {
            const int64_t q = row_at(tl, len, j);
            S* g = G + q * kW;
            if (!have_next) {
              if (dh_last)
                for (int64_t r = 0; r < k.w; ++r) g[r] += dh_last[bi * n + k.c0 + r];
              have_next = true;
            } else {
              const bool inside = j + 1 < len;
              const int64_t qn = row_at(tl, len, j + 1);
              conj_fma_inplace(inside ? A + qn * kW : anext, inside ? G + qn * kW : gnext, g, k.w);
            }
            if (!L.a_time) mul_conj_add(g, Hs + q * kW, dacc, k.w);
            else mul_conj_inplace(g, Hs + q * kW, k.w);  // Hs becomes the da tile
          }
          const int64_t q0 = row_at(tl, len, 0);  // the tile's logically first step
          copy_add<S>(A + q0 * kW, nullptr, anext, k.w);
          copy_add<S>(G + q0 * kW, nullptr, gnext, k.w);
          tr(G, kW, db + k.x + p0, T, len, k.w);
          if (L.a_time) {
            S* dst = da + k.ax + p0;
            if (!full && bi != b0) {  // a shared by the batch: add this item's da
              tr(dst, T, D, kW, k.w, len);
              for (int64_t e = 0; e < len * kW; ++e) Hs[e] += D[e];
            }
            tr(Hs, kW, dst, T, len, k.w);
          }
        }
        if (dh0) {
          S* d0 = dh0 + bi * n + k.c0;
          fill_zero(d0, k.w);
          conj_fma_inplace(anext, gnext, d0, k.w);
        }
      }
      if (!L.a_time) {
        const Task k = make_task(T, n, L, b0, blk * kW);
        for (int64_t r = 0; r < k.w; ++r) da[k.ax + r] = dacc[r];
      }
    }
  }
}

#define STRUX_DIAG_TILES_INST(S)                                                                              \
  template void diag_forward_time_last<S>(int64_t, int64_t, int64_t, const S*, const S*, const S*, S*,        \
                                          const DiagLayout&);                                                 \
  template void diag_backward_time_last<S>(int64_t, int64_t, int64_t, const S*, const S*, const S*, const S*, \
                                           const S*, S*, S*, S*, const DiagLayout&);
STRUX_DIAG_TILES_INST(float)
STRUX_DIAG_TILES_INST(double)
STRUX_DIAG_TILES_INST(std::complex<float>)
STRUX_DIAG_TILES_INST(std::complex<double>)
#undef STRUX_DIAG_TILES_INST

}  // namespace strux::cpu::scan
