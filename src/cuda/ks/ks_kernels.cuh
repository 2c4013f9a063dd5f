// Kernels of the ks family (private). Included by one .cu per element type so that the
// instantiations compile in parallel.
//
// Every product is expressed as a per-group dense product C[p, q] = sum_r A[p, r] B[r, q],
// where the group g = (i, j) names one block of the Kronecker pattern and the loaders
// below turn (g, p, r) into the strided address of Algorithm 2, so nothing is permuted.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::ks {

template <class T>
__device__ __forceinline__ float ld(const T* p);
template <>
__device__ __forceinline__ float ld<float>(const float* p) { return __ldg(p); }
// Half types through the unsigned short __ldg: cuda_fp16's own __half __ldg was seen hoisted out
// of its bounds guard in the scan kernels (bench/NOTES-gpu-scan.md); these loads sit behind such
// guards too.
template <>
__device__ __forceinline__ float ld<__half>(const __half* p) {
  return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
}
template <>
__device__ __forceinline__ float ld<__nv_bfloat16>(const __nv_bfloat16* p) {
  return __bfloat162float(__ushort_as_bfloat16(__ldg(reinterpret_cast<const unsigned short*>(p))));
}
__device__ __forceinline__ void st(float* p, float v) { *p = v; }
__device__ __forceinline__ void st(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// y = x K'^T (or K' x) where K' has pattern (a, b, c, d) and weights w[i*si + k*sk + l*sl + j*sj].
// Forward uses w's own strides; dx = dy K uses pattern (a, c, b, d) with the middle strides
// swapped. p = batch row n, q = output index k, r = input index l.
template <class T, bool BL>
struct ProdProblem {
  const T* x;
  const T* w;
  T* y;
  int64_t a, b, c, d, batch;
  int64_t si, sk, sl, sj;
  __device__ int64_t P() const { return batch; }
  __device__ int64_t Q() const { return b; }
  __device__ int64_t R() const { return c; }
  __device__ float A(int64_t i, int64_t j, int64_t n, int64_t l) const {
    const int64_t col = (i * c + l) * d + j;
    return BL ? ld(x + col * batch + n) : ld(x + n * (a * c * d) + col);
  }
  __device__ float B(int64_t i, int64_t j, int64_t l, int64_t k) const {
    return ld(w + i * si + k * sk + l * sl + j * sj);
  }
  __device__ void C(int64_t i, int64_t j, int64_t n, int64_t k, float v) const {
    const int64_t row = (i * b + k) * d + j;
    if (BL)
      st(y + row * batch + n, v);
    else
      st(y + n * (a * b * d) + row, v);
  }
};

// *p += v atomically, keeping subnormals: atom.add.f32 flushes subnormal inputs and results to
// zero (PTX ISA), which zeroed float32 weight gradients of tiny values. A tiny v takes a
// compare-and-swap loop with an IEEE add; a larger one the atomic add, where a flushed
// subnormal (< 2^-126) is below the rounding of v (>= 2^-100) anyway.
__device__ __forceinline__ void add_keep_subnormal(float* p, float v) {
  if (!(fabsf(v) < 0x1p-100f)) {  // NaN and inf too
    atomicAdd(p, v);
    return;
  }
  unsigned* a = reinterpret_cast<unsigned*>(p);
  unsigned old = *a, seen;
  do {
    seen = old;
    old = atomicCAS(a, seen, __float_as_uint(__fadd_rn(__uint_as_float(seen), v)));
  } while (old != seen);
}

// dw[i,k,l,j] += sum_n dy[n, row(i,k,j)] x[n, col(i,l,j)]: p = k, q = l, r = n (split over
// blocks, summed with float atomics into a float32 dw; add_keep_subnormal).
template <class T, bool BL>
struct GradWProblem {
  const T* x;
  const T* dy;
  float* dw;
  int64_t a, b, c, d, batch;
  __device__ int64_t P() const { return b; }
  __device__ int64_t Q() const { return c; }
  __device__ int64_t R() const { return batch; }
  __device__ float A(int64_t i, int64_t j, int64_t k, int64_t n) const {
    const int64_t row = (i * b + k) * d + j;
    return BL ? ld(dy + row * batch + n) : ld(dy + n * (a * b * d) + row);
  }
  __device__ float B(int64_t i, int64_t j, int64_t n, int64_t l) const {
    const int64_t col = (i * c + l) * d + j;
    return BL ? ld(x + col * batch + n) : ld(x + n * (a * c * d) + col);
  }
  __device__ void C(int64_t i, int64_t j, int64_t k, int64_t l, float v) const {
    add_keep_subnormal(dw + ((i * b + k) * c + l) * d + j, v);
  }
};

// The fused output-stationary tile kernel. 256 threads; the block's C tile is (16 TM) x (16 TN)
// of one group; each thread keeps TM x TN accumulators in registers at p = tp + 16 u,
// q = tq + 16 v, so that a warp's 16 neighbouring lanes touch neighbouring addresses of the
// layout's contiguous axis (LANE_P: p, else q). Tiles of A and B are staged through shared
// memory BK values of r at a time; A_RFAST / B_RFAST say which index is contiguous in memory
// so that the staging reads are coalesced. Every index is bounds-checked: sizes need not
// divide the tile.
// Grid: x = p_tiles * q_tiles, y = groups (looped), z = r splits of length r_split.
template <int TM, int TN, int BK, bool LANE_P, bool A_RFAST, bool B_RFAST, class Prob>
__global__ void __launch_bounds__(256) tile_kernel(Prob pr, int64_t p_tiles, int64_t groups,
                                                   int64_t r_split) {
  constexpr int BM = 16 * TM, BN = 16 * TN;
  __shared__ float As[BK][BM + 1];
  __shared__ float Bs[BK][BN + 1];
  const int t = threadIdx.x;
  const int tp = LANE_P ? (t & 15) : (t >> 4);
  const int tq = LANE_P ? (t >> 4) : (t & 15);
  const int64_t P = pr.P(), Q = pr.Q(), R = pr.R();
  const int64_t p0 = int64_t(blockIdx.x % p_tiles) * BM;
  const int64_t q0 = int64_t(blockIdx.x / p_tiles) * BN;
  const int64_t r0 = int64_t(blockIdx.z) * r_split;
  const int64_t r1 = min(R, r0 + r_split);
  const int64_t d = pr.d;
  for (int64_t g = blockIdx.y; g < groups; g += gridDim.y) {
    const int64_t gi = g / d, gj = g - gi * d;
    float acc[TM][TN];
#pragma unroll
    for (int u = 0; u < TM; ++u)
#pragma unroll
      for (int v = 0; v < TN; ++v) acc[u][v] = 0.f;
    for (int64_t rb = r0; rb < r1; rb += BK) {
#pragma unroll
      for (int e0 = 0; e0 < BM * BK; e0 += 256) {
        const int e = e0 + t;
        if (BM * BK % 256 == 0 || e < BM * BK) {
          const int pp = A_RFAST ? e / BK : e % BM;
          const int rr = A_RFAST ? e % BK : e / BM;
          const int64_t p = p0 + pp, r = rb + rr;
          As[rr][pp] = (p < P && r < r1) ? pr.A(gi, gj, p, r) : 0.f;
        }
      }
#pragma unroll
      for (int e0 = 0; e0 < BN * BK; e0 += 256) {
        const int e = e0 + t;
        if (BN * BK % 256 == 0 || e < BN * BK) {
          const int qq = B_RFAST ? e / BK : e % BN;
          const int rr = B_RFAST ? e % BK : e / BN;
          const int64_t q = q0 + qq, r = rb + rr;
          Bs[rr][qq] = (q < Q && r < r1) ? pr.B(gi, gj, r, q) : 0.f;
        }
      }
      __syncthreads();
#pragma unroll
      for (int rr = 0; rr < BK; ++rr) {
        float av[TM], bv[TN];
#pragma unroll
        for (int u = 0; u < TM; ++u) av[u] = As[rr][tp + 16 * u];
#pragma unroll
        for (int v = 0; v < TN; ++v) bv[v] = Bs[rr][tq + 16 * v];
#pragma unroll
        for (int u = 0; u < TM; ++u)
#pragma unroll
          for (int v = 0; v < TN; ++v) acc[u][v] = fmaf(av[u], bv[v], acc[u][v]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int u = 0; u < TM; ++u)
#pragma unroll
      for (int v = 0; v < TN; ++v) {
        const int64_t p = p0 + tp + 16 * u, q = q0 + tq + 16 * v;
        if (p < P && q < Q) pr.C(gi, gj, p, q, acc[u][v]);
      }
  }
}

// sum_l A(i, j, n, l) B(i, j, l, k) for any length c. A single running float32 sum stalls once
// it reaches 2^24 times a term (pattern (1, 1, 2^25, 1) of equal terms summed to half the true
// value), so terms are summed from zero in blocks of kDotBlock and the block sums are added with
// compensation (Kahan): ~1e-7 relative for any c. For c <= kDotBlock this is the plain FMA chain.
// No flush to zero anywhere (fmaf, IEEE adds; the build has no -ftz / fast-math): subnormal
// products and sums are kept. An infinite sum skips the compensation (inf - inf would be NaN).
constexpr int64_t kDotBlock = 64;
template <class Prob>
__device__ __forceinline__ float blocked_dot(const Prob& pr, int64_t i, int64_t j, int64_t n, int64_t k) {
  float s = 0.f, comp = 0.f;
  for (int64_t l0 = 0; l0 < pr.c; l0 += kDotBlock) {
    const int64_t l1 = min(pr.c, l0 + kDotBlock);
    float part = 0.f;
    for (int64_t l = l0; l < l1; ++l) part = fmaf(pr.A(i, j, n, l), pr.B(i, j, l, k), part);
    const float y = __fsub_rn(part, comp), t = __fadd_rn(s, y);
    comp = isfinite(t) ? __fsub_rn(__fsub_rn(t, s), y) : 0.f;
    s = t;
  }
  return s;
}

// Small groups (c or b tiny, e.g. butterfly factors b = c = 2): one thread per output element,
// walking the output in memory order so stores are coalesced; the c inputs it reads are shared
// with its b - 1 siblings through L1. Memory-bound by design.
// Grid: batch-last: x over batch, y over rows m (looped); batch-first: x over rows m, y over
// batch (looped).
template <class T, bool BL>
__global__ void __launch_bounds__(256) direct_kernel(ProdProblem<T, BL> pr) {
  const int64_t M = pr.a * pr.b * pr.d;
  const int64_t bd = pr.b * pr.d;
  const int64_t inner = BL ? pr.batch : M;
  const int64_t outer = BL ? M : pr.batch;
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= inner) return;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    const int64_t n = BL ? e : o;
    const int64_t m = BL ? o : e;
    const int64_t i = m / bd, rem = m - i * bd;
    const int64_t k = rem / pr.d, j = rem - k * pr.d;
    pr.C(i, j, n, k, blocked_dot(pr, i, j, n, k));
  }
}

}  // namespace strux::cuda::ks
