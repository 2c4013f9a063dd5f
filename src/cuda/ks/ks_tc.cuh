// The float32 ks product on tensor cores (private to src/cuda/ks): a per-group GEMM whose
// operands are split as x = hi + lo (hi = x rounded to tf32, lo = x - hi) and multiplied as
// hi*hi + hi*lo + lo*hi with tf32 mma.sync and float32 accumulation ("3xTF32"). The dropped
// lo*lo term and the tf32 truncation of lo are ~2^-21 of each product, so the result keeps
// float32 accuracy (~1e-6 relative) while running on the tensor cores (the FFMA path tops out at
// ~51 TFLOP/s, which the large-b, c patterns need all of).
//
// Group g = (i, j) computes Y_g = X_g W_g^T with X_g[n, l] = x at column (i*c + l)*d + j and
// W_g[k, l] = w[i*si + k*sk + l*sl + j*sj] (Algorithm 2 addressing: nothing is permuted).
// GEMM orientation follows the output's contiguous axis, so that an accumulator fragment's
// two neighbouring columns are neighbours in memory:
//   batch-last  (BL): M = k (out), N = n (batch), K = l; A = W_g, B = X_g^T (n contiguous).
//   batch-first     : M = n (batch), N = k (out), K = l; A = X_g (l contiguous if d == 1), B = W_g^T.
// Tiles of X (TP batch rows x BK) and W (TQ out rows x BK) go global -> shared with cp.async,
// STAGES deep, 16-byte copies where the layout allows (VEC); fragments are read from shared
// memory with row strides padded so that a warp's 32 reads hit 32 different banks.
//
// Accuracy for any K: the mma adds into its accumulator with truncation, a bias that grows
// linearly with the number of adds into one accumulator (~7e-9 * K relative measured with a
// single running accumulator: 5.4e-6 at K = 768). So each k8 step's three products go into a
// fresh zeroed fragment (3 truncating adds of terms of one k8 step) and that fragment is added
// into the running float32 sum with ordinary round-to-nearest FADDs: the truncation bias no
// longer accumulates along K and the error stays at the float32 level (~1e-7 relative).
//
// (A block-wide pre-split of each stage into hi/lo tiles in shared memory was slower than the
// per-warp split; measured: bench/NOTES-gpu-ks-scan.md#ks-tc-variants.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::ks {
namespace tc {

constexpr int NTHR = 256;  // 8 warps

struct Args {
  const float* x;
  const float* w;
  float* y;
  int64_t a, b, c, d, batch;
  int64_t si, sk, sl, sj;
  int64_t p_tiles, q_tiles;
  bool w_lfast;  // sl == 1: lanes run along l when staging W
  bool w_vec;    // and 16-byte copies of W are possible (c, sk, si, sj multiples of 4, aligned)
  bool y2;       // the output pair of a fragment may be stored as one float2
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Copies with zero fill: when !ok no byte is read (src must still be a valid address).
__device__ __forceinline__ void cp4(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp16(float* dst, const float* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// One 8-byte global store. A float2 assignment through a reinterpret_cast compiled into two
// 4-byte stores (nvcc 13.0, sm_90a; the PTX had no st.global.v2), twice the store
// instructions and partial-sector writes (the same split ks_stream.cuh's st4 avoids).
__device__ __forceinline__ void st2(float* p, float v0, float v1) {
  asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(v0), "f"(v1) : "memory");
}
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// hi = x truncated to tf32 (low 13 mantissa bits cleared: |hi| <= |x|, exact difference),
// lo = x - hi (the mma reads its top 19 bits). Truncation, not rounding, so that lo has the
// sign of x: an infinite x (hi = inf, lo = 0) meets the other operand's hi and lo with the same
// sign, and inf*b_hi + inf*b_lo stays infinite instead of inf - inf = NaN. A NaN keeps lo NaN.
__device__ __forceinline__ void split(float v, uint32_t& hi, uint32_t& lo) {
  const uint32_t h = __float_as_uint(v) & 0xffffe000u;
  hi = h;
  lo = __float_as_uint(isinf(v) ? 0.f : v - __uint_as_float(h));
}
// c += a*b and c = a*b (C = zero registers). volatile: the mma keep the order written, so that
// the compiler does not interleave every fresh fragment of a k8 step at once (registers).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma0(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%10,%10,%10};\n"
      : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.f));
}

template <int TP, int TQ, bool BL, int BK, int STAGES>
struct Shape {
  // l-contiguous rows are BK + 4 long: (g*KS + t) % 32 distinct for BK = 16, 32.
  static constexpr int KS = BK + 4;
  // X tile: batch-last [BK][TP + 8] (n contiguous; (t*(TP+8) + g) % 32 distinct for the TP
  // used), batch-first [TP][KS]. W tile: [TQ][KS] in both.
  static constexpr int XS = BL ? BK * (TP + 8) : TP * KS;
  static constexpr int WS = TQ * KS;
  static constexpr int STAGE = XS + WS;
  static constexpr int SMEM_BYTES = STAGES * STAGE * 4;
};

// Grid: one block per (q tile, j, p tile, i), q tile fastest then j: blocks that run together
// share their X tile (other q tiles) or its 32-byte sectors (other j, batch-first), in L2.
// MINB: blocks per SM asked of the register allocator (2 caps registers at 128).
template <int TP, int TQ, int WP, int WQ, bool BL, bool VEC, int MINB, int BK, int STAGES>
__global__ void __launch_bounds__(NTHR, MINB) tf32x3_kernel(Args ar) {
  using S = Shape<TP, TQ, BL, BK, STAGES>;
  constexpr int KS = S::KS;
  static_assert(BK % 8 == 0 && STAGES >= 2, "stage shape");
  static_assert(WP * WQ == NTHR / 32, "8 warps");
  constexpr int WTP = TP / WP, WTQ = TQ / WQ;              // warp tile
  constexpr int WM = BL ? WTQ : WTP, WN = BL ? WTP : WTQ;  // in GEMM terms
  constexpr int MT = WM / 16, NT = WN / 8;
  static_assert(MT * 16 == WM && NT * 8 == WN, "warp tile must be a multiple of 16 x 8");

  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wp = warp % WP, wq = warp / WP;

  int64_t bid = blockIdx.x;
  const int64_t qt = bid % ar.q_tiles;
  bid /= ar.q_tiles;
  const int64_t j = bid % ar.d;
  bid /= ar.d;
  const int64_t pt = bid % ar.p_tiles, i = bid / ar.p_tiles;
  const int64_t p0 = pt * TP, q0 = qt * TQ;
  const int64_t b = ar.b, c = ar.c, d = ar.d, batch = ar.batch;

  // X_g[n, l] at xg[n * sxp + l * sxl]
  const float* xg = BL ? ar.x + (i * c * d + j) * batch : ar.x + i * c * d + j;
  const int64_t sxl = BL ? d * batch : d, sxp = BL ? 1 : ar.a * c * d;
  const float* wg = ar.w + i * ar.si + j * ar.sj;

  auto load = [&](int stage, int64_t l0) {
    float* Xs = smem + stage * S::STAGE;
    float* Ws = Xs + S::XS;
    if constexpr (BL) {
      if constexpr (VEC) {  // batch % 4 == 0, 16-byte aligned: a quad is all in or all out
        constexpr int NV = BK * TP / 4;
#pragma unroll
        for (int e0 = 0; e0 < NV; e0 += NTHR) {
          const int e = e0 + tid, kk = e / (TP / 4), pp = (e % (TP / 4)) * 4;
          const int64_t l = l0 + kk, p = p0 + pp;
          const bool ok = l < c && p < batch;
          cp16(Xs + kk * (TP + 8) + pp, ok ? xg + l * sxl + p : ar.x, ok);
        }
      } else {
#pragma unroll 4
        for (int e0 = 0; e0 < BK * TP; e0 += NTHR) {
          const int e = e0 + tid, kk = e / TP, pp = e % TP;
          const int64_t l = l0 + kk, p = p0 + pp;
          const bool ok = l < c && p < batch;
          cp4(Xs + kk * (TP + 8) + pp, ok ? xg + l * sxl + p : ar.x, ok);
        }
      }
    } else {
      if constexpr (VEC) {  // d == 1, c % 4 == 0, aligned: l contiguous in quads
        constexpr int NV = TP * BK / 4;
#pragma unroll
        for (int e0 = 0; e0 < NV; e0 += NTHR) {
          const int e = e0 + tid, pp = e / (BK / 4), kq = (e % (BK / 4)) * 4;
          const int64_t l = l0 + kq, p = p0 + pp;
          const bool ok = l < c && p < batch;
          cp16(Xs + pp * KS + kq, ok ? xg + p * sxp + l : ar.x, ok);
        }
      } else {
#pragma unroll 4
        for (int e0 = 0; e0 < TP * BK; e0 += NTHR) {
          const int e = e0 + tid, pp = e / BK, kk = e % BK;
          const int64_t l = l0 + kk, p = p0 + pp;
          const bool ok = l < c && p < batch;
          cp4(Xs + pp * KS + kk, ok ? xg + p * sxp + l * sxl : ar.x, ok);
        }
      }
    }
    if (ar.w_vec) {  // l contiguous in quads, all in or all out (c % 4 == 0)
#pragma unroll
      for (int e0 = 0; e0 < TQ * BK / 4; e0 += NTHR) {
        const int e = e0 + tid;
        if (TQ * BK / 4 % NTHR == 0 || e < TQ * BK / 4) {
          const int q = e / (BK / 4), kq = (e % (BK / 4)) * 4;
          const int64_t l = l0 + kq, k = q0 + q;
          const bool ok = l < c && k < b;
          cp16(Ws + q * KS + kq, ok ? wg + k * ar.sk + l : ar.w, ok);
        }
      }
      return;
    }
#pragma unroll 4
    for (int e0 = 0; e0 < TQ * BK; e0 += NTHR) {
      const int e = e0 + tid;
      if (TQ * BK % NTHR == 0 || e < TQ * BK) {
        const int q = ar.w_lfast ? e / BK : e % TQ, kk = ar.w_lfast ? e % BK : e / TQ;
        const int64_t l = l0 + kk, k = q0 + q;
        const bool ok = l < c && k < b;
        cp4(Ws + q * KS + kk, ok ? wg + k * ar.sk + l * ar.sl : ar.w, ok);
      }
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mt][nt][r] = 0.f;

  const int wm0 = BL ? wq * WTQ : wp * WTP, wn0 = BL ? wp * WTP : wq * WTQ;
  const int KT = int((c + BK - 1) / BK);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load(s, int64_t(s) * BK);
    cp_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_wait<STAGES - 2>();
    __syncthreads();  // stage kt landed for all; stage kt-1 is free to refill
    {
      const int nk = kt + STAGES - 1;
      if (nk < KT) load(nk % STAGES, int64_t(nk) * BK);
      cp_commit();
    }
    const float* Xs = smem + (kt % STAGES) * S::STAGE;
    const float* Ws = Xs + S::XS;
    // A (M x K) and B (K x N) fragments of this orientation, split into tf32 hi and lo.
    const float* As = BL ? Ws : Xs;
#pragma unroll
    for (int k0 = 0; k0 < BK; k0 += 8) {
      auto frag_a = [&](int mt, uint32_t(&ah)[4], uint32_t(&al)[4]) {
        const int m = wm0 + mt * 16 + g;
        split(As[m * KS + k0 + t], ah[0], al[0]);
        split(As[(m + 8) * KS + k0 + t], ah[1], al[1]);
        split(As[m * KS + k0 + t + 4], ah[2], al[2]);
        split(As[(m + 8) * KS + k0 + t + 4], ah[3], al[3]);
      };
      auto frag_b = [&](int nt, uint32_t(&bh)[2], uint32_t(&bl)[2]) {
        const int n = wn0 + nt * 8 + g;
        if constexpr (BL) {
          split(Xs[(k0 + t) * (TP + 8) + n], bh[0], bl[0]);
          split(Xs[(k0 + t + 4) * (TP + 8) + n], bh[1], bl[1]);
        } else {
          split(Ws[n * KS + k0 + t], bh[0], bl[0]);
          split(Ws[n * KS + k0 + t + 4], bh[1], bl[1]);
        }
      };
      // Fresh fragment per k8 step, then a rounding add into the running sum (see the top).
      // The streaming side's fragment meets G held fragments: the G chains of 3 mma are issued
      // side by side (G independent mma in flight), then G x 4 FADDs.
      if constexpr (8 * MT <= 4 * NT) {  // hold A (MT fragments), stream B
        uint32_t ah[MT][4], al[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) frag_a(mt, ah[mt], al[mt]);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          uint32_t bh[2], bl[2];
          frag_b(nt, bh, bl);
          float tmp[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) mma0(tmp[mt], al[mt], bh);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) mma(tmp[mt], ah[mt], bl);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) mma(tmp[mt], ah[mt], bh);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mt][nt][r] += tmp[mt][r];
        }
      } else {  // hold B (NT fragments), stream A
        uint32_t bh[NT][2], bl[NT][2];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) frag_b(nt, bh[nt], bl[nt]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          uint32_t ah[4], al[4];
          frag_a(mt, ah, al);
          float tmp[NT][4];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma0(tmp[nt], al, bh[nt]);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma(tmp[nt], ah, bl[nt]);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma(tmp[nt], ah, bh[nt]);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mt][nt][r] += tmp[nt][r];
        }
      }
    }
  }
  cp_wait<0>();

  // Epilogue: accumulator (r = 2h + e) sits at GEMM row m + 8h, column n + e.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = wm0 + mt * 16 + g + 8 * h, n = wn0 + nt * 8 + 2 * t;
        const float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
        if constexpr (BL) {
          const int64_t k = q0 + m, p = p0 + n;
          if (k >= b || p >= batch) continue;
          float* dst = ar.y + ((i * b + k) * d + j) * batch + p;
          if (ar.y2) {
            st2(dst, v0, v1);
          } else {
            dst[0] = v0;
            if (p + 1 < batch) dst[1] = v1;
          }
        } else {
          const int64_t p = p0 + m, k = q0 + n;
          if (p >= batch || k >= b) continue;
          float* dst = ar.y + p * (ar.a * b * d) + (i * b + k) * d + j;
          if (ar.y2) {
            st2(dst, v0, v1);
          } else {
            dst[0] = v0;
            if (k + 1 < b) dst[d] = v1;
          }
        }
      }
}

}  // namespace tc
}  // namespace strux::cuda::ks
