// The float32 batch-last ks product for groups whose weight fits in shared memory ("stream",
// private to src/cuda/ks): a persistent grid, each block holding one group's W pre-split into
// tf32 hi/lo once, streaming batch tiles of that group's x through a cp.async ring.
//
// Why: for small b, c the product is memory-bound (it reads c and writes b floats per batch
// column and does b*c FMAs per column), and a per-tile kernel (ks_tc.cuh) re-stages W and pays
// a pipeline prologue per output tile, while cuBLAS SGEMM runs on the FFMA pipe near its peak
// (~2x the byte floor at b = c = 64). Here the block's only per-tile traffic is the x tile in
// and the y tile out; the 3xTF32 products go to the tensor cores.
//
// Group g = (i, j) (a*d groups): Y_g (b x batch) = W_g X_g, X_g[l, n] = x[(i*c + l)*d + j, n]
// (rows d*batch apart, n contiguous), W_g[k, l] = w[i*si + k*sk + l*sl + j*sj]. Work items are
// (group, batch tile of TN columns), group-major; a block takes a contiguous run of items, so
// it loads W again only when its run crosses into the next group (once or twice per block).
//
// mma m16n8k8 (tf32): M = k (out rows), N = n (batch), K = l. A = W_g from shared memory in
// fragment order (each lane's 4 hi then 4 lo values are one 16-byte load each, conflict free).
// B: the n index of an mma is a free relabelling: mma column 2u + e of n8 tile nt of a
// 32-column chunk is batch column 16e + 4u + nt. So a lane (g = lane / 4, t = lane % 4) reads
// its B values of all 4 n8 tiles with one 16-byte shared load (columns 16(g%2) + 4(g/2) + 0..3),
// and its accumulators hold, per output row, columns 4t + 0..3 and 16 + 4t + 0..3: two float4
// stores, each warp store covering 8 rows x 64 contiguous bytes (whole 32-byte sectors).
// Accuracy: the truncating split and the fresh fragments with rounding FADDs of ks_tc.cuh (see
// there; here one fresh fragment per two k8 steps): 4.5e-7 relative vs float64 measured for
// c up to 192, the truncation bias stays per chain for any c; NaN stays in its column, an
// infinite x gives infinities (also against weights exact in tf32: split3).
// measured: bench/NOTES-gpu-ks-scan.md#ks-stream
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/ks/ks_tc.cuh"  // split, mma, mma0, cp4, cp16, cp_commit, cp_wait

