// One right-hand side (RC = 1): a pure stream of F̂ (8 bytes per 8 FLOP). The kernels read F̂
// with 16-byte loads (float4 = 2 complex, 4 pairs of a 16-bit F̂; narrower where Nm or the
// alignment does not allow it), about 128 bytes in flight per lane, the spectrum x̂ through L1
// (no shared memory, no barriers in the unsplit kernels).
//   matvec:  a warp per (frequency, rows), lanes along Nm (32 per row, 16 or 8 on short rows),
//            shuffle reduction; x̂ read 16 bytes at a time where it is contiguous.
//   adjoint: a thread per (frequency, K columns), loops over the Nd rows (column sums in
//            registers), x̂[f][d] read as a warp-uniform broadcast. adjoint_shift reads every row
//            in aligned 16-byte packs whatever Nm (a pack's values go to the thread's columns and
//            its left neighbour's); where too few threads would fill the GPU, adjoint_one lets up
//            to 8 threads of a CTA share a column's rows and add their sums in order.
// Shapes and their measurements: bench/NOTES-toeplitz-precision.md ("one-rhs-variants",
// "shifted-packs").
// Included by multi.cu only (one translation unit, internal linkage).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/device.hpp"
#include "cuda/elem.cuh"
#include "cuda/toeplitz/product.cuh"

namespace strux::cuda::toeplitz_detail {
namespace {

constexpr int kRows1 = 2;  // matvec rows per warp (x̂ loads shared between them)
constexpr int kU1 = 4;     // matvec: packs per row in flight per lane
constexpr int kUd1 = 8;    // adjoint: rows in flight per thread

// K complex of x̂ from p (stride R): 16-byte loads where XV (R = 1, float2, K even, aligned).
template <class C, int K, bool XV>
__device__ __forceinline__ void ld_x(const C* p, int64_t R, C (&x)[K]) {
  if constexpr (XV && sizeof(C) == 8 && K % 2 == 0) {
#pragma unroll
    for (int j = 0; j < K / 2; ++j) {
      const float4 q = __ldg(reinterpret_cast<const float4*>(p) + j);
      x[2 * j] = C{q.x, q.y}, x[2 * j + 1] = C{q.z, q.w};
    }
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) x[k] = __ldg(p + k * R);
  }
}

// Y[f][d] = alpha · Σ_n F̂[f][d][n] X[f][n]. K complex per lane load (2: float4); G lanes per row
// (32: the whole warp; 16 or 8 where a row is too short to give a warp U packs per lane: a warp
// then serves 32 / G row groups), ROWS rows per group share each x̂ load, U packs per row in
// flight per lane.
template <class C, class T, int K, class S = C, int ROWS = kRows1, int U = kU1, bool XV = false, int G = 32>
__global__ void __launch_bounds__(kThreads) matvec_one(const S* __restrict__ F, const C* __restrict__ X,
                                                       C* __restrict__ Y, int64_t nfreq, int64_t Nd, int64_t Nm,
                                                       int64_t R, int64_t r0, T alpha) {
  static_assert(G == 32 || G == 16 || G == 8, "lanes per row: 32, 16 or 8");
  constexpr int WR = ROWS * (32 / G);  // rows per warp
  const int lane = threadIdx.x & 31, l = lane % G;
  const int64_t groups = (Nd + WR - 1) / WR;
  const int64_t w = (int64_t(blockIdx.x) * kThreads + threadIdx.x) >> 5;
  if (w >= nfreq * groups) return;  // whole warps leave together
  const int64_t f = w / groups, d0 = (w - f * groups) * WR + (lane / G) * ROWS;
  const S* Fr[ROWS];
#pragma unroll
  for (int i = 0; i < ROWS; ++i) Fr[i] = F + (f * Nd + imin(d0 + i, Nd - 1)) * Nm;
  const C* xf = X + f * Nm * R + r0;
  C acc[ROWS];
#pragma unroll
  for (int i = 0; i < ROWS; ++i) acc[i] = C{0, 0};
  const int64_t npk = Nm / K;
  int64_t p = l;
  for (; p + G * (U - 1) < npk; p += G * U) {
    S a[U][ROWS][K];
    C x[U][K];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < ROWS; ++i) ld_stream<S, K>(Fr[i] + (p + G * u) * K, a[u][i]);
#pragma unroll
    for (int u = 0; u < U; ++u) ld_x<C, K, XV>(xf + (p + G * u) * K * R, R, x[u]);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int k = 0; k < K; ++k) fma_c(acc[i], to_c(a[u][i][k]), x[u][k]);
  }
  for (; p < npk; p += G) {
    S a[ROWS][K];
    C x[K];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) ld_stream<S, K>(Fr[i] + p * K, a[i]);
    ld_x<C, K, XV>(xf + p * K * R, R, x);
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
      for (int k = 0; k < K; ++k) fma_c(acc[i], to_c(a[i][k]), x[k]);
  }
