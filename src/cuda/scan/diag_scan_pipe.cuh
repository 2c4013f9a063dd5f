// The pipelined chunked diagonal scan (private to src/cuda/scan): the chunk kernel's decomposition
// (diag_scan_chunk.cuh: a lane owns VW adjacent channels, warp w owns LC consecutive steps, a
// block one chunk of 8 * LC steps of 32 lanes, look-back over earlier chunks of the same lanes)
// run by a persistent grid that overlaps the memory traffic of the next chunk with the look-back
// of the current one.
//
// Why: the chunk kernel holds a chunk in registers from its loads to its stores; two blocks fit
// an SM, and each spends a few memory round trips per chunk (aggregate published behind a fence,
// flags and values read, inclusive state published behind a fence) with no loads in flight, so
// the loads of an SM stall whenever both blocks are in those phases. Here a block copies chunks
// into shared memory with cp.async, PP_STAGES chunks ahead, and computes from there: the local
// scan reads a chunk once for the aggregates and again for the fix-up (h recomputed step by step
// from the incoming state), so no chunk lives in registers and the copies of the next chunks are
// in flight during the look-back and the stores of this one.
// The look-back window is 8 warps x PP_WK chunks per round trip (the chunk kernel: 8): with few
// channel tiles (f32 (4, 65536, 256): 8 tiles) the chain of chunks bounded the chunk kernel.
// Blocks take chunk tickets from the counter in order, PP_STAGES + 1 ahead of the one they
// compute; a block's tickets increase, so the smallest unfinished ticket is always some block's
// current chunk, whose predecessors are all finished: no deadlock, resident or not.
// Workspace (the plan's) and epochs as in diag_scan_chunk.cuh; the done counter counts blocks.
#pragma once

#include "cuda/scan/diag_scan_chunk.cuh"

namespace strux::cuda::scan {

constexpr int PP_WARPS = 8, PP_THREADS = 32 * PP_WARPS, PP_WK = 4, PP_STAGES = 2;
// Shared memory per stage (all arrays of one chunk): two stages and the block's scratch stay
// under half an SM's 228 KB, so two blocks fit.
constexpr int PP_STAGE_BYTES = 48 * 1024;

// Steps per warp: as many as a stage holds (forward: a, b; backward: a, dh, h), at most 16.
template <class S, int VW, bool REV>
__host__ __device__ constexpr int pipe_lc() {
  constexpr int lc = PP_STAGE_BYTES / (PP_THREADS * int(sizeof(S)) * VW * (REV ? 3 : 2));
  return lc > 16 ? 16 : lc;
}
template <class S, int VW, bool REV>
__host__ __device__ constexpr int pipe_smem_bytes() {
  return PP_STAGES * (REV ? 3 : 2) * pipe_lc<S, VW, REV>() * PP_THREADS * int(sizeof(S)) * VW;
}

// An EB-byte copy global -> shared that is in flight until cp_wait (zeros when !valid; src must
// still be a valid address). cp.async moves 4, 8 or 16 bytes; 2-byte lanes load and store.
template <int EB, class W>
__device__ __forceinline__ void cp_async(unsigned char* dst, const void* src, bool valid) {
  if constexpr (EB >= 4) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    if constexpr (EB == 16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0)
                   : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(EB),
                   "r"(valid ? EB : 0)
                   : "memory");
  } else {
    *reinterpret_cast<W*>(dst) = valid ? *reinterpret_cast<const W*>(src) : W(0);
  }
}
// "memory": the stage's reads stay between the wait for its copies and the next copies into it.
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

