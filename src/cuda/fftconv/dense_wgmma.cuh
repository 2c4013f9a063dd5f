// The dense fftconv forward on wgmma (sm_90a; plan algo 17 forces it, the automatic rule takes it
// for ungated forwards where its model beats the mma.sync kernel of dense.cuh;
// bench/NOTES-gpu-fftconv-dense.md rounds 10–13).
//
// Blocks of 64: with t = 64·i + p and s = 64·j + q, y[t] = Σ_d Σ_q k[64·d + p − q] · v[64·(i − d) + q].
// One CTA: one h and R batch rows (R a multiple of 8), two warpgroups. Its rows sit in shared
// memory as V[n][q], n = x·R + r (block x of batch row r), 128-byte rows, K-major with the 128-byte
// swizzle. Output columns n = i·R + r of tap block d read row n − d·R, so a tile of 128 columns
// reads 128 consecutive rows: one descriptor start d·R rows earlier per tap block (causal: 128 zero
// rows before V; circular: V's first 128 rows again after it, so every window is contiguous). The
// Toeplitz block A_d[p][q] = k[64·d + p − q] is the register operand (constant along diagonals:
// a3 = a0), its pairs one aligned 32-bit load each from the reversed filter's two parity copies,
// as in dense.cuh. Accumulators: 64 × 128 float32 per warpgroup, staged through shared memory for
// 16-byte stores.
#pragma once

#include <cstdint>

#include "cuda/elem.cuh"
#include "cuda/fftconv/dense_taps.cuh"
#include "cuda/fftconv/dense_wgmma.hpp"
#include "cuda/fftconv/wgmma64.cuh"
#include "cuda/mma16.cuh"

namespace strux::cuda::dense::wg {

template <class T>
struct Params {
  const T* k;
  const T* u;
  T* y;
  int64_t B, H, L;
  int m, NI, D, R, nchunk, kwords, ntile;
  bool circular;
};

// Byte offset of 16-byte chunk c of row rho (128-byte rows in a 1024-byte aligned buffer: the
// 128-byte swizzle XORs the chunk with the row's place in its 8-row atom).
__device__ __forceinline__ uint32_t sw_off(int rho, int c) {
  return uint32_t(rho) * 128u + (uint32_t(c ^ (rho & 7)) << 4);
}

// The four operand registers of tap block d, k-step kk for this lane (kp: dense.cuh's pointer).
__device__ __forceinline__ void load_a(uint32_t (&a)[4][4], const uint32_t* kp, int d) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const int o = -32 * d + 8 * kk;
    a[kk][0] = kp[o];
    a[kk][1] = kp[o - 4];
    a[kk][2] = kp[o + 4];
    a[kk][3] = a[kk][0];
  }
}

template <class T>
__device__ __forceinline__ void issue(float (&acc)[64], uint32_t (&a)[4][4], uint32_t row_addr, bool first) {
  fence_regs(acc);  // the zeroing / the A loads before the fence, in PTX order too
  fence_regs(a);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) Wgmma<T>::mma(acc, a[kk], desc_sw128(row_addr + 32u * kk), first && kk == 0 ? 0 : 1);
  wgmma_commit();
  fence_regs(acc);
}

// 1 where this translation unit's loaded image has the wgmma path (an sm_90a cubin), 0 where the
// driver took another image (sm_90 cubin or compute_90 PTX of the same fatbin: forward_kernel traps
// there). The host asks once per device before planning (dense_wgmma.cu, supported).
__global__ void probe_kernel(int* out) {
#ifdef STRUX_DENSE_WGMMA
  *out = 1;
#else
  *out = 0;
#endif
}

