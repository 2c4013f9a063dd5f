// Per-frequency F̂ products for R right-hand sides (algo 2), in chunks of RC right-hand sides
// (16, 8, 4, 2, 1 for float32; 8, 4, 2, 1 for float64: the accumulators live in registers).
//
// One right-hand side (RC = 1) is a pure stream of F̂ (8 bytes per 8 FLOP): the kernels read F̂
// with 16-byte loads (float4 = 2 complex, 4 pairs of a 16-bit F̂; narrower where Nm or the
// alignment does not allow it), about 128 bytes in flight per lane, the spectrum x̂ through L1
// (no shared memory, no barriers in the unsplit kernels).
//   matvec:  a warp per (frequency, 2 or 4 rows), lanes along Nm, warp-shuffle reduction; x̂ read
//            16 bytes at a time where it is contiguous.
//   adjoint: a thread per (frequency, K columns), loops over the Nd rows (column sums in
//            registers), x̂[f][d] read as a warp-uniform broadcast; where those threads cannot fill
//            the GPU, up to 8 threads of a CTA share a column's rows and add their sums in order.
// Shapes and their measurements: bench/NOTES-toeplitz-precision.md ("one-rhs-variants").
// Several right-hand sides (RC >= 2) make the product compute-bound (4·RC FMAs per F̂ element):
//   matvec:  register tiles of 4 rows × RC, F̂ and X̂ tiles staged in shared memory by cp.async
//            in a 3-stage pipeline (no registers held for loads in flight), lanes along Nm,
//            X̂ rows padded so the 16-byte shared loads of 8 lanes hit distinct banks.
//   adjoint: register tiles of 2 columns × RC, F̂ straight from HBM (4 rows in flight), the X̂[f]
//            rows as shared-memory broadcasts; no reduction.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/device.hpp"
#include "cuda/elem.cuh"
#include "cuda/toeplitz/multi.hpp"

