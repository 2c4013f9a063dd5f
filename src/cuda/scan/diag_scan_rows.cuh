// The row diagonal scan kernel (private to src/cuda/scan): n == 1, i.e. B rows of T contiguous
// time steps -- the time-last layout (B, n, T) seen as (B * n, T, 1).
//
// One block of RW_THREADS (128) per row walks the row in tiles of RW_THREADS * K steps, K = the
// elements of 16 bytes: each thread owns K consecutive steps (one 16-byte load per array, so a
// warp reads 512 contiguous bytes), composes them into one affine map (A, H), the warp scans the
// 32 maps with shuffles, the warps' totals meet in shared memory (double-buffered by tile
// parity: one barrier per tile), and each thread rebuilds its steps from its incoming state.
// The carry between tiles is the fold of the tile's warp totals, the same in every thread.
// The next tile's loads are issued before this tile's arithmetic (kept as raw words, converted
// only when used), so each thread has two tiles of loads in flight. No workspace, no look-back:
// rows are independent, so a row never waits for another block.
// Unaligned pointers or T * sizeof(S) not a multiple of 16 run the same tiles with per-element
// guarded loads (VEC = false).
// REV = the backward pass, tiles and steps from the end: the map of step t is
// x -> conj(a_t) (dh_t + x) (x = the state coming from t + 1), so g_t = dh_t + x, db_t = g_t,
// da_t = g_t conj(h_{t-1}), and the state leaving step 0 is dh0 = conj(a_0) g_0; every step
// uses its own a_t (no shifted loads of a); h_{t-1} of a thread's first step comes from the
// previous lane (a shuffle) or, for lane 0, one scalar load.
#pragma once

#include "cuda/scan/diag_scan_seq.cuh"

