// The fused circulant scan, forward (private to src/cuda/scan): h_t = circ(a_t) h_{t-1} + u_t
// for real a, u of length N (a power of two, 64..1024), with the FFT over the state dimension,
// the Fourier-domain scan and the inverse FFT inside the kernels, so no spectrum goes through
// device memory. Three launches over chunks of L time steps (one block per (chunk, batch row)):
//   summary: per step, one complex FFT of z = a_t + i u_t in shared memory gives both half
//     spectra (A = (Z_f + conj Z_{N-f}) / 2, U = (Z_f - conj Z_{N-f}) / 2i); the chunk's
//     aggregate (product of A, local state from 0) per frequency goes to a small buffer; the
//     first chunk's block also transforms h0;
//   carry: per (batch row, frequency), the state entering each chunk (a scan over chunks);
//   apply: per step, the same FFT, H = A H + U from the chunk's carry, then the inverse FFT of
//     the Hermitian spectrum (a forward FFT of its conjugate) gives h_t, written once.
// So a and u are read twice (summary, apply) and h written once: 5 array passes against the
// cuFFT path's ~9 and a floor of 3. The next step folds summary and apply into one pass with a
// look-back (as diag_scan_chunk.cuh does).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::scan {

template <int N>
struct CircFused {
  static constexpr int LOG = N == 64 ? 6 : N == 128 ? 7 : N == 256 ? 8 : N == 512 ? 9 : 10;
  static constexpr int NT = N / 2 < 256 ? N / 2 : 256;  // threads per block (circulant_fused_shape too)
  static constexpr int NF = N / 2 + 1;                  // frequencies of the half spectrum
  static constexpr int FPT = (NF + NT - 1) / NT;        // frequencies per thread
  static constexpr int EPT = N / NT;                    // real elements per thread per step
};

struct CircFusedArgs {
  const float* a;   // (B, T, N)
  const float* u;   // (B, T, N)
  const float* h0;  // (B, N) or null
  float* h;         // (B, T, N)
  float2* aggA;     // (B, C, NF): product of the chunk's A
  float2* aggH;     // (B, C, NF): the chunk's local state from 0
  float2* carry;    // (B, C, NF): the state entering each chunk (chunk 0: the spectrum of h0)
  int64_t B, T, L, C;
};

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 cfma(float2 a, float2 b, float2 c) {  // a * b + c
  return make_float2(fmaf(a.x, b.x, fmaf(-a.y, b.y, c.x)), fmaf(a.x, b.y, fmaf(a.y, b.x, c.y)));
}

// tw[k] = exp(-2 pi i k / N), k < N/2.
template <int N>
__device__ __forceinline__ void fill_twiddles(float2* tw) {
  for (int k = threadIdx.x; k < N / 2; k += CircFused<N>::NT) {
    float s, c;
    sincospif(-2.f * float(k) / float(N), &s, &c);
    tw[k] = make_float2(c, s);
  }
}

__device__ __forceinline__ int bitrev(int i, int log) { return int(__brev(unsigned(i)) >> (32 - log)); }

// In-place radix-2 decimation-in-time FFT of z (input in bit-reversed order), forward sign.
// Ends with a barrier.
template <int N>
__device__ __forceinline__ void fft_inplace(float2* z, const float2* tw) {
  using F = CircFused<N>;
#pragma unroll
  for (int lg = 1; lg <= F::LOG; ++lg) {
    const int half = 1 << (lg - 1), step = N >> lg;
#pragma unroll
    for (int r = 0; r < N / 2 / F::NT; ++r) {
      const int j = threadIdx.x + r * F::NT;
      const int k = j & (half - 1), i0 = ((j >> (lg - 1)) << lg) + k, i1 = i0 + half;
      const float2 t = cmul(tw[k * step], z[i1]), x = z[i0];
      z[i0] = make_float2(x.x + t.x, x.y + t.y);
      z[i1] = make_float2(x.x - t.x, x.y - t.y);
    }
    __syncthreads();
  }
}