namespace strux::cuda::toeplitz_detail {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <class C>
__device__ __forceinline__ void fma_c(C& acc, C a, C x) {  // acc += a·x
  acc.x = fma(a.x, x.x, fma(-a.y, x.y, acc.x));
  acc.y = fma(a.x, x.y, fma(a.y, x.x, acc.y));
}
template <class C>
__device__ __forceinline__ void fma_cc(C& acc, C a, C x) {  // acc += conj(a)·x
  acc.x = fma(a.x, x.x, fma(a.y, x.y, acc.x));
  acc.y = fma(a.x, x.y, fma(-a.y, x.x, acc.y));
}

// K consecutive stored values of F̂, read once: streaming (evict-first) so x̂ keeps the caches.
// S is the stored element: the complex C itself, or a (re, im) pair of 16-bit floats
// (__nv_bfloat162 / __half2, 4 bytes), read 4 per 16-byte load.
template <class S, int K>
__device__ __forceinline__ void ld_stream(const S* p, S (&v)[K]) {
  if constexpr (K == 1) {
    v[0] = __ldcs(p);
  } else if constexpr (sizeof(S) * K == 16) {
    const uint4 q = __ldcs(reinterpret_cast<const uint4*>(p));
    memcpy(&v, &q, 16);
  } else if constexpr (sizeof(S) * K == 8) {
    const uint2 q = __ldcs(reinterpret_cast<const uint2*>(p));
    memcpy(&v, &q, 8);
  } else {  // instantiated for complex128 pairs, never launched (launch_one packs complex64 only)
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = __ldcs(p + k);
  }
}

// A stored F̂ value as the accumulation's complex type.
__device__ __forceinline__ float2 to_c(float2 v) { return v; }
__device__ __forceinline__ double2 to_c(double2 v) { return v; }
__device__ __forceinline__ float2 to_c(__nv_bfloat162 v) { return __bfloat1622float2(v); }
__device__ __forceinline__ float2 to_c(__half2 v) { return __half22float2(v); }

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

template <class C>
__device__ __forceinline__ C scale(C v, decltype(C{}.x) a) {
  return C{a * v.x, a * v.y};
}

template <class C>
__device__ __forceinline__ void warp_sum(C& v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
}

// ---- one right-hand side ------------------------------------------------------------------------

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

// Y[f][d] = alpha · Σ_n F̂[f][d][n] X[f][n]. K complex per lane load (2: float4); ROWS rows per
// warp share each x̂ load, U packs per row in flight per lane.
template <class C, class T, int K, class S = C, int ROWS = kRows1, int U = kU1, bool XV = false>
__global__ void __launch_bounds__(kThreads) matvec_one(const S* __restrict__ F, const C* __restrict__ X,
                                                       C* __restrict__ Y, int64_t nfreq, int64_t Nd, int64_t Nm,
                                                       int64_t R, int64_t r0, T alpha) {
  const int lane = threadIdx.x & 31;
  const int64_t groups = (Nd + ROWS - 1) / ROWS;
  const int64_t w = (int64_t(blockIdx.x) * kThreads + threadIdx.x) >> 5;
  if (w >= nfreq * groups) return;  // whole warps leave together
  const int64_t f = w / groups, d0 = (w - f * groups) * ROWS;
  const S* Fr[ROWS];
#pragma unroll
  for (int i = 0; i < ROWS; ++i) Fr[i] = F + (f * Nd + imin(d0 + i, Nd - 1)) * Nm;
  const C* xf = X + f * Nm * R + r0;
  C acc[ROWS];
#pragma unroll
  for (int i = 0; i < ROWS; ++i) acc[i] = C{0, 0};
  const int64_t npk = Nm / K;
  int64_t p = lane;
  for (; p + 32 * (U - 1) < npk; p += 32 * U) {
    S a[U][ROWS][K];
    C x[U][K];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < ROWS; ++i) ld_stream<S, K>(Fr[i] + (p + 32 * u) * K, a[u][i]);
#pragma unroll
    for (int u = 0; u < U; ++u) ld_x<C, K, XV>(xf + (p + 32 * u) * K * R, R, x[u]);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int k = 0; k < K; ++k) fma_c(acc[i], to_c(a[u][i][k]), x[u][k]);
  }
  for (; p < npk; p += 32) {
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
  for (int i = 0; i < ROWS; ++i) warp_sum(acc[i]);
#pragma unroll
  for (int i = 0; i < ROWS; ++i)
    if (lane == i && d0 + i < Nd) Y[(f * Nd + d0 + i) * R + r0] = scale(acc[i], alpha);
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

// ---- several right-hand sides: matvec ---------------------------------------------------------

constexpr int kDT = 4;      // rows per warp (register tile kDT × RC)
constexpr int kJ = 2;       // columns per lane per tile
constexpr int kStages = 3;  // cp.async pipeline depth

__device__ __forceinline__ void cp_async(void* smem, const void* gmem, bool pred, int bytes) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  const int n = pred ? bytes : 0;  // 0 source bytes: the destination is zero-filled
  if (bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// X̂ tile row stride (complex values): RC values padded to an odd number of 16-byte units, so
// the 16-byte loads of 8 consecutive lanes (consecutive columns) fall in distinct bank groups.
template <class C, int RC>
constexpr int xs_stride() {
  constexpr int bytes = RC * int(sizeof(C));
  constexpr int units = bytes / 16;
  return (units % 2 == 1 ? bytes : bytes + 16) / int(sizeof(C));
}

// Shared memory of matvec_tiled: kStages × (F̂ tile rows × TN, X̂ tile TN × stride), TN ≤ 2·32·kJ.
template <class C, int RC>
constexpr size_t matvec_smem() {
  constexpr size_t fs = size_t(kWarps) * kDT * 32 * kJ;  // rows_cta · TN is the same for S = 1, 2
  constexpr size_t xs = size_t(2 * 32 * kJ) * xs_stride<C, RC>();
  return kStages * (fs + xs) * sizeof(C);
}

// Y[f][d][r] = alpha · Σ_n F̂[f][d][n] X[f][n][r0 + r]. CTA: (frequency, rows_cta rows);
// warp w: row group w / S (kDT rows), column part w % S of each TN = S·32·kJ column tile.
template <class C, class T, int RC>
__global__ void __launch_bounds__(kThreads, 1) matvec_tiled(const C* __restrict__ F, const C* __restrict__ X,
                                                            C* __restrict__ Y, int64_t nfreq, int64_t Nd,
                                                            int64_t Nm, int64_t R, int64_t r0, T alpha, int S) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  C* smem = reinterpret_cast<C*>(smem_raw);
  constexpr int XS = xs_stride<C, RC>();
  constexpr int FS = kWarps * kDT * 32 * kJ;  // F̂ tile elements per stage
  const int TN = S * 32 * kJ, rows_cta = (kWarps / S) * kDT;
  const int XSt = TN * XS;  // X̂ tile elements per stage
  C* Fs = smem;
  C* Xs = smem + kStages * FS;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = warp / S, part = warp - g * S;
  const int64_t row0 = int64_t(blockIdx.x) * rows_cta;
  const int64_t ntiles = (Nm + TN - 1) / TN;
  // Fill roles: F̂ column c_f (fixed) over rows; X̂ (column, r) pairs.
  const int cf = tid % TN, rf0 = tid / TN, rstep = kThreads / TN;
  const int rx = tid % RC, cx0 = tid / RC;
  constexpr int cxstep = kThreads / RC;

  for (int64_t f = blockIdx.y; f < nfreq; f += gridDim.y) {
    const C* Ff = F + f * Nd * Nm;
    const C* Xf = X + f * Nm * R + r0;
    auto fill = [&](int stage, int64_t t) {
      const int64_t n0 = t * TN;
      C* fs = Fs + stage * FS;
      C* xs = Xs + stage * XSt;
      const int64_t n = n0 + cf;
      const bool okn = n < Nm;
      for (int rl = rf0; rl < rows_cta; rl += rstep) {
        const int64_t d = imin(row0 + rl, Nd - 1);
        cp_async(fs + rl * TN + cf, Ff + d * Nm + (okn ? n : 0), okn, int(sizeof(C)));
      }
      for (int cl = cx0; cl < TN; cl += cxstep) {
        const int64_t nn = n0 + cl;
        const bool ok = nn < Nm;
        cp_async(xs + cl * XS + rx, Xf + (ok ? nn : 0) * R + rx, ok, int(sizeof(C)));
      }
    };
    C acc[kDT][RC];
#pragma unroll
    for (int i = 0; i < kDT; ++i)
#pragma unroll
      for (int r = 0; r < RC; ++r) acc[i][r] = C{0, 0};
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < ntiles) fill(st, st);
      cp_commit();
    }
    for (int64_t t = 0; t < ntiles; ++t) {
      const int64_t tn = t + kStages - 1;
      if (tn < ntiles) fill(int(tn % kStages), tn);
      cp_commit();
      cp_wait<kStages - 1>();  // tile t has landed (this thread's copies) ...
      __syncthreads();         // ... and everyone's
      const int st = int(t % kStages);
      const C* fs = Fs + st * FS + (g * kDT) * TN;
      const C* xs = Xs + st * XSt;
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const int nl = part * 32 * kJ + 32 * j + lane;
        C a[kDT];
#pragma unroll
        for (int i = 0; i < kDT; ++i) a[i] = fs[i * TN + nl];
        const C* xr = xs + nl * XS;
        if constexpr (sizeof(C) == 8) {
#pragma unroll
          for (int r = 0; r < RC; r += 2) {
            const float4 q = *reinterpret_cast<const float4*>(xr + r);
            const C x0{q.x, q.y}, x1{q.z, q.w};
#pragma unroll
            for (int i = 0; i < kDT; ++i) fma_c(acc[i][r], a[i], x0), fma_c(acc[i][r + 1], a[i], x1);
          }
        } else {
#pragma unroll
          for (int r = 0; r < RC; ++r) {
            const C x = xr[r];
#pragma unroll
            for (int i = 0; i < kDT; ++i) fma_c(acc[i][r], a[i], x);
          }
        }
      }
      __syncthreads();  // stage st is refilled by the next iteration
    }
    // Reduce over lanes, then over the S column parts through shared memory (stages are free).
    C* red = smem;  // [part][row_local][r]