namespace strux::cuda::scan {

// 128 threads, at least 8 blocks per SM (<= 64 registers): ~1000 long rows on a 132-SM GPU run
// in one wave, where 256-thread blocks would take a wave and a half.
constexpr int RW_THREADS = 128, RW_WARPS = RW_THREADS / 32, RW_MIN_BLOCKS = 8;

template <class R>
__device__ __forceinline__ IfReal<R> shfl_up_v(R v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
template <class C>
__device__ __forceinline__ IfCx<C> shfl_up_v(C v, int d) {
  return CxOf<decltype(v.x)>::make(__shfl_up_sync(0xffffffffu, v.x, d), __shfl_up_sync(0xffffffffu, v.y, d));
}
template <class R>
__device__ __forceinline__ IfReal<R> shfl_down_v(R v, int d) { return __shfl_down_sync(0xffffffffu, v, d); }
template <class C>
__device__ __forceinline__ IfCx<C> shfl_down_v(C v, int d) {
  return CxOf<decltype(v.x)>::make(__shfl_down_sync(0xffffffffu, v.x, d), __shfl_down_sync(0xffffffffu, v.y, d));
}

template <class R>
__device__ __forceinline__ IfReal<R> vadd(R a, R b) { return a + b; }
template <class C>
__device__ __forceinline__ IfCx<C> vadd(C a, C b) { return CxOf<decltype(a.x)>::make(a.x + b.x, a.y + b.y); }

template <class S>
__host__ __device__ constexpr int rows_k() { return 16 / int(sizeof(S)); }

// K steps of one array at t (the thread's first step): raw words; steps past T (only in the
// last tile) get `fill` (1 for a, 0 for b / dh, so they compose as the identity).
template <class S, bool VEC>
__device__ __forceinline__ typename Vec<S, rows_k<S>()>::R rows_ld(const S* p, int64_t t, int64_t T,
                                                                   typename Tr<S>::V fill) {
  constexpr int K = rows_k<S>();
  using P = Vec<S, K>;
  typename P::R r;
  if constexpr (VEC) {
    if (t < T) return P::ld(p + t);  // T % K == 0: a vector is all in or all out
#pragma unroll
    for (int k = 0; k < K; ++k) put<S>(r.w, k, fill);
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) put<S>(r.w, k, t + k < T ? Tr<S>::ld(p + t + k) : fill);
  }
  return r;
}
template <class S, bool VEC>
__device__ __forceinline__ void rows_st(S* p, int64_t t, int64_t T, const typename Vec<S, rows_k<S>()>::R& r) {
  constexpr int K = rows_k<S>();
  if constexpr (VEC) {
    if (t < T) Vec<S, K>::st(p + t, r);
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (t + k < T) Tr<S>::st(p + t + k, get<S>(r.w, k));
  }
}

// Forward: h_t = a_t h_{t-1} + scale b_t, h_{-1} = scale h0; one block per row.
template <class S, bool VEC>
__global__ void __launch_bounds__(RW_THREADS, RW_MIN_BLOCKS) diag_scan_rows_fwd(SeqArgs g) {
  using V = typename Tr<S>::V;
  constexpr int K = rows_k<S>();
  constexpr int64_t TILE = int64_t(RW_THREADS) * K;
  using R = typename Vec<S, K>::R;
  __shared__ V sA[2][RW_WARPS], sH[2][RW_WARPS];
  const int64_t row = blockIdx.x, T = g.T;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const S* pa = static_cast<const S*>(g.a) + row * T;
  const S* pb = static_cast<const S*>(g.b) + row * T;
  S* ph = static_cast<S*>(g.h) + row * T;
  const auto sc = static_cast<typename ReOf<V>::T>(g.scale);
  V carry = g.h0 ? scal(Tr<S>::ld(static_cast<const S*>(g.h0) + row), sc) : Tr<S>::zero();

  const int64_t ntiles = (T + TILE - 1) / TILE;
  int64_t t = int64_t(threadIdx.x) * K;
  R ca = rows_ld<S, VEC>(pa, t, T, Tr<S>::one()), cb = rows_ld<S, VEC>(pb, t, T, Tr<S>::zero());
  for (int64_t i = 0; i < ntiles; ++i, t += TILE) {
    R na = ca, nb = cb;
    if (i + 1 < ntiles)
      na = rows_ld<S, VEC>(pa, t + TILE, T, Tr<S>::one()), nb = rows_ld<S, VEC>(pb, t + TILE, T, Tr<S>::zero());
    // The thread's map over its K steps, then the warp's inclusive scan of the maps.
    V A = Tr<S>::one(), H = Tr<S>::zero();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const V ak = get<S>(ca.w, k);
      H = axpy(ak, H, scal(get<S>(cb.w, k), sc));
      A = mul(ak, A);
    }
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const V Ap = shfl_up_v(A, d), Hp = shfl_up_v(H, d);
      if (lane >= d) H = axpy(A, Hp, H), A = mul(A, Ap);
    }
    const int buf = int(i & 1);
    if (lane == 31) sA[buf][warp] = A, sH[buf][warp] = H;
    __syncthreads();
    // The state entering this warp (carry through the earlier warps), then this thread.
    V s = carry;
    for (int w = 0; w < warp; ++w) s = axpy(sA[buf][w], s, sH[buf][w]);
    const V Ae = shfl_up_v(A, 1), He = shfl_up_v(H, 1);
    V h = lane == 0 ? s : axpy(Ae, s, He);
    R o;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      h = axpy(get<S>(ca.w, k), h, scal(get<S>(cb.w, k), sc));
      put<S>(o.w, k, h);
    }
    rows_st<S, VEC>(ph, t, T, o);
    for (int w = 0; w < RW_WARPS; ++w) carry = axpy(sA[buf][w], carry, sH[buf][w]);
    ca = na, cb = nb;
  }
}

