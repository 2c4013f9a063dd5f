// The fused single-pass fftconv kernels: one CTA per (h, chunk of batch rows); per row the real
// signal (length nfft = 2N) is packed as N complex points, transformed in shared memory by
// radix-16 Stockham passes (registers hold each butterfly), combined with the filter spectrum
// K̂[h] (fp32, [N + 1] half spectrum, 1/nfft folded in, read from L2) in the real-FFT
// post-/pre-processing step, transformed back, and the epilogue writes y straight from the
// last pass's registers. HBM traffic per row: u (+ gates) in, y out.
//
// Why these choices: the cuFFT path moves the padded fp32 row through HBM about eight times;
// here each row lives in shared memory from load to store. Twiddles come from sincospif of an
// exact argument (power-of-two denominators) and products of those, so float32 accuracy stays
// near 1e-6 relative without a table.
#pragma once

#include "cuda/elem.cuh"
#include "cuda/fftconv/fused.hpp"

namespace strux::cuda::fused {

// Threads per CTA for complex length N: 16 complex points per thread (N = 16384: 1024 threads,
// 64 registers each, which fits with fresh_tid and staged I/O; 32 points per thread at 512
// threads spilled ~850 bytes per thread and ran at a third of the expected rate).
__host__ __device__ constexpr int threads_for(int N) { return N / 16; }
// Shared-memory index with one pad slot per 16 float2: the stride-R stores of the first pass
// (R <= 16) then hit 16 distinct 8-byte bank pairs per half warp.
__device__ __forceinline__ int pad(int i) { return i + (i >> 4); }
__host__ __device__ constexpr int padded(int N) { return N + N / 16; }

__device__ __forceinline__ float2 operator+(float2 a, float2 b) { return {a.x + b.x, a.y + b.y}; }
__device__ __forceinline__ float2 operator-(float2 a, float2 b) { return {a.x - b.x, a.y - b.y}; }
__device__ __forceinline__ float2 conjf2(float2 a) { return {a.x, -a.y}; }
__device__ __forceinline__ float2 scale2(float2 a, float s) { return {a.x * s, a.y * s}; }
__device__ __forceinline__ float2 mulf2(float2 a, float2 b) {
  return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x};
}
// conj(a) * b
__device__ __forceinline__ float2 mulcf2(float2 a, float2 b) {
  return {a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x};
}
// i * a
__device__ __forceinline__ float2 mul_i(float2 a) { return {-a.y, a.x}; }

// b · exp(Sign·2πi·m/16), m in [0, 8): the constant twiddles inside a radix-16 register DFT.
template <int Sign, int M>
__device__ __forceinline__ float2 tw16(float2 b) {
  constexpr float c1 = 0.92387953251128674f, s1 = 0.38268343236508978f, r2 = 0.70710678118654752f;
  constexpr float cs[8] = {1.f, c1, r2, s1, 0.f, -s1, -r2, -c1};
  constexpr float sn[8] = {0.f, s1, r2, c1, 1.f, c1, r2, s1};
  if constexpr (M == 0) {
    return b;
  } else if constexpr (M == 4) {
    return Sign > 0 ? float2{-b.y, b.x} : float2{b.y, -b.x};
  } else {
    const float c = cs[M], s = Sign * sn[M];
    return {b.x * c - b.y * s, b.x * s + b.y * c};
  }
}

__host__ __device__ constexpr int bitrev(int i, int R) {
  int r = 0;
  for (int m = 1; m < R; m <<= 1) r = (r << 1) | ((i & m) ? 1 : 0);
  return r;
}

template <int R, int Sign, int Len, int I, int J>
__device__ __forceinline__ void dft_bfly(float2* v) {
  if constexpr (J < Len / 2) {
    const float2 a = v[I + J], b = tw16<Sign, J*(16 / Len)>(v[I + J + Len / 2]);
    v[I + J] = a + b;
    v[I + J + Len / 2] = a - b;
    dft_bfly<R, Sign, Len, I, J + 1>(v);
  }
}
template <int R, int Sign, int Len, int I>
__device__ __forceinline__ void dft_stage(float2* v) {
  if constexpr (I < R) {
    dft_bfly<R, Sign, Len, I, 0>(v);
    dft_stage<R, Sign, Len, I + Len>(v);
  }
}
template <int R, int Sign, int Len>
__device__ __forceinline__ void dft_stages(float2* v) {
  if constexpr (Len <= R) {
    dft_stage<R, Sign, Len, 0>(v);
    dft_stages<R, Sign, 2 * Len>(v);
  }
}

