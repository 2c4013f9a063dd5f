// Direct fftconv kernels (direct.hpp): y[t] = Σ_{j<m} k[j] v[t − j] summed tap by tap.
//
// A CTA takes a tile of time of one or several rows: each thread owns kV = 4 consecutive outputs
// (in the forward, fwd_groups(sizeof(T)) such groups, TX·kV apart) and the tile of v (float32,
// float64 for float64 data) sits in shared memory with K − 1 samples of history before it (zeros
// in causal mode, the row's end in circular mode), so both modes are one sliding dot product. A
// thread reads its window of kV + K − 1 samples into registers with 16-byte shared loads
// (conflict-free: consecutive threads, consecutive 16 bytes) and does kV multiply-adds per tap
// from registers. K is the compiled bucket (4 … 64); taps j >= m are skipped by a uniform branch,
// never multiplied (a non-finite sample must not reach outputs the contract keeps it from). HBM
// traffic: u, the gates and y once each (the halo is an L2 hit).
//
// Backward, one CTA per (h, tile of time, chunk of the batch), looping over its rows b:
//   dz = dy ⊙ post, dv[t] = Σ_j k[j] dz[t + j] + skip dz[t] (dz with K − 1 samples after the tile:
//   zeros, or the row's start in circular mode), du = dv ⊙ pre, dpre = dv ⊙ u,
//   dpost = dy ⊙ (k * v + skip v), dk[j] += Σ_t dz[t] v[t − j], dskip += Σ_t dz[t] v[t];
// dk and dskip stay in registers over the rows, are reduced over the CTA in a fixed order and
// written to a partial-sum slot per CTA, which reduce_part sums in double in a fixed order.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/elem.cuh"
#include "cuda/fftconv/direct.hpp"

namespace strux::cuda::direct {

constexpr int kV = 4;  // outputs per thread

template <class T>
struct Params {
  const T* k;  // (H, m)
  const T *u, *pre, *post, *skip, *dy;
  T *y, *du, *dpre, *dpost;
  void* part;  // backward: [nchunk·tiles][H][K + 1] of the compute type
  int64_t B, H, L, rows;
  int m;
  bool circular;
};

// ---- element access ------------------------------------------------------------------------------

// 4 elements from 16-byte-aligned memory (VEC) or one by one.
template <class T, class A>
__device__ __forceinline__ void load4(const T* p, A* o) {
  if constexpr (sizeof(T) == 2) {
    const uint2 r = *reinterpret_cast<const uint2*>(p);
    const T* e = reinterpret_cast<const T*>(&r);
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = A(to_c(e[i]));
  } else if constexpr (sizeof(T) == 4) {
    const float4 r = *reinterpret_cast<const float4*>(p);
    o[0] = r.x, o[1] = r.y, o[2] = r.z, o[3] = r.w;
  } else {
    const double2 a = reinterpret_cast<const double2*>(p)[0], b = reinterpret_cast<const double2*>(p)[1];
    o[0] = a.x, o[1] = a.y, o[2] = b.x, o[3] = b.y;
  }
}

template <class T, class A>
__device__ __forceinline__ void store4(T* p, const A* x) {
  if constexpr (sizeof(T) == 2) {
    uint2 r;
    T* e = reinterpret_cast<T*>(&r);
#pragma unroll
    for (int i = 0; i < 4; ++i) e[i] = From<T>::of(x[i]);
    *reinterpret_cast<uint2*>(p) = r;
  } else if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
  } else {
    reinterpret_cast<double2*>(p)[0] = make_double2(x[0], x[1]);
    reinterpret_cast<double2*>(p)[1] = make_double2(x[2], x[3]);
  }
}

// The kV elements of row `base` at t0 … t0 + 3 (0 past L); VEC: one aligned vector load when the
// four are in the row.
template <bool VEC, class T, class A>
__device__ __forceinline__ void load_row4(const T* x, int64_t base, int64_t t0, int64_t L, A* o) {
  if (VEC && t0 + kV <= L) {
    load4(x + base + t0, o);
    return;
  }
#pragma unroll
  for (int i = 0; i < kV; ++i) o[i] = t0 + i < L ? A(to_c(x[base + t0 + i])) : A(0);
}

template <bool VEC, class T, class A>
__device__ __forceinline__ void store_row4(T* x, int64_t base, int64_t t0, int64_t L, const A* v) {
  if (VEC && t0 + kV <= L) {
    store4(x + base + t0, v);
    return;
  }
#pragma unroll
  for (int i = 0; i < kV; ++i)
    if (t0 + i < L) x[base + t0 + i] = From<T>::of(v[i]);
}