namespace strux::cuda::ks {
namespace stream {

constexpr int NTHR = 256, NWARP = NTHR / 32;

struct Args {
  const float* x;
  const float* w;
  float* y;
  int64_t b, c, d, batch;
  int64_t si, sk, sl, sj;
  int mtiles;  // ceil(b / 16) rounded up to MT: m16 tiles of W in shared memory
  int ksteps;  // ceil(c / 8): k8 steps; rows of an x tile = 8 * ksteps
  int64_t tiles, items, per;  // batch tiles per group, a*d*tiles, items per block
};

// Shared memory of one block: W (2 floats per element, padded) and STAGES x tiles of
// 8*ksteps rows by TN + 4 floats (the + 4: a row is 4 banks past the previous one, so the 8
// lanes of a 16-byte load phase, 4 rows x 2 column quads 16 floats apart, hit 32 banks).
inline int64_t smem_bytes(int tn, int stages, int mtiles, int ksteps) {
  return (int64_t(mtiles) * ksteps * 256 + int64_t(stages) * ksteps * 8 * (tn + 4)) * 4;
}

// tc::split, plus hc = hi with an infinity replaced by 0, the B operand of the lo(W) * hi(x)
// product: an infinite x then gives hi(W) * inf + lo(W) * 0 + hi(W) * 0 = inf even where lo(W)
// is 0 (W exact in tf32, e.g. 1.0), where lo(W) * inf would be NaN.
__device__ __forceinline__ void split3(float v, uint32_t& hi, uint32_t& lo, uint32_t& hc) {
  const uint32_t h = __float_as_uint(v) & 0xffffe000u;
  const bool inf = isinf(v);
  hi = h;
  lo = __float_as_uint(inf ? 0.f : v - __uint_as_float(h));
  hc = inf ? 0u : h;
}

// One 16-byte global store (default caching). A plain float4 assignment was compiled into four
// 4-byte stores (nvcc 13.0, sm_90a): 8 partial-sector writes per 32-byte sector, which made the
// kernel L2-bound at 4x the bytes (ncu; bench/NOTES-gpu-ks-scan.md#ks-stream).
__device__ __forceinline__ void st4(float* p, float4 v) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
}

// MT: m16 tiles (16 output rows each) per warp work item. 1: more items per stage (more warps
// busy: the kernel is latency-bound at 8 warps per SM); 2: each x value split half as often.
template <int TN, int STAGES, bool VEC, int MT>
__global__ void __launch_bounds__(NTHR, 2) stream_kernel(Args ar) {
  static_assert(TN % 32 == 0 && STAGES >= 2 && (MT == 1 || MT == 2), "tile shape");
  constexpr int RS = TN + 4, NCH = TN / 32;
  extern __shared__ float4 smem4[];
  float* const Ws = reinterpret_cast<float*>(smem4);
  float* const Xs0 = Ws + ar.mtiles * ar.ksteps * 256;
  const int c = int(ar.c), rows = ar.ksteps * 8, xstage = rows * RS;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int64_t it0 = int64_t(blockIdx.x) * ar.per;
  const int64_t it1 = it0 + ar.per < ar.items ? it0 + ar.per : ar.items;
  if (it0 >= it1) return;
  const int64_t rsx = ar.d * ar.batch;  // row stride of x and y

  // x tile of item it -> stage: c rows of TN columns (zero fill past the batch).
  auto load_x = [&](int stage, int64_t it) {
    const int64_t grp = it / ar.tiles, n0 = (it - grp * ar.tiles) * TN;
    const int64_t i = grp / ar.d, j = grp - i * ar.d;
    const float* xg = ar.x + (i * ar.c * ar.d + j) * ar.batch + n0;
    const int64_t nleft = ar.batch - n0;
    float* Xs = Xs0 + stage * xstage;
    if constexpr (VEC) {  // batch % 4 == 0, 16-byte aligned: a quad is all in or all out
      for (int e = tid; e < c * (TN / 4); e += NTHR) {
        const int l = e / (TN / 4), q = (e % (TN / 4)) * 4;
        const bool ok = q < nleft;
        tc::cp16(Xs + l * RS + q, ok ? xg + l * rsx + q : ar.x, ok);
      }
    } else {
      for (int e = tid; e < c * TN; e += NTHR) {
        const int l = e / TN, q = e % TN;
        const bool ok = q < nleft;
        tc::cp4(Xs + l * RS + q, ok ? xg + l * rsx + q : ar.x, ok);
      }
    }
  };

  // W of group grp -> shared memory, split, in fragment order: fragment (mt, s) is 256 floats,
  // lane L's hi values at [4L, 4L+4), its lo values at [128 + 4L, 128 + 4L + 4). Element e of
  // a lane's A fragment: row mt*16 + g + 8*(e & 1), column s*8 + t + 4*(e >> 1); zero past b, c.
  auto load_w = [&](int64_t grp) {
    const int64_t i = grp / ar.d, j = grp - i * ar.d;
    const float* wg = ar.w + i * ar.si + j * ar.sj;
    const int nf = ar.mtiles * ar.ksteps * 32;
#pragma unroll 4
    for (int f = tid; f < nf; f += NTHR) {
      const int ln = f & 31, fs = f >> 5, mt = fs / ar.ksteps, s = fs - mt * ar.ksteps;
      uint32_t h[4], lo[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t k = mt * 16 + (ln >> 2) + 8 * (e & 1), l = s * 8 + (ln & 3) + 4 * (e >> 1);
        const float v = k < ar.b && l < c ? __ldg(wg + k * ar.sk + l * ar.sl) : 0.f;
        tc::split(v, h[e], lo[e]);
      }
      float* dst = Ws + fs * 256 + ln * 4;
      *reinterpret_cast<uint4*>(dst) = make_uint4(h[0], h[1], h[2], h[3]);
      *reinterpret_cast<uint4*>(dst + 128) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    }
  };

  // y tile of item (grp, n0) from the x tile in Xs: warp work items (m group of MT m16 tiles,
  // 32-column chunk), round robin over the warps.
  auto compute = [&](const float* Xs, int64_t grp, int64_t n0) {
    const int64_t i = grp / ar.d, j = grp - i * ar.d;
    const int mvalid = int((ar.b + 15) / 16);
    const int nitems = (ar.mtiles / MT) * NCH;
    for (int itw = warp; itw < nitems; itw += NWARP) {
      const int mg = itw / NCH, ch = itw - mg * NCH;
      const bool two = MT > 1 && mg * MT + 1 < mvalid;  // a second m16 tile with rows < b
      float acc[MT][4][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int r = 0; r < 4; ++r) acc[mt][nt][r] = 0.f;
      const float* xp = Xs + t * RS + ch * 32 + 16 * (g & 1) + 4 * (g >> 1);
      const float* wp = Ws + mg * MT * ar.ksteps * 256 + lane * 4;
      // Two k8 steps per fresh fragment (6 truncating mma adds, 4 independent chains per m16
      // tile side by side), then one rounding add into acc: the truncation bias grows with the
      // adds per chain, ~7e-9 per k (ks_tc.cuh), so ~1e-7 here, and half the FADDs of one step.
      for (int s0 = 0; s0 < ar.ksteps; s0 += 2) {
        const bool pair = s0 + 1 < ar.ksteps;
        float tmp[MT][4][4];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          if (u == 1 && !pair) break;
          const int s = s0 + u;
          const float4 x0 = *reinterpret_cast<const float4*>(xp + s * 8 * RS);
          const float4 x1 = *reinterpret_cast<const float4*>(xp + (s * 8 + 4) * RS);
          uint32_t bh[4][2], bl[4][2], bc[4][2];
          split3(x0.x, bh[0][0], bl[0][0], bc[0][0]);
          split3(x1.x, bh[0][1], bl[0][1], bc[0][1]);
          split3(x0.y, bh[1][0], bl[1][0], bc[1][0]);
          split3(x1.y, bh[1][1], bl[1][1], bc[1][1]);
          split3(x0.z, bh[2][0], bl[2][0], bc[2][0]);
          split3(x1.z, bh[2][1], bl[2][1], bc[2][1]);
          split3(x0.w, bh[3][0], bl[3][0], bc[3][0]);
          split3(x1.w, bh[3][1], bl[3][1], bc[3][1]);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            if (mt > 0 && !two) break;
            const float* wf = wp + (mt * ar.ksteps + s) * 256;
            const uint4 h = *reinterpret_cast<const uint4*>(wf);
            const uint4 lo = *reinterpret_cast<const uint4*>(wf + 128);
            const uint32_t ah[4] = {h.x, h.y, h.z, h.w}, al[4] = {lo.x, lo.y, lo.z, lo.w};
            if (u == 0) {
#pragma unroll
              for (int nt = 0; nt < 4; ++nt) tc::mma0(tmp[mt][nt], al, bc[nt]);
            } else {
#pragma unroll
              for (int nt = 0; nt < 4; ++nt) tc::mma(tmp[mt][nt], al, bc[nt]);
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) tc::mma(tmp[mt][nt], ah, bl[nt]);
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) tc::mma(tmp[mt][nt], ah, bh[nt]);
          }
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (mt > 0 && !two) break;
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mt][nt][r] += tmp[mt][nt][r];
        }
      }
      // Accumulator r of n8 tile nt: row g + 8*(r >> 1), mma column 2t + (r & 1), i.e. batch
      // column 16*(r & 1) + 4t + nt of the chunk: row g + 8h holds columns 4t + 0..3 (r = 2h)
      // and 16 + 4t + 0..3 (r = 2h + 1).
      const int64_t nb = n0 + ch * 32 + 4 * t;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if (mt > 0 && !two) break;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t k = (mg * MT + mt) * 16 + g + 8 * h;
          if (k >= ar.b) continue;
          float* yr = ar.y + ((i * ar.b + k) * ar.d + j) * ar.batch + nb;
          const float4 v0 = make_float4(acc[mt][0][2 * h], acc[mt][1][2 * h], acc[mt][2][2 * h],
                                        acc[mt][3][2 * h]);
          const float4 v1 = make_float4(acc[mt][0][2 * h + 1], acc[mt][1][2 * h + 1],
                                        acc[mt][2][2 * h + 1], acc[mt][3][2 * h + 1]);
          if constexpr (VEC) {  // nb % 4 == 0 and batch % 4 == 0: each float4 all in or out
            if (nb < ar.batch) st4(yr, v0);
            if (nb + 16 < ar.batch) st4(yr + 16, v1);
          } else {
            const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
            for (int e = 0; e < 8; ++e)
              if (nb + (e & 3) + 16 * (e >> 2) < ar.batch) yr[(e & 3) + 16 * (e >> 2)] = v[e];
          }
        }
      }
    }
  };

  // Rows c .. 8*ksteps - 1 of every stage stay zero (no copy writes them; W is zero there too,
  // and 0 * stale NaN would not be).
  const int pad = (rows - c) * TN;
  for (int e = tid; e < STAGES * pad; e += NTHR) {
    const int st = e / pad, r = e - st * pad;
    Xs0[st * xstage + (c + r / TN) * RS + r % TN] = 0.f;
  }
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (it0 + s < it1) load_x(s, it0 + s);
    tc::cp_commit();
  }
  int64_t wgrp = it0 / ar.tiles;
  load_w(wgrp);  // (overlaps the first copies; the loop's barrier publishes it)
  int st = 0, ldst = STAGES - 1;
  for (int64_t it = it0; it < it1; ++it) {
    tc::cp_wait<STAGES - 2>();
    __syncthreads();  // stage st landed for all; the stage computed last iteration is free
    if (it + STAGES - 1 < it1) load_x(ldst, it + STAGES - 1);
    tc::cp_commit();
    ldst = ldst + 1 == STAGES ? 0 : ldst + 1;
    const int64_t grp = it / ar.tiles;
    if (grp != wgrp) {  // block-uniform: every warp is past the previous compute
      load_w(grp);
      wgrp = grp;
      __syncthreads();
    }
    compute(Xs0 + st * xstage, grp, (it - grp * ar.tiles) * TN);
    st = st + 1 == STAGES ? 0 : st + 1;
  }
  tc::cp_wait<0>();
}

}  // namespace stream
}  // namespace strux::cuda::ks