// Registers of one step's a and u (EPT values each), loaded ahead of their use.
template <int N>
struct StepIn {
  float a[CircFused<N>::EPT], u[CircFused<N>::EPT];
};

template <int N>
__device__ __forceinline__ void load_step(StepIn<N>& s, const float* a, const float* u) {
#pragma unroll
  for (int e = 0; e < CircFused<N>::EPT; ++e) {
    const int i = threadIdx.x + e * CircFused<N>::NT;
    s.a[e] = __ldcs(a + i);
    s.u[e] = __ldcs(u + i);
  }
}

// z <- FFT(a + i u) of the step in s; then this thread's frequencies' A and U.
template <int N>
__device__ __forceinline__ void spectra(const StepIn<N>& s, float2* z, const float2* tw,
                                        float2 (&A)[CircFused<N>::FPT], float2 (&U)[CircFused<N>::FPT]) {
  using F = CircFused<N>;
#pragma unroll
  for (int e = 0; e < F::EPT; ++e) {
    const int i = threadIdx.x + e * F::NT;
    z[bitrev(i, F::LOG)] = make_float2(s.a[e], s.u[e]);
  }
  __syncthreads();
  fft_inplace<N>(z, tw);
#pragma unroll
  for (int q = 0; q < F::FPT; ++q) {
    const int f = threadIdx.x + q * F::NT;
    if (f < F::NF) {
      const float2 zf = z[f], zm = z[(N - f) & (N - 1)];
      A[q] = make_float2(0.5f * (zf.x + zm.x), 0.5f * (zf.y - zm.y));
      const float2 d = make_float2(zf.x - zm.x, zf.y + zm.y);  // Z_f - conj(Z_{N-f})
      U[q] = make_float2(0.5f * d.y, -0.5f * d.x);             // divided by 2i
    }
  }
  __syncthreads();  // z is free for the next use
}

template <int N>
__global__ void __launch_bounds__(CircFused<N>::NT) circ_fused_summary(CircFusedArgs g) {
  using F = CircFused<N>;
  __shared__ float2 z[N], tw[N / 2];
  const int64_t c = blockIdx.x, bi = blockIdx.y;
  fill_twiddles<N>(tw);
  float2 P[F::FPT], H[F::FPT], A[F::FPT], U[F::FPT];
#pragma unroll
  for (int q = 0; q < F::FPT; ++q) P[q] = make_float2(1.f, 0.f), H[q] = make_float2(0.f, 0.f);
  const int64_t t0 = c * g.L, t1 = t0 + g.L < g.T ? t0 + g.L : g.T;
  const float* pa = g.a + bi * g.T * N;
  const float* pu = g.u + bi * g.T * N;
  if (c == 0) {  // the spectrum of h0 (0 without): the carry into chunk 0
    StepIn<N> s;
#pragma unroll
    for (int e = 0; e < F::EPT; ++e) s.a[e] = g.h0 ? g.h0[bi * N + threadIdx.x + e * F::NT] : 0.f, s.u[e] = 0.f;
    __syncthreads();  // twiddles
    spectra<N>(s, z, tw, A, U);
#pragma unroll
    for (int q = 0; q < F::FPT; ++q) {
      const int f = threadIdx.x + q * F::NT;
      if (f < F::NF) g.carry[bi * g.C * F::NF + f] = A[q];
    }
  }
  StepIn<N> cur, nxt;
  load_step<N>(cur, pa + t0 * N, pu + t0 * N);
  for (int64_t t = t0; t < t1; ++t) {
    if (t + 1 < t1) load_step<N>(nxt, pa + (t + 1) * N, pu + (t + 1) * N);
    spectra<N>(cur, z, tw, A, U);
#pragma unroll
    for (int q = 0; q < F::FPT; ++q) H[q] = cfma(A[q], H[q], U[q]), P[q] = cmul(A[q], P[q]);
    cur = nxt;
  }
#pragma unroll
  for (int q = 0; q < F::FPT; ++q) {
    const int f = threadIdx.x + q * F::NT;
    if (f < F::NF) {
      const int64_t o = (bi * g.C + c) * F::NF + f;
      g.aggA[o] = P[q];
      g.aggH[o] = H[q];
    }
  }
}