// In-register DFT of size R in {2, 4, 8, 16}, natural order in and out:
// v[k] ← Σ_r v[r]·exp(Sign·2πi·r·k/R).
template <int R, int Sign>
__device__ __forceinline__ void dft(float2* v) {
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int j = bitrev(i, R);
    if (j > i) {
      const float2 t = v[i];
      v[i] = v[j];
      v[j] = t;
    }
  }
  dft_stages<R, Sign, 2>(v);
}

// Radix of the Stockham pass that starts at stride Ns.
__host__ __device__ constexpr int radix_at(int N, int Ns) { return N / Ns >= 16 ? 16 : N / Ns; }

// One Stockham pass of radix R at stride Ns over N points, T threads; each thread owns
// E/R butterflies j = tid + b·T, inputs x[j + r·N/R] in v[b·R + r].
template <int N, int T, int R, int Ns, int Sign>
struct Pass {
  static constexpr int E = N / T, NB = E / R;
  static_assert(E % R == 0, "each thread holds whole butterflies");

  template <class Load>
  __device__ static void load(float2* v, int tid, Load ld) {
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int r = 0; r < R; ++r) v[b * R + r] = ld(tid + b * T + r * (N / R));
  }

  // Twiddle, DFT, and hand each output to st(index, value).
  template <class Store>
  __device__ static void run(float2* v, int tid, Store st) {
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      const int j = tid + b * T, k = j & (Ns - 1);
      float2* x = v + b * R;
      if constexpr (Ns > 1) {
        // x[r] *= w^r, w = exp(Sign·2πi·k/(Ns·R)): w^r by a running product (two complex
        // registers; error about 2r ulps, r < 16) restarted from sincospif at r = 8.
        float s, c;
        sincospif(2.f * float(k) / float(Ns * R), &s, &c);
        const float2 w1 = {c, Sign * s};
        float2 w = w1;
#pragma unroll
        for (int r = 1; r < R; ++r) {
          if (r == 8) {
            sincospif(2.f * float(8 * k) / float(Ns * R), &s, &c);
            w = {c, Sign * s};
          } else if (r > 1) {
            w = mulf2(w, w1);
          }
          x[r] = mulf2(x[r], w);
        }
      }
      dft<R, Sign>(x);
      const int base = (j - k) * R + k;
#pragma unroll
      for (int r = 0; r < R; ++r) st(base + r * Ns, x[r]);
    }
  }
};

// All passes from stride Ns on, the first pass's inputs already in v. Intermediate passes go
// through buf (padded); the last pass hands its outputs to out(n, value). A barrier precedes
// every pass's stores (all loads of buf done) and follows every store to buf.
template <int N, int T, int Sign, int Ns, class Out>
__device__ __forceinline__ void fft_rest(float2* v, float2* buf, int tid, Out out) {
  constexpr int R = radix_at(N, Ns);
  if constexpr (Ns * R == N) {
    __syncthreads();
    Pass<N, T, R, Ns, Sign>::run(v, tid, out);
  } else {
    __syncthreads();
    Pass<N, T, R, Ns, Sign>::run(v, tid, [&](int i, float2 x) { buf[pad(i)] = x; });
    __syncthreads();
    Pass<N, T, radix_at(N, Ns * R), Ns * R, Sign>::load(v, tid, [&](int i) { return buf[pad(i)]; });
    fft_rest<N, T, Sign, Ns * R>(v, buf, tid, out);
  }
}

// Full transform: the first pass loads through ld(n), the last stores through out(n, value).
template <int N, int T, int Sign, class Load, class Out>
__device__ __forceinline__ void fft(float2* buf, int tid, Load ld, Out out) {
  float2 v[N / T];
  Pass<N, T, radix_at(N, 1), 1, Sign>::load(v, tid, ld);
  fft_rest<N, T, Sign, 1>(v, buf, tid, out);
}

// Staged I/O for the largest size (1024 threads, 64 registers each): the row passes through
// shared memory in plain loops instead of being loaded/stored inside the first/last pass,
// whose 16 outstanding global loads per thread (plus gates) would spill. Costs one extra
// shared-memory pass and barrier each way.
template <int N>
constexpr bool kStaged = N >= 16384;