#pragma unroll
  for (int i = 0; i < ROWS; ++i) warp_sum<G>(acc[i]);
#pragma unroll
  for (int i = 0; i < ROWS; ++i)
    if (l == i && d0 + i < Nd) Y[(f * Nd + d0 + i) * R + r0] = scale(acc[i], alpha);
}

// Y[f][n] = alpha · Σ_d conj(F̂[f][d][n]) X[f][d]; a thread per K consecutive columns, UD rows
// in flight. SPLIT > 1 (few frequency-column pairs, many rows: too few threads to fill the GPU)
// gives each column SPLIT threads in one CTA, over consecutive row segments, whose sums are added
// in segment order through shared memory (deterministic).
template <class C, class T, int K, class S = C, int UD = kUd1, int SPLIT = 1>
__global__ void __launch_bounds__(kThreads) adjoint_one(const S* __restrict__ F, const C* __restrict__ X,
                                                        C* __restrict__ Y, int64_t nfreq, int64_t Nd, int64_t Nm,
                                                        int64_t R, int64_t r0, T alpha) {
  static_assert(kWarps % SPLIT == 0, "SPLIT divides the warps of a CTA");
  constexpr int CW = kWarps / SPLIT;  // warps along columns
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int seg = warp / CW, col = (warp - seg * CW) * 32 + lane;
  const int64_t npk = Nm / K;
  const int64_t idx = int64_t(blockIdx.x) * (CW * 32) + col;
  const bool live = idx < nfreq * npk;  // no early return: SPLIT > 1 meets at a barrier
  const int64_t f = live ? idx / npk : 0, p = live ? idx - f * npk : 0;
  const S* Fc = F + f * Nd * Nm + p * K;
  const C* xf = X + f * Nd * R + r0;
  C acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = C{0, 0};
  int64_t d = Nd * seg / SPLIT;
  const int64_t d_end = live ? Nd * (seg + 1) / SPLIT : d;
  for (; d + UD <= d_end; d += UD) {
    S a[UD][K];
    C x[UD];
#pragma unroll
    for (int u = 0; u < UD; ++u) ld_stream<S, K>(Fc + (d + u) * Nm, a[u]);
#pragma unroll
    for (int u = 0; u < UD; ++u) x[u] = __ldg(xf + (d + u) * R);
#pragma unroll
    for (int u = 0; u < UD; ++u)
#pragma unroll
      for (int k = 0; k < K; ++k) fma_cc(acc[k], to_c(a[u][k]), x[u]);
  }
  for (; d < d_end; ++d) {
    S a[K];
    ld_stream<S, K>(Fc + d * Nm, a);
    const C x = __ldg(xf + d * R);
#pragma unroll
    for (int k = 0; k < K; ++k) fma_cc(acc[k], to_c(a[k]), x);
  }
  if constexpr (SPLIT > 1) {
    __shared__ C part[SPLIT - 1][CW * 32][K];
    if (seg > 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) part[seg - 1][col][k] = acc[k];
    }
    __syncthreads();
    if (seg > 0) return;
    for (int s = 0; s < SPLIT - 1; ++s)
#pragma unroll
      for (int k = 0; k < K; ++k) acc[k].x += part[s][col][k].x, acc[k].y += part[s][col][k].y;
  }
  if (!live) return;
#pragma unroll
  for (int k = 0; k < K; ++k) Y[(f * Nm + p * K + k) * R + r0] = scale(acc[k], alpha);
}