#include "cuda/check.hpp"

namespace strux::cuda::ks {
namespace stream {

// Blocks of `fn` (NTHR threads, smem bytes) resident on the whole current device; also lifts
// fn's dynamic shared memory limit. Cached per (thread, device, kernel, smem): ks_stream.cu.
int64_t resident_blocks(const void* fn, int smem);

}  // namespace stream

template <int TN, int STAGES, bool VEC, int MT>
void launch_stream(const stream::Args& ar0, cudaStream_t s) {
  auto kern = stream::stream_kernel<TN, STAGES, VEC, MT>;
  const int smem = int(stream::smem_bytes(TN, STAGES, ar0.mtiles, ar0.ksteps));
  const int64_t resident = stream::resident_blocks(reinterpret_cast<const void*>(kern), smem);
  stream::Args ar = ar0;
  // Persistent: one wave of blocks, each a contiguous run of `per` items (none left empty).
  int64_t grid = ar.items < resident ? ar.items : resident;
  ar.per = (ar.items + grid - 1) / grid;
  grid = (ar.items + ar.per - 1) / ar.per;
  kern<<<dim3(unsigned(grid)), stream::NTHR, smem, s>>>(ar);
  STRUX_LAUNCH("ks stream_kernel");
}

}  // namespace strux::cuda::ks