template <int N, int T, int Sign, bool StageIn, bool StageOut, class Load, class Out>
__device__ __forceinline__ void fft_io(float2* buf, int tid, Load ld, Out out) {
  auto from_buf = [&](int n) { return buf[pad(n)]; };
  auto to_buf = [&](int i, float2 x) { buf[pad(i)] = x; };
  if constexpr (StageIn) {
    __syncthreads();  // the previous user of buf is done
#pragma unroll 4
    for (int n = tid; n < N; n += T) buf[pad(n)] = ld(n);
    __syncthreads();
  }
  if constexpr (StageOut) {
    if constexpr (StageIn) fft<N, T, Sign>(buf, tid, from_buf, to_buf);
    else fft<N, T, Sign>(buf, tid, ld, to_buf);
    __syncthreads();
#pragma unroll 4
    for (int n = tid; n < N; n += T) out(n, buf[pad(n)]);
  } else {
    if constexpr (StageIn) fft<N, T, Sign>(buf, tid, from_buf, out);
    else fft<N, T, Sign>(buf, tid, ld, out);
  }
}

// threadIdx.x read afresh: every address below derives from it, and a value the compiler cannot
// hoist keeps it from holding each pass's loop-invariant addresses live across the whole row
// loop (at 64 registers per thread that spilled ~400 bytes per thread).
__device__ __forceinline__ int fresh_tid() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// ---- real-FFT split / merge -----------------------------------------------------------------
// Z = DFT_N(z), z[n] = x[2n] + i·x[2n+1]. For the pair (f, g = N − f), W = exp(−2πi f/2N):
//   X[f] = E + W·O,  X[g] = conj(E − W·O),  E = (Z[f] + conj Z[g])/2,  O = −i(Z[f] − conj Z[g])/2.
// The inverse (Y Hermitian of length 2N, scale folded into K̂): z' = IDFT_N(Z') with
//   Z'[f] = A + i·conj(W)·D,  Z'[g] = conj(A − i·conj(W)·D),  A = Y[f] + conj Y[g],  D = Y[f] − conj Y[g].
// f = 0 pairs with g = N (Z[N] = Z[0]; Z'[N] is not stored).
struct Split {
  float2 xf, xg, w;
};
template <int N>
__device__ __forceinline__ Split split(float2 zf, float2 zg, int f) {
  const float2 e = {0.5f * (zf.x + zg.x), 0.5f * (zf.y - zg.y)};
  const float2 o = {0.5f * (zf.y + zg.y), -0.5f * (zf.x - zg.x)};
  float s, c;
  sincospif(float(f) / float(N), &s, &c);
  const float2 w = {c, -s};
  const float2 wo = mulf2(w, o);
  return {e + wo, conjf2(e - wo), w};
}
// Writes Z'[f] (and Z'[g] unless f = 0) through st(index, value).
template <int N, class Store>
__device__ __forceinline__ void merge(float2 yf, float2 yg, float2 w, int f, Store st) {
  const float2 a = yf + conjf2(yg), d = yf - conjf2(yg);
  const float2 t = mul_i(mulcf2(w, d));  // i·conj(W)·D
  st(f, a + t);
  if (f != 0) st(N - f, conjf2(a - t));
}

// ---- loads and stores of real rows, two samples per complex point --------------------------
template <class T>
struct Vec2;
template <>
struct Vec2<float> {
  using type = float2;
  static __device__ __forceinline__ float2 get(type p) { return p; }
  static __device__ __forceinline__ type make(float a, float b) { return {a, b}; }
};
template <>
struct Vec2<__half> {
  using type = __half2;
  static __device__ __forceinline__ float2 get(type p) { return __half22float2(p); }
  static __device__ __forceinline__ type make(float a, float b) { return __floats2half2_rn(a, b); }
};
template <>
struct Vec2<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static __device__ __forceinline__ float2 get(type p) { return __bfloat1622float2(p); }
  static __device__ __forceinline__ type make(float a, float b) { return __floats2bfloat162_rn(a, b); }
};

