// The streaming diagonal scan kernel (private to src/cuda/scan), for shapes with many channels.
//
// One thread owns VW adjacent channels of one batch row for the whole sequence and walks t in
// order: h stays in registers, so nothing crosses threads or blocks and there are no phases or
// barriers (the look-back kernel's lock-step waves were what kept it at ~57% of bandwidth). A warp
// reads 32*VW consecutive channels at one t: coalesced. Memory parallelism comes from a register
// ring of D steps: step t's inputs were requested D steps earlier, so each thread keeps 2D (3D
// backward) loads in flight; D * sizeof(S) * VW is what one thread has in flight per stream.
// Used when B*n fills the GPU (DiagScanPlan picks it); long sequences with few channels still go
// to the chunked look-back kernel, which splits time across blocks.
#pragma once

#include "cuda/scan/diag_scan_kernel.cuh"

namespace strux::cuda::scan {

// VW elements of S move as one load/store of VW * sizeof(S) bytes, kept as NW 32-bit words.
template <int BYTES>
struct VecOf;
template <>
struct VecOf<2> { using T = unsigned short; };
template <>
struct VecOf<4> { using T = unsigned int; };
template <>
struct VecOf<8> { using T = uint2; };
template <>
struct VecOf<16> { using T = uint4; };

template <class S, int VW>
struct Vec {
  static constexpr int BYTES = int(sizeof(S)) * VW;
  static constexpr int NW = BYTES < 4 ? 1 : BYTES / 4;
  using W = typename VecOf<BYTES>::T;
  struct R { unsigned int w[NW]; };

  static __device__ __forceinline__ R unpack(const W v) {
    R r;
    if constexpr (BYTES == 2) r.w[0] = v;
    else if constexpr (BYTES == 4) r.w[0] = v;
    else if constexpr (BYTES == 8) r.w[0] = v.x, r.w[1] = v.y;
    else r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
    return r;
  }
  static __device__ __forceinline__ W pack(const R& r) {
    if constexpr (BYTES == 2) return static_cast<unsigned short>(r.w[0]);
    else if constexpr (BYTES == 4) return r.w[0];
    else if constexpr (BYTES == 8) return make_uint2(r.w[0], r.w[1]);
    else return make_uint4(r.w[0], r.w[1], r.w[2], r.w[3]);
  }
  static __device__ __forceinline__ R ld(const S* p) { return unpack(__ldcs(reinterpret_cast<const W*>(p))); }
  static __device__ __forceinline__ void st(S* p, const R& r) { __stcs(reinterpret_cast<W*>(p), pack(r)); }
  static __device__ __forceinline__ R zero() {
    R r;
#pragma unroll
    for (int i = 0; i < NW; ++i) r.w[i] = 0u;  // 0 bits = +0 in every element type
    return r;
  }
};

// Element k of a packed vector as the compute type, and back.
__device__ __forceinline__ unsigned short half_bits(const unsigned int* w, int k) {
  return static_cast<unsigned short>(w[k / 2] >> (16 * (k % 2)));
}
template <class S>
__device__ __forceinline__ typename Tr<S>::V get(const unsigned int* w, int k);
template <>
__device__ __forceinline__ float2 get<float2>(const unsigned int* w, int k) {
  return make_float2(__uint_as_float(w[2 * k]), __uint_as_float(w[2 * k + 1]));
}
template <>
__device__ __forceinline__ float get<float>(const unsigned int* w, int k) { return __uint_as_float(w[k]); }
template <>
__device__ __forceinline__ float get<__half>(const unsigned int* w, int k) {
  return __half2float(__ushort_as_half(half_bits(w, k)));
}
template <>
__device__ __forceinline__ float get<__nv_bfloat16>(const unsigned int* w, int k) {
  return __bfloat162float(__ushort_as_bfloat16(half_bits(w, k)));
}
__device__ __forceinline__ void put_half(unsigned int* w, int k, unsigned short b) {
  if (k % 2 == 0) w[k / 2] = b;  // the even element comes first and clears the word
  else w[k / 2] |= static_cast<unsigned int>(b) << 16;
}
template <class S>
__device__ __forceinline__ void put(unsigned int* w, int k, typename Tr<S>::V v);
template <>
__device__ __forceinline__ void put<float2>(unsigned int* w, int k, float2 v) {
  w[2 * k] = __float_as_uint(v.x), w[2 * k + 1] = __float_as_uint(v.y);
}
template <>
__device__ __forceinline__ void put<float>(unsigned int* w, int k, float v) { w[k] = __float_as_uint(v); }
template <>
__device__ __forceinline__ void put<__half>(unsigned int* w, int k, float v) {
  put_half(w, k, __half_as_ushort(__float2half_rn(v)));
}
template <>
__device__ __forceinline__ void put<__nv_bfloat16>(unsigned int* w, int k, float v) {
  put_half(w, k, __bfloat16_as_ushort(__float2bfloat16_rn(v)));
}

struct SeqArgs {
  const void* a;
  const void* b;   // forward: b; backward: dh
  const void* h0;  // (B, n) or null
  const void* hf;  // backward: the forward's h
  void* h;         // forward output
  void* da;        // backward outputs
  void* db;
  void* dh0;
  int64_t B, T, n;
  double scale;
};

// 4 blocks of 128 per SM (<= 128 registers): 512 resident threads per SM, so the shapes the
// plan sends here run in one wave (a second, partial wave would run a whole sequence alone).
constexpr int SEQ_THREADS = 128, SEQ_MIN_BLOCKS = 4;

// Forward: h_t = a_t h_{t-1} + scale b_t, h_{-1} = scale h0.
template <class S, int VW, int D>
__global__ void __launch_bounds__(SEQ_THREADS, SEQ_MIN_BLOCKS) diag_scan_seq_fwd(SeqArgs g) {
  using V = typename Tr<S>::V;
  using P = Vec<S, VW>;
  using R = typename P::R;
  const int64_t nv = g.n / VW;
  const int64_t q = int64_t(blockIdx.x) * SEQ_THREADS + threadIdx.x;
  if (q >= g.B * nv) return;
  const int64_t bi = q / nv, ch = (q - bi * nv) * VW, n = g.n, T = g.T;
  const int64_t off = bi * T * n + ch;
  const S* pa = static_cast<const S*>(g.a) + off;
  const S* pb = static_cast<const S*>(g.b) + off;
  S* ph = static_cast<S*>(g.h) + off;

  const auto sc = static_cast<typename ReOf<V>::T>(g.scale);
  V h[VW];
  {
    const R r = g.h0 ? P::ld(static_cast<const S*>(g.h0) + bi * n + ch) : P::zero();
#pragma unroll
    for (int k = 0; k < VW; ++k) h[k] = scal(get<S>(r.w, k), sc);
  }
  R ra[D], rb[D];
#pragma unroll
  for (int i = 0; i < D; ++i)
    if (i < T) ra[i] = P::ld(pa + i * n), rb[i] = P::ld(pb + i * n);

  auto step = [&](int i, int64_t t, bool guard) {
    const R ca = ra[i], cb = rb[i];
    if (!guard || t + D < T) ra[i] = P::ld(pa + (t + D) * n), rb[i] = P::ld(pb + (t + D) * n);
    R o;
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      h[k] = axpy(get<S>(ca.w, k), h[k], scal(get<S>(cb.w, k), sc));
      put<S>(o.w, k, h[k]);
    }
    P::st(ph + t * n, o);
  };
  int64_t t0 = 0;
  for (; t0 + 2 * D <= T; t0 += D) {  // every prefetch in range: no guards
#pragma unroll
    for (int i = 0; i < D; ++i) step(i, t0 + i, false);
  }
  for (; t0 < T; t0 += D) {
#pragma unroll
    for (int i = 0; i < D; ++i)
      if (t0 + i < T) step(i, t0 + i, true);
  }
}