// x ⊙ g (g null: x) at any t of row `base`: 0 outside [0, L), except, in circular mode, the
// history t in [−(m − 1), 0) (fwd: the forward's v) or the wrap t in [L, L + m − 1) (!fwd: the
// backward's dz), read at t mod L. Arguments by value: a reference to the kernel's parameter
// block would give it a local-memory copy.
template <bool fwd, class A, class T>
__device__ __forceinline__ A at(const T* x, const T* g, int64_t base, int64_t t, int64_t L, int m, bool circular) {
  if (t < 0) {
    if (!fwd || !circular || t < -(m - 1)) return A(0);
    t += L;
  } else if (t >= L) {
    if (fwd || !circular || t >= L + m - 1) return A(0);
    t -= L;
  }
  A v = A(to_c(x[base + t]));
  if (g) v *= A(to_c(g[base + t]));
  return v;
}

// n values of a shared-memory window starting 16-byte aligned, by 16-byte loads (n a multiple of
// 16 / sizeof(A)).
template <int N>
__device__ __forceinline__ void window(const float* s, float* w) {
#pragma unroll
  for (int q = 0; q < N / 4; ++q) {
    const float4 x = reinterpret_cast<const float4*>(s)[q];
    w[4 * q] = x.x, w[4 * q + 1] = x.y, w[4 * q + 2] = x.z, w[4 * q + 3] = x.w;
  }
}
template <int N>
__device__ __forceinline__ void window(const double* s, double* w) {
#pragma unroll
  for (int q = 0; q < N / 2; ++q) {
    const double2 x = reinterpret_cast<const double2*>(s)[q];
    w[2 * q] = x.x, w[2 * q + 1] = x.y;
  }
}

// The taps go in blocks of kJ: a thread holds a window of kV + kJ − 1 samples at a time (not
// kV + K − 1), so the backward's K + 1 filter-gradient sums fit in registers beside it; a block
// past the used taps is skipped whole.
template <int K>
constexpr int kJ = K < 16 ? K : 16;

// acc[i] = Σ_{j<m} k[j] h[i + K − 1 − j], h = the history window from s (taps j in order).
template <int K, class A>
__device__ __forceinline__ void conv4(const A* kt, int m, const A* s, A* acc) {
  constexpr int J = kJ<K>;
#pragma unroll
  for (int i = 0; i < kV; ++i) acc[i] = A(0);
#pragma unroll
  for (int jb = 0; jb < K; jb += J) {
    if (jb < m) {
      A w[kV + J];
      window<kV + J>(s + (K - jb - J), w);
#pragma unroll
      for (int jj = 0; jj < J; ++jj) {
        if (jb + jj < m) {
          const A c = kt[jb + jj];
#pragma unroll
          for (int i = 0; i < kV; ++i) acc[i] = fma(c, w[i + J - 1 - jj], acc[i]);
        }
      }
    }
  }
}

// acc[i] = Σ_{j<m} k[j] g[i + j], g = the window from s on (taps j in order).
template <int K, class A>
__device__ __forceinline__ void corr4(const A* kt, int m, const A* s, A* acc) {
  constexpr int J = kJ<K>;
#pragma unroll
  for (int i = 0; i < kV; ++i) acc[i] = A(0);
#pragma unroll
  for (int jb = 0; jb < K; jb += J) {
    if (jb < m) {
      A w[kV + J];
      window<kV + J>(s + jb, w);
#pragma unroll
      for (int jj = 0; jj < J; ++jj) {
        if (jb + jj < m) {
          const A c = kt[jb + jj];
#pragma unroll
          for (int i = 0; i < kV; ++i) acc[i] = fma(c, w[i + jj], acc[i]);
        }
      }
    }
  }
}

// dk[j] += Σ_i dz[i] h[i + K − 1 − j] for j < m, h the history window from s.
template <int K, class A>
__device__ __forceinline__ void grad4(int m, const A* s, const A* dz, A* dk) {
  constexpr int J = kJ<K>;
#pragma unroll
  for (int jb = 0; jb < K; jb += J) {
    if (jb < m) {
      A w[kV + J];
      window<kV + J>(s + (K - jb - J), w);
#pragma unroll
      for (int jj = 0; jj < J; ++jj) {
        if (jb + jj < m) {
#pragma unroll
          for (int i = 0; i < kV; ++i) dk[jb + jj] = fma(dz[i], w[i + J - 1 - jj], dk[jb + jj]);
        }
      }
    }
  }
}

// ---- forward -------------------------------------------------------------------------------------