#pragma unroll
    for (int i = 0; i < kDT; ++i)
#pragma unroll
      for (int r = 0; r < RC; ++r) warp_sum(acc[i][r]);
    if (lane < RC) {
#pragma unroll
      for (int i = 0; i < kDT; ++i) {
        C v{0, 0};
#pragma unroll
        for (int r = 0; r < RC; ++r)
          if (lane == r) v = acc[i][r];
        red[(part * rows_cta + g * kDT + i) * RC + lane] = v;
      }
    }
    __syncthreads();
    for (int e = tid; e < rows_cta * RC; e += kThreads) {
      const int rl = e / RC, r = e - rl * RC;
      C v = red[e];
      for (int q = 1; q < S; ++q) {
        const C w = red[q * rows_cta * RC + e];
        v.x += w.x, v.y += w.y;
      }
      if (row0 + rl < Nd) Y[(f * Nd + row0 + rl) * R + r0 + r] = scale(v, alpha);
    }
    __syncthreads();  // red aliases the stages of the next frequency
  }
}

// ---- several right-hand sides: adjoint --------------------------------------------------------

constexpr int kNT = 2;  // columns per lane
constexpr int kUd = 4;  // rows in flight
template <class C, int RC>
constexpr int adj_tile_rows() {
  return int(16384 / (RC * sizeof(C)));  // 16 KB of X̂ rows per shared tile
}

// Y[f][n][r0 + r] = alpha · Σ_d conj(F̂[f][d][n]) X[f][d][r0 + r]. CTA: (frequency, 512 columns).
template <class C, class T, int RC>
__global__ void __launch_bounds__(kThreads, 2) adjoint_tiled(const C* __restrict__ F, const C* __restrict__ X,
                                                             C* __restrict__ Y, int64_t nfreq, int64_t Nd,
                                                             int64_t Nm, int64_t R, int64_t r0, T alpha) {
  constexpr int TD = adj_tile_rows<C, RC>();
  __shared__ __align__(16) C xs[TD * RC];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t cbase = int64_t(blockIdx.x) * (kThreads * kNT) + warp * (32 * kNT) + lane;
  int64_t n[kNT];
  bool ok[kNT];
#pragma unroll
  for (int j = 0; j < kNT; ++j) n[j] = cbase + 32 * j, ok[j] = n[j] < Nm, n[j] = ok[j] ? n[j] : 0;
  for (int64_t f = blockIdx.y; f < nfreq; f += gridDim.y) {
    const C* Ff = F + f * Nd * Nm;
    const C* Xf = X + f * Nd * R + r0;
    C acc[kNT][RC];
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int r = 0; r < RC; ++r) acc[j][r] = C{0, 0};
    for (int64_t d0 = 0; d0 < Nd; d0 += TD) {
      const int dt = int(imin(TD, Nd - d0));
      __syncthreads();
      for (int e = tid; e < dt * RC; e += kThreads) {
        const int dl = e / RC, r = e - dl * RC;
        xs[e] = Xf[(d0 + dl) * R + r];
      }
      __syncthreads();
      auto step = [&](const C (&a)[kNT], int dl) {
        const C* xr = xs + dl * RC;
        if constexpr (sizeof(C) == 8) {
#pragma unroll
          for (int r = 0; r < RC; r += 2) {
            const float4 q = *reinterpret_cast<const float4*>(xr + r);
            const C x0{q.x, q.y}, x1{q.z, q.w};
#pragma unroll
            for (int j = 0; j < kNT; ++j) fma_cc(acc[j][r], a[j], x0), fma_cc(acc[j][r + 1], a[j], x1);
          }
        } else {
#pragma unroll
          for (int r = 0; r < RC; ++r) {
            const C x = xr[r];
#pragma unroll
            for (int j = 0; j < kNT; ++j) fma_cc(acc[j][r], a[j], x);
          }
        }
      };
      int dl = 0;
      for (; dl + kUd <= dt; dl += kUd) {
        C a[kUd][kNT];
#pragma unroll
        for (int u = 0; u < kUd; ++u)
#pragma unroll
          for (int j = 0; j < kNT; ++j) a[u][j] = __ldcs(Ff + (d0 + dl + u) * Nm + n[j]);
#pragma unroll
        for (int u = 0; u < kUd; ++u) step(a[u], dl + u);
      }
      for (; dl < dt; ++dl) {
        C a[kNT];
#pragma unroll
        for (int j = 0; j < kNT; ++j) a[j] = __ldcs(Ff + (d0 + dl) * Nm + n[j]);
        step(a, dl);
      }
    }
#pragma unroll
    for (int j = 0; j < kNT; ++j)
      if (ok[j]) {
#pragma unroll
        for (int r = 0; r < RC; ++r) Y[(f * Nm + n[j]) * R + r0 + r] = scale(acc[j][r], alpha);
      }
  }
}