// Backward, walking t = T-1 .. 0: g_t = dh_t + conj(a_{t+1}) g_{t+1}; db_t = g_t;
// da_t = g_t conj(h_{t-1}) (h_{-1} = h0 or 0); dh0 = conj(a_0) g_0. a_t is loaded at step t and
// used at step t-1 (as a_{t+1}), so a is read once.
template <class S, int VW, int D>
__global__ void __launch_bounds__(SEQ_THREADS, SEQ_MIN_BLOCKS) diag_scan_seq_bwd(SeqArgs g) {
  using V = typename Tr<S>::V;
  using P = Vec<S, VW>;
  using R = typename P::R;
  const int64_t nv = g.n / VW;
  const int64_t q = int64_t(blockIdx.x) * SEQ_THREADS + threadIdx.x;
  if (q >= g.B * nv) return;
  const int64_t bi = q / nv, ch = (q - bi * nv) * VW, n = g.n, T = g.T;
  const int64_t off = bi * T * n + ch;
  const S* pa = static_cast<const S*>(g.a) + off;
  const S* pd = static_cast<const S*>(g.b) + off;
  const S* pf = static_cast<const S*>(g.hf) + off;
  S* pda = static_cast<S*>(g.da) + off;
  S* pdb = static_cast<S*>(g.db) + off;
  const S* h0 = g.h0 ? static_cast<const S*>(g.h0) + bi * n + ch : nullptr;

  // Loads of step s (time t = T-1-s): a_t, dh_t, h_{t-1}.
  auto hprev = [&](int64_t t) { return t >= 1 ? P::ld(pf + (t - 1) * n) : (h0 ? P::ld(h0) : P::zero()); };
  R ra[D], rd[D], rh[D];
#pragma unroll
  for (int i = 0; i < D; ++i)
    if (i < T) {
      const int64_t t = T - 1 - i;
      ra[i] = P::ld(pa + t * n), rd[i] = P::ld(pd + t * n), rh[i] = hprev(t);
    }
  V gg[VW], an[VW];
#pragma unroll
  for (int k = 0; k < VW; ++k) gg[k] = Tr<S>::zero(), an[k] = Tr<S>::zero();

  auto step = [&](int i, int64_t s, bool guard) {
    const int64_t t = T - 1 - s;
    const R ca = ra[i], cd = rd[i], chh = rh[i];
    if (!guard || s + D < T) {
      const int64_t tn = t - D;
      ra[i] = P::ld(pa + tn * n), rd[i] = P::ld(pd + tn * n), rh[i] = hprev(tn);
    }
    R ob, oa;
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      gg[k] = axpy(cj(an[k]), gg[k], get<S>(cd.w, k));
      an[k] = get<S>(ca.w, k);
      put<S>(ob.w, k, gg[k]);
      put<S>(oa.w, k, mul(gg[k], cj(get<S>(chh.w, k))));
    }
    P::st(pdb + t * n, ob);
    P::st(pda + t * n, oa);
  };
  int64_t s0 = 0;
  for (; s0 + 2 * D <= T; s0 += D) {
#pragma unroll
    for (int i = 0; i < D; ++i) step(i, s0 + i, false);
  }
  for (; s0 < T; s0 += D) {
#pragma unroll
    for (int i = 0; i < D; ++i)
      if (s0 + i < T) step(i, s0 + i, true);
  }
  if (g.dh0) {
    R o;
#pragma unroll
    for (int k = 0; k < VW; ++k) put<S>(o.w, k, mul(cj(an[k]), gg[k]));
    P::st(static_cast<S*>(g.dh0) + bi * n + ch, o);
  }
}

}  // namespace strux::cuda::scan