// (x[t], x[t+1]) as floats, zero at t >= L; `vec`: both samples in one aligned 2-vector load
// (L even and the row base aligned, decided once per launch).
template <class T>
__device__ __forceinline__ float2 ld2(const T* __restrict__ x, int64_t t, int64_t L, bool vec) {
  if (vec) {
    if (t >= L) return {0.f, 0.f};
    return Vec2<T>::get(*reinterpret_cast<const typename Vec2<T>::type*>(x + t));
  }
  return {t < L ? float(to_c(x[t])) : 0.f, t + 1 < L ? float(to_c(x[t + 1])) : 0.f};
}
template <class T>
__device__ __forceinline__ void st2(T* __restrict__ x, int64_t t, int64_t L, bool vec, float a, float b) {
  if (vec) {
    if (t < L) *reinterpret_cast<typename Vec2<T>::type*>(x + t) = Vec2<T>::make(a, b);
    return;
  }
  if (t < L) x[t] = From<T>::of(a);
  if (t + 1 < L) x[t + 1] = From<T>::of(b);
}
__device__ __forceinline__ float2 mul2(float2 a, float2 b) { return {a.x * b.x, a.y * b.y}; }

// Rows [b0, b1) of CTA blockIdx.x = h·nchunk + chunk (chunks of one h are adjacent, so K̂[h]
// stays in L2 while they run).
struct Rows {
  int64_t h, chunk, b0, b1;
};
__device__ __forceinline__ Rows rows_of(int64_t B, int nchunk, int rows_per_cta) {
  Rows r;
  r.h = blockIdx.x / nchunk;
  r.chunk = blockIdx.x % nchunk;
  r.b0 = r.chunk * rows_per_cta;
  r.b1 = r.b0 + rows_per_cta < B ? r.b0 + rows_per_cta : B;
  return r;
}

// ---- filter spectrum -------------------------------------------------------------------------
// out[0..N] = rfft(scale · kr[:Lmin] zero-padded to 2N) by the calling CTA: the same transform and
// split as the rows of the kernels below. Ends with a barrier, so the CTA's threads may read out
// (plain loads: it was written in this kernel) right after.
template <class T, int N>
__device__ __forceinline__ void filter_spectrum(float2* smem, const T* __restrict__ kr, int64_t Lmin, float scale,
                                                float2* out) {
  constexpr int TT = threads_for(N);
  fft_io<N, TT, -1, kStaged<N>, false>(
      smem, fresh_tid(), [&](int n) { return scale2(ld2(kr, 2 * int64_t(n), Lmin, false), scale); },
      [&](int i, float2 x) { smem[pad(i)] = x; });
  __syncthreads();
  for (int f = fresh_tid(); f <= N / 2; f += TT) {
    const int g = N - f;
    const Split sp = split<N>(smem[pad(f)], smem[pad(g & (N - 1))], f);
    out[f] = sp.xf;
    out[g] = sp.xg;  // f = N/2: its own partner, the same value
  }
  __syncthreads();
}

// khat[h] for every h, one CTA each: the spectrum step of a call is this one launch (not a pad
// kernel and a cuFFT R2C).
template <class T, int N>
__global__ void __launch_bounds__(threads_for(N)) spectrum_kernel(const T* __restrict__ k, int64_t Lk, int64_t Lmin,
                                                                  float scale, float2* __restrict__ khat) {
  extern __shared__ float2 smem[];
  filter_spectrum<T, N>(smem, k + int64_t(blockIdx.x) * Lk, Lmin, scale, khat + int64_t(blockIdx.x) * (N + 1));
}

// The filter spectrum as the forward kernel reads it: through the read-only cache when another
// launch wrote it, by plain loads when this CTA just did (OwnK).
template <bool OwnK>
__device__ __forceinline__ float2 ld_khat(const float2* p) {
  if constexpr (OwnK) return *p;
  else return __ldg(p);
}

// ---- forward ---------------------------------------------------------------------------------
// y = post ⊙ (conv(k, v) + skip·v), v = u ⊙ pre. khat: [H][N + 1], scaled by 1/(2N).
// OwnK (only with nchunk = 1, one CTA per h): the CTA first writes khat[h] from the filter
// own.k itself, so a call with a new filter is one launch instead of two, with no transform
// repeated (each h's spectrum is computed once either way).
template <class T, int N, bool OwnK>
__global__ void __launch_bounds__(threads_for(N)) forward_kernel(
    const T* __restrict__ u, const T* __restrict__ pre, const T* __restrict__ post, const T* __restrict__ skip,
    float2* khat, T* __restrict__ y, int64_t B, int64_t H, int64_t L, int nchunk, int rows_per_cta, bool vec,
    OwnFilter own) {
  constexpr int TT = threads_for(N);
  extern __shared__ float2 smem[];
  const Rows rw = rows_of(B, nchunk, rows_per_cta);
  float2* kh = khat + rw.h * (N + 1);
  if constexpr (OwnK)
    filter_spectrum<T, N>(smem, static_cast<const T*>(own.k) + rw.h * own.Lk, own.Lmin, own.scale, kh);
  const float sk = skip ? float(to_c(skip[rw.h])) : 0.f;
  for (int64_t b = rw.b0; b < rw.b1; ++b) {
    const int64_t off = (b * H + rw.h) * L;
    const T* ur = u + off;
    const T* pr = pre ? pre + off : nullptr;
    fft_io<N, TT, -1, kStaged<N>, false>(
        smem, fresh_tid(),
        [&](int n) {
          float2 z = ld2(ur, 2 * int64_t(n), L, vec);
          if (pr) z = mul2(z, ld2(pr, 2 * int64_t(n), L, vec));
          return z;
        },
        [&](int i, float2 x) { smem[pad(i)] = x; });
    __syncthreads();
    // unroll 2: deeper unrolling hoists every pair's loads and spills at 64 registers
#pragma unroll 2
    for (int f = fresh_tid(); f <= N / 2; f += TT) {
      const int g = N - f;
      const Split sp = split<N>(smem[pad(f)], smem[pad(g & (N - 1))], f);
      merge<N>(mulf2(sp.xf, ld_khat<OwnK>(kh + f)), mulf2(sp.xg, ld_khat<OwnK>(kh + g)), sp.w, f,
               [&](int i, float2 x) { smem[pad(i)] = x; });
    }
    __syncthreads();
    fft_io<N, TT, +1, false, kStaged<N>>(
        smem, fresh_tid(), [&](int n) { return smem[pad(n)]; },
        [&](int n, float2 z) {
          const int64_t t = 2 * int64_t(n);
          if (t >= L) return;
          if (skip) {
            float2 v = ld2(ur, t, L, vec);
            if (pr) v = mul2(v, ld2(pr, t, L, vec));
            z = {z.x + sk * v.x, z.y + sk * v.y};
          }
          if (post) z = mul2(z, ld2(post + off, t, L, vec));
          st2(y + off, t, L, vec, z.x, z.y);
        });
  }
}