// The adjoint where Nm % K != 0 (odd Nm in complex64, K = 2; Nm % 4 != 0 in 16-bit pairs, K = 4):
// rows then start at every alignment, which left the unpacked kernel 8- or 4-byte loads. Here each
// row is read in the aligned 16-byte packs that cover it. Thread q of frequency f reads, in row d,
// the pack that starts r = (offset of the row) mod K values before column K·q, and adds its K
// products to the sums of columns K·q − r … K·q − r + K − 1: its own K columns and up to K − 1 to
// their left, which are thread q − 1's. At the end each thread adds its right neighbour's left sums
// to its own (a fixed order: deterministic) through shared memory. CTAs overlap by one thread, so
// every right neighbour is in the CTA; the last thread of a CTA only supplies its left sums. Pack
// values outside the row (the previous row's tail, the next row's head) feed sums of columns that
// do not exist, never written; only past the end of F̂ are they not loaded.
// adjoint_shift's threads per frequency: one per K columns, and one more (no columns of its own)
// where the last thread's columns reach past the K − r of a pack with offset r ≥ 2, which the next
// thread's left sums hold (Nm % K ≥ 2: with Nm % K == 1 the last thread has column K·q only).
__host__ __device__ inline int64_t shift_threads(int64_t Nm, int K) { return Nm / K + (Nm % K > 0) + (Nm % K > 1); }

template <class C, class T, int K, class S, int UD>
__global__ void __launch_bounds__(kThreads) adjoint_shift(const S* __restrict__ F, const C* __restrict__ X,
                                                          C* __restrict__ Y, int64_t nfreq, int64_t Nd, int64_t Nm,
                                                          int64_t R, int64_t r0, T alpha) {
  static_assert(K == 2 || K == 4, "packs of 2 or 4 values");
  constexpr int E = 2 * K - 1;  // sums of columns K·q − (K − 1) … K·q + K − 1
  const int t = threadIdx.x;
  const int64_t npk = shift_threads(Nm, K);
  const int64_t idx = int64_t(blockIdx.x) * (kThreads - 1) + t;
  const bool live = idx < nfreq * npk;
  const int64_t f = live ? idx / npk : 0, q = live ? idx - f * npk : 0;
  const int64_t end = nfreq * Nd * Nm;  // F̂'s values
  const int64_t o0 = f * Nd * Nm + K * q;
  const C* xf = X + f * Nd * R + r0;
  C acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = C{0, 0};
  // One row: the pack at o (aligned), its offset r, the spectrum value x.
  auto load = [&](int64_t d, S (&a)[K], int& r) {
    const int64_t o = o0 + d * Nm;
    r = int(o % K);
    const int64_t b = o - r;
    if (b + K <= end) {
      ld_stream<S, K>(F + b, a);
    } else {  // the last pack of F̂: its values past the end belong to no column
#pragma unroll
      for (int k = 0; k < K; ++k) a[k] = b + k < end ? __ldcs(F + b + k) : S{};
    }
  };
  auto add = [&](const S (&a)[K], int r, C x) {
#pragma unroll
    for (int rr = 0; rr < K; ++rr)
      if (r == rr) {
#pragma unroll
        for (int k = 0; k < K; ++k) fma_cc(acc[k - rr + K - 1], to_c(a[k]), x);
      }
  };
  int64_t d = 0;
  const int64_t d_end = live ? Nd : 0;
  for (; d + UD <= d_end; d += UD) {
    S a[UD][K];
    int r[UD];
    C x[UD];
#pragma unroll
    for (int u = 0; u < UD; ++u) load(d + u, a[u], r[u]);
#pragma unroll
    for (int u = 0; u < UD; ++u) x[u] = __ldg(xf + (d + u) * R);
#pragma unroll
    for (int u = 0; u < UD; ++u) add(a[u], r[u], x[u]);
  }
  for (; d < d_end; ++d) {
    S a[K];
    int r;
    load(d, a, r);
    add(a, r, __ldg(xf + d * R));
  }
  __shared__ C left[K - 1][kThreads];
#pragma unroll
  for (int e = 0; e < K - 1; ++e) left[e][t] = acc[e];
  __syncthreads();
  if (!live || t == kThreads - 1) return;
  const bool right = q + 1 < npk;  // the right neighbour is of the same frequency
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t n = K * q + k;
    if (n >= Nm) break;
    C v = acc[K - 1 + k];
    if (k > 0 && right) v.x += left[k - 1][t + 1].x, v.y += left[k - 1][t + 1].y;
    Y[(f * Nm + n) * R + r0] = scale(v, alpha);
  }
}

