// The four-step (Bailey) fftconv kernels for FFT sizes past the one-CTA fused kernels. The real
// row (length nfft = 2M) is packed as M complex points z[m] = x[2m] + i·x[2m+1] and M = M1·M2,
// m = m1·M2 + m2, frequency k = k1 + M1·k2. Three launches per call, the complex fp32
// intermediate X[row][k1][m2] (M points per row) between them:
//   pass A (cols_forward): per tile of C consecutive columns m2, the length-M1 FFTs over m1
//     (prologue: pregate, zero padding, dtype conversion fused in the load);
//   pass B (rows_kernel): per row pair (k1, M1 − k1) — the real-FFT split pairs frequency f with
//     M − f, which lives in the partner row — twiddle W_M^(m2·k1), FFT over m2, split, times
//     K̂, merge, inverse FFT, conjugate twiddle, back in place;
//   pass C (cols_inverse): the inverse FFTs over k1 per column tile and an epilogue
//     (fourstep_epi.cuh: the forward's y, or the backward's du / dpre, dpost, dk / dskip).
// The backward runs pass A on v and dz, its own row pass (fourstep_bwd.cuh rows_backward: dV̂,
// dK̂ summed over the batch, Ẑ) and pass C three times.
// The FFTs are fused.cuh's radix-16 Stockham passes in shared memory, one per group of N/16
// threads; the column passes stage their tile through shared memory so that global loads and
// stores run along m2 (contiguous). bench/fftconv_fourstep_model.py is the float64 model of
// every index below (bench/fftconv_fourstep_bwd_model.py of the backward's).
#pragma once

#include "cuda/fftconv/fused.cuh"
#include "cuda/fftconv/fourstep.hpp"

namespace strux::cuda::fourstep {

using fused::conjf2;
using fused::ld2;
using fused::mul2;
using fused::mul_i;
using fused::mulcf2;
using fused::mulf2;
using fused::pad;
using fused::padded;
using fused::scale2;
using fused::st2;
using fused::operator+;
using fused::operator-;

// Complex points per column tile (C = kTile / M1 columns, 512 threads, ~70 KB of shared memory).
constexpr int kTile = 8192;
constexpr int kColThreads = kTile / 16;
// Column stride in shared memory: padded(M1) + 1 is odd, so the staging loops (consecutive
// threads on consecutive columns) hit distinct banks.
__host__ __device__ constexpr int col_stride(int M1) { return padded(M1) + 1; }
__host__ __device__ constexpr size_t col_smem(int M1) { return size_t(kTile / M1) * col_stride(M1) * 8; }
__host__ __device__ constexpr int row_threads(int M2) { return M2 / 8; }  // two rows, M2/16 each
// 768 resident threads per SM (80 registers each): pass B is bound by memory latency, and at
// its unbounded ~150 registers only 8 warps per SM would be resident (at 64 registers it spilled).
__host__ __device__ constexpr int kRowMinBlocks(int M2) { return 768 / row_threads(M2); }
__host__ __device__ constexpr size_t row_smem(int M2) { return size_t(2) * (padded(M2) + 1) * 8; }

// exp(Sign·2πi·p/M), p < M <= 2^21: float(p)·(2/M) is exact, so sincospif is accurate to an ulp.
template <int Sign>
__device__ __forceinline__ float2 twiddle(int p, int M) {
  float s, c;
  sincospif(float(p) * (2.f / float(M)), &s, &c);
  return {c, Sign * s};
}

// In-place length-M1 FFTs of the C columns staged in sm (column c at sm + c·col_stride).
template <int M1, int Sign>
__device__ __forceinline__ void column_ffts(float2* sm) {
  constexpr int T1 = M1 / 16;
  const int g = threadIdx.x / T1, tid = threadIdx.x % T1;
  float2* buf = sm + g * col_stride(M1);
  __syncthreads();  // the staged tile is complete
  fused::fft<M1, T1, Sign>(buf, tid, [&](int n) { return buf[pad(n)]; },
                           [&](int i, float2 x) { buf[pad(i)] = x; });
  __syncthreads();
}

// fused.cuh split / merge (see the formulas there) with a run-time M: the pair (f, M − f) of the
// packed row's DFT Z ↔ the real row's spectrum X; W = pair_w(f, M) = exp(−πi·f/M).
struct Pair {
  float2 f, g;
};
__device__ __forceinline__ float2 pair_w(int f, int M) {
  float s, c;
  sincospif(float(f) / float(M), &s, &c);
  return {c, -s};
}
// (Z[f], Z[M − f]) → (X[f], X[M − f])
__device__ __forceinline__ Pair split_pair(float2 zf, float2 zg, float2 w) {
  const float2 e = {0.5f * (zf.x + zg.x), 0.5f * (zf.y - zg.y)};
  const float2 o = {0.5f * (zf.y + zg.y), -0.5f * (zf.x - zg.x)};
  const float2 wo = mulf2(w, o);
  return {e + wo, conjf2(e - wo)};
}
// (Y[f], Y[M − f]) → (Z'[f], Z'[M − f]), Z'[M − f] not stored when f = 0 (it is Z'[M] = Z'[0])
__device__ __forceinline__ Pair merge_pair(float2 yf, float2 yg, float2 w) {
  const float2 a = yf + conjf2(yg), d = yf - conjf2(yg);
  const float2 t = mul_i(mulcf2(w, d));  // i·conj(W)·D
  return {a + t, conjf2(a - t)};
}

// (x[t] … x[t + 3]) of a 16-bit row as two points, zero at t >= n: one 8-byte load where all four
// are valid (t a multiple of 4 and the row base 8-byte aligned: the caller's `quad`), else pairs.
template <class T>
__device__ __forceinline__ void ld4(const T* __restrict__ x, int64_t t, int64_t n, float2& z0, float2& z1) {
  struct alignas(8) Quad {
    typename fused::Vec2<T>::type a, b;
  };
  if (t + 4 <= n) {
    const Quad q = *reinterpret_cast<const Quad*>(x + t);
    z0 = fused::Vec2<T>::get(q.a), z1 = fused::Vec2<T>::get(q.b);
  } else {
    z0 = ld2(x, t, n, false), z1 = ld2(x, t + 2, n, false);
  }
}

// Pass A: X[row][k1][m2] = Σ_m1 z[m1·M2 + m2]·W_M1^(m1·k1), z from x ⊙ gate (x rows of stride ld,
// zero at t >= nvalid), times scale. CTA blockIdx.x = row·(M2 / C) + tile. `quad` (16-bit rows
// only, ld a multiple of 4, bases 8-byte aligned): each thread stages two neighbouring columns
// from one 8-byte load, so a 16-bit tile has as many bytes in flight per load as a float32 one
// (with one 4-byte pair per thread it ran at 35% of copy bandwidth where float32 ran at 57%).
template <class T, int M1>
__global__ void __launch_bounds__(kColThreads) cols_forward(const T* __restrict__ x, const T* __restrict__ gate,
                                                            int64_t ld, int64_t nvalid, float scale, int M2,
                                                            bool vec, bool quad, float2* __restrict__ X) {
  constexpr int C = kTile / M1, S = col_stride(M1);
  extern __shared__ float2 sm[];
  const int ntile = M2 / C;
  const int64_t row = blockIdx.x / ntile;
  const int c0 = int(blockIdx.x % ntile) * C;
  const T* xr = x + row * ld;
  const T* gr = gate ? gate + row * ld : nullptr;
  if (sizeof(T) == 2 && quad) {
#pragma unroll 8
    for (int it = 0; it < kTile / 2 / kColThreads; ++it) {
      const int i = threadIdx.x + it * kColThreads;
      const int c = (i % (C / 2)) * 2, m1 = i / (C / 2);
      const int64_t t = 2 * (int64_t(m1) * M2 + c0 + c);
      float2 z0, z1;
      ld4(xr, t, nvalid, z0, z1);
      if (gr) {
        float2 g0, g1;
        ld4(gr, t, nvalid, g0, g1);
        z0 = mul2(z0, g0), z1 = mul2(z1, g1);
      }
      sm[c * S + pad(m1)] = scale2(z0, scale);
      sm[(c + 1) * S + pad(m1)] = scale2(z1, scale);
    }
  } else {
#pragma unroll 8
    for (int it = 0; it < kTile / kColThreads; ++it) {  // fixed trip count: 8 loads in flight per thread
      const int i = threadIdx.x + it * kColThreads;
      const int c = i % C, m1 = i / C;
      const int64_t t = 2 * (int64_t(m1) * M2 + c0 + c);
      float2 z = ld2(xr, t, nvalid, vec);
      if (gr) z = mul2(z, ld2(gr, t, nvalid, vec));
      sm[c * S + pad(m1)] = scale2(z, scale);
    }
  }
  column_ffts<M1, -1>(sm);
  float2* Xr = X + row * int64_t(M1) * M2 + c0;
#pragma unroll 8
  for (int it = 0; it < kTile / kColThreads; ++it) {  // fixed trip count: 8 loads in flight per thread
    const int i = threadIdx.x + it * kColThreads;
    const int c = i % C, k1 = i / C;
    Xr[int64_t(k1) * M2 + c] = sm[c * S + pad(k1)];
  }
}

// Pass C: z'[m1·M2 + m2] = Σ_k1 X[row][k1][m2]·W_M1^(−m1·k1), each point (samples t = 2m, 2m + 1)
// handed to the epilogue (fourstep_epi.cuh): epi.row(row) once per CTA, then its (t, z') per
// point; the epilogue skips the samples past its row's length itself.
template <int M1, class Epi>
__global__ void __launch_bounds__(kColThreads) cols_inverse(const float2* __restrict__ X, int M2, Epi epi) {
  constexpr int C = kTile / M1, S = col_stride(M1);
  extern __shared__ float2 sm[];
  const int ntile = M2 / C;
  const int64_t row = blockIdx.x / ntile;
  const int c0 = int(blockIdx.x % ntile) * C;
  const float2* Xr = X + row * int64_t(M1) * M2 + c0;
#pragma unroll 8
  for (int it = 0; it < kTile / kColThreads; ++it) {  // fixed trip count: 8 loads in flight per thread
    const int i = threadIdx.x + it * kColThreads;
    const int c = i % C, k1 = i / C;
    sm[c * S + pad(k1)] = Xr[int64_t(k1) * M2 + c];
  }
  column_ffts<M1, +1>(sm);
  const auto out = epi.row(row);
#pragma unroll 8
  for (int it = 0; it < kTile / kColThreads; ++it) {  // fixed trip count: 8 loads in flight per thread
    const int i = threadIdx.x + it * kColThreads;
    const int c = i % C, m1 = i / C;
    out(2 * (int64_t(m1) * M2 + c0 + c), sm[c * S + pad(m1)]);
  }
}

// K̂ in pass B's loop order: per (h, k1), k1 in [0, M1/2], a block of 2·M2 values, K̂[f] of pair j
// at j and K̂[M − f] at M2 + j. Pass B reads (and the spectrum writes) it contiguously; in natural
// order f = k1 + M1·j its accesses ran at stride M1, one 8-byte value per 32-byte sector.
__host__ __device__ constexpr int64_t khat_block(int64_t h, int k1, int M1, int M2) {
  return (h * (M1 / 2 + 1) + k1) * 2 * int64_t(M2);
}

// Pass B, CTA blockIdx.x = (h·(M1/2 + 1) + k1)·B + b, k1 in [0, M1/2], row = b·H + h: the B rows of
// one (h, k1) run together, so K̂'s block is read from HBM once per h, not once per row. Rows ka =
// k1 and kb = M1 − k1 (mod M1) of X[row], one per thread group. Frequency f = ka + M1·j (position j
// of row ka) pairs with M − f at position M2 − 1 − j of row kb; rows 0 and M1/2 are their own
// partners (row 0: j ↔ (M2 − j) mod M2, f = 0 with M; row M1/2: j ↔ M2 − 1 − j), and both groups
// then hold the same row, of which group 0's copy is used. Spectrum (B = 1, H filter rows): stop
// after the split and write K̂[f], K̂[M − f] to khat_out's block; else multiply by khat's block
// of h, merge, and transform back into X.
template <int M2, bool Spectrum>
__global__ void __launch_bounds__(row_threads(M2), kRowMinBlocks(M2)) rows_kernel(float2* __restrict__ X,
                                                               const float2* __restrict__ khat,
                                                               float2* __restrict__ khat_out, int M1, int64_t B,
                                                               int64_t H, bool k1_fastest) {
  constexpr int T2 = M2 / 16, S = padded(M2) + 1;
  extern __shared__ float2 sm[];
  const int M = M1 * M2;
  // k1_fastest (the probe of Geometry::rows_by_k1): CTA = row·(M1/2 + 1) + k1 instead
  const int64_t nk = M1 / 2 + 1;
  const int64_t hk = k1_fastest ? (blockIdx.x / nk % H) * nk + blockIdx.x % nk : blockIdx.x / B;
  const int64_t h = hk / nk;
  const int64_t row = (k1_fastest ? blockIdx.x / nk / H : blockIdx.x % B) * H + h;
  const int k1 = int(hk % nk);
  const int ka = k1, kb = (M1 - k1) & (M1 - 1);
  const int grp = threadIdx.x / T2, tid = threadIdx.x % T2;
  const int kr = grp ? kb : ka;
  float2* xr = X + row * int64_t(M) + int64_t(kr) * M2;
  float2* buf = sm + grp * S;
  // Staged in and out through shared memory (as fused.cuh's kStaged): the first and last passes
  // with 16 global accesses and twiddles each in flight spilled at 64 registers.
  // tid read afresh per phase (fused.cuh fresh_tid): hoisted per-pass addresses spilled.
  auto tid_now = [] { return fused::fresh_tid() & (T2 - 1); };
  auto from_buf = [&](int n) { return buf[pad(n)]; };
  auto to_buf = [&](int i, float2 x) { buf[pad(i)] = x; };
#pragma unroll 8
  for (int n = tid; n < M2; n += T2) buf[pad(n)] = mulf2(xr[n], twiddle<-1>(n * kr, M));
  __syncthreads();
  fused::fft<M2, T2, -1>(buf, tid_now(), from_buf, to_buf);
  __syncthreads();
  float2* bA = sm;
  float2* bB = ka == kb ? sm : sm + S;
  const int npairs = ka != kb ? M2 : k1 == 0 ? M2 / 2 + 1 : M2 / 2;
  for (int j = fused::fresh_tid(); j < npairs; j += row_threads(M2)) {
    const int pb = k1 == 0 ? (M2 - j) & (M2 - 1) : M2 - 1 - j;
    const int f = ka + M1 * j;
    const float2 w = pair_w(f, M);
    const Pair x = split_pair(bA[pad(j)], bB[pad(pb)], w);
    if constexpr (Spectrum) {
      float2* ko = khat_out + khat_block(h, k1, M1, M2);
      ko[j] = x.f;
      ko[M2 + j] = x.g;
    } else {
      const float2* kh = khat + khat_block(h, k1, M1, M2);
      const Pair y = merge_pair(mulf2(x.f, __ldg(kh + j)), mulf2(x.g, __ldg(kh + M2 + j)), w);
      bA[pad(j)] = y.f;
      if (f != 0) bB[pad(pb)] = y.g;
    }
  }
  if constexpr (!Spectrum) {
    __syncthreads();  // every merged value is in place before the inverse's first loads
    const bool store = grp == 0 || ka != kb;
    fused::fft<M2, T2, +1>(buf, tid_now(), from_buf, to_buf);
    __syncthreads();
    if (store) {
#pragma unroll 4
      for (int n = tid_now(); n < M2; n += T2) xr[n] = mulf2(buf[pad(n)], twiddle<+1>(n * kr, M));
    }
  }
}

}  // namespace strux::cuda::fourstep