// ---- launches ---------------------------------------------------------------------------------

unsigned freq_grid(int64_t nfreq) { return unsigned(std::min<int64_t>(nfreq, 65535)); }

// One right-hand side: a matvec_one launch with ROWS rows per warp and U loads per row in flight,
// x̂ read 16 bytes at a time where it is contiguous (R = 1) and aligned.
template <class C, class T, int K, class S, int ROWS, int U>
void launch_matvec(const S* F, const C* X, C* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R, int64_t r0,
                   T alpha, cudaStream_t s) {
  const int64_t warps = nfreq * ((Nd + ROWS - 1) / ROWS);
  const unsigned grid = unsigned((warps + kWarps - 1) / kWarps);
  if constexpr (sizeof(C) == 8 && K % 2 == 0) {
    if (R == 1 && reinterpret_cast<uintptr_t>(X) % 16 == 0) {  // Nm % K == 0: every x̂[f] row aligned too
      matvec_one<C, T, K, S, ROWS, U, true><<<grid, kThreads, 0, s>>>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha);
      STRUX_LAUNCH("toeplitz matvec_one");
      return;
    }
  }
  matvec_one<C, T, K, S, ROWS, U, false><<<grid, kThreads, 0, s>>>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha);
  STRUX_LAUNCH("toeplitz matvec_one");
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

// A 16-bit F̂ (S a 4-byte pair): 4 values per 16-byte load where Nm % 4 == 0 and F̂ is 16-byte
// aligned, else 2 per 8-byte load (Nm even, 8-byte aligned), else 1. Each shape keeps about 128
// bytes of F̂ in flight per lane (ROWS × U × 4K; adjoint 16 rows): measured side by side against
// complex64 F̂ in bench/NOTES-toeplitz-precision.md ("one-rhs variants").
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
    if (vec)
      launch_adjoint<C, T, 2, C, kUd1>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
    else
      launch_adjoint<C, T, 1, C, kUd1>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, s);
  }
}

// Column split S of matvec_tiled: 8/S row groups of kDT rows per CTA. S = 2 when it pads Nd
// with clearly fewer idle rows (Nd = 100: 112 instead of 128 row slots).
int matvec_split(int64_t Nd) {
  const auto padded = [&](int S) {
    const int64_t rows = (kWarps / S) * kDT;
    return (Nd + rows - 1) / rows * rows;
  };
  return padded(2) * 20 < padded(1) * 19 ? 2 : 1;
}

