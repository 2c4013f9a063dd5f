// Shared pieces of the per-frequency F̂ product kernels (one_rhs.cuh, multi.cu): the CTA shape,
// complex multiply-adds, streaming loads of stored F̂ values (complex or 16-bit pairs) and the
// warp reduction. Included by multi.cu only (one translation unit, internal linkage).
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// The sum over each aligned group of G lanes (G = 32: the whole warp), left in every lane of it.
template <int G = 32, class C>
__device__ __forceinline__ void warp_sum(C& v) {
#pragma unroll
  for (int o = G / 2; o > 0; o /= 2) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
}

}  // namespace
}  // namespace strux::cuda::toeplitz_detail