// VEC: L % 8 == 0 and u, y 16-byte aligned (16-byte loads and stores).
template <class T, bool VEC>
__global__ void __launch_bounds__(kThreads, 2) forward_kernel(Params<T> p) {
#ifndef STRUX_DENSE_WGMMA
  __trap();  // built without sm_90a: the host refuses such devices before launching
#else
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte aligned in the shared window (the swizzle XORs bits 4–6 of the shared address with
  // bits 7–9, and base offset 0 needs the 8-row atoms on 1024-byte boundaries).
  const uint32_t s_raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* V = smem_raw + (((s_raw + 1023u) & ~1023u) - s_raw);
  const int NI = p.NI, R = p.R, D = p.D, NR = NI * R;
  const int rows = rows_of(NR);
  uint32_t* kE = reinterpret_cast<uint32_t*>(V + size_t(rows) * 128);
  uint32_t* kO = kE + p.kwords;
  T* stage = reinterpret_cast<T*>(kO + p.kwords);
  const int h = int(blockIdx.x / unsigned(p.nchunk));
  const int64_t b0 = int64_t(blockIdx.x % unsigned(p.nchunk)) * R;
  const int Z0 = kB * D;

  // ---- stage: the reversed filter (two parity copies), the zero rows, the rows of v -----------
  {
    stage_reversed_taps(p.k, int64_t(h) * p.m, p.m, Z0, p.kwords, kE, kO, kThreads);
    if (!p.circular)
      for (int i = threadIdx.x; i < kPadRows * 8; i += kThreads) reinterpret_cast<uint4*>(V)[i] = make_uint4(0, 0, 0, 0);
    const int base = p.circular ? 0 : kPadRows;
    for (int idx = threadIdx.x; idx < R * NI * 8; idx += kThreads) {
      const int r = idx / (NI * 8), rem = idx - r * NI * 8, x = rem >> 3, c = rem & 7;
      const int64_t b = b0 + r, t0 = int64_t(kB) * x + 8 * c;
      uint4 w = make_uint4(0, 0, 0, 0);
      if (b < p.B && t0 < p.L) {
        const T* src = p.u + (b * p.H + h) * p.L + t0;
        if (VEC) {
          w = __ldg(reinterpret_cast<const uint4*>(src));
        } else {
          uint16_t* e = reinterpret_cast<uint16_t*>(&w);
          for (int i = 0; i < 8 && t0 + i < p.L; ++i) e[i] = bits_of(src, i);
        }
      }
      const int n = x * R + r;
      *reinterpret_cast<uint4*>(V + sw_off(base + n, c)) = w;
      if (p.circular && n < kPadRows) *reinterpret_cast<uint4*>(V + sw_off(NR + n, c)) = w;
    }
  }
  fence_proxy_async();  // the rows above, written by ordinary stores, are read by wgmma
  __syncthreads();

  // ---- products: warpgroup wg takes tiles wg, wg + 2, … of 128 output columns ----------------
  const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, c = lane & 3;
  const uint32_t sV = static_cast<uint32_t>(__cvta_generic_to_shared(V));
  // a0 of k-step kk, tap block d: (k[x], k[x − 1]) with x = 64·d + 16·warp + g − 16·kk − 2·c, i.e. the
  // reversed filter's pair at z = Z0 − x (parity of g: kE or kO).
  const uint32_t* kp = ((g & 1) ? kO : kE) + (Z0 - 16 * warp - g + 2 * c - (g & 1)) / 2;
  T* st = stage + wg * kN * kSt;
  for (int tile = wg; tile < p.ntile; tile += 2) {
    const int n0 = tile * kN;
    const int dmax = p.circular ? D - 1 : min(D - 1, (min(n0 + kN, NR) - 1) / R);
    const auto row_addr = [&](int d) -> uint32_t {
      const int s = p.circular ? ((n0 - d * R) % NR + NR) % NR : kPadRows + n0 - d * R;
      return sV + uint32_t(s) * 128u;
    };
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    uint32_t A0[4][4], A1[4][4];
    load_a(A0, kp, 0);
    for (int d = 0; d <= dmax; d += 2) {  // two register sets: the next block's loads overlap the products
      issue<T>(acc, A0, row_addr(d), d == 0);
      wgmma_wait<1>();
      if (d + 1 <= dmax) {
        load_a(A1, kp, d + 1);
        issue<T>(acc, A1, row_addr(d + 1), false);
        wgmma_wait<1>();
        if (d + 2 <= dmax) load_a(A0, kp, d + 2);
      }
    }
    wgmma_wait<0>();
    fence_regs(acc);  // the epilogue's reads of the accumulators after the wait

    // ---- epilogue: D[p][n] (rows 16·warp + g (+8), columns 8·j + 2·c (+1)) to st[n][p], then rows
    // of 8 samples to y ------------------------------------------------------------------------
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        st[(8 * j + 2 * c + (e & 1)) * kSt + 16 * warp + g + 8 * (e >> 1)] = From<T>::of(acc[4 * j + e]);
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
    for (int idx = tid; idx < kN * 8; idx += 128) {
      const int nl = idx >> 3, cc = idx & 7, n = n0 + nl;
      if (n >= NR) continue;
      const int i = n / R, r = n - i * R;
      const int64_t b = b0 + r, t0 = int64_t(kB) * i + 8 * cc;
      if (b >= p.B || t0 >= p.L) continue;
      T* dst = p.y + (b * p.H + h) * p.L + t0;
      const T* from = st + nl * kSt + 8 * cc;
      if (VEC) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(from);
      } else {
        for (int q = 0; q < 8 && t0 + q < p.L; ++q) dst[q] = from[q];
      }
    }
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");  // st is refilled by the next tile
  }
#endif
}

}  // namespace strux::cuda::dense::wg
