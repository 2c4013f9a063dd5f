// A pair of KS factors in one kernel (private to src/cuda/ks): y = x (K_1 K_2)^T (batch-first)
// or K_1 K_2 x (batch-last), with the intermediate kept in shared memory. One read of x, one
// write of y.
//
// A block owns TB consecutive batch rows (whole rows: every output of a Monarch pair depends on
// every input of its row). It copies its x rows into shared memory (16-byte global loads; in
// batch-last, 16 bytes of consecutive batch columns of one feature, spread over V rows), runs
// factor 2 then factor 1 there, and copies its y rows out (16-byte global stores). Each factor
// is a set of a*d independent groups (Algorithm 2 of Gonon et al.): group (i, j) is the dense
// product Z_g = W_g X_g with X_g[l][n] = buffer[n][i*c*d + l*d + j] and W_g[k][l] =
// w[i, k, l, j]; a warp owns whole groups (square factors, computed in place) or m16 tiles of
// groups (the others), run on mma.sync with M = k (outputs, m16 tiles), N = the block's batch
// rows (n8 tiles), K = l, float32 accumulation:
//   - float16 / bfloat16: m16n8k16 in the input type; the intermediate is rounded to the input
//     type, as between two single-factor calls;
//   - float32: m16n8k8 tf32 with both operands split hi + lo and hi*hi + hi*lo + lo*hi summed
//     (3xTF32, ks_tc.cuh's split; each k8 step in a fresh fragment added with rounding FADDs so
//     the truncating mma adds do not build up along K); the intermediate stays float32.
// A operands (weights) come straight from global memory (L2-resident; each block reads every
// weight once, reused over its TB rows), group-major (a factor with d > 1 is first copied by
// relayout_kernel, so that a warp's fragment loads read whole 16-byte runs instead of one
// 2-byte value per 32-byte sector); B operands (activations) from shared memory.
//
// Buffers hold rows (stride LD0 / LD1 elements) in natural column order with a one-word pad
// after every P elements (sidx): the strided group columns (stride d, e.g. d = 32 in the
// Monarch pair's second factor) then fall in different banks for the four lanes of a quad.
// A square factor (b == c) writes its outputs over its own inputs (same column set): the warp
// computes the whole group into a private scratch, then copies it into place. A non-square
// factor writes into the other buffer.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/ks/ks_tc.cuh"  // tc::split, tc::mma, tc::mma0 (3xTF32)

namespace strux::cuda::ks::fused {

constexpr int NWARP = 8, NTHR = 32 * NWARP;

struct Fac {
  int a, b, c, d;
};

template <class T>
struct Args {
  const T* x;
  const T* w1;  // factor 1 (applied second), (a1, b1, c1, d1), group-major: see relayout
  const T* w2;  // factor 2 (applied first)
  T* y;
  int64_t batch;
  Fac f1, f2;
  int N, M;      // widths of x and y
  int LD0, LD1;  // row strides of the two buffers, elements (LD1 = 0: every factor square, one buffer)
  int sh;        // pad: one 32-bit word after every 2^sh elements
  int scr;       // elements of one warp's scratch (0: no square factor)
  bool bl;       // batch-last: x (N, batch), y (M, batch); the block's rows are columns there
  bool vec;      // 16-byte global copies (batch-first: of rows; batch-last: of V batch columns)
  bool wpair;    // half types: w1, w2 4-byte aligned, so a (l, l+1) weight pair is one load
};

template <class T>
struct Elem {
  static constexpr int EPW = 4 / int(sizeof(T));  // elements per 32-bit word
};

__device__ __forceinline__ int sidx(int n, int sh, int epw) { return n + epw * (n >> sh); }

__device__ __forceinline__ uint32_t pack2(__half lo, __half hi) {
  return uint32_t(__half_as_ushort(lo)) | (uint32_t(__half_as_ushort(hi)) << 16);
}
__device__ __forceinline__ uint32_t pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return uint32_t(__bfloat16_as_ushort(lo)) | (uint32_t(__bfloat16_as_ushort(hi)) << 16);
}