template <class S, int VW, bool REV>
__global__ void __launch_bounds__(PP_THREADS, 2) diag_scan_pipe(ChunkArgs g) {
  using V = typename Tr<S>::V;
  using P = Vec<S, VW>;
  using R = typename P::R;
  using W = typename P::W;
  constexpr int LC = pipe_lc<S, VW, REV>(), CHK = PP_WARPS * LC, NA = REV ? 3 : 2, EB = P::BYTES;
  struct Vals { V v[VW]; };
  extern __shared__ __align__(16) unsigned char pp_stage[];
  // sA / sH: the warps' aggregates, then (once every thread has its prefix) the look-back window.
  __shared__ Vals sA[PP_WARPS][32], sH[PP_WARPS][32], sC[32];
  __shared__ unsigned int s_first, s_new, s_tag, s_f[PP_WARPS], s_done;

  const int lane = threadIdx.x % 32, tw = threadIdx.x / 32;
  const int64_t nv = g.n / VW, n = g.n, T = g.T, nblk = g.nblk, ctiles = g.ctiles;
  const auto sc = static_cast<typename ReOf<V>::T>(g.scale);
  const S* a0 = static_cast<const S*>(g.a);
  auto slot = [&](int st, int j, int s) {
    return pp_stage + ((size_t(st * NA + j) * LC + s) * PP_THREADS + threadIdx.x) * EB;
  };
  auto rd = [&](int st, int j, int s) { return P::unpack(*reinterpret_cast<const W*>(slot(st, j, s))); };
  struct Where {
    int64_t chunk, tile, bi, ch, base, s0;
    bool live;
  };
  auto where = [&](unsigned vid) {
    Where w;
    w.chunk = vid / ctiles, w.tile = vid - w.chunk * ctiles;
    const int64_t q = w.tile * 32 + lane;
    w.live = q < g.B * nv;
    w.bi = w.live ? q / nv : 0, w.ch = w.live ? (q - w.bi * nv) * VW : 0;
    w.base = w.bi * T * n + w.ch;
    w.s0 = w.chunk * CHK + tw * LC;
    return w;
  };
  // Copies of chunk `vid`'s arrays into stage st (none past the last ticket), as one group.
  auto issue = [&](int st, unsigned vid) {
    if (vid < nblk) {
      const Where w = where(vid);
      const S* pa = a0 + w.base;
      const S* pb = static_cast<const S*>(g.b) + w.base;
#pragma unroll
      for (int s = 0; s < LC; ++s) {
        if constexpr (!REV) {
          const int64_t t = w.s0 + s;
          const bool in = w.live && t < T;
          cp_async<EB, W>(slot(st, 0, s), in ? pa + t * n : a0, in);
          cp_async<EB, W>(slot(st, 1, s), in ? pb + t * n : a0, in);
        } else {
          const int64_t t = T - 1 - (w.s0 + s);
          const bool in = w.live && t >= 0;
          cp_async<EB, W>(slot(st, 0, s), in && t + 1 < T ? pa + (t + 1) * n : a0, in && t + 1 < T);
          cp_async<EB, W>(slot(st, 1, s), in ? pb + t * n : a0, in);
          const S* hp = !in ? a0
                        : t >= 1 ? static_cast<const S*>(g.hf) + w.base + (t - 1) * n
                        : g.h0   ? static_cast<const S*>(g.h0) + w.bi * n + w.ch
                                 : nullptr;
          cp_async<EB, W>(slot(st, 2, s), hp ? hp : a0, hp != nullptr && in);
        }
      }
    }
    cp_commit();
  };

  if (threadIdx.x == 0) {
    s_first = atomicAdd(g.hdr, unsigned(PP_STAGES));
    s_tag = (atomicAdd(g.hdr + 2, 0u) & 0x3fffffffu) << 2;
  }
  __syncthreads();
  const unsigned tag = s_tag;
  unsigned tk[PP_STAGES];  // the tickets of the chunks in the stages, in compute order
#pragma unroll
  for (int i = 0; i < PP_STAGES; ++i) tk[i] = s_first + i, issue(i, tk[i]);

  for (int it = 0; tk[0] < nblk; ++it) {
    const int st = it % PP_STAGES;
    unsigned next = 0;
    if (threadIdx.x == 0) next = atomicAdd(g.hdr, 1u);  // used only after the look-back
    const Where w = where(tk[0]);
    cp_wait<PP_STAGES - 1>();  // this thread's copies of stage st have landed (it reads only its own)

    // (1) the local scan from state 0, for the aggregates only.
    Vals PA, PH;
#pragma unroll
    for (int k = 0; k < VW; ++k) PA.v[k] = Tr<S>::one(), PH.v[k] = Tr<S>::zero();
#pragma unroll
    for (int s = 0; s < LC; ++s) {
      const int64_t t = REV ? T - 1 - (w.s0 + s) : w.s0 + s;
      const bool in = REV ? t >= 0 : t < T;
      const R ra = rd(st, 0, s), rb = rd(st, 1, s);
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        const V av = get<S>(ra.w, k), bv = get<S>(rb.w, k);
        const V al = in ? (REV ? cj(av) : av) : Tr<S>::one();
        const V bl = in ? (REV ? bv : scal(bv, sc)) : Tr<S>::zero();
        PH.v[k] = axpy(al, PH.v[k], bl);
        PA.v[k] = mul(al, PA.v[k]);
      }
    }
    sA[tw][lane] = PA;
    sH[tw][lane] = PH;
    __syncthreads();
    // (2) this warp's prefix (the map from the chunk's incoming state to this warp's), and the
    // block's aggregate, published by warp 0.
    Vals XA, XH, BA, BH;
#pragma unroll
    for (int k = 0; k < VW; ++k) XA.v[k] = Tr<S>::one(), XH.v[k] = Tr<S>::zero();
    for (int v = 0; v < tw; ++v)
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        XH.v[k] = axpy(sA[v][lane].v[k], XH.v[k], sH[v][lane].v[k]);
        XA.v[k] = mul(sA[v][lane].v[k], XA.v[k]);
      }
    const int64_t slotv = w.chunk * ctiles + w.tile;
    if (tw == 0) {
      BA = XA, BH = XH;
#pragma unroll
      for (int v = 0; v < PP_WARPS; ++v)
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          BH.v[k] = axpy(sA[v][lane].v[k], BH.v[k], sH[v][lane].v[k]);
          BA.v[k] = mul(sA[v][lane].v[k], BA.v[k]);
        }
      if (w.chunk > 0) {
        static_cast<Vals*>(g.aggA)[slotv * 32 + lane] = BA;
        static_cast<Vals*>(g.aggH)[slotv * 32 + lane] = BH;
        __threadfence();
        __syncwarp();
        if (lane == 0) atomicExch(g.flags + slotv, tag | 1u);
      }
    }
    __syncthreads();  // sA / sH are the look-back window from here

    // (3) look-back: warp v folds chunks top - PP_WK v - j (j < PP_WK, nearest first) into one
    // map or an inclusive state; warp 0 folds the warps' results, nearest first.
    Vals carry;