// Backward (see the file comment); one block per row, tiles from the end of the row.
template <class S, bool VEC>
__global__ void __launch_bounds__(RW_THREADS, RW_MIN_BLOCKS) diag_scan_rows_bwd(SeqArgs g) {
  using V = typename Tr<S>::V;
  constexpr int K = rows_k<S>();
  constexpr int64_t TILE = int64_t(RW_THREADS) * K;
  using R = typename Vec<S, K>::R;
  __shared__ V sA[2][RW_WARPS], sH[2][RW_WARPS];
  const int64_t row = blockIdx.x, T = g.T;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const S* pa = static_cast<const S*>(g.a) + row * T;
  const S* pd = static_cast<const S*>(g.b) + row * T;
  const S* pf = static_cast<const S*>(g.hf) + row * T;
  S* pda = static_cast<S*>(g.da) + row * T;
  S* pdb = static_cast<S*>(g.db) + row * T;
  const S* h0 = g.h0 ? static_cast<const S*>(g.h0) + row : nullptr;
  V carry = Tr<S>::zero();

  const int64_t ntiles = (T + TILE - 1) / TILE;
  int64_t t = (ntiles - 1) * TILE + int64_t(threadIdx.x) * K;
  auto h_before = [&](int64_t tt) {  // h_{tt-1} (h0 or 0 before the row)
    return tt >= 1 ? (tt - 1 < T ? Tr<S>::ld(pf + tt - 1) : Tr<S>::zero()) : (h0 ? Tr<S>::ld(h0) : Tr<S>::zero());
  };
  R ca = rows_ld<S, VEC>(pa, t, T, Tr<S>::one()), cd = rows_ld<S, VEC>(pd, t, T, Tr<S>::zero()),
    ch = rows_ld<S, VEC>(pf, t, T, Tr<S>::zero());
  V hb = lane == 0 ? h_before(t) : Tr<S>::zero();
  for (int64_t i = ntiles - 1; i >= 0; --i, t -= TILE) {
    R na = ca, nd = cd, nh = ch;
    V nhb = hb;
    if (i > 0) {
      na = rows_ld<S, VEC>(pa, t - TILE, T, Tr<S>::one()), nd = rows_ld<S, VEC>(pd, t - TILE, T, Tr<S>::zero());
      nh = rows_ld<S, VEC>(pf, t - TILE, T, Tr<S>::zero());
      if (lane == 0) nhb = h_before(t - TILE);
    }
    // The thread's map over its K steps taken from the last, then the warp's scan from lane 31.
    V A = Tr<S>::one(), H = Tr<S>::zero();
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int k = K - 1 - j;
      const V ak = cj(get<S>(ca.w, k));
      H = mul(ak, vadd(H, get<S>(cd.w, k)));
      A = mul(ak, A);
    }
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const V Ap = shfl_down_v(A, d), Hp = shfl_down_v(H, d);
      if (lane + d < 32) H = axpy(A, Hp, H), A = mul(A, Ap);
    }
    const int buf = int(i & 1);
    if (lane == 0) sA[buf][warp] = A, sH[buf][warp] = H;
    __syncthreads();
    V s = carry;
    for (int w = RW_WARPS - 1; w > warp; --w) s = axpy(sA[buf][w], s, sH[buf][w]);
    const V Ae = shfl_down_v(A, 1), He = shfl_down_v(H, 1);
    V x = lane == 31 ? s : axpy(Ae, s, He);
    // h_{t-1} of the thread's first step: the previous lane's last h, lane 0's own load.
    const V hl = shfl_up_v(get<S>(ch.w, K - 1), 1);
    V hp[K];
    hp[0] = lane == 0 ? hb : hl;
#pragma unroll
    for (int k = 1; k < K; ++k) hp[k] = get<S>(ch.w, k - 1);
    // The steps run from the last, but the packing (put) goes from element 0 up: a 2-byte
    // type's even element starts its word.
    V gs[K];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int k = K - 1 - j;
      gs[k] = vadd(get<S>(cd.w, k), x);
      x = mul(cj(get<S>(ca.w, k)), gs[k]);
    }
    R ob, oa;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      put<S>(ob.w, k, gs[k]);
      put<S>(oa.w, k, mul(gs[k], cj(hp[k])));
    }
    rows_st<S, VEC>(pdb, t, T, ob);
    rows_st<S, VEC>(pda, t, T, oa);
    for (int w = RW_WARPS - 1; w >= 0; --w) carry = axpy(sA[buf][w], carry, sH[buf][w]);
    ca = na, cd = nd, ch = nh, hb = nhb;
  }
  if (g.dh0 && threadIdx.x == 0) Tr<S>::st(static_cast<S*>(g.dh0) + row, carry);
}

}  // namespace strux::cuda::scan
