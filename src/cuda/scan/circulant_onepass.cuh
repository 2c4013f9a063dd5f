// The single-pass fused circulant scan, forward (private to src/cuda/scan): h_t = circ(a_t) h_{t-1}
// + u_t for real a, u of length N (a power of two, 64..1024), reading a and u once and writing h
// once (3 array passes). Why this shape, and not the three-launch kernel of circulant_fused.cuh:
// that kernel runs each step's FFT as log2(N) radix-2 stages over shared memory with a block
// barrier between stages, one step in flight per block, so per byte of HBM it moves ~20 bytes of
// shared memory and waits on ~20 barriers per step: latency- and shared-memory-bound (bench/
// NOTES-gpu-scan-circulant.md).
//
// Here an N-point FFT is N = M x R: pass 1, M threads each take R elements (stride M) into
// registers, an R-point DFT there, twiddles W_N^{n1 k2}; one exchange through shared memory;
// pass 2, R threads each take M elements, an M-point DFT in registers. So an FFT costs two
// shared-memory round trips of its data, and a block transforms a whole chunk of S steps at once
// (every barrier serves S FFTs).
//
// Blocks are persistent and take (chunk, batch row) tickets in chunk-major order. Per ticket:
//  1. the forward FFT of z_s = a_s + i u_s for the chunk's S steps into shared memory (Z);
//  2. sweep 1: per frequency (a thread per frequency pair), A_s, U_s from Z, the chunk's product
//     of A and its local state from 0;
//  3. look-back over earlier chunks of the same row (windows of 8 chunks, as diag_scan_chunk.cuh
//     does); the state entering the chunk; the inclusive state published;
//  4. sweep 2: H_s = A_s H_{s-1} + U_s from that state, H_s written over Z_s;
//  5. the inverse FFT of two steps at once (Y = H_s + i H_{s+1}: h_s real, h_{s+1} imaginary),
//     written to h.
// Time is shifted by one step: virtual step g = t + 1, and g = 0 is a step with a = 0 and u = h0
// (or 0), so h0 enters the scan with no transform of its own.
//
// The Fourier form (FOURIER = true, CirculantScanPlan::forward_fourier): a is given as its half
// spectra â (B, T, N/2 + 1) complex. Step 1 then transforms z_s = u_s alone (Z = U: the half
// frequencies f < N/2 read directly, f = 0 and N/2 from the real parts), and the chunk's S x Q
// values of â are read once, coalesced (a chunk's â is one contiguous span), into a shared array
// A_s[q] (q = 0: the real parts of â_0 and â_{N/2}, as irfft reads them). Steps 2-5 are the same.
//
// Shared layout: an M x R buffer per step, element (n1, k2) at n1 R + (k2 + n1) mod R (the
// rotation keeps pass 1's column writes free of bank conflicts). Pass 2 reads column k2 and writes
// its outputs X[R k1 + k2] to the same slots, so frequency f = R k1 + k2 lives at slot(k1, k2).
// Frequencies 0 and N/2 are real: their A, U, H travel as one complex value (x: f = 0, y: N/2)
// with elementwise products; the others' H_{N-f} = conj H_f is not kept.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/scan/circulant_fused.cuh"

