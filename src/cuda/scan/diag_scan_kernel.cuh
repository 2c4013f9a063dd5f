// The one-pass chunked diagonal scan kernel (private to src/cuda/scan).
//
// Block = 32 channels (lanes, along the contiguous n axis: coalesced) x 8 warps; each thread
// owns LC = 16 consecutive time steps of one channel, so a block covers a chunk of 128 steps.
// Phases: (1) load the chunk (all loads independent, in flight together) and scan it locally in
// registers, keeping the running A-product and the local h (state entering the chunk = 0);
// (2) combine the 8 per-thread aggregates through shared memory; (3) warp 0 publishes the
// block's aggregate, looks back over earlier chunks of the same channels (decoupled look-back:
// an earlier chunk's inclusive state ends the walk, its bare aggregate is folded in and the walk
// goes on), publishes its own inclusive state; (4) each thread fixes its local h with the
// incoming state and writes. Blocks take chunk numbers from an atomic counter in start order,
// so a block only ever waits for blocks already running: no deadlock.
// REV = the backward pass: the same scan run from t = T-1 down to 0 on g_t = dh_t +
// conj(a_{t+1}) g_{t+1}, then db = g, da_t = g_t conj(h_{t-1}), dh0 = conj(a_0) g_0.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace strux::cuda::scan {

constexpr int CW = 32, TW = 8, LC = 16, CH = TW * LC;

// The scan's arithmetic, once for float32 / complex64 (float, float2) and float64 / complex128
// (double, double2): R is a real type, C its complex pair (x = real part, y = imaginary part).
template <class R>
struct CxOf {};
template <>
struct CxOf<float> {
  using T = float2;
  static __device__ __forceinline__ float2 make(float x, float y) { return make_float2(x, y); }
};
template <>
struct CxOf<double> {
  using T = double2;
  static __device__ __forceinline__ double2 make(double x, double y) { return make_double2(x, y); }
};
template <class C>
struct ReOf {};
template <>
struct ReOf<float2> { using T = float; };
template <>
struct ReOf<double2> { using T = double; };
template <>
struct ReOf<float> { using T = float; };
template <>
struct ReOf<double> { using T = double; };
template <class R>
using IfReal = std::enable_if_t<std::is_floating_point<R>::value, R>;
template <class C>
using IfCx = std::enable_if_t<!std::is_floating_point<C>::value, typename CxOf<typename ReOf<C>::T>::T>;

