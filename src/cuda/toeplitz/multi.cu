// Per-frequency F̂ products for R right-hand sides (algo 2), in chunks of RC right-hand sides
// (16, 8, 4, 2, 1 for float32; 8, 4, 2, 1 for float64: the accumulators live in registers).
// One right-hand side (RC = 1): the streaming kernels of one_rhs.cuh.
// Several right-hand sides (RC >= 2) make the product compute-bound (4·RC FMAs per F̂ element):
//   matvec:  register tiles of 4 rows × RC, F̂ and X̂ tiles staged in shared memory by cp.async
//            in a 3-stage pipeline (no registers held for loads in flight), lanes along Nm,
//            X̂ rows padded so the 16-byte shared loads of 8 lanes hit distinct banks.
//   adjoint: register tiles of 2 columns × RC, F̂ straight from HBM (4 rows in flight), the X̂[f]
//            rows as shared-memory broadcasts; no reduction.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/toeplitz/multi.hpp"
#include "cuda/toeplitz/one_rhs.cuh"
#include "cuda/toeplitz/product.cuh"

namespace strux::cuda::toeplitz_detail {

namespace {

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