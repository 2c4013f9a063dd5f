// The fused kernels around cuFFT for fftconv. Rows are (b, h) pairs, row = b·H + h; the FFT
// buffers hold one row per (b, h) with real stride 2·nf (cuFFT's in-place layout), nf = nfft/2+1.
#pragma once

#include "cuda/elem.cuh"

namespace strux::cuda::fftconv_kernels {

constexpr int kThreads = 256;

// out[r, t] = scale · x[r, t] · gate[r, t] for t < n_copy, 0 for n_copy <= t < n_write.
template <class T, class Tc>
__global__ void pad(const T* __restrict__ x, const T* __restrict__ gate, int64_t rows, int64_t ld_in,
                    int64_t n_copy, int64_t n_write, int64_t ld_out, Tc scale, Tc* __restrict__ out) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n_write) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    Tc v = 0;
    if (t < n_copy) {
      v = Tc(to_c(x[r * ld_in + t]));
      if (gate) v *= Tc(to_c(gate[r * ld_in + t]));
      v *= scale;
    }
    out[r * ld_out + t] = v;
  }
}

// X[r, f] *= K[r mod H, f]  (K holds the filter spectrum, already scaled by 1/nfft).
template <class C>
__global__ void mul_filter(C* __restrict__ X, const C* __restrict__ K, int64_t rows, int64_t H, int64_t nf) {
  const int64_t f = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f >= nf) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t h = r % H;
    X[r * nf + f] = cmul(X[r * nf + f], K[h * nf + f]);
  }
}

// y = (conv + skip·v) ⊙ post, v = u ⊙ pre; conv rows have stride ldc.
template <class T, class Tc>
__global__ void epilogue_forward(const Tc* __restrict__ conv, int64_t ldc, const T* __restrict__ u,
                                 const T* __restrict__ pre, const T* __restrict__ post, const T* __restrict__ skip,
                                 int64_t rows, int64_t H, int64_t L, T* __restrict__ y) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= L) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t i = r * L + t;
    Tc z = conv[r * ldc + t];
    if (skip) {
      Tc v = Tc(to_c(u[i]));
      if (pre) v *= Tc(to_c(pre[i]));
      z += Tc(to_c(skip[r % H])) * v;
    }
    if (post) z *= Tc(to_c(post[i]));
    y[i] = From<T>::of(z);
  }
}

// One (h, f) of the backward spectra, over b: returns Σ_b conj(V)·G; G ← conj(k)·G (the dv
// spectrum), V ← k·V when need_z (the forward's product, for dpostgate); zero_imag zeroes the
// imaginary parts of both (fftconv_spectral's bins 0 and n/2, which irfft reads as real).
template <class C>
__device__ __forceinline__ C backward_bin(C* __restrict__ V, C* __restrict__ G, C k, int64_t B, int64_t H,
                                          int64_t h, int64_t nf, int64_t f, bool need_z, bool zero_imag) {
  C acc{0, 0};
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = (b * H + h) * nf + f;
    const C v = V[i], g = G[i];
    const C p = cmulc(v, g);
    acc.x += p.x;
    acc.y += p.y;
    C dv = cmulc(k, g);
    if (zero_imag) dv.y = 0;
    G[i] = dv;
    if (need_z) {
      C z = cmul(k, v);
      if (zero_imag) z.y = 0;
      V[i] = z;
    }
  }
  return acc;
}

// Per (h, f): dK[h,f] = scale·Σ_b conj(V[b,h,f])·G[b,h,f];  G ← conj(K)·G (dv spectrum);
// V ← K·V when need_z (the forward's conv, for dpostgate).
template <class C, class Tc>
__global__ void backward_spectra(C* __restrict__ V, C* __restrict__ G, const C* __restrict__ K, C* __restrict__ dK,
                                 int64_t B, int64_t H, int64_t nf, bool need_z, Tc scale) {
  const int64_t f = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f >= nf) return;
  for (int64_t h = blockIdx.y; h < H; h += gridDim.y) {
    const C acc = backward_bin(V, G, K[h * nf + f], B, H, h, nf, f, need_z, false);
    dK[h * nf + f] = C{acc.x * scale, acc.y * scale};
  }
}

// dz = dy ⊙ post; dv = corr + skip·dz; du = dv ⊙ pre; dpre = dv ⊙ u; dpost = dy ⊙ (z + skip·v).
template <class T, class Tc>
__global__ void epilogue_backward(const Tc* __restrict__ corr, const Tc* __restrict__ conv, int64_t ldc,
                                  const T* __restrict__ dy, const T* __restrict__ u, const T* __restrict__ pre,
                                  const T* __restrict__ post, const T* __restrict__ skip, int64_t rows, int64_t H,
                                  int64_t L, T* __restrict__ du, T* __restrict__ dpre, T* __restrict__ dpost) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= L) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t i = r * L + t;
    const Tc g = Tc(to_c(dy[i]));
    const Tc dz = post ? g * Tc(to_c(post[i])) : g;
    const Tc s = skip ? Tc(to_c(skip[r % H])) : Tc(0);
    const Tc dv = corr[r * ldc + t] + s * dz;
    const Tc uu = Tc(to_c(u[i]));
    if (pre) {
      du[i] = From<T>::of(dv * Tc(to_c(pre[i])));
      if (dpre) dpre[i] = From<T>::of(dv * uu);
    } else {
      du[i] = From<T>::of(dv);
    }
    if (dpost) {
      const Tc v = pre ? uu * Tc(to_c(pre[i])) : uu;
      dpost[i] = From<T>::of(g * (conv[r * ldc + t] + s * v));
    }
  }
}

// dk[h, s] = c[h, s] for s < Lmin, 0 for Lmin <= s < Lk (taps past L never matter);
// dskip[h] = c[h, 0] (lag-0 correlation = Σ dz·v).
template <class T, class Tc>
__global__ void filter_grad(const Tc* __restrict__ c, int64_t ldc, int64_t H, int64_t Lk, int64_t Lmin,
                            T* __restrict__ dk, T* __restrict__ dskip) {
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= Lk) return;
  for (int64_t h = blockIdx.y; h < H; h += gridDim.y) {
    const Tc v = s < Lmin ? c[h * ldc + s] : Tc(0);
    dk[h * Lk + s] = From<T>::of(v);
    if (dskip && s == 0) dskip[h] = From<T>::of(v);
  }
}

}  // namespace strux::cuda::fftconv_kernels
