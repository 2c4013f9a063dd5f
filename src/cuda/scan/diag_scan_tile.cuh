// The tile diagonal scan kernel (private to src/cuda/scan): (B, T, n) with channels contiguous,
// one block per tile of channels for the whole sequence -- the rows kernel's idea (a block owns
// whole sequences, so no block ever waits for another: no look-back, flags or workspace) in the
// channels-last layout. Why: the chunk kernel's phases (load, scan, publish, look-back, fix-up,
// store) run in sequence with nothing in flight between them, 53-69% of copy on issue 14's float32
// rows; the rows kernel, whose blocks stream independent rows, runs the same data time-last at
// 90-95% (bench/NOTES-gpu-ks-scan.md, "diag_scan relay" and "diag_scan tile").
//
// A tile is LR lanes of one time step, a lane VW adjacent channels (16 bytes, or one element when n
// or a pointer does not allow): LR * 16 bytes of each row of time (32 to 256). The block (4
// warps) walks time in chunks: thread (warp w, lane l) owns channel lane l % LR and segment
// w * (32 / LR) + l / LR of the chunk, L consecutive steps (64 bytes of each array; 16 for a
// one-element half type). A chunk is copied into shared memory with cp.async, `ns` chunks ahead
// (each thread copies exactly the slots it reads later, so only its own cp.async wait orders
// them: no barrier for the data), then: (1) each thread composes its L steps into one map (A, H); (2) shuffles scan the maps of
// the warp's segments; (3) the warps' totals meet in shared memory (double-buffered by chunk
// parity: one barrier per chunk) and every thread folds them from the carry (the state entering
// the chunk): the state entering its warp, and the carry of the next chunk; (4) the thread reruns
// its steps from the state entering them, reading the stage again, and stores with 16-byte
// streaming stores; then it refills its slots of the stage with chunk + ns.
// The stages in flight are the memory parallelism: the plan sizes ns so that the blocks of one
// wave share the SM's shared memory (diag_scan.cu, tile_stages).
// REV = the backward pass, steps from t = T-1 down: the map of step t is x -> conj(a_t) (dh_t + x)
// (x = the state coming from t + 1), so g_t = dh_t + x, db_t = g_t, da_t = g_t conj(h_{t-1}), and
// the state leaving step 0 is dh0 = conj(a_0) g_0; as in the rows kernel every step uses its own
// a_t; h_{t-1} is copied with the step (h0 or 0 at t = 0).
#pragma once

#include "cuda/scan/diag_scan_pipe.cuh"  // cp_async, cp_commit, cp_wait
#include "cuda/scan/diag_scan_rows.cuh"  // shfl_up_v, vadd

