// Per-frequency F̂ products for R right-hand sides (algo 2), in chunks of up to 16 RHS.
//
// matvec (reduction over Nm): a CTA takes 16 rows of F̂[f] (2 per warp); lanes stride over
// columns, the RHS tile X[f][n0:n0+256][r] sits in shared memory as [r][n] (conflict-free: lanes
// read consecutive n), accumulators per (row, r) in registers, warp-shuffle reduction at the end.
// adjoint (reduction over Nd): one thread per column n of F̂[f], loops over rows d with conj(F̂),
// the RHS tile X[f][d0:d0+64][r] in shared memory read as broadcasts; no reduction needed.
// Both stream F̂ with coalesced 8/16-byte loads, several in flight per thread (unrolled).
#include <algorithm>

#include "cuda/elem.cuh"
#include "cuda/toeplitz/multi.hpp"

namespace strux::cuda::toeplitz_detail {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerCta = (kThreads / 32) * kRowsPerWarp;
constexpr int kTileD = 64;    // adjoint: rows per shared-memory tile

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

// matvec: columns per shared-memory tile (the tile is RC·kTileN complex values, at most 32 KB).
template <class C>
constexpr int tile_n() { return sizeof(C) == 16 ? 128 : 256; }

template <class C, class T, int RC>
__global__ void __launch_bounds__(kThreads) matvec_multi(const C* __restrict__ F, const C* __restrict__ X,
                                                         C* __restrict__ Y, int64_t nfreq, int64_t Nd, int64_t Nm,
                                                         int64_t R, int64_t r0, T alpha) {
  constexpr int kTileN = tile_n<C>();
  __shared__ C xs[RC * kTileN];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t d0 = int64_t(blockIdx.x) * kRowsPerCta + warp * kRowsPerWarp;
  const bool has0 = d0 < Nd, has1 = d0 + 1 < Nd;
  for (int64_t f = blockIdx.y; f < nfreq; f += gridDim.y) {
    const C* F0 = F + (f * Nd + (has0 ? d0 : 0)) * Nm;
    const C* F1 = has1 ? F0 + Nm : F0;
    const C* Xf = X + f * Nm * R + r0;
    C acc0[RC], acc1[RC];
#pragma unroll
    for (int r = 0; r < RC; ++r) acc0[r] = acc1[r] = C{0, 0};
    for (int64_t n0 = 0; n0 < Nm; n0 += kTileN) {
      const int nt = int(Nm - n0 < kTileN ? Nm - n0 : kTileN);
      __syncthreads();
      for (int i = threadIdx.x; i < nt * RC; i += kThreads) {
        const int nl = i / RC, r = i - nl * RC;
        xs[r * kTileN + nl] = Xf[(n0 + nl) * R + r];
      }
      __syncthreads();
      if (nt == kTileN) {
        // Full tile: issue all of this lane's F̂ loads first (U per row), then the math.
        constexpr int U = kTileN / 32;
        C a[U], b[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          a[u] = F0[n0 + lane + 32 * u];
          b[u] = F1[n0 + lane + 32 * u];
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
          for (int r = 0; r < RC; ++r) {
            const C x = xs[r * kTileN + lane + 32 * u];
            fma_c(acc0[r], a[u], x);
            fma_c(acc1[r], b[u], x);
          }
        }
      } else {
        for (int nl = lane; nl < nt; nl += 32) {
          const C a = F0[n0 + nl], b = F1[n0 + nl];
#pragma unroll
          for (int r = 0; r < RC; ++r) {
            const C x = xs[r * kTileN + nl];
            fma_c(acc0[r], a, x);
            fma_c(acc1[r], b, x);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < RC; ++r) {
      for (int o = 16; o > 0; o /= 2) {
        acc0[r].x += __shfl_xor_sync(0xffffffffu, acc0[r].x, o);
        acc0[r].y += __shfl_xor_sync(0xffffffffu, acc0[r].y, o);
        acc1[r].x += __shfl_xor_sync(0xffffffffu, acc1[r].x, o);
        acc1[r].y += __shfl_xor_sync(0xffffffffu, acc1[r].y, o);
      }
    }
    if (lane < RC) {
      // Lane r writes RHS r (unrolled select keeps the accumulators in registers).
      C v0{0, 0}, v1{0, 0};
#pragma unroll
      for (int r = 0; r < RC; ++r)
        if (lane == r) v0 = acc0[r], v1 = acc1[r];
      if (has0) Y[(f * Nd + d0) * R + r0 + lane] = C{alpha * v0.x, alpha * v0.y};
      if (has1) Y[(f * Nd + d0 + 1) * R + r0 + lane] = C{alpha * v1.x, alpha * v1.y};
    }
  }
}

template <class C, class T, int RC>
__global__ void __launch_bounds__(kThreads) adjoint_multi(const C* __restrict__ F, const C* __restrict__ X,
                                                          C* __restrict__ Y, int64_t nfreq, int64_t Nd, int64_t Nm,
                                                          int64_t R, int64_t r0, T alpha) {
  __shared__ C xs[kTileD * RC];
  const int64_t n = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const bool valid = n < Nm;
  const int64_t nn = valid ? n : 0;
  for (int64_t f = blockIdx.y; f < nfreq; f += gridDim.y) {
    const C* Ff = F + f * Nd * Nm + nn;
    const C* Xf = X + f * Nd * R + r0;
    C acc[RC];
#pragma unroll
    for (int r = 0; r < RC; ++r) acc[r] = C{0, 0};
    for (int64_t d0 = 0; d0 < Nd; d0 += kTileD) {
      const int dt = int(Nd - d0 < kTileD ? Nd - d0 : kTileD);
      __syncthreads();
      for (int i = threadIdx.x; i < dt * RC; i += kThreads) {
        const int dl = i / RC, r = i - dl * RC;
        xs[dl * RC + r] = Xf[(d0 + dl) * R + r];
      }
      __syncthreads();
      int dl = 0;
      constexpr int U = 8;
      for (; dl + U <= dt; dl += U) {
        C a[U];
#pragma unroll
        for (int u = 0; u < U; ++u) a[u] = Ff[(d0 + dl + u) * Nm];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int r = 0; r < RC; ++r) fma_cc(acc[r], a[u], xs[(dl + u) * RC + r]);
      }
      for (; dl < dt; ++dl) {
        const C a = Ff[(d0 + dl) * Nm];
#pragma unroll
        for (int r = 0; r < RC; ++r) fma_cc(acc[r], a, xs[dl * RC + r]);
      }
    }
    if (valid) {
#pragma unroll
      for (int r = 0; r < RC; ++r) Y[(f * Nm + n) * R + r0 + r] = C{alpha * acc[r].x, alpha * acc[r].y};
    }
  }
}

template <class C, class T, int RC>
void launch(const C* F, const C* X, C* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R, int64_t r0,
            bool adjoint, T alpha, cudaStream_t s) {
  const unsigned gy = unsigned(std::min<int64_t>(nfreq, 65535));
  if (!adjoint) {
    const dim3 grid(unsigned((Nd + kRowsPerCta - 1) / kRowsPerCta), gy);
    matvec_multi<C, T, RC><<<grid, kThreads, 0, s>>>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha);
    STRUX_LAUNCH("toeplitz matvec_multi");
  } else {
    const dim3 grid(unsigned((Nm + kThreads - 1) / kThreads), gy);
    adjoint_multi<C, T, RC><<<grid, kThreads, 0, s>>>(F, X, Y, nfreq, Nd, Nm, R, r0, alpha);
    STRUX_LAUNCH("toeplitz adjoint_multi");
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
  // Chunks of 16, then 8, 4, 2, 1: every chunk is a compile-time width (registers, no spills).
  for (int64_t r0 = 0; r0 < R;) {
    const int64_t left = R - r0;
    if (left >= 16) {
      launch<C, T, 16>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += 16;
    } else if (left >= 8) {
      launch<C, T, 8>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += 8;
    } else if (left >= 4) {
      launch<C, T, 4>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += 4;
    } else if (left >= 2) {
      launch<C, T, 2>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += 2;
    } else {
      launch<C, T, 1>(F, X, Y, nfreq, Nd, Nm, R, r0, adjoint, alpha, s), r0 += 1;
    }
  }
}

template void apply_fhat_multi<float>(const void*, const void*, void*, int64_t, int64_t, int64_t, int64_t, bool, float,
                                      cudaStream_t);
template void apply_fhat_multi<double>(const void*, const void*, void*, int64_t, int64_t, int64_t, int64_t, bool,
                                       double, cudaStream_t);

}  // namespace strux::cuda::toeplitz_detail