// blockDim (TX, RY): RY rows of one tile of NV·TX·kV outputs, thread tx owning the kV outputs at
// tile0 + g·TX·kV + tx·kV for g < NV (fwd_groups: NV independent vector loads per stream in
// flight per thread); grid (row groups, tiles). Every global load (taps, history, u, the gates,
// skip) is issued into registers before the barrier, so a CTA waits for memory once, not once
// for u and again for the history and the postgate.
template <class T, int K, bool VEC>
__global__ void __launch_bounds__(256, 2) forward_kernel(const Params<T> p) {
  using A = typename Compute<T>::type;
  constexpr int NV = fwd_groups(sizeof(T));
  constexpr int KR = (K + 31) / 32;  // taps / history samples per thread at most (TX >= 32)
  extern __shared__ __align__(16) unsigned char smem[];
  const int TX = blockDim.x, tx = threadIdx.x, ty = threadIdx.y;
  const int W = TX * kV;       // outputs of one group
  const int TS = NV * W + K;   // a row's window: K − 1 history samples, the tile, padding
  A* kt = reinterpret_cast<A*>(smem) + ty * K;
  A* s = reinterpret_cast<A*>(smem) + blockDim.y * K + ty * TS;
  const int64_t r = int64_t(blockIdx.x) * blockDim.y + ty;
  const bool live = r < p.rows;
  const int64_t h = live ? r % p.H : 0, base = r * p.L;
  const int64_t tile0 = int64_t(blockIdx.y) * NV * W;
  const int m = p.m;
  A kr[KR], hr[KR];
#pragma unroll
  for (int c = 0; c < KR; ++c) {
    const int j = tx + c * TX;
    kr[c] = live && j < m ? A(to_c(p.k[h * m + j])) : A(0);
    // History: only the last m − 1 samples before the tile are ever multiplied.
    hr[c] = live && j < K - 1 && j >= K - m ? at<true, A>(p.u, p.pre, base, tile0 - (K - 1) + j, p.L, m, p.circular)
                                            : A(0);
  }
  A v[NV][kV], gp[NV][kV], gq[NV][kV];
#pragma unroll
  for (int g = 0; g < NV; ++g) {
    const int64_t t = tile0 + g * W + int64_t(tx) * kV;
    if (live) {
      load_row4<VEC>(p.u, base, t, p.L, v[g]);
      if (p.pre) load_row4<VEC>(p.pre, base, t, p.L, gp[g]);
      if (p.post) load_row4<VEC>(p.post, base, t, p.L, gq[g]);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) v[g][i] = A(0);
    }
  }
  const A sk = live && p.skip ? A(to_c(p.skip[h])) : A(0);
#pragma unroll
  for (int c = 0; c < KR; ++c) {
    const int j = tx + c * TX;
    if (j < K) kt[j] = kr[c];
    if (j < K - 1) s[j] = hr[c];
  }
#pragma unroll
  for (int g = 0; g < NV; ++g) {
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      if (live && p.pre) v[g][i] *= gp[g][i];
      s[K - 1 + g * W + tx * kV + i] = v[g][i];
    }
  }
  if (tx == 0) s[TS - 1] = A(0);  // the 16-byte window's padding
  __syncthreads();
  if (!live) return;
#pragma unroll
  for (int g = 0; g < NV; ++g) {
    const int64_t t = tile0 + g * W + int64_t(tx) * kV;
    if (t >= p.L) break;
    A z[kV];
    conv4<K>(kt, m, s + g * W + tx * kV, z);
    if (p.skip) {
#pragma unroll
      for (int i = 0; i < kV; ++i) z[i] = fma(sk, v[g][i], z[i]);
    }
    if (p.post) {
#pragma unroll
      for (int i = 0; i < kV; ++i) z[i] *= gq[g][i];
    }
    store_row4<VEC>(p.y, base, t, p.L, z);
  }
}

// ---- backward ------------------------------------------------------------------------------------