// ---- backward --------------------------------------------------------------------------------
// Per row: V̂ = rfft(v) into vh; Ĝ = rfft(dz), dz = dy ⊙ post; dkpart[chunk][h] += conj(V̂)·Ĝ;
// dv = irfft(conj(K̂)·Ĝ) + skip·dz → du = dv ⊙ pre, dpre = dv ⊙ u; and when dpost is wanted,
// z = irfft(K̂·V̂) → dpost = dy ⊙ (z + skip·v). vh is shared memory after the work buffer when
// it fits (vh_smem), else this CTA's slice of vh_global ([grid][N + 1]).
template <class T, int N>
__global__ void __launch_bounds__(threads_for(N)) backward_kernel(
    const T* __restrict__ dy, const T* __restrict__ u, const T* __restrict__ pre, const T* __restrict__ post,
    const T* __restrict__ skip, const float2* __restrict__ khat, float2* __restrict__ dkpart,
    float2* __restrict__ vh_global, T* __restrict__ du, T* __restrict__ dpre, T* __restrict__ dpost, int64_t B,
    int64_t H, int64_t L, int nchunk, int rows_per_cta, bool vec, bool vh_smem) {
  constexpr int TT = threads_for(N);
  extern __shared__ float2 smem[];
  const Rows rw = rows_of(B, nchunk, rows_per_cta);
  const float2* __restrict__ kh = khat + rw.h * (N + 1);
  float2* dkp = dkpart + (rw.chunk * H + rw.h) * (N + 1);
  float2* vh = vh_smem ? smem + padded(N) : vh_global + int64_t(blockIdx.x) * (N + 1);
  const float sk = skip ? float(to_c(skip[rw.h])) : 0.f;
  const bool need_z = dpost != nullptr;
  for (int64_t b = rw.b0; b < rw.b1; ++b) {
    const int64_t off = (b * H + rw.h) * L;
    const T* ur = u + off;
    const T* pr = pre ? pre + off : nullptr;
    const T* dyr = dy + off;
    const T* por = post ? post + off : nullptr;
    // V̂ (half spectrum, N + 1 values) into vh
    fft_io<N, TT, -1, kStaged<N>, false>(
        smem, fresh_tid(),
        [&](int n) {
          float2 z = ld2(ur, 2 * int64_t(n), L, vec);
          if (pr) z = mul2(z, ld2(pr, 2 * int64_t(n), L, vec));
          return z;
        },
        [&](int i, float2 x) { smem[pad(i)] = x; });
    __syncthreads();
    // unroll 2: deeper unrolling hoists every pair's loads and spills at 64 registers
#pragma unroll 2
    for (int f = fresh_tid(); f <= N / 2; f += TT) {
      const int g = N - f;
      const Split sp = split<N>(smem[pad(f)], smem[pad(g & (N - 1))], f);
      vh[f] = sp.xf;
      vh[g] = sp.xg;
    }
    // Ĝ; the barrier inside fft orders the vh stores above before anyone reads vh below
    fft_io<N, TT, -1, kStaged<N>, false>(
        smem, fresh_tid(),
        [&](int n) {
          float2 z = ld2(dyr, 2 * int64_t(n), L, vec);
          if (por) z = mul2(z, ld2(por, 2 * int64_t(n), L, vec));
          return z;
        },
        [&](int i, float2 x) { smem[pad(i)] = x; });
    __syncthreads();
    const bool first = b == rw.b0;
    // unroll 2: deeper unrolling hoists every pair's loads and spills at 64 registers
#pragma unroll 2
    for (int f = fresh_tid(); f <= N / 2; f += TT) {
      const int g = N - f;
      const Split sp = split<N>(smem[pad(f)], smem[pad(g & (N - 1))], f);
      const float2 vf = vh[f], vg = vh[g];
      const float2 kf = __ldg(kh + f), kg = __ldg(kh + g);
      // f = N/2 is its own partner: count it once
      float2 pf = mulcf2(vf, sp.xf), pg = mulcf2(vg, sp.xg);
      if (!first) {
        pf = pf + dkp[f];
        pg = pg + dkp[g];
      }
      dkp[f] = pf;
      if (g != f) dkp[g] = pg;
      merge<N>(mulcf2(kf, sp.xf), mulcf2(kg, sp.xg), sp.w, f, [&](int i, float2 x) { smem[pad(i)] = x; });
      if (need_z) merge<N>(mulf2(kf, vf), mulf2(kg, vg), sp.w, f, [&](int i, float2 x) { vh[i] = x; });
    }
    __syncthreads();
    fft_io<N, TT, +1, false, kStaged<N>>(
        smem, fresh_tid(), [&](int n) { return smem[pad(n)]; },
        [&](int n, float2 c) {
          const int64_t t = 2 * int64_t(n);
          if (t >= L) return;
          const float2 g = ld2(dyr, t, L, vec);
          const float2 dz = por ? mul2(g, ld2(por, t, L, vec)) : g;
          const float2 dv = {c.x + sk * dz.x, c.y + sk * dz.y};
          if (pr) {
            const float2 p = ld2(pr, t, L, vec);
            st2(du + off, t, L, vec, dv.x * p.x, dv.y * p.y);
            if (dpre) {
              const float2 uu = ld2(ur, t, L, vec);
              st2(dpre + off, t, L, vec, dv.x * uu.x, dv.y * uu.y);
            }
          } else {
            st2(du + off, t, L, vec, dv.x, dv.y);
          }
        });
    if (need_z) {
      // vh's merged stores are ordered before these loads by the barriers inside the fft above
      fft_io<N, TT, +1, kStaged<N>, kStaged<N>>(
          smem, fresh_tid(), [&](int n) { return vh[n]; },
          [&](int n, float2 z) {
            const int64_t t = 2 * int64_t(n);
            if (t >= L) return;
            if (skip) {
              float2 v = ld2(ur, t, L, vec);
              if (pr) v = mul2(v, ld2(pr, t, L, vec));
              z = {z.x + sk * v.x, z.y + sk * v.y};
            }
            const float2 g = ld2(dyr, t, L, vec);
            st2(dpost + off, t, L, vec, g.x * z.x, g.y * z.y);
          });
    }
  }
}

}  // namespace strux::cuda::fused
