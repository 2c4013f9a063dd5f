// The dense fftconv kernel: y = k * v as products of 32×32 Toeplitz blocks on tensor cores.
//
// With t = 32·i + p and s = 32·j + q (p, q < 32), y[t] = Σ_d Σ_q v[32·(i − d) + q] · k[32·d + p − q]
// over the tap blocks d < D (k is zero outside [0, m)). For a CTA (one h, R batch rows) that is
// one matrix product per tap block: rows m = (i, r) (i-major: m = i·R + r), A_d[m][q] =
// v_r[32·(i − d) + q] (a row of 32 samples of row r, read with ldmatrix), B_d[q][p] =
// k[32·d + p − q] (the Toeplitz block, the same for every row of the CTA), accumulated in float32
// by mma.sync m16n8k16. Causal: blocks i − d < 0 read a zero block and a tile of rows stops at
// d = its largest i; circular (L a multiple of 32): i − d wraps.
//
// Exactness: the products of two 16-bit values are exact in float32, so the error is the float32
// sums' and the output rounding. With a pregate, v = u ⊙ pregate is split as hi + lo·2^-s (both in
// the 16-bit type, lo scaled so it stays normal) with the lo products in a second accumulator.
// A row's outputs read only its own samples (NaN stays in its row, as in the FFT kernels).
//
// Shared memory: v as R rows of S blocks (S odd) of 32 samples (64 bytes, four 16-byte units),
// unit c of block X stored at unit c ^ ((X >> 1) & 3): ldmatrix's 8 rows (8 consecutive X, or 8
// rows r at one x) then hit 8 distinct 16-byte bank groups. The filter reversed, twice (kE: pairs
// (kr[2w], kr[2w+1]), kO: (kr[2w+1], kr[2w+2]), kr[z] = k[32·D − z]), so that every B fragment
// register is one aligned 32-bit load; kO starts 16 banks after kE (conflict-free).
#pragma once

#include <cstdint>

#include "cuda/elem.cuh"
#include "cuda/fftconv/dense.hpp"
#include "cuda/mma16.cuh"

