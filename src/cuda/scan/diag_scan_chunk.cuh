// The chunked diagonal scan with a windowed look-back (private to src/cuda/scan), for few
// channels and long sequences.
//
// Block = 8 warps x 32 lanes. A lane owns VW adjacent channels (chunk_vw: 16 bytes, 8 for half
// types, when n and the pointers allow; one element otherwise) of the flattened (B, n / VW)
// channel vectors, so a warp reads 32 * VW consecutive channels of one step (up to 512 bytes); warp w owns LC consecutive steps,
// so the block covers a chunk of 8 * LC steps. Phases: (1) load the chunk (all loads in flight
// together), scan it locally from state 0 keeping the running product and the local state;
// (2) the block's aggregate (product, local state) through shared memory, published by warp 0;
// (3) the incoming state by a look-back over earlier chunks of the same channels in windows of 8:
// warp w reads chunk c-1-w (an inclusive state ends the walk, bare aggregates are folded in), so
// a walk advances 8 chunks per memory round trip -- with one predecessor per round trip the
// chain of chunks, not the bandwidth, bounded the look-back kernel on long sequences with few
// channels; (4) fix up and write. Blocks take their chunk from a ticket counter, chunk-major, so
// a block waits only for blocks already running: no deadlock.
//
// The workspace is the plan's, allocated once and zeroed once: a header (ticket counter, done
// counter, epoch), a flag per (chunk, tile) and the published values. A flag holds the epoch of
// the launch that wrote it (bits 2..31) and the state (bits 0..1: 1 aggregate, 2 inclusive), so
// flags need no reset between launches; the last block to finish resets the two counters and
// bumps the epoch. Launches reading the same workspace must be ordered (the plan does that).
// REV = the backward pass, as in diag_scan_kernel.cuh.
#pragma once

#include "cuda/scan/diag_scan_seq.cuh"

namespace strux::cuda::scan {

constexpr int CK_WARPS = 8, CK_THREADS = 32 * CK_WARPS;

// Channels per lane: 16 bytes, but 8 for half types (4 channels: with 8 the register budget below
// leaves 16-step chunks, whose per-block costs dominate).
template <class S>
__host__ __device__ constexpr int chunk_vw() {
  return sizeof(S) == 2 ? 4 : 16 / int(sizeof(S));
}

// Steps per thread: the values of a and of b a thread holds (LC * VW * components) are 32 forward
// and 16 backward (which also holds h_{t-1}): the most that stays clear of spills at 128
// registers (ptxas -v, sm_90a).
template <class S, int VW, bool REV>
__host__ __device__ constexpr int chunk_lc() {
  constexpr int comps = sizeof(typename Tr<S>::V) / sizeof(float);
  constexpr int budget = REV ? 16 : 32;
  constexpr int lc = budget / (VW * comps);
  return lc < 2 ? 2 : lc > 16 ? 16 : lc;
}

struct ChunkArgs {
  const void* a;
  const void* b;   // forward: b; backward: dh
  const void* h0;  // (B, n) or null
  const void* hf;  // backward: the forward's h
  void* h;         // forward output
  void* da;        // backward outputs
  void* db;
  void* dh0;
  int64_t B, T, n, ctiles, nblk;
  double scale;
  unsigned int* hdr;    // [0] ticket counter, [1] done counter, [2] epoch
  unsigned int* flags;  // per (chunk, tile): epoch << 2 | state
  void* aggA;           // per (chunk, tile, lane): VW values of the compute type
  void* aggH;
  void* incl;
};

template <class S, int VW, bool REV>
__global__ void __launch_bounds__(CK_THREADS, 2) diag_scan_chunk(ChunkArgs g) {
  using V = typename Tr<S>::V;
  using P = Vec<S, VW>;
  using R = typename P::R;
  constexpr int LC = chunk_lc<S, VW, REV>(), CHK = CK_WARPS * LC;
  struct Vals { V v[VW]; };
  __shared__ unsigned int s_vid, s_tag, s_done;
  __shared__ Vals sA[CK_WARPS][32], sH[CK_WARPS][32], wA[CK_WARPS][32], wH[CK_WARPS][32], sC[32];
  __shared__ unsigned int s_f[CK_WARPS];

  const int lane = threadIdx.x % 32, tw = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    s_vid = atomicAdd(g.hdr, 1u);
    s_tag = (atomicAdd(g.hdr + 2, 0u) & 0x3fffffffu) << 2;
  }
  __syncthreads();
  const unsigned int tag = s_tag;
  const int64_t vid = s_vid;
  const int64_t chunk = vid / g.ctiles, tile = vid - chunk * g.ctiles;
  const int64_t nv = g.n / VW, q = tile * 32 + lane;
  const bool live = q < g.B * nv;
  const int64_t bi = live ? q / nv : 0, ch = live ? (q - bi * nv) * VW : 0, n = g.n, T = g.T;
  const int64_t base = bi * T * n + ch;
  const int64_t s0 = chunk * CHK + tw * LC;  // first step (in scan order) of this thread
  const auto sc = static_cast<typename ReOf<V>::T>(g.scale);
  const S* pa = static_cast<const S*>(g.a) + base;
  const S* pb = static_cast<const S*>(g.b) + base;