__device__ __forceinline__ void mma16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                      __half) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                      __nv_bfloat16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <class T>
__device__ __forceinline__ T from_f32(float v) {
  if constexpr (sizeof(T) == 4) return v;
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

// One factor over the block's rows: work units (groups, or m16 tiles of groups) u = warp,
// warp + NWARP, ...; in -> out (out == in: square factor, through the warp's scratch).
template <class T, int TB, bool D1>
__device__ void stage(const T* __restrict__ w, Fac f, const T* in, int LD, T* out, int LDO, T* scr,
                      int sh, bool wpair, int warp, int lane) {
  constexpr int NT = TB / 8, EPW = Elem<T>::EPW;
  constexpr int SP = sizeof(T) == 4 ? 4 : 8;  // scratch row padding: conflict-free epilogue
  const int g = lane >> 2, t = lane & 3;
  const bool inplace = in == out;
  const int sb = f.b + SP;
  const int ngroups = f.a * f.d, mtiles = f.b / 16;
  // A warp's unit of work: a whole group in place (its outputs overwrite inputs that the other
  // m16 tiles of the group still read), else one m16 tile of a group (tiles are independent
  // there), so that a factor with few large groups (e.g. 12 groups of 128 outputs) still
  // spreads evenly over the warps.
  const int nunits = inplace ? ngroups : ngroups * mtiles;
  for (int u = warp; u < nunits; u += NWARP) {
    const int grp = inplace ? u : u / mtiles;
    const int mbeg = inplace ? 0 : (u - grp * mtiles) * 16, mend = inplace ? f.b : mbeg + 16;
    const int i = grp / f.d, j = grp - i * f.d;
    const int in_base = i * f.c * f.d + j, out_base = i * f.b * f.d + j;
    const T* wg = w + int64_t(grp) * f.b * f.c;  // W_g[k][l] = wg[k*c + l] (group-major weights)
    for (int m0 = mbeg; m0 < mend; m0 += 16) {
      const int k0 = m0 + g, k1 = k0 + 8;
      float acc[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
      if constexpr (sizeof(T) == 4) {
#pragma unroll 2
        for (int l0 = t; l0 < f.c; l0 += 8) {
          const float wa[4] = {__ldg(wg + k0 * f.c + l0), __ldg(wg + k1 * f.c + l0),
                               __ldg(wg + k0 * f.c + l0 + 4), __ldg(wg + k1 * f.c + l0 + 4)};
          uint32_t ahi[4], alo[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) tc::split(wa[e], ahi[e], alo[e]);
          const int o0 = sidx(in_base + l0 * f.d, sh, EPW), o1 = sidx(in_base + (l0 + 4) * f.d, sh, EPW);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int r = (nt * 8 + g) * LD;
            const float xb[2] = {in[r + o0], in[r + o1]};
            uint32_t bhi[2], blo[2], bhz[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              tc::split(xb[e], bhi[e], blo[e]);
              bhz[e] = isinf(xb[e]) ? 0u : bhi[e];  // lo(w) * hi(x): an infinite x stays infinite
            }
            float fr[4];
            tc::mma0(fr, ahi, blo);
            tc::mma(fr, alo, bhz);
            tc::mma(fr, ahi, bhi);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[nt][e] += fr[e];
          }
        }
      } else {
        using U = unsigned short;
        const U* wu = reinterpret_cast<const U*>(wg);
        const U* inu = reinterpret_cast<const U*>(in);
        auto wpr = [&](int k, int l) -> uint32_t {  // {W[k][l], W[k][l+1]}: l and k*c even
          const int o = k * f.c + l;
          if (wpair) return __ldg(reinterpret_cast<const uint32_t*>(wu + o));
          return uint32_t(__ldg(wu + o)) | (uint32_t(__ldg(wu + o + 1)) << 16);
        };
#pragma unroll 2
        for (int l0 = 2 * t; l0 < f.c; l0 += 16) {
          const uint32_t a[4] = {wpr(k0, l0), wpr(k1, l0), wpr(k0, l0 + 8), wpr(k1, l0 + 8)};
          const int o0 = sidx(in_base + l0 * f.d, sh, EPW), o2 = sidx(in_base + (l0 + 8) * f.d, sh, EPW);
          const int o1 = D1 ? 0 : sidx(in_base + (l0 + 1) * f.d, sh, EPW);
          const int o3 = D1 ? 0 : sidx(in_base + (l0 + 9) * f.d, sh, EPW);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int r = (nt * 8 + g) * LD;
            uint32_t bb[2];
            if constexpr (D1) {  // (l, l+1) adjacent in one word: in_base, l0 even, pads whole words
              bb[0] = *reinterpret_cast<const uint32_t*>(inu + r + o0);
              bb[1] = *reinterpret_cast<const uint32_t*>(inu + r + o2);
            } else {
              bb[0] = uint32_t(inu[r + o0]) | (uint32_t(inu[r + o1]) << 16);
              bb[1] = uint32_t(inu[r + o2]) | (uint32_t(inu[r + o3]) << 16);
            }
            mma16(acc[nt], a, bb, T{});
          }
        }
      }
      // C fragment: (k0, row 2t), (k0, 2t+1), (k1, 2t), (k1, 2t+1) of each n8 tile
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int r0 = nt * 8 + 2 * t, r1 = r0 + 1;
        if (inplace) {
          scr[r0 * sb + k0] = from_f32<T>(acc[nt][0]);
          scr[r1 * sb + k0] = from_f32<T>(acc[nt][1]);
          scr[r0 * sb + k1] = from_f32<T>(acc[nt][2]);
          scr[r1 * sb + k1] = from_f32<T>(acc[nt][3]);
        } else {
          const int q0 = sidx(out_base + k0 * f.d, sh, EPW), q1 = sidx(out_base + k1 * f.d, sh, EPW);
          out[r0 * LDO + q0] = from_f32<T>(acc[nt][0]);
          out[r1 * LDO + q0] = from_f32<T>(acc[nt][1]);
          out[r0 * LDO + q1] = from_f32<T>(acc[nt][2]);
          out[r1 * LDO + q1] = from_f32<T>(acc[nt][3]);
        }
      }
    }
    if (inplace) {  // every lane has read its last input of this group: write the group over it
      // lanes along k (one output column each, its buffer offset computed once), rows unrolled:
      // round 2's loop over e = r*b + k spent ~35 instructions per element on a runtime division
      // and sidx, ~40% of the pair's time by the count in NOTES "ks-fused round 3"
      __syncwarp();
      for (int k = lane; k < f.b; k += 32) {
        const int o = sidx(out_base + k * f.d, sh, EPW);
#pragma unroll 8
        for (int r = 0; r < TB; ++r) out[r * LDO + o] = scr[r * sb + k];
      }
      __syncwarp();
    }
  }
}