// One thread per (batch row, frequency): carry[c] = state entering chunk c, from carry[0].
template <int N>
__global__ void circ_fused_carry(CircFusedArgs g) {
  constexpr int NF = CircFused<N>::NF, D = 16;
  const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q >= g.B * NF) return;
  const int64_t bi = q / NF, f = q - bi * NF, base = bi * g.C * NF + f;
  float2 x = g.carry[base];
  for (int64_t c0 = 0; c0 < g.C; c0 += D) {  // the loads of D chunks in flight before the chain
    float2 pa[D], ph[D];
#pragma unroll
    for (int i = 0; i < D; ++i)
      if (c0 + i < g.C) pa[i] = __ldcg(g.aggA + base + (c0 + i) * NF), ph[i] = __ldcg(g.aggH + base + (c0 + i) * NF);
#pragma unroll
    for (int i = 0; i < D; ++i)
      if (c0 + i < g.C) {
        g.carry[base + (c0 + i) * NF] = x;
        x = cfma(pa[i], x, ph[i]);
      }
  }
}

template <int N>
__global__ void __launch_bounds__(CircFused<N>::NT) circ_fused_apply(CircFusedArgs g) {
  using F = CircFused<N>;
  __shared__ float2 z[N], tw[N / 2];
  const int64_t c = blockIdx.x, bi = blockIdx.y;
  fill_twiddles<N>(tw);
  float2 H[F::FPT], A[F::FPT], U[F::FPT];
#pragma unroll
  for (int q = 0; q < F::FPT; ++q) {
    const int f = threadIdx.x + q * F::NT;
    H[q] = f < F::NF ? g.carry[(bi * g.C + c) * F::NF + f] : make_float2(0.f, 0.f);
  }
  __syncthreads();  // twiddles
  const int64_t t0 = c * g.L, t1 = t0 + g.L < g.T ? t0 + g.L : g.T;
  const float* pa = g.a + bi * g.T * N;
  const float* pu = g.u + bi * g.T * N;
  float* ph = g.h + bi * g.T * N;
  constexpr float inv = 1.f / float(N);
  StepIn<N> cur, nxt;
  load_step<N>(cur, pa + t0 * N, pu + t0 * N);
  for (int64_t t = t0; t < t1; ++t) {
    if (t + 1 < t1) load_step<N>(nxt, pa + (t + 1) * N, pu + (t + 1) * N);
    spectra<N>(cur, z, tw, A, U);
    // H_t, then conj of the Hermitian spectrum into z (bit-reversed): h = Re FFT(conj Y) / N.
#pragma unroll
    for (int q = 0; q < F::FPT; ++q) {
      const int f = threadIdx.x + q * F::NT;
      if (f < F::NF) {
        H[q] = cfma(A[q], H[q], U[q]);
        z[bitrev(f, F::LOG)] = make_float2(H[q].x, -H[q].y);
        if (f > 0 && f < N / 2) z[bitrev(N - f, F::LOG)] = H[q];  // conj(conj(H_f))
      }
    }
    __syncthreads();
    fft_inplace<N>(z, tw);
#pragma unroll
    for (int e = 0; e < F::EPT; ++e) {
      const int i = threadIdx.x + e * F::NT;
      __stcs(ph + t * N + i, z[i].x * inv);
    }
    __syncthreads();  // z is rewritten by the next step
    cur = nxt;
  }
}

}  // namespace strux::cuda::scan