template <class R>
__device__ __forceinline__ IfReal<R> mul(R a, R b) { return a * b; }
template <class C>
__device__ __forceinline__ IfCx<C> mul(C a, C b) {
  return CxOf<decltype(a.x)>::make(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
// a * x + y
template <class R>
__device__ __forceinline__ IfReal<R> axpy(R a, R x, R y) { return fma(a, x, y); }
template <class C>
__device__ __forceinline__ IfCx<C> axpy(C a, C x, C y) {
  return CxOf<decltype(a.x)>::make(fma(a.x, x.x, fma(-a.y, x.y, y.x)), fma(a.x, x.y, fma(a.y, x.x, y.y)));
}
template <class R>
__device__ __forceinline__ IfReal<R> cj(R a) { return a; }
template <class C>
__device__ __forceinline__ IfCx<C> cj(C a) { return CxOf<decltype(a.x)>::make(a.x, -a.y); }
// times a real scale of the element's precision (kernels round the plan's double scale once)
template <class R>
__device__ __forceinline__ IfReal<R> scal(R a, R s) { return a * s; }
template <class C>
__device__ __forceinline__ IfCx<C> scal(C a, decltype(C::x) s) { return CxOf<decltype(a.x)>::make(a.x * s, a.y * s); }
template <class V>
__device__ __forceinline__ V ldcg(const V* p) { return __ldcg(p); }
__device__ __forceinline__ float2 shfl0(float2 v) {
  return make_float2(__shfl_sync(0xffffffffu, v.x, 0), __shfl_sync(0xffffffffu, v.y, 0));
}

// Storage type S -> compute type V, with loads and stores.
template <class S>
struct Tr;
template <>
struct Tr<float> {
  using V = float;
  static __device__ __forceinline__ V one() { return 1.f; }
  static __device__ __forceinline__ V zero() { return 0.f; }
  static __device__ __forceinline__ V ld(const float* p) { return __ldg(p); }
  static __device__ __forceinline__ void st(float* p, V v) { __stcs(p, v); }
};
template <>
struct Tr<__half> {
  using V = float;
  static __device__ __forceinline__ V one() { return 1.f; }
  static __device__ __forceinline__ V zero() { return 0.f; }
  // The bits through the unsigned short __ldg: cuda_fp16's own __half __ldg is an inline asm the
  // compiler may hoist out of the bounds check that guards it (an out-of-bounds read, seen on an
  // H100 in the rows kernel's guarded loads).
  static __device__ __forceinline__ V ld(const __half* p) {
    return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
  }
  static __device__ __forceinline__ void st(__half* p, V v) { *p = __float2half_rn(v); }
};
template <>
struct Tr<__nv_bfloat16> {
  using V = float;
  static __device__ __forceinline__ V one() { return 1.f; }
  static __device__ __forceinline__ V zero() { return 0.f; }
  static __device__ __forceinline__ V ld(const __nv_bfloat16* p) {  // as __half's
    return __bfloat162float(__ushort_as_bfloat16(__ldg(reinterpret_cast<const unsigned short*>(p))));
  }
  static __device__ __forceinline__ void st(__nv_bfloat16* p, V v) { *p = __float2bfloat16_rn(v); }
};
template <>
struct Tr<float2> {
  using V = float2;
  static __device__ __forceinline__ V one() { return make_float2(1.f, 0.f); }
  static __device__ __forceinline__ V zero() { return make_float2(0.f, 0.f); }
  static __device__ __forceinline__ V ld(const float2* p) { return __ldg(p); }
  static __device__ __forceinline__ void st(float2* p, V v) { __stcs(p, v); }
};

template <>
struct Tr<double> {
  using V = double;
  static __device__ __forceinline__ V one() { return 1.0; }
  static __device__ __forceinline__ V zero() { return 0.0; }
  static __device__ __forceinline__ V ld(const double* p) { return __ldg(p); }
  static __device__ __forceinline__ void st(double* p, V v) { __stcs(p, v); }
};
template <>
struct Tr<double2> {
  using V = double2;
  static __device__ __forceinline__ V one() { return make_double2(1.0, 0.0); }
  static __device__ __forceinline__ V zero() { return make_double2(0.0, 0.0); }
  static __device__ __forceinline__ V ld(const double2* p) { return __ldg(p); }
  static __device__ __forceinline__ void st(double2* p, V v) { __stcs(p, v); }
};

template <class S, class V>
struct ScanArgs {
  const S* a;
  const S* b;    // forward: b; backward: dh
  const S* h0;   // (B, n) or null
  const S* hf;   // backward: the forward's h
  S* h;          // forward output
  S* da;         // backward outputs
  S* db;
  S* dh0;
  int64_t B, T, n, ctiles, n_tiles, n_chunks;
  double scale;
  int* counter;
  int* flags;  // 0 = nothing, 1 = aggregate published, 2 = inclusive state published
  V* aggA;
  V* aggH;
  V* incl;
};

template <class S, bool REV>
__global__ void __launch_bounds__(CW* TW) diag_scan_kernel(ScanArgs<S, typename Tr<S>::V> g) {
  using V = typename Tr<S>::V;
  __shared__ int s_vid;
  __shared__ V sA[TW][CW], sH[TW][CW], sC[CW];
  const int lane = threadIdx.x % CW, tw = threadIdx.x / CW;
  if (threadIdx.x == 0) s_vid = atomicAdd(g.counter, 1);
  __syncthreads();
  const int64_t vid = s_vid;
  const int64_t chunk = vid / g.n_tiles, tile = vid - chunk * g.n_tiles;
  const int64_t bi = tile / g.ctiles, ch = (tile - bi * g.ctiles) * CW + lane;
  const bool live = ch < g.n;
  const int64_t base = bi * g.T * g.n + ch;
  const int64_t s0 = chunk * CH + tw * LC;  // first step (in scan order) of this thread
  const auto sc = static_cast<typename ReOf<V>::T>(g.scale);

  // (1) load and scan locally: al[s] becomes the running product, bl[s] the local state.
  V al[LC], bl[LC];
#pragma unroll
  for (int s = 0; s < LC; ++s) {
    const int64_t t = REV ? g.T - 1 - (s0 + s) : s0 + s;
    al[s] = Tr<S>::one();
    bl[s] = Tr<S>::zero();
    if (live && t >= 0 && t < g.T) {
      if (REV) {
        al[s] = t + 1 < g.T ? cj(Tr<S>::ld(g.a + base + (t + 1) * g.n)) : Tr<S>::zero();
        bl[s] = Tr<S>::ld(g.b + base + t * g.n);
      } else {
        al[s] = Tr<S>::ld(g.a + base + t * g.n);
        bl[s] = scal(Tr<S>::ld(g.b + base + t * g.n), sc);
      }
    }
  }
  V PA = Tr<S>::one(), PH = Tr<S>::zero();
#pragma unroll
  for (int s = 0; s < LC; ++s) {
    PH = axpy(al[s], PH, bl[s]);
    PA = mul(al[s], PA);
    al[s] = PA;
    bl[s] = PH;
  }
  // (2) per-thread aggregates to shared memory.
  sA[tw][lane] = PA;
  sH[tw][lane] = PH;
  __syncthreads();

  // (3) look-back, by warp 0.
  if (tw == 0) {
    V BA = Tr<S>::one(), BH = Tr<S>::zero();
#pragma unroll
    for (int w = 0; w < TW; ++w) {
      BH = axpy(sA[w][lane], BH, sH[w][lane]);
      BA = mul(sA[w][lane], BA);
    }
    const int64_t slot = chunk * g.n_tiles + tile;
    V carry = Tr<S>::zero();
    if (chunk == 0) {
      if (!REV && g.h0 && live) carry = scal(Tr<S>::ld(g.h0 + bi * g.n + ch), sc);
    } else {
      g.aggA[slot * CW + lane] = BA;
      g.aggH[slot * CW + lane] = BH;
      __threadfence();
      __syncwarp();
      if (lane == 0) atomicExch(g.flags + slot, 1);
      V SA = Tr<S>::one(), SH = Tr<S>::zero();  // chunks between the one read and ours
      for (int64_t p = chunk - 1; p >= 0; --p) {
        const int64_t ps = p * g.n_tiles + tile;
        int f = 0;
        if (lane == 0) {
          const volatile int* fp = g.flags + ps;
          while ((f = *fp) == 0) {
          }
        }
        f = __shfl_sync(0xffffffffu, f, 0);
        __threadfence();
        if (f == 2) {
          carry = axpy(SA, ldcg(g.incl + ps * CW + lane), SH);
          break;
        }
        SH = axpy(SA, ldcg(g.aggH + ps * CW + lane), SH);
        SA = mul(SA, ldcg(g.aggA + ps * CW + lane));
      }
    }
    g.incl[slot * CW + lane] = axpy(BA, carry, BH);
    __threadfence();
    __syncwarp();
    if (lane == 0) atomicExch(g.flags + slot, 2);
    sC[lane] = carry;
  }
  __syncthreads();

  // (4) state entering this thread's steps, then fix up and write.
  V cin = sC[lane];
  for (int w = 0; w < tw; ++w) cin = axpy(sA[w][lane], cin, sH[w][lane]);
  if (!live) return;
#pragma unroll
  for (int s = 0; s < LC; ++s) {
    const int64_t t = REV ? g.T - 1 - (s0 + s) : s0 + s;
    if (t < 0 || t >= g.T) continue;
    const V v = axpy(al[s], cin, bl[s]);
    if (!REV) {
      Tr<S>::st(g.h + base + t * g.n, v);
    } else {
      Tr<S>::st(g.db + base + t * g.n, v);
      V hp = Tr<S>::zero();
      if (t >= 1)
        hp = Tr<S>::ld(g.hf + base + (t - 1) * g.n);
      else if (g.h0)
        hp = Tr<S>::ld(g.h0 + bi * g.n + ch);
      Tr<S>::st(g.da + base + t * g.n, mul(v, cj(hp)));
      if (t == 0 && g.dh0) Tr<S>::st(g.dh0 + bi * g.n + ch, mul(cj(Tr<S>::ld(g.a + base)), v));
    }
  }
}

}  // namespace strux::cuda::scan