  // (1) load and scan locally: al becomes the running product, bl the local state.
  V al[LC][VW], bl[LC][VW];
  {
    R ra[LC], rb[LC];
#pragma unroll
    for (int s = 0; s < LC; ++s) {
      const int64_t t = REV ? T - 1 - (s0 + s) : s0 + s;
      ra[s] = P::zero(), rb[s] = P::zero();
      if (live && t >= 0 && t < T) {
        if (!REV || t + 1 < T) ra[s] = P::ld(pa + (REV ? t + 1 : t) * n);
        rb[s] = P::ld(pb + t * n);
      }
    }
#pragma unroll
    for (int s = 0; s < LC; ++s) {
      const int64_t t = REV ? T - 1 - (s0 + s) : s0 + s;
      const bool in = live && t >= 0 && t < T;
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        // Outside the sequence: the identity step (a = 1, b = 0); backward at t = T-1: a = 0.
        const V av = get<S>(ra[s].w, k), bv = get<S>(rb[s].w, k);
        al[s][k] = in ? (REV ? cj(av) : av) : Tr<S>::one();
        bl[s][k] = in ? (REV ? bv : scal(bv, sc)) : Tr<S>::zero();
      }
    }
  }
  Vals PA, PH;
#pragma unroll
  for (int k = 0; k < VW; ++k) PA.v[k] = Tr<S>::one(), PH.v[k] = Tr<S>::zero();
#pragma unroll
  for (int s = 0; s < LC; ++s)
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      PH.v[k] = axpy(al[s][k], PH.v[k], bl[s][k]);
      PA.v[k] = mul(al[s][k], PA.v[k]);
      al[s][k] = PA.v[k];
      bl[s][k] = PH.v[k];
    }
  // (2) per-thread aggregates to shared memory; warp 0 forms and publishes the block's.
  sA[tw][lane] = PA;
  sH[tw][lane] = PH;
  __syncthreads();
  const int64_t slot = chunk * g.ctiles + tile;
  Vals BA, BH;
  if (tw == 0) {
#pragma unroll
    for (int k = 0; k < VW; ++k) BA.v[k] = Tr<S>::one(), BH.v[k] = Tr<S>::zero();
#pragma unroll
    for (int w = 0; w < CK_WARPS; ++w)
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        BH.v[k] = axpy(sA[w][lane].v[k], BH.v[k], sH[w][lane].v[k]);
        BA.v[k] = mul(sA[w][lane].v[k], BA.v[k]);
      }
    if (chunk > 0) {
      static_cast<Vals*>(g.aggA)[slot * 32 + lane] = BA;
      static_cast<Vals*>(g.aggH)[slot * 32 + lane] = BH;
      __threadfence();
      __syncwarp();
      if (lane == 0) atomicExch(g.flags + slot, tag | 1u);
    }
  }

  // (3) look-back in windows of CK_WARPS chunks; warp 0 folds the window, nearest first.
  Vals carry;