template <class C, class T, int RC>
void launch_tiled(const C* F, const C* X, C* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R, int64_t r0,
                  bool adjoint, T alpha, cudaStream_t s) {
  if (!adjoint) {
    constexpr size_t smem = matvec_smem<C, RC>();
    // The attribute belongs to the current device: once per device (a process may drive several).
    static std::atomic<uint64_t> set{0};
    int dev = 0;
    STRUX_CUDA(cudaGetDevice(&dev));
    const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
    if (!(set.load(std::memory_order_acquire) & bit)) {
      STRUX_CUDA(cudaFuncSetAttribute(matvec_tiled<C, T, RC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(smem)));
      set.fetch_or(bit, std::memory_order_release);
    }
    const int S = matvec_split(Nd);
    const int64_t rows = (kWarps / S) * kDT;
    const dim3 grid(unsigned((Nd + rows - 1) / rows), freq_grid(nfreq));
    matvec_tiled<C, T, RC><<<grid, kThreads, smem, s>>>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha, S);
    STRUX_LAUNCH("toeplitz matvec_tiled");
  } else {
    const dim3 grid(unsigned((Nm + kThreads * kNT - 1) / (kThreads * kNT)), freq_grid(nfreq));
    adjoint_tiled<C, T, RC><<<grid, kThreads, 0, s>>>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha);
    STRUX_LAUNCH("toeplitz adjoint_tiled");
  }
}

}  // namespace

template <class T>
void apply_fhat_multi(const void* fhat, const void* Xv, void* Yv, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R,
                      bool adjoint, T alpha, cudaStream_t s) {
  using C = typename Fft<T>::C;
  const C* F = static_cast<const C*>(fhat);
  const C* X = static_cast<const C*>(Xv);
  C* Y = static_cast<C*>(Yv);
  // Widest chunk first; every chunk is a compile-time width (register tiles, no spills).
  constexpr int kMax = sizeof(T) == 4 ? 16 : 8;
  for (int64_t r0 = 0; r0 < R;) {
    const int64_t left = R - r0;
    if (kMax == 16 && left >= 16) {
      launch_tiled<C, T, kMax>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += kMax;
    } else if (left >= 8) {
      launch_tiled<C, T, 8>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += 8;
    } else if (left >= 4) {
      launch_tiled<C, T, 4>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += 4;
    } else if (left >= 2) {
      launch_tiled<C, T, 2>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += 2;
    } else {
      launch_one<C, T>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += 1;
    }
  }
}

void apply_fhat_half(const void* fhat, bool bf16, const void* Xv, void* Yv, int64_t nfreq, int64_t Nd, int64_t Nm,
                     int64_t R, bool adjoint, float alpha, cudaStream_t s) {
  const float2* X = static_cast<const float2*>(Xv);
  float2* Y = static_cast<float2*>(Yv);
  // One right-hand side at a time: each pass streams the 16-bit F̂ once (R > 1 reads it R times).
  for (int64_t r0 = 0; r0 < R; ++r0) {
    if (bf16)
      launch_one_half<float2, float>(static_cast<const __nv_bfloat162*>(fhat), X, Y, nfreq, Nd, Nm, R, r0, adjoint,
                                     alpha, s);
    else
      launch_one_half<float2, float>(static_cast<const __half2*>(fhat), X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha,
                                     s);
  }
}

template void apply_fhat_multi<float>(const void*, const void*, void*, int64_t, int64_t, int64_t, int64_t, bool, float,
                                      cudaStream_t);
template void apply_fhat_multi<double>(const void*, const void*, void*, int64_t, int64_t, int64_t, int64_t, bool,
                                       double, cudaStream_t);

}  // namespace strux::cuda::toeplitz_detail