template <class T, int TB>
__device__ __forceinline__ void run_stage(const T* w, Fac f, const T* in, int LD, T* out, int LDO, T* scr,
                                          int sh, bool wpair, int warp, int lane) {
  if (f.d == 1) stage<T, TB, true>(w, f, in, LD, out, LDO, scr, sh, wpair, warp, lane);
  else stage<T, TB, false>(w, f, in, LD, out, LDO, scr, sh, wpair, warp, lane);
}

template <class T, int TB>
__global__ void __launch_bounds__(NTHR, 2) pair_kernel(Args<T> ar) {  // 2 blocks per SM: <= 128 registers
  constexpr int EPW = Elem<T>::EPW, V = 16 / int(sizeof(T));  // elements per 16 bytes
  extern __shared__ uint4 smem_u4[];
  T* b0 = reinterpret_cast<T*>(smem_u4);
  T* b1 = b0 + TB * ar.LD0;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  T* scr = b1 + TB * ar.LD1 + warp * ar.scr;
  const int64_t row0 = int64_t(blockIdx.x) * TB;
  const int rows = ar.batch - row0 < TB ? int(ar.batch - row0) : TB;
  const int sh = ar.sh;

  // x rows -> b0 (rows past the batch: zeros)
  if (ar.bl) {  // x[n][row0 + r]: V consecutive batch columns per 16-byte load, scattered to V rows
    if (ar.vec) {  // batch % V == 0: a chunk is all in or all out
      constexpr int CH = TB / V;
#pragma unroll 4
      for (int e = tid; e < CH * ar.N; e += NTHR) {
        const int n = e / CH, rv = (e - n * CH) * V;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (rv < rows) v = __ldg(reinterpret_cast<const uint4*>(ar.x + int64_t(n) * ar.batch + row0 + rv));
        const T* pv = reinterpret_cast<const T*>(&v);
        const int o = sidx(n, sh, EPW);
#pragma unroll
        for (int q = 0; q < V; ++q) b0[(rv + q) * ar.LD0 + o] = pv[q];
      }
    } else {
      for (int e = tid; e < TB * ar.N; e += NTHR) {
        const int n = e / TB, r = e - n * TB;
        b0[r * ar.LD0 + sidx(n, sh, EPW)] = r < rows ? ar.x[int64_t(n) * ar.batch + row0 + r] : from_f32<T>(0.f);
      }
    }
  } else if (ar.vec) {
    const int nv = ar.N / V;
#pragma unroll 4
    for (int e = tid; e < TB * nv; e += NTHR) {
      const int r = e / nv, n = (e - r * nv) * V;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r < rows) v = __ldg(reinterpret_cast<const uint4*>(ar.x + (row0 + r) * ar.N + n));
      uint32_t* s = reinterpret_cast<uint32_t*>(b0 + r * ar.LD0 + sidx(n, sh, EPW));  // V never straddles a pad
      s[0] = v.x;
      s[1] = v.y;
      s[2] = v.z;
      s[3] = v.w;
    }
  } else {
    for (int e = tid; e < TB * ar.N; e += NTHR) {
      const int r = e / ar.N, n = e - r * ar.N;
      b0[r * ar.LD0 + sidx(n, sh, EPW)] = r < rows ? ar.x[(row0 + r) * ar.N + n] : from_f32<T>(0.f);
    }
  }
  __syncthreads();
  // a square factor writes over its input (one buffer), another into the other buffer
  const bool z1 = ar.f2.b != ar.f2.c, y1 = z1 == (ar.f1.b == ar.f1.c);  // z, y in b1
  T* z = z1 ? b1 : b0;
  run_stage<T, TB>(ar.w2, ar.f2, b0, ar.LD0, z, z1 ? ar.LD1 : ar.LD0, scr, sh, ar.wpair, warp, lane);
  __syncthreads();
  T* nxt = y1 ? b1 : b0;
  const int LD = y1 ? ar.LD1 : ar.LD0;
  run_stage<T, TB>(ar.w1, ar.f1, z, z1 ? ar.LD1 : ar.LD0, nxt, LD, scr, sh, ar.wpair, warp, lane);
  __syncthreads();
  // nxt rows -> y
  if (ar.bl) {
    if (ar.vec) {
      constexpr int CH = TB / V;
#pragma unroll 4
      for (int e = tid; e < CH * ar.M; e += NTHR) {
        const int m = e / CH, rv = (e - m * CH) * V;
        if (rv >= rows) continue;
        const int o = sidx(m, sh, EPW);
        uint4 v;
        T* pv = reinterpret_cast<T*>(&v);
#pragma unroll
        for (int q = 0; q < V; ++q) pv[q] = nxt[(rv + q) * LD + o];
        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(ar.y + int64_t(m) * ar.batch + row0 + rv),
                     "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
      }
    } else {
      for (int e = tid; e < TB * ar.M; e += NTHR) {
        const int m = e / TB, r = e - m * TB;
        if (r < rows) ar.y[int64_t(m) * ar.batch + row0 + r] = nxt[r * LD + sidx(m, sh, EPW)];
      }
    }
  } else if (ar.vec) {
    const int nv = ar.M / V;
#pragma unroll 4
    for (int e = tid; e < rows * nv; e += NTHR) {
      const int r = e / nv, m = (e - r * nv) * V;
      const uint32_t* s = reinterpret_cast<const uint32_t*>(nxt + r * LD + sidx(m, sh, EPW));
      // one 16-byte store (a uint4 assignment can compile to four 4-byte ones: ks_stream.cuh)
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(ar.y + (row0 + r) * ar.M + m),
                   "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]) : "memory");
    }
  } else {
    for (int e = tid; e < rows * ar.M; e += NTHR) {
      const int r = e / ar.M, m = e - r * ar.M;
      ar.y[(row0 + r) * ar.M + m] = nxt[r * LD + sidx(m, sh, EPW)];
    }
  }
}

// Group-major weights: wt[((i*d + j)*b + k)*c + l] = w[((i*b + k)*c + l)*d + j], so that a
// group's W_g is one contiguous b x c block (w itself when d == 1). Read coalesced along j.
template <class T>
__global__ void relayout_kernel(const T* __restrict__ w, T* __restrict__ wt, int a, int b, int c, int d) {
  const int64_t n = int64_t(a) * b * c * d;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % d, l = (e / d) % c, k = (e / (int64_t(d) * c)) % b, i = e / (int64_t(d) * c * b);
    wt[((i * d + j) * b + k) * c + l] = w[e];
  }
}

}  // namespace strux::cuda::ks::fused