// blockDim TX; grid (H · tiles, chunks of the batch).
template <class T, int K, bool VEC>
__global__ void __launch_bounds__(256, 1) backward_kernel(const Params<T> p, int64_t tiles, int64_t nchunk) {
  using A = typename Compute<T>::type;
  extern __shared__ __align__(16) unsigned char smem[];
  const int TX = blockDim.x, tx = threadIdx.x;
  const int TS = TX * kV + K;
  A* kt = reinterpret_cast<A*>(smem);
  A* sv = kt + K;       // v: K − 1 history samples, the tile
  A* sg = sv + TS;      // dz: the tile, K − 1 samples after it
  A* red = sg + TS;     // [warps][K + 1] partial sums
  const int64_t h = blockIdx.x / tiles, tile = blockIdx.x % tiles, chunk = blockIdx.y;
  const int64_t b0 = chunk * p.B / nchunk, b1 = (chunk + 1) * p.B / nchunk;
  const int64_t tile0 = tile * TX * kV, t0 = tile0 + int64_t(tx) * kV;
  const int m = p.m;
  const bool mine = t0 < p.L;
  for (int j = tx; j < K; j += TX) kt[j] = j < m ? A(to_c(p.k[h * m + j])) : A(0);
  const A sk = p.skip ? A(to_c(p.skip[h])) : A(0);
  A dk[K + 1];  // dk[j] for j < K, dskip last
#pragma unroll
  for (int j = 0; j <= K; ++j) dk[j] = A(0);

  for (int64_t b = b0; b < b1; ++b) {
    const int64_t base = (b * p.H + h) * p.L;
    A u[kV], v[kV], dy[kV], dz[kV];
    load_row4<VEC>(p.u, base, t0, p.L, u);
    load_row4<VEC>(p.dy, base, t0, p.L, dy);
    A pre[kV], post[kV];
#pragma unroll
    for (int i = 0; i < kV; ++i) pre[i] = post[i] = A(1);
    if (p.pre) load_row4<VEC>(p.pre, base, t0, p.L, pre);
    if (p.post) load_row4<VEC>(p.post, base, t0, p.L, post);
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      v[i] = p.pre ? u[i] * pre[i] : u[i];
      dz[i] = p.post ? dy[i] * post[i] : dy[i];
      sv[K - 1 + tx * kV + i] = v[i];
      // past L: zeros, or in circular mode the row's start that the correlation wraps to
      sg[tx * kV + i] = t0 + i < p.L ? dz[i] : at<false, A>(p.dy, p.post, base, t0 + i, p.L, m, p.circular);
    }
    for (int q = tx; q < K - 1; q += TX) {
      sv[q] = q >= K - m ? at<true, A>(p.u, p.pre, base, tile0 - (K - 1) + q, p.L, m, p.circular) : A(0);
      sg[TX * kV + q] = q < m - 1 ? at<false, A>(p.dy, p.post, base, tile0 + TX * kV + q, p.L, m, p.circular) : A(0);
    }
    if (tx == 0) sv[TS - 1] = sg[TS - 1] = A(0);
    __syncthreads();
    if (mine) {
      A acc[kV];
      corr4<K>(kt, m, sg + tx * kV, acc);  // dv = corr(k, dz) + skip dz
#pragma unroll
      for (int i = 0; i < kV; ++i) acc[i] = fma(sk, dz[i], acc[i]);
      if (p.pre) {
        A o[kV];
#pragma unroll
        for (int i = 0; i < kV; ++i) o[i] = acc[i] * pre[i];
        store_row4<VEC>(p.du, base, t0, p.L, o);
        if (p.dpre) {
#pragma unroll
          for (int i = 0; i < kV; ++i) o[i] = acc[i] * u[i];
          store_row4<VEC>(p.dpre, base, t0, p.L, o);
        }
      } else {
        store_row4<VEC>(p.du, base, t0, p.L, acc);
      }
      if (p.dpost) {  // the forward's z
        conv4<K>(kt, m, sv + tx * kV, acc);
#pragma unroll
        for (int i = 0; i < kV; ++i) acc[i] = dy[i] * fma(sk, v[i], acc[i]);
        store_row4<VEC>(p.dpost, base, t0, p.L, acc);
      }
      grad4<K>(m, sv + tx * kV, dz, dk);
#pragma unroll
      for (int i = 0; i < kV; ++i) dk[K] = fma(dz[i], v[i], dk[K]);
    }
    __syncthreads();  // the tiles are rewritten for the next row
  }
  // The CTA's sums: warp shuffles, then warps in order.
  const int lane = tx & 31, warp = tx >> 5, nwarp = TX >> 5;
#pragma unroll
  for (int j = 0; j <= K; ++j) {
    A x = dk[j];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
    if (lane == 0) red[warp * (K + 1) + j] = x;
  }
  __syncthreads();
  A* part = static_cast<A*>(p.part) + ((chunk * tiles + tile) * p.H + h) * (K + 1);
  for (int j = tx; j <= K; j += TX) {
    A x = red[j];
    for (int q = 1; q < nwarp; ++q) x += red[q * (K + 1) + j];
    part[j] = x;
  }
}

// dk[h, j] = Σ_parts part[·][h][j] (j < m; 0 for m <= j < Lk), dskip[h] = Σ part[·][h][K], in double.
template <class T, class A>
__global__ void reduce_part(const A* __restrict__ part, int64_t nparts, int64_t H, int K, int m, int64_t Lk,
                            T* __restrict__ dk, T* __restrict__ dskip) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= H * (Lk + 1)) return;
  const int64_t h = i / (Lk + 1), j = i % (Lk + 1);
  if (j == Lk && !dskip) return;
  const int64_t slot = j == Lk ? K : j;
  double s = 0.0;
  if (j == Lk || j < m)
    for (int64_t q = 0; q < nparts; ++q) s += double(part[(q * H + h) * (K + 1) + slot]);
  if (j == Lk)
    dskip[h] = From<T>::of(A(s));
  else
    dk[h * Lk + j] = From<T>::of(A(s));
}

}  // namespace strux::cuda::direct