// ---- launches ---------------------------------------------------------------------------------


// Lanes per row of matvec_one: the whole warp where a row gives every lane U packs, else 16 or 8
// (short rows: Nm = 64 in bfloat16 is 16 packs, which left half a warp idle and one pack in flight).
int lanes_per_row(int64_t npk, int U) { return npk >= 32 * U ? 32 : npk >= 16 * U ? 16 : 8; }

// One right-hand side: a matvec_one launch with ROWS rows per lane group and U loads per row in
// flight, x̂ read 16 bytes at a time where it is contiguous (R = 1) and aligned.
template <class C, class T, int K, class S, int ROWS, int U, bool XV, int G>
void launch_matvec_g(const S* F, const C* X, C* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R, int64_t r0,
                     T alpha, cudaStream_t s) {
  constexpr int WR = ROWS * (32 / G);
  const int64_t warps = nfreq * ((Nd + WR - 1) / WR);
  const unsigned grid = unsigned((warps + kWarps - 1) / kWarps);
  matvec_one<C, T, K, S, ROWS, U, XV, G><<<grid, kThreads, 0, s>>>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha);
  STRUX_LAUNCH("toeplitz matvec_one");
}

template <class C, class T, int K, class S, int ROWS, int U>
void launch_matvec(const S* F, const C* X, C* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R, int64_t r0,
                   T alpha, cudaStream_t s) {
  auto go = [&](auto xv) {
    constexpr bool XV = decltype(xv)::value;
    switch (lanes_per_row(Nm / K, U)) {
      case 32: return launch_matvec_g<C, T, K, S, ROWS, U, XV, 32>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
      case 16: return launch_matvec_g<C, T, K, S, ROWS, U, XV, 16>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
      default: return launch_matvec_g<C, T, K, S, ROWS, U, XV, 8>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
    }
  };
  // Nm % K == 0: every x̂[f] row is aligned where X is.
  if constexpr (sizeof(C) == 8 && K % 2 == 0) {
    if (R == 1 && reinterpret_cast<uintptr_t>(X) % 16 == 0) return go(std::true_type{});
  }
  go(std::false_type{});
}

// Row segments per column of adjoint_one: 1, or more where nfreq · Nm / K threads would not fill
// about two waves of the GPU (2048 threads per multiprocessor), each segment keeping at least 2·UD
// rows. Deterministic for a given shape and device.
int adjoint_split(int64_t col_threads, int64_t Nd, int UD) {
  const int64_t want = int64_t(current_sm_count()) * 2048 * 2;
  int s = 1;
  while (s < kWarps && col_threads * s < want && Nd / (2 * s) >= 2 * UD) s *= 2;
  return s;
}

// One right-hand side, adjoint: a thread per K columns (SPLIT threads per column where that is
// too few threads), UD rows in flight.
template <class C, class T, int K, class S, int UD>
void launch_adjoint(const S* F, const C* X, C* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R, int64_t r0,
                    T alpha, cudaStream_t s) {
  const int64_t cols = nfreq * (Nm / K);
  const int split = adjoint_split(cols, Nd, UD);
  const int64_t per_cta = kThreads / split;
  const unsigned grid = unsigned((cols + per_cta - 1) / per_cta);
  auto go = [&](auto kernel) { kernel<<<grid, kThreads, 0, s>>>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha); };
  switch (split) {
    case 1: go(adjoint_one<C, T, K, S, UD, 1>); break;
    case 2: go(adjoint_one<C, T, K, S, UD, 2>); break;
    case 4: go(adjoint_one<C, T, K, S, UD, 4>); break;
    default: go(adjoint_one<C, T, K, S, UD, 8>); break;
  }
  STRUX_LAUNCH("toeplitz adjoint_one");
}