#pragma unroll
    for (int k = 0; k < VW; ++k) carry.v[k] = Tr<S>::zero();
    if (w.chunk == 0) {
      if (!REV && g.h0 && w.live && tw == 0) {
        const R r = P::ld(static_cast<const S*>(g.h0) + w.bi * n + w.ch);
#pragma unroll
        for (int k = 0; k < VW; ++k) carry.v[k] = scal(get<S>(r.w, k), sc);
      }
    } else {
      Vals SA, SH;
#pragma unroll
      for (int k = 0; k < VW; ++k) SA.v[k] = Tr<S>::one(), SH.v[k] = Tr<S>::zero();
      for (int64_t top = w.chunk - 1;; top -= PP_WARPS * PP_WK) {
        const int64_t p0 = top - int64_t(tw) * PP_WK;
        if (p0 >= 0) {
          unsigned f = 0;
          if (lane < PP_WK && p0 - lane >= 0) {
            const volatile unsigned int* fp = g.flags + (p0 - lane) * ctiles + w.tile;
            do f = *fp;
            while ((f & ~3u) != tag || (f & 3u) == 0);
          }
          unsigned fs[PP_WK];
#pragma unroll
          for (int j = 0; j < PP_WK; ++j) fs[j] = __shfl_sync(0xffffffffu, f, j) & 3u;
          __threadfence();
          Vals vh[PP_WK], va[PP_WK];
#pragma unroll
          for (int j = 0; j < PP_WK; ++j)
            if (p0 - j >= 0) {
              const int64_t ps = (p0 - j) * ctiles + w.tile;
              const Vals* src = static_cast<const Vals*>(fs[j] == 2 ? g.incl : g.aggH);
#pragma unroll
              for (int k = 0; k < VW; ++k) {
                vh[j].v[k] = ldcg(&src[ps * 32 + lane].v[k]);
                va[j].v[k] = fs[j] == 2 ? Tr<S>::one() : ldcg(&static_cast<const Vals*>(g.aggA)[ps * 32 + lane].v[k]);
              }
            }
          Vals cA, cH;
          unsigned state = 1;
#pragma unroll
          for (int k = 0; k < VW; ++k) cA.v[k] = Tr<S>::one(), cH.v[k] = Tr<S>::zero();
#pragma unroll
          for (int j = 0; j < PP_WK; ++j) {
            if (p0 - j < 0) break;
#pragma unroll
            for (int k = 0; k < VW; ++k) cH.v[k] = axpy(cA.v[k], vh[j].v[k], cH.v[k]);
            if (fs[j] == 2) {
              state = 2;
              break;
            }
#pragma unroll
            for (int k = 0; k < VW; ++k) cA.v[k] = mul(cA.v[k], va[j].v[k]);
          }
          sA[tw][lane] = cA;
          sH[tw][lane] = cH;
          if (lane == 0) s_f[tw] = state;
        }
        __syncthreads();
        if (tw == 0) {
          bool done = false;
          for (int v = 0; v < PP_WARPS && top - int64_t(v) * PP_WK >= 0; ++v) {
#pragma unroll
            for (int k = 0; k < VW; ++k) {
              const V h = axpy(SA.v[k], sH[v][lane].v[k], SH.v[k]);
              if (s_f[v] == 2) carry.v[k] = h;
              else SH.v[k] = h, SA.v[k] = mul(SA.v[k], sA[v][lane].v[k]);
            }
            if (s_f[v] == 2) {
              done = true;
              break;
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
      static_cast<Vals*>(g.incl)[slotv * 32 + lane] = inc;
      __threadfence();
      __syncwarp();
      if (lane == 0) atomicExch(g.flags + slotv, tag | 2u);
      sC[lane] = carry;
      if (lane == 0) s_new = next;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i + 1 < PP_STAGES; ++i) tk[i] = tk[i + 1];
    tk[PP_STAGES - 1] = s_new;

    // (4) the state entering this warp's steps, then the recurrence again from the stage, written.
    Vals cin;
#pragma unroll
    for (int k = 0; k < VW; ++k) cin.v[k] = axpy(XA.v[k], sC[lane].v[k], XH.v[k]);
    if (w.live) {
      if constexpr (!REV) {
        S* ph = static_cast<S*>(g.h) + w.base;
#pragma unroll
        for (int s = 0; s < LC; ++s) {
          const int64_t t = w.s0 + s;
          if (t >= T) break;
          const R ra = rd(st, 0, s), rb = rd(st, 1, s);
          R o;
#pragma unroll
          for (int k = 0; k < VW; ++k) {
            cin.v[k] = axpy(get<S>(ra.w, k), cin.v[k], scal(get<S>(rb.w, k), sc));
            put<S>(o.w, k, cin.v[k]);
          }
          P::st(ph + t * n, o);
        }
      } else {
        S* pda = static_cast<S*>(g.da) + w.base;
        S* pdb = static_cast<S*>(g.db) + w.base;
#pragma unroll
        for (int s = 0; s < LC; ++s) {
          const int64_t t = T - 1 - (w.s0 + s);
          if (t < 0) break;
          const R ra = rd(st, 0, s), rb = rd(st, 1, s), rh = rd(st, 2, s);
          R ob, oa;
#pragma unroll
          for (int k = 0; k < VW; ++k) {
            cin.v[k] = axpy(cj(get<S>(ra.w, k)), cin.v[k], get<S>(rb.w, k));
            put<S>(ob.w, k, cin.v[k]);
            put<S>(oa.w, k, mul(cin.v[k], cj(get<S>(rh.w, k))));
          }
          P::st(pdb + t * n, ob);
          P::st(pda + t * n, oa);
          if (t == 0 && g.dh0) {
            const R r0 = P::ld(a0 + w.base);
            R o;
#pragma unroll
            for (int k = 0; k < VW; ++k) put<S>(o.w, k, mul(cj(get<S>(r0.w, k)), cin.v[k]));
            P::st(static_cast<S*>(g.dh0) + w.bi * n + w.ch, o);
          }
        }
      }
    }
    issue(st, tk[PP_STAGES - 1]);  // stage st is free: this thread has read its own slots
  }
  cp_wait<0>();

  // The last block to finish resets the counters and starts the next epoch: every block has
  // taken its last ticket (one past the end) before it counts itself done.
  __syncthreads();
  if (threadIdx.x == 0) {
    if (atomicAdd(g.hdr + 1, 1u) == gridDim.x - 1) {
      atomicExch(g.hdr, 0u);
      atomicExch(g.hdr + 1, 0u);
      atomicAdd(g.hdr + 2, 1u);
    }
  }
}

}  // namespace strux::cuda::scan