#pragma unroll
  for (int k = 0; k < VW; ++k) carry.v[k] = Tr<S>::zero();
  if (chunk == 0) {
    if (!REV && g.h0 && live && tw == 0) {
      const R r = P::ld(static_cast<const S*>(g.h0) + bi * n + ch);
#pragma unroll
      for (int k = 0; k < VW; ++k) carry.v[k] = scal(get<S>(r.w, k), sc);
    }
  } else {
    Vals SA, SH;  // the map from the state entering the window to the state entering this chunk
#pragma unroll
    for (int k = 0; k < VW; ++k) SA.v[k] = Tr<S>::one(), SH.v[k] = Tr<S>::zero();
    for (int64_t top = chunk - 1;; top -= CK_WARPS) {
      const int64_t p = top - tw;
      if (p >= 0) {  // warp tw reads chunk p into wA / wH [tw]
        const int64_t ps = p * g.ctiles + tile;
        unsigned int f = 0;
        if (lane == 0) {
          const volatile unsigned int* fp = g.flags + ps;
          do f = *fp;
          while ((f & ~3u) != tag || (f & 3u) == 0);
        }
        f = __shfl_sync(0xffffffffu, f, 0);
        __threadfence();
        const Vals* src = static_cast<const Vals*>((f & 3u) == 2 ? g.incl : g.aggH);
#pragma unroll
        for (int k = 0; k < VW; ++k) wH[tw][lane].v[k] = ldcg(&src[ps * 32 + lane].v[k]);
        if ((f & 3u) != 2)
#pragma unroll
          for (int k = 0; k < VW; ++k) wA[tw][lane].v[k] = ldcg(&static_cast<const Vals*>(g.aggA)[ps * 32 + lane].v[k]);
        if (lane == 0) s_f[tw] = f & 3u;
      }
      __syncthreads();
      if (tw == 0) {
        bool done = false;
        for (int w = 0; w < CK_WARPS && top - w >= 0; ++w) {
          if (s_f[w] == 2) {
#pragma unroll
            for (int k = 0; k < VW; ++k) carry.v[k] = axpy(SA.v[k], wH[w][lane].v[k], SH.v[k]);
            done = true;
            break;
          }
#pragma unroll
          for (int k = 0; k < VW; ++k) {
            SH.v[k] = axpy(SA.v[k], wH[w][lane].v[k], SH.v[k]);
            SA.v[k] = mul(SA.v[k], wA[w][lane].v[k]);
          }
        }
        if (lane == 0) s_done = done;
      }
      __syncthreads();  // also: the next window is written only after warp 0 has read this one
      if (s_done) break;
    }
  }
  if (tw == 0) {
    Vals inc;
#pragma unroll
    for (int k = 0; k < VW; ++k) inc.v[k] = axpy(BA.v[k], carry.v[k], BH.v[k]);
    static_cast<Vals*>(g.incl)[slot * 32 + lane] = inc;
    __threadfence();
    __syncwarp();
    if (lane == 0) atomicExch(g.flags + slot, tag | 2u);
    sC[lane] = carry;
  }
  __syncthreads();

  // (4) the state entering this thread's steps, then fix up and write.
  Vals cin = sC[lane];
  for (int w = 0; w < tw; ++w)
#pragma unroll
    for (int k = 0; k < VW; ++k) cin.v[k] = axpy(sA[w][lane].v[k], cin.v[k], sH[w][lane].v[k]);
  if (live) {
    if constexpr (!REV) {
      S* ph = static_cast<S*>(g.h) + base;
#pragma unroll
      for (int s = 0; s < LC; ++s) {
        const int64_t t = s0 + s;
        if (t >= T) break;
        R o;
#pragma unroll
        for (int k = 0; k < VW; ++k) put<S>(o.w, k, axpy(al[s][k], cin.v[k], bl[s][k]));
        P::st(ph + t * n, o);
      }
    } else {
      // h_{t-1} of every step first (h0 or 0 before the start), so the loads are in flight together.
      const S* pf = static_cast<const S*>(g.hf) + base;
      const S* h0 = g.h0 ? static_cast<const S*>(g.h0) + bi * n + ch : nullptr;
      R rh[LC];
#pragma unroll
      for (int s = 0; s < LC; ++s) {
        const int64_t t = T - 1 - (s0 + s);
        rh[s] = P::zero();
        if (t >= 1) rh[s] = P::ld(pf + (t - 1) * n);
        else if (t == 0 && h0) rh[s] = P::ld(h0);
      }
      S* pda = static_cast<S*>(g.da) + base;
      S* pdb = static_cast<S*>(g.db) + base;
#pragma unroll
      for (int s = 0; s < LC; ++s) {
        const int64_t t = T - 1 - (s0 + s);
        if (t < 0) break;
        R ob, oa;
        V gv[VW];
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          gv[k] = axpy(al[s][k], cin.v[k], bl[s][k]);
          put<S>(ob.w, k, gv[k]);
          put<S>(oa.w, k, mul(gv[k], cj(get<S>(rh[s].w, k))));
        }
        P::st(pdb + t * n, ob);
        P::st(pda + t * n, oa);
        if (t == 0 && g.dh0) {
          const R r0 = P::ld(pa);
          R o;
#pragma unroll
          for (int k = 0; k < VW; ++k) put<S>(o.w, k, mul(cj(get<S>(r0.w, k)), gv[k]));
          P::st(static_cast<S*>(g.dh0) + bi * n + ch, o);
        }
      }
    }
  }

  // The last block to finish resets the counters and starts the next epoch: every block took
  // its ticket and finished its look-back before it counted itself done.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(g.hdr + 1, 1u) == unsigned(g.nblk - 1)) {
      atomicExch(g.hdr, 0u);
      atomicExch(g.hdr + 1, 0u);
      atomicAdd(g.hdr + 2, 1u);
      __threadfence();
    }
  }
}

}  // namespace strux::cuda::scan