namespace strux::cuda::scan {

constexpr int OP_THREADS = 256;

template <int N>
struct OnePass {
  static constexpr int R = N <= 128 ? 8 : N <= 512 ? 16 : 32;  // pass 1 DFT size (registers)
  static constexpr int M = N / R;                              // pass 2 DFT size; threads per step in pass 1
  static constexpr int Q = N / 2;                              // frequency pairs (0 and N/2 share one)
  static constexpr int FI = (Q + OP_THREADS - 1) / OP_THREADS;  // pairs per thread
  // float2 slots between steps in shared memory: with M = 8 a half warp of pass 1 spans two
  // steps, which the pad puts on the other 16 banks.
  static constexpr int ZS = N + (M == 8 ? 8 : 0);
  static_assert(M <= 32 && OP_THREADS % M == 0 && OP_THREADS % R == 0, "thread roles");
};

struct OnePassArgs {
  const float* a;   // (B, T, N); null in the Fourier form
  const float2* ah;  // the Fourier form: (B, T, N/2 + 1) complex; else null
  const float* u;   // (B, T, N)
  const float* h0;  // (B, N) or null
  float* h;         // (B, T, N)
  unsigned int* ticket;
  unsigned int* flags;  // (C, B): 0 nothing, 1 aggregate, 2 inclusive state
  float2* aggA;         // (C, B, Q)
  float2* aggH;
  float2* incl;
  int64_t B, T;
  int S, C;  // virtual steps per chunk (even), chunks of T + 1 virtual steps
};

// cos(pi m / 16), m = 0..8.
__host__ __device__ constexpr float cos16(int m) {
  return m == 0 ? 1.f : m == 1 ? 0.98078528040323044912f : m == 2 ? 0.92387953251128675613f
       : m == 3 ? 0.83146961230254523708f : m == 4 ? 0.70710678118654752440f : m == 5 ? 0.55557023301960222474f
       : m == 6 ? 0.38268343236508977173f : m == 7 ? 0.19509032201612826785f : 0.f;
}

// exp(-+2 pi i j / K) for K dividing 32 (INV: the + sign); j is a constant once unrolled.
template <int K, bool INV>
__host__ __device__ constexpr float2 wk(int j) {
  const int m = (j * (32 / K)) & 31, q = m / 8, r = m % 8;  // angle pi m / 16 = pi q / 2 + pi r / 16
  const float c = cos16(r), s = cos16(8 - r);                // cos, sin of pi r / 16
  const float cs = q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
  const float sn = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
  return make_float2(cs, INV ? sn : -sn);
}

// v * W_K^j without multiplies where W is 1 or -+i.
template <int K, bool INV>
__device__ __forceinline__ float2 twk(float2 v, int j) {
  if (j == 0) return v;
  if (4 * j == K) return INV ? make_float2(-v.y, v.x) : make_float2(v.y, -v.x);
  return cmul(wk<K, INV>(j), v);
}

template <int K>
__host__ __device__ constexpr int log2c() {
  return K == 8 ? 3 : K == 16 ? 4 : K == 32 ? 5 : K == 2 ? 1 : K == 4 ? 2 : 0;
}
// The log2(K) low bits of i reversed; no loop, so it folds to a constant once unrolled (a loop
// here left the register arrays indexed at run time: local memory).
template <int K>
__host__ __device__ constexpr int revbits(int i) {
  const int r5 = ((i & 1) << 4) | ((i & 2) << 2) | (i & 4) | ((i & 8) >> 2) | ((i & 16) >> 4);
  return r5 >> (5 - log2c<K>());
}

// One radix-2 stage of span LEN, then the next: the span a template constant, so every loop
// unrolls (a run-time span left the register arrays indexed at run time: local memory).
template <int K, int LEN, bool INV>
__device__ __forceinline__ void dft_stages(float2 (&y)[K]) {
  constexpr int hl = LEN / 2;
#pragma unroll
  for (int i = 0; i < K; i += LEN)
#pragma unroll
    for (int k = 0; k < hl; ++k) {
      const float2 b = twk<K, INV>(y[i + k + hl], k * (K / LEN)), a = y[i + k];
      y[i + k] = make_float2(a.x + b.x, a.y + b.y);
      y[i + k + hl] = make_float2(a.x - b.x, a.y - b.y);
    }
  if constexpr (LEN < K) dft_stages<K, 2 * LEN, INV>(y);
}

// In-register K-point DFT (radix-2, decimation in time), natural order in and out; unnormalised.
template <int K, bool INV>
__device__ __forceinline__ void dft_reg(float2 (&x)[K]) {
  float2 y[K];
#pragma unroll
  for (int i = 0; i < K; ++i) y[i] = x[revbits<K>(i)];
  dft_stages<K, 2, INV>(y);
#pragma unroll
  for (int i = 0; i < K; ++i) x[i] = y[i];
}

template <int N>
__device__ __forceinline__ int op_slot(int n1, int k2) {
  constexpr int R = OnePass<N>::R;
  return n1 * R + ((k2 + n1) & (R - 1));
}
template <int N>
__device__ __forceinline__ int op_fslot(int f) {  // frequency f = R k1 + k2
  constexpr int R = OnePass<N>::R;
  return op_slot<N>(f / R, f & (R - 1));
}

// The pair q's A and U from a step's spectrum Z = FFT(a + i u): A = (Z_f + conj Z_{N-f}) / 2,
// U = (Z_f - conj Z_{N-f}) / 2i; q = 0 packs the real f = 0 (x) and f = N/2 (y).
template <int N>
__device__ __forceinline__ void op_au(const float2* z, int q, float2& A, float2& U) {
  if (q == 0) {
    const float2 z0 = z[op_fslot<N>(0)], zh = z[op_fslot<N>(N / 2)];
    A = make_float2(z0.x, zh.x);
    U = make_float2(z0.y, zh.y);
  } else {
    const float2 zf = z[op_fslot<N>(q)], zm = z[op_fslot<N>(N - q)];
    A = make_float2(0.5f * (zf.x + zm.x), 0.5f * (zf.y - zm.y));
    U = make_float2(0.5f * (zf.y + zm.y), -0.5f * (zf.x - zm.x));
  }
}
// The Fourier form: A from the shared â of the step, U from Z = FFT(u).
template <int N, bool FOURIER>
__device__ __forceinline__ void op_au2(const float2* z, const float2* as, int q, float2& A, float2& U) {
  if constexpr (FOURIER) {
    A = as[q];
    if (q == 0)
      U = make_float2(z[op_fslot<N>(0)].x, z[op_fslot<N>(N / 2)].x);
    else
      U = z[op_fslot<N>(q)];
  } else {
    op_au<N>(z, q, A, U);
  }
}

// Item it = s Q + q of a chunk's shared â (the Fourier form): 0 outside the sequence (the virtual
// step g = 0 has A = 0, as in the spatial form).
template <int N>
__device__ __forceinline__ float2 op_load_ah(const float2* ahb, int64_t g0, int64_t T, int it) {
  constexpr int Q = OnePass<N>::Q, NF = N / 2 + 1;
  const int s = it / Q, q = it - s * Q;
  const int64_t gs = g0 + s;
  if (gs < 1 || gs > T) return make_float2(0.f, 0.f);
  const float2* r = ahb + (gs - 1) * NF;
  if (q == 0) return make_float2(__ldcs(&r[0].x), __ldcs(&r[N / 2].x));
  return __ldcs(r + q);
}

// Products of pair values: complex, or elementwise for the packed real pair (q = 0).
__device__ __forceinline__ float2 qmul(bool re, float2 a, float2 b) {
  return re ? make_float2(a.x * b.x, a.y * b.y) : cmul(a, b);
}
__device__ __forceinline__ float2 qfma(bool re, float2 a, float2 b, float2 c) {  // a * b + c
  return re ? make_float2(fmaf(a.x, b.x, c.x), fmaf(a.y, b.y, c.y)) : cfma(a, b, c);
}

template <int N, bool FOURIER>
__global__ void __launch_bounds__(OP_THREADS, 2) circ_onepass(OnePassArgs g) {
  using F = OnePass<N>;
  constexpr int R = F::R, M = F::M, Q = F::Q, FI = F::FI, ZS = F::ZS;
  // The Fourier form's â items held in registers through pass 1 (their loads overlap u's);
  // fewer at large N, whose pass 1 leaves no registers to spare (the rest load after pass 1).
  constexpr int AB = N <= 128 ? 8 : 2;
  extern __shared__ float2 op_smem[];
  float2* tw = op_smem;     // tw[slot(n1, k2)] = W_N^{n1 k2}
  float2* Z = op_smem + N;  // S steps x ZS
  float2* As = Z + g.S * ZS;  // the Fourier form: S steps x Q, the chunk's â
  __shared__ unsigned int s_tk, s_w[8];
  const int tid = threadIdx.x;
  for (int i = tid; i < N; i += OP_THREADS) {
    const int n1 = i / R, k2 = i % R;
    float s, c;
    sincospif(-2.f * float((n1 * k2) % N) / float(N), &s, &c);
    tw[op_slot<N>(n1, k2)] = make_float2(c, s);
  }
  const int S = g.S, pairs = S / 2;
  const int64_t B = g.B, T = g.T, total = int64_t(g.C) * B;
  for (;;) {
    if (tid == 0) s_tk = atomicAdd(g.ticket, 1u);
    __syncthreads();  // also: the twiddles (first ticket), Z free (later tickets)
    const int64_t tk = s_tk;
    if (tk >= total) break;
    const int c = int(tk / B);
    const int64_t b = tk - int64_t(c) * B, g0 = int64_t(c) * S;  // first virtual step
    const int sv = int(T + 1 - g0 < S ? T + 1 - g0 : S);          // valid steps of this chunk
    const float* pa = FOURIER ? nullptr : g.a + b * T * N;
    const float* pu = g.u + b * T * N;
    const float2* pah = FOURIER ? g.ah + b * T * (N / 2 + 1) : nullptr;
    float2 av[AB];
    if constexpr (FOURIER) {
#pragma unroll
      for (int j = 0; j < AB; ++j) {
        const int it = tid + j * OP_THREADS;
        av[j] = it < S * Q ? op_load_ah<N>(pah, g0, T, it) : make_float2(0.f, 0.f);
      }
    }

    // 1. forward FFTs. Pass 1: item (s, n1) loads z[n1 + M n2], n2 < R (coalesced over n1).
    for (int it = tid; it < S * M; it += OP_THREADS) {
      const int s = it / M, n1 = it % M;
      const int64_t gs = g0 + s;
      float2 x[R];
      if (gs == 0) {
#pragma unroll
        for (int n2 = 0; n2 < R; ++n2) {
          const float v = g.h0 ? g.h0[b * N + n1 + M * n2] : 0.f;
          x[n2] = FOURIER ? make_float2(v, 0.f) : make_float2(0.f, v);
        }
      } else if (gs <= T) {
        const float* ru = pu + (gs - 1) * N + n1;
        if constexpr (FOURIER) {
#pragma unroll
          for (int n2 = 0; n2 < R; ++n2) x[n2] = make_float2(__ldcs(ru + M * n2), 0.f);
        } else {
          const float* ra = pa + (gs - 1) * N + n1;
#pragma unroll
          for (int n2 = 0; n2 < R; ++n2) x[n2] = make_float2(__ldcs(ra + M * n2), __ldcs(ru + M * n2));
        }
      } else {
#pragma unroll
        for (int n2 = 0; n2 < R; ++n2) x[n2] = make_float2(0.f, 0.f);
      }
      dft_reg<R, false>(x);
      float2* zs = Z + s * ZS;
      zs[op_slot<N>(n1, 0)] = x[0];
#pragma unroll
      for (int k2 = 1; k2 < R; ++k2) zs[op_slot<N>(n1, k2)] = cmul(tw[op_slot<N>(n1, k2)], x[k2]);
    }
    if constexpr (FOURIER) {
#pragma unroll
      for (int j = 0; j < AB; ++j)
        if (tid + j * OP_THREADS < S * Q) As[tid + j * OP_THREADS] = av[j];
      for (int base = tid + AB * OP_THREADS; base < S * Q; base += 8 * OP_THREADS) {  // 8 loads in flight
        float2 v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int it = base + j * OP_THREADS;
          v[j] = it < S * Q ? op_load_ah<N>(pah, g0, T, it) : make_float2(0.f, 0.f);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j)
          if (base + j * OP_THREADS < S * Q) As[base + j * OP_THREADS] = v[j];
      }
    }
    __syncthreads();
    // Pass 2: item (s, k2) transforms column k2 in place.
    for (int it = tid; it < S * R; it += OP_THREADS) {
      const int s = it / R, k2 = it % R;
      float2* zs = Z + s * ZS;
      float2 x[M];
#pragma unroll
      for (int n1 = 0; n1 < M; ++n1) x[n1] = zs[op_slot<N>(n1, k2)];
      dft_reg<M, false>(x);
#pragma unroll
      for (int k1 = 0; k1 < M; ++k1) zs[op_slot<N>(k1, k2)] = x[k1];
    }
    __syncthreads();

    // 2. sweep 1: the chunk's aggregate per pair.
    float2 P[FI], HL[FI];
#pragma unroll
    for (int i = 0; i < FI; ++i) {
      const int q = tid + i * OP_THREADS;
      P[i] = make_float2(1.f, 1.f), HL[i] = make_float2(0.f, 0.f);
      if (q < Q) {
        const bool re = q == 0;
        if (!re) P[i].y = 0.f;
#pragma unroll 4
        for (int s = 0; s < sv; ++s) {
          float2 A, U;
          op_au2<N, FOURIER>(Z + s * ZS, As + s * Q, q, A, U);
          HL[i] = qfma(re, A, HL[i], U);
          P[i] = qmul(re, A, P[i]);
        }
      }
    }

    // 3. look-back: the state entering the chunk (0 for chunk 0: h0 is its first step).
    float2 cin[FI];
#pragma unroll
    for (int i = 0; i < FI; ++i) cin[i] = make_float2(0.f, 0.f);
    if (c > 0) {
      const int64_t row = int64_t(c) * B + b;
      // Publish the aggregate unless the predecessor is already inclusive (then this chunk's
      // inclusive state follows at once).
      if (tid == 0) s_w[0] = *(volatile unsigned int*)(g.flags + row - B);
      __syncthreads();
      const bool publish = s_w[0] != 2u;
      if (publish) {
#pragma unroll
        for (int i = 0; i < FI; ++i) {
          const int q = tid + i * OP_THREADS;
          if (q < Q) g.aggA[row * Q + q] = P[i], g.aggH[row * Q + q] = HL[i];
        }
        __threadfence();
      }
      __syncthreads();
      if (publish && tid == 0) atomicExch(g.flags + row, 1u);
      float2 SA[FI], SH[FI];  // the map from the state entering the window to cin
#pragma unroll
      for (int i = 0; i < FI; ++i) SA[i] = make_float2(1.f, tid + i * OP_THREADS == 0 ? 1.f : 0.f), SH[i] = cin[i];
      for (int top = c - 1;; top -= 8) {
        if (tid < 8) {
          unsigned int f = 0;
          if (top - tid >= 0) {
            const volatile unsigned int* fp = g.flags + int64_t(top - tid) * B + b;
            do f = *fp;
            while (f == 0u);
            __threadfence();
          }
          s_w[tid] = f;
        }
        __syncthreads();
        bool done = false;
        for (int w = 0; w < 8 && top - w >= 0 && !done; ++w) {
          const int64_t pr = int64_t(top - w) * B + b;
          done = s_w[w] == 2u;
#pragma unroll
          for (int i = 0; i < FI; ++i) {
            const int q = tid + i * OP_THREADS;
            if (q < Q) {
              const bool re = q == 0;
              if (done) {
                cin[i] = qfma(re, SA[i], __ldcg(g.incl + pr * Q + q), SH[i]);
              } else {
                SH[i] = qfma(re, SA[i], __ldcg(g.aggH + pr * Q + q), SH[i]);
                SA[i] = qmul(re, SA[i], __ldcg(g.aggA + pr * Q + q));
              }
            }
          }
        }
        __syncthreads();  // s_w is rewritten by the next window
        if (done || top - 8 < 0) break;  // chunk 0 is always inclusive: done by then
      }
    }
    {
      const int64_t row = int64_t(c) * B + b;
#pragma unroll
      for (int i = 0; i < FI; ++i) {
        const int q = tid + i * OP_THREADS;
        if (q < Q) g.incl[row * Q + q] = qfma(q == 0, P[i], cin[i], HL[i]);
      }
      __threadfence();
      __syncthreads();
      if (tid == 0) atomicExch(g.flags + row, 2u);
    }

    // 4. sweep 2: H_s over Z_s (slot of f; the packed real pair at slot 0).
#pragma unroll
    for (int i = 0; i < FI; ++i) {
      const int q = tid + i * OP_THREADS;
      if (q < Q) {
        const bool re = q == 0;
        float2 H = cin[i];
#pragma unroll 4
        for (int s = 0; s < sv; ++s) {
          float2 A, U;
          op_au2<N, FOURIER>(Z + s * ZS, As + s * Q, q, A, U);
          H = qfma(re, A, H, U);
          Z[s * ZS + op_fslot<N>(q)] = H;
        }
      }
    }
    __syncthreads();

    // 5. inverse FFTs of step pairs: Y_f = H_s,f + i H_{s+1},f over all f (Hermitian halves).
    // Pass 1 reads a pair's two steps and writes the first: all reads of a round before its
    // writes (a round covers OP_THREADS / M whole pairs, so rounds touch disjoint pairs).
    for (int base = 0; base < pairs * M; base += OP_THREADS) {
      const int it = base + tid, p = it / M, j = it % M;
      const bool has = it < pairs * M;
      float2 x[R];
      if (has) {
        const float2* z0 = Z + (2 * p) * ZS;
        const float2* z1 = z0 + ZS;
#pragma unroll
        for (int n2 = 0; n2 < R; ++n2) {
          const int f = j + M * n2;
          if (f == 0 || f == N / 2) {
            const float2 s0 = z0[op_fslot<N>(0)], s1 = z1[op_fslot<N>(0)];
            x[n2] = f == 0 ? make_float2(s0.x, s1.x) : make_float2(s0.y, s1.y);
          } else if (f < N / 2) {
            const float2 s0 = z0[op_fslot<N>(f)], s1 = z1[op_fslot<N>(f)];
            x[n2] = make_float2(s0.x - s1.y, s0.y + s1.x);
          } else {  // conj of the stored H_{N-f}
            const float2 s0 = z0[op_fslot<N>(N - f)], s1 = z1[op_fslot<N>(N - f)];
            x[n2] = make_float2(s0.x + s1.y, s1.x - s0.y);
          }
        }
        dft_reg<R, true>(x);
      }
      __syncthreads();
      if (has) {
        float2* zs = Z + (2 * p) * ZS;
        zs[op_slot<N>(j, 0)] = x[0];
#pragma unroll
        for (int k2 = 1; k2 < R; ++k2) {
          const float2 w = tw[op_slot<N>(j, k2)];
          zs[op_slot<N>(j, k2)] = cmul(make_float2(w.x, -w.y), x[k2]);
        }
      }
    }
    __syncthreads();
    // Pass 2: item (pair, k2): h at n = R k1 + k2 (real part: step 2p, imaginary: 2p + 1).
    constexpr float inv = 1.f / float(N);
    for (int it = tid; it < pairs * R; it += OP_THREADS) {
      const int p = it / R, k2 = it % R;
      const float2* zs = Z + (2 * p) * ZS;
      float2 x[M];
#pragma unroll
      for (int n1 = 0; n1 < M; ++n1) x[n1] = zs[op_slot<N>(n1, k2)];
      dft_reg<M, true>(x);
      const int64_t t0 = g0 + 2 * p - 1;  // time of virtual step 2p
      float* h0p = g.h + (b * T + t0) * N + k2;
      if (t0 >= 0 && t0 < T)
#pragma unroll
        for (int k1 = 0; k1 < M; ++k1) __stcs(h0p + R * k1, x[k1].x * inv);
      if (t0 + 1 < T)
#pragma unroll
        for (int k1 = 0; k1 < M; ++k1) __stcs(h0p + N + R * k1, x[k1].y * inv);
    }
    __syncthreads();  // Z and s_tk are rewritten by the next ticket
  }
}

}  // namespace strux::cuda::scan