namespace strux::cuda::scan {

// 128 threads and at most 128 registers (4 blocks per SM): issue 14's (1, 4096, 16384) has 3.9
// tiles of 128 bytes per SM, all resident in one wave.
constexpr int TL_THREADS = 128, TL_WARPS = TL_THREADS / 32, TL_MIN_BLOCKS = 4, TL_MAX_STAGES = 6;
constexpr int TL_THREAD_BYTES = 64;  // bytes of each array a thread copies per chunk (2-byte lanes: 16)

// Channels per lane on the vector path: 16 bytes.
template <class S>
__host__ __device__ constexpr int tile_vw() { return 16 / int(sizeof(S)); }
// Steps per thread per chunk (L) and per chunk (TL_THREADS / LR segments of L steps). One-element
// half lanes copy through registers (cp.async moves 4 bytes at least) and take 8 steps: with 32,
// then 16, their backward spilled (sm_80, ptxas -v).
template <class S, int VW>
__host__ __device__ constexpr int tile_steps() {
  return VW * sizeof(S) == 2 ? 8 : TL_THREAD_BYTES / (VW * int(sizeof(S)));
}
template <class S, int VW, int LR>
__host__ __device__ constexpr int tile_chunk() { return TL_THREADS / LR * tile_steps<S, VW>(); }
// Shared memory of one stage: a, b (backward: a, dh, h_{t-1}) of every thread.
template <class S, int VW>
__host__ __device__ constexpr int tile_stage_bytes(bool rev) {
  return (rev ? 3 : 2) * TL_THREADS * tile_steps<S, VW>() * VW * int(sizeof(S));
}

// cp.async.wait_group takes an immediate: the plan's stage count is a runtime value.
__device__ __forceinline__ void cp_wait_upto(int pending) {
  switch (pending) {
    case 0: cp_wait<0>(); break;
    case 1: cp_wait<1>(); break;
    case 2: cp_wait<2>(); break;
    case 3: cp_wait<3>(); break;
    case 4: cp_wait<4>(); break;
    default: cp_wait<5>(); break;
  }
}

template <class S, int VW, int LR, bool REV>
__global__ void __launch_bounds__(TL_THREADS, TL_MIN_BLOCKS) diag_scan_tile(SeqArgs g, int ns) {
  using V = typename Tr<S>::V;
  using P = Vec<S, VW>;
  using R = typename P::R;
  using W = typename P::W;
  constexpr int L = tile_steps<S, VW>(), SW = 32 / LR, NA = REV ? 3 : 2, EB = P::BYTES;
  constexpr int64_t TC = tile_chunk<S, VW, LR>();
  static_assert(L * EB <= TL_THREAD_BYTES && L >= 1, "a thread copies at most 64 bytes of each array per chunk");
  static_assert(32 % LR == 0 && TC == int64_t(TL_WARPS) * SW * L, "segments tile the chunk");
  struct Vals { V v[VW]; };
  extern __shared__ __align__(16) unsigned char tl_stage[];  // [ns][NA][L][TL_THREADS] lanes
  __shared__ Vals sA[2][TL_WARPS][LR], sH[2][TL_WARPS][LR];   // warp totals, by chunk parity

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int c = lane % LR, j = lane / LR;  // channel lane of the row; segment within the warp
  const int64_t seg = int64_t(warp) * SW + j;
  const int64_t nv = g.n / VW, n = g.n, T = g.T;
  const int64_t q = int64_t(blockIdx.x) * LR + c;  // lane of the flattened (B, n / VW) channels
  const bool live = q < g.B * nv;
  const int64_t bi = live ? q / nv : 0, ch = live ? (q - bi * nv) * VW : 0;
  const int64_t base = bi * T * n + ch;
  const S* a0 = static_cast<const S*>(g.a);
  const S* pa = a0 + base;
  const S* pb = static_cast<const S*>(g.b) + base;  // b, or dh backward
  const S* pf = REV ? static_cast<const S*>(g.hf) + base : nullptr;
  const S* h0 = g.h0 && live ? static_cast<const S*>(g.h0) + bi * n + ch : nullptr;
  const int64_t nchunks = (T + TC - 1) / TC;
  const auto sc = static_cast<typename ReOf<V>::T>(g.scale);

  auto slot = [&](int st, int arr, int s) {
    return tl_stage + ((size_t(st * NA + arr) * L + s) * TL_THREADS + threadIdx.x) * EB;
  };
  auto rd = [&](int st, int arr, int s) { return P::unpack(*reinterpret_cast<const W*>(slot(st, arr, s))); };
  // time of this thread's step s of chunk k (scan order: backward from T-1 down); <0 or >=T: past the end
  auto when = [&](int64_t k, int s) {
    const int64_t i = k * TC + seg * L + s;
    return REV ? T - 1 - i : i;
  };
  // Copies of chunk k into stage st (zeros past the sequence or for dead lanes), as one group;
  // an empty group past the last chunk keeps the group count uniform for cp_wait_upto.
  auto issue = [&](int st, int64_t k) {
    if (k < nchunks) {
#pragma unroll
      for (int s = 0; s < L; ++s) {
        const int64_t t = when(k, s);
        const bool in = live && t >= 0 && t < T;
        cp_async<EB, W>(slot(st, 0, s), in ? pa + t * n : a0, in);
        cp_async<EB, W>(slot(st, 1, s), in ? pb + t * n : a0, in);
        if constexpr (REV) {
          const S* hp = !in ? nullptr : t >= 1 ? pf + (t - 1) * n : h0;
          cp_async<EB, W>(slot(st, 2, s), hp ? hp : a0, hp != nullptr);
        }
      }
    }
    cp_commit();
  };

  Vals carry;  // the state entering chunk k, the same in every thread of channel lane c
  {
    const R r = !REV && h0 ? P::ld(h0) : P::zero();
#pragma unroll
    for (int k = 0; k < VW; ++k) carry.v[k] = scal(get<S>(r.w, k), sc);
  }
  for (int i = 0; i < ns; ++i) issue(i, i);

  int st = 0;  // the stage of chunk k: k % ns
  for (int64_t k = 0; k < nchunks; ++k, st = st + 1 == ns ? 0 : st + 1) {
    cp_wait_upto(ns - 1);  // chunk k's copies (this thread's) have landed; ns - 1 chunks still in flight
    // (1) the thread's steps as one map x -> A x + H (past the sequence: the identity)
    Vals A, H;
#pragma unroll
    for (int k2 = 0; k2 < VW; ++k2) A.v[k2] = Tr<S>::one(), H.v[k2] = Tr<S>::zero();
#pragma unroll
    for (int s = 0; s < L; ++s) {
      const int64_t t = when(k, s);
      const bool in = t >= 0 && t < T;
      const R ra = rd(st, 0, s), rb = rd(st, 1, s);
#pragma unroll
      for (int k2 = 0; k2 < VW; ++k2) {
        const V av = REV ? cj(get<S>(ra.w, k2)) : get<S>(ra.w, k2);
        const V bv = REV ? mul(av, get<S>(rb.w, k2)) : scal(get<S>(rb.w, k2), sc);
        H.v[k2] = in ? axpy(av, H.v[k2], bv) : H.v[k2];
        A.v[k2] = in ? mul(av, A.v[k2]) : A.v[k2];
      }
    }
    // (2) inclusive scan over the warp's segments (lanes c, c + LR, ...; earlier segments first)
#pragma unroll
    for (int d = LR; d < 32; d *= 2)
#pragma unroll
      for (int k2 = 0; k2 < VW; ++k2) {
        const V Ap = shfl_up_v(A.v[k2], d), Hp = shfl_up_v(H.v[k2], d);
        if (lane >= d) H.v[k2] = axpy(A.v[k2], Hp, H.v[k2]), A.v[k2] = mul(A.v[k2], Ap);
      }
    const int buf = int(k & 1);
    if (j == SW - 1) sA[buf][warp][c] = A, sH[buf][warp][c] = H;
    Vals Ae, He;  // exclusive: the map from the warp's entering state to this thread's
#pragma unroll
    for (int k2 = 0; k2 < VW; ++k2) {
      Ae.v[k2] = shfl_up_v(A.v[k2], LR), He.v[k2] = shfl_up_v(H.v[k2], LR);
      if (j == 0) Ae.v[k2] = Tr<S>::one(), He.v[k2] = Tr<S>::zero();
    }
    __syncthreads();
    // (3) fold the warps' totals from the carry: the state entering this warp, then the next carry
    Vals x;
#pragma unroll
    for (int w = 0; w < TL_WARPS; ++w) {
      const Vals tA = sA[buf][w][c], tH = sH[buf][w][c];
#pragma unroll
      for (int k2 = 0; k2 < VW; ++k2) {
        if (w == warp) x.v[k2] = axpy(Ae.v[k2], carry.v[k2], He.v[k2]);
        carry.v[k2] = axpy(tA.v[k2], carry.v[k2], tH.v[k2]);
      }
    }
    // (4) the steps again from the state entering them, stored
    if (live) {
      if constexpr (!REV) {
        S* ph = static_cast<S*>(g.h) + base;
#pragma unroll
        for (int s = 0; s < L; ++s) {
          const int64_t t = when(k, s);
          if (t >= T) break;
          const R ra = rd(st, 0, s), rb = rd(st, 1, s);
          R o;
#pragma unroll
          for (int k2 = 0; k2 < VW; ++k2) {
            x.v[k2] = axpy(get<S>(ra.w, k2), x.v[k2], scal(get<S>(rb.w, k2), sc));
            put<S>(o.w, k2, x.v[k2]);
          }
          P::st(ph + t * n, o);
        }
      } else {
        S* pda = static_cast<S*>(g.da) + base;
        S* pdb = static_cast<S*>(g.db) + base;
#pragma unroll
        for (int s = 0; s < L; ++s) {
          const int64_t t = when(k, s);
          if (t < 0) break;
          const R ra = rd(st, 0, s), rg = rd(st, 1, s), rh = rd(st, 2, s);
          R ob, oa;
#pragma unroll
          for (int k2 = 0; k2 < VW; ++k2) {
            const V gv = vadd(get<S>(rg.w, k2), x.v[k2]);
            put<S>(ob.w, k2, gv);
            put<S>(oa.w, k2, mul(gv, cj(get<S>(rh.w, k2))));
            x.v[k2] = mul(cj(get<S>(ra.w, k2)), gv);
          }
          P::st(pdb + t * n, ob);
          P::st(pda + t * n, oa);
        }
      }
    }
    issue(st, k + ns);  // the stage's slots of this thread were read above: free
  }
  cp_wait<0>();
  // backward: the state leaving step 0 is dh0 (steps past the start were the identity)
  if (REV && g.dh0 && live && warp == 0 && j == 0) {
    R o;
#pragma unroll
    for (int k2 = 0; k2 < VW; ++k2) put<S>(o.w, k2, carry.v[k2]);
    P::st(static_cast<S*>(g.dh0) + bi * n + ch, o);
  }
}

}  // namespace strux::cuda::scan