// adjoint_shift's launch: ceil(Nm / K) threads per frequency, CTAs overlapping by one thread.
template <class C, class T, int K, class S, int UD>
void launch_adjoint_shift(const S* F, const C* X, C* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R, int64_t r0,
                          T alpha, cudaStream_t s) {
  const int64_t threads = nfreq * shift_threads(Nm, K);
  const unsigned grid = unsigned((threads + kThreads - 2) / (kThreads - 1));
  adjoint_shift<C, T, K, S, UD><<<grid, kThreads, 0, s>>>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha);
  STRUX_LAUNCH("toeplitz adjoint_shift");
}

// adjoint_shift serves where F̂ is 16-byte aligned and its threads fill half the GPU's thread slots
// (16-byte loads keep enough bytes in flight there: at (1001, 1024, 1022) in 16 bits, 257K threads
// ran at 0.85 of copy where the 8-byte loads with rows split in two ran at 0.71), or where the rows
// are too few to split; elsewhere the unpacked adjoint_one, which can split the rows.
template <int K>
bool use_shift(const void* F, int64_t nfreq, int64_t Nd, int64_t Nm, int UD) {
  const int64_t threads = nfreq * shift_threads(Nm, K);
  return reinterpret_cast<uintptr_t>(F) % 16 == 0 &&
         (threads >= int64_t(current_sm_count()) * 1024 || adjoint_split(threads, Nd, UD) == 1);
}

// A 16-bit F̂ (S a 4-byte pair): 4 values per 16-byte load where Nm % 4 == 0 and F̂ is 16-byte
// aligned, else 2 per 8-byte load (Nm even, 8-byte aligned), else 1; the adjoint with Nm % 4 == 2
// reads aligned packs of 4 (adjoint_shift). Each shape keeps about 128 bytes of F̂ in flight per
// lane (ROWS × U × 4K; adjoint 16 rows): measured side by side against complex64 F̂ in
// bench/NOTES-toeplitz-precision.md ("one-rhs variants", "shifted packs").
template <class C, class T, class S>
void launch_one_half(const S* F, const C* X, C* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R, int64_t r0,
                     bool adjoint, T alpha, cudaStream_t s) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(F);
  const int K = Nm % 4 == 0 && a % 16 == 0 ? 4 : Nm % 2 == 0 && a % 8 == 0 ? 2 : 1;
  if (!adjoint) {
    if (K == 4)
      launch_matvec<C, T, 4, S, 2, 4>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
    else if (K == 2)
      launch_matvec<C, T, 2, S, 4, 4>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
    else
      launch_matvec<C, T, 1, S, 4, 8>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
  } else {
    if (K == 4)
      launch_adjoint<C, T, 4, S, 16>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
    else if (Nm % 4 == 2 && use_shift<4>(F, nfreq, Nd, Nm, 4))  // odd Nm: single pairs measured faster
      launch_adjoint_shift<C, T, 4, S, 4>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
    else if (K == 2)
      launch_adjoint<C, T, 2, S, 16>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
    else
      launch_adjoint<C, T, 1, S, 16>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
  }
}

template <class C, class T>
void launch_one(const C* F, const C* X, C* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R, int64_t r0,
                bool adjoint, T alpha, cudaStream_t s) {
  // float4 loads need an even Nm (rows start on 16 bytes) and a 16-byte aligned F̂.
  const bool vec = sizeof(C) == 8 && Nm % 2 == 0 && reinterpret_cast<uintptr_t>(F) % 16 == 0;
  if (!adjoint) {
    if (vec)  // 4 rows a warp: half the x̂ loads per F̂ byte (measured: equal or faster at every shape)
      launch_matvec<C, T, 2, C, 4, 2>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
    else
      launch_matvec<C, T, 1, C, kRows1, kU1>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
  } else {
    if constexpr (sizeof(C) == 8) {
      // adjoint_shift at even Nm too: there its sums are adjoint_one's (offset 0 in every row), but
      // its CTAs (255 columns, not 256) ran 3-14% faster at four shapes ("shifted packs").
      if (use_shift<2>(F, nfreq, Nd, Nm, kUd1))
        return launch_adjoint_shift<C, T, 2, C, kUd1>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
      if (vec) return launch_adjoint<C, T, 2, C, kUd1>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
    }
    launch_adjoint<C, T, 1, C, kUd1>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
  }
}

}  // namespace
}  // namespace strux::cuda::toeplitz_detail