namespace strux::cuda::dense {

template <class T>
struct Params {
  const T *k, *u, *pre, *post, *skip;
  T* y;
  int64_t B, H, L;
  int m, NI, S, D, R, nchunk, kwords;
  bool circular;
};

template <class T>
__device__ __forceinline__ uint16_t bits_of(const T* p, int64_t i) {
  return reinterpret_cast<const uint16_t*>(p)[i];
}
__device__ __forceinline__ uint32_t pack_bits(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

// Byte offset of 16-byte unit c of block X in a v buffer.
__device__ __forceinline__ uint32_t unit_offset(int X, int c) { return uint32_t(X) * 64u + (uint32_t(c ^ ((X >> 1) & 3)) << 4); }

// Stage one 16-byte unit (8 samples from t0) of v into the hi (and lo) buffers.
template <class T, bool SPLIT, bool VEC>
__device__ __forceinline__ void stage_unit(const Params<T>& p, int64_t row, bool live, int64_t t0, unsigned char* hi,
                                           unsigned char* lo) {
  using Op = Mma16<T>;
  if constexpr (!SPLIT && VEC) {  // a raw copy of 8 samples
    uint4 w = make_uint4(0, 0, 0, 0);
    if (live && t0 < p.L) w = __ldg(reinterpret_cast<const uint4*>(p.u + row + t0));
    *reinterpret_cast<uint4*>(hi) = w;
    return;
  }
  float v[8];
  if (VEC && live && t0 < p.L) {
    const uint4 w = __ldg(reinterpret_cast<const uint4*>(p.u + row + t0));
    const T* e = reinterpret_cast<const T*>(&w);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = to_c(e[i]);
    if (SPLIT) {
      const uint4 wp = __ldg(reinterpret_cast<const uint4*>(p.pre + row + t0));
      const T* ep = reinterpret_cast<const T*>(&wp);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] *= to_c(ep[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const bool in = live && t0 + i < p.L;
      v[i] = in ? to_c(p.u[row + t0 + i]) : 0.f;
      if (SPLIT && in) v[i] *= to_c(p.pre[row + t0 + i]);
    }
  }
  uint4 wh, wl;
  uint32_t* h = reinterpret_cast<uint32_t*>(&wh);
  uint32_t* l = reinterpret_cast<uint32_t*>(&wl);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float a = Op::round(v[2 * i]), b = Op::round(v[2 * i + 1]);
    h[i] = Op::pack(a, b);
    if (SPLIT) l[i] = Op::pack((v[2 * i] - a) * Op::kLo, (v[2 * i + 1] - b) * Op::kLo);
  }
  *reinterpret_cast<uint4*>(hi) = wh;
  if (SPLIT) *reinterpret_cast<uint4*>(lo) = wl;
}

// NT: tiles of 16 rows m per warp in flight (they share each B fragment).
// SPLIT: a pregate is given (v as hi + lo). VEC: L % 8 == 0 and u, pre, post, y 16-byte aligned
// (16-byte staging loads, 4-byte epilogue accesses); otherwise one sample at a time.
template <class T, int NT, bool SPLIT, bool VEC>
__global__ void __launch_bounds__(kThreads) forward_kernel(Params<T> p) {
  using Op = Mma16<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int NI = p.NI, S = p.S, R = p.R, D = p.D;
  const int h = int(blockIdx.x / unsigned(p.nchunk)), chunk = int(blockIdx.x % unsigned(p.nchunk));
  const int64_t b0 = int64_t(chunk) * R;
  const size_t vbytes = size_t(R) * S * 64;
  unsigned char* vhi = smem;
  unsigned char* vlo = smem + vbytes;  // SPLIT only
  unsigned char* zero = smem + (SPLIT ? 2 : 1) * vbytes;
  uint32_t* kE = reinterpret_cast<uint32_t*>(zero + 64);
  uint32_t* kO = kE + p.kwords;
  const int Z0 = kPb * D;

  // ---- stage: the filter reversed (two copies), a zero block, the rows' samples ----------------
  {
    const int64_t kb = int64_t(h) * p.m;
    const auto kr = [&](int z) -> uint16_t {
      const int x = Z0 - z;
      return (x >= 0 && x < p.m) ? bits_of(p.k, kb + x) : uint16_t(0);
    };
    for (int w = threadIdx.x; w < p.kwords; w += kThreads) {
      const uint16_t a = kr(2 * w), b = kr(2 * w + 1), c = kr(2 * w + 2);
      kE[w] = pack_bits(a, b);
      kO[w] = pack_bits(b, c);
    }
    if (threadIdx.x < 16) reinterpret_cast<uint32_t*>(zero)[threadIdx.x] = 0u;
    const int U = NI * 4;
    for (int idx = threadIdx.x; idx < R * U; idx += kThreads) {
      const int r = idx / U, un = idx - r * U, x = un >> 2, c = un & 3;
      const int64_t b = b0 + r;
      const bool live = b < p.B;
      const int64_t row = live ? (b * p.H + h) * p.L : 0;
      const uint32_t off = unit_offset(r * S + x, c);
      stage_unit<T, SPLIT, VEC>(p, row, live, int64_t(kPb) * x + 8 * c, vhi + off, vlo + off);
    }
  }
  __syncthreads();

  // ---- products: warp w takes groups of 16·NT rows m = w, w + 4, … ---------------------------
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const int M = R * NI, G = (M + 16 * NT - 1) / (16 * NT);
  const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8, lunit = lane >> 4;
  const uint32_t s_vhi = static_cast<uint32_t>(__cvta_generic_to_shared(vhi));
  const uint32_t s_zero = static_cast<uint32_t>(__cvta_generic_to_shared(zero));
  const uint32_t lo_delta = uint32_t(vbytes);
  // This lane's B registers: b0 = (k[x], k[x − 1]), x = 32·d + 8·j + g − 16·kk − 2·c; b1 at x − 8.
  const uint32_t* kp = ((g & 1) ? kO : kE) + (Z0 - g + 2 * c - (g & 1)) / 2;
  const float sk = p.skip ? to_c(p.skip[h]) : 0.f;

  for (int grp = warp; grp < G; grp += kThreads / 32) {
    const int mbase = grp * 16 * NT;
    float acc[NT][4][4], accl[NT][4][4];
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[t][j][e] = 0.f, accl[t][j][e] = 0.f;
    int ii[NT], rx[NT];
    bool ok[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int m = mbase + 16 * t + lrow;
      ok[t] = m < M;
      ii[t] = ok[t] ? m / R : 0;
      rx[t] = ok[t] ? (m - ii[t] * R) * S : 0;
    }
    int dmax = D - 1;
    if (!p.circular) dmax = min(dmax, (min(mbase + 16 * NT, M) - 1) / R);
    for (int d = 0; d <= dmax; ++d) {
      uint32_t abase[NT], asw[NT];  // a row's block, and its unit swizzle (0 for the zero block)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        int x = ii[t] - d;
        if (p.circular && x < 0) x += NI;
        const int X = rx[t] + x;
        const bool live = ok[t] && x >= 0;
        abase[t] = live ? s_vhi + uint32_t(X) * 64u : s_zero;
        asw[t] = live ? uint32_t((X >> 1) & 3) << 4 : 0u;
      }
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        uint32_t bf[4][2];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          bf[j][0] = kp[-16 * d - 4 * j + 8 * kk];
          bf[j][1] = kp[-16 * d - 4 * j + 8 * kk + 4];
        }
        const uint32_t un = uint32_t(2 * kk + lunit) << 4;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const uint32_t addr = abase[t] + (un ^ asw[t]);
          uint32_t a[4];
          ldmatrix_x4(a, addr);
#pragma unroll
          for (int j = 0; j < 4; ++j) Op::mma(acc[t][j], a, bf[j][0], bf[j][1]);
          if constexpr (SPLIT) {  // the lo buffer sits lo_delta after hi; the zero block serves both
            uint32_t al[4];
            ldmatrix_x4(al, abase[t] == s_zero ? addr : addr + lo_delta);
#pragma unroll
            for (int j = 0; j < 4; ++j) Op::mma(accl[t][j], al, bf[j][0], bf[j][1]);
          }
        }
      }
    }

    // ---- epilogue: rows g and g + 8 of each tile, columns 8·j + 2·c, +1 -------------------------
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int m = mbase + 16 * t + g + 8 * hh;
        if (m >= M) continue;
        const int i = m / R, r = m - i * R;
        const int64_t b = b0 + r;
        if (b >= p.B) continue;
        const int64_t row = (b * p.H + h) * p.L;
        const int X = r * S + i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t t0 = int64_t(kPb) * i + 8 * j + 2 * c;
          if (t0 >= p.L) continue;
          float z[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) z[e] = acc[t][j][2 * hh + e] + (SPLIT ? accl[t][j][2 * hh + e] / Op::kLo : 0.f);
          if (p.skip) {
            const uint32_t off = unit_offset(X, j) + 4u * c;
            const T* vh = reinterpret_cast<const T*>(vhi + off);
            const T* vl = reinterpret_cast<const T*>(vlo + off);
#pragma unroll
            for (int e = 0; e < 2; ++e) z[e] += sk * (to_c(vh[e]) + (SPLIT ? to_c(vl[e]) / Op::kLo : 0.f));
          }
          const bool two = t0 + 1 < p.L;
          if (VEC) {  // L even: the pair is in range and 4-byte aligned
            if (p.post) {
              const T* q = p.post + row + t0;
              z[0] *= to_c(q[0]), z[1] *= to_c(q[1]);
            }
            *reinterpret_cast<uint32_t*>(p.y + row + t0) = Op::pack(z[0], z[1]);
          } else {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              if (e == 1 && !two) break;
              if (p.post) z[e] *= to_c(p.post[row + t0 + e]);
              p.y[row + t0 + e] = From<T>::of(z[e]);
            }
          }
        }
      }
  }
}

}  // namespace strux::cuda::dense
