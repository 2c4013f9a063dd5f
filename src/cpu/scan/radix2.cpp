// Radix-2 real FFTs of a power-of-two length k across rows (dft.hpp, ShortDft): L rows at a
// time, row l in lane l of 64-byte vectors (L = 16 floats / 8 doubles), so every butterfly is
// one vector operation on L rows and no shuffles are needed inside the transform.
//
// Why: a row of 64 costs the GEMM with the DFT matrix 8.4K FLOPs (78 ns from L2 at the BLAS
// rate) and a batched FFTW plan ~60 ns (FFTW_MEASURE); the FFT is ~400 FLOPs. Measured, 1
// thread, from L2: 34 ns a row forward at k = 64, 17 at 32; what bounds it is stores (the passes
// over the lane block, the transposes), and from memory the column-wise reads of a block
// (bench/NOTES-cpu.md "block-circulant p <= 4, 2026-11-27").
//
// The real transform of length k = 2m packs z_n = x_{2n} + i x_{2n+1} and runs one complex FFT
// of length m (decimation in time, input in bit-reversed order):
//   X_f = E_f + W^f O_f,  E_f = (Z_f + conj Z_{m-f}) / 2,  O_f = (Z_f - conj Z_{m-f}) / (2i),
// W = e^{-2 pi i / k}, indices of Z mod m. The inverse runs the same steps backwards:
//   Z_f = (X_f + conj X_{m-f}) + i W^{-f} (X_f - conj X_{m-f}),  z = m-point inverse FFT,
// which gives k x_j (FFTW's unnormalised c2r), times `scale`.
//
// The build targets x86-64-v2, so the block kernels are compiled three times (target_clones:
// AVX-512, AVX2 + FMA, baseline) and the loader picks the clone the CPU runs.
#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <utility>

#include "cpu/scan/dft.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"  // 64-byte vectors pass only between inlined functions

namespace strux::cpu::scan {

namespace {

template <class T>
struct Lanes;
template <>
struct Lanes<float> {
  typedef float V __attribute__((vector_size(64)));
  typedef int32_t M __attribute__((vector_size(64)));  // shuffle masks
  using Ix = int32_t;
  static constexpr int64_t L = 16;
};
template <>
struct Lanes<double> {
  typedef double V __attribute__((vector_size(64)));
  typedef int64_t M __attribute__((vector_size(64)));
  using Ix = int64_t;
  static constexpr int64_t L = 8;
};

// One level of an L x L transpose (R[r] = row r): swaps the off-diagonal D x D blocks of every
// 2D x 2D block, rows i and i + D: lanes with bit D set of row i <-> lanes without it of row
// i + D. The levels D = L/2 .. 1 together transpose (two-source permutes, one instruction each
// in the AVX-512 clone; a gather or scatter of the same lanes is microcoded on AMD).
// (GCC's __builtin_shuffle takes a mask vector, clang's __builtin_shufflevector the indices.)
template <class T, int64_t D, size_t... I>
[[gnu::always_inline]] inline void transpose_level(typename Lanes<T>::V* R, std::index_sequence<I...>) {
  constexpr int64_t L = Lanes<T>::L;
#if !defined(__clang__)
  using M = typename Lanes<T>::M;
  constexpr M lo = {typename Lanes<T>::Ix((int64_t(I) & D) ? L + int64_t(I) - D : int64_t(I))...};
  constexpr M hi = {typename Lanes<T>::Ix((int64_t(I) & D) ? L + int64_t(I) : int64_t(I) + D)...};
#endif
#pragma GCC unroll 16
  for (int64_t i = 0; i < L; ++i)
    if (!(i & D)) {
      const auto a = R[i], b = R[i + D];
#if defined(__clang__)
      R[i] = __builtin_shufflevector(a, b, ((int64_t(I) & D) ? L + int64_t(I) - D : int64_t(I))...);
      R[i + D] = __builtin_shufflevector(a, b, ((int64_t(I) & D) ? L + int64_t(I) : int64_t(I) + D)...);
#else
      R[i] = __builtin_shuffle(a, b, lo);
      R[i + D] = __builtin_shuffle(a, b, hi);
#endif
    }
}

template <class T>
[[gnu::always_inline]] inline void transpose(typename Lanes<T>::V* R) {
  constexpr auto idx = std::make_index_sequence<size_t(Lanes<T>::L)>();
  transpose_level<T, Lanes<T>::L / 2>(R, idx);
  transpose_level<T, Lanes<T>::L / 4>(R, idx);
  transpose_level<T, Lanes<T>::L / 8>(R, idx);
  if constexpr (Lanes<T>::L == 16) transpose_level<T, 1>(R, idx);
}

// R[l] = the L values at src + l * stride (rows past nl: zeros).
template <class T>
[[gnu::always_inline]] inline void load_rows(const T* src, int64_t stride, int64_t nl, typename Lanes<T>::V* R) {
  if (nl == Lanes<T>::L) {  // the common case without a test per row
    #pragma GCC unroll 16
    for (int64_t l = 0; l < Lanes<T>::L; ++l) std::memcpy(&R[l], src + l * stride, sizeof(R[l]));
    return;
  }
  #pragma GCC unroll 16
  for (int64_t l = 0; l < Lanes<T>::L; ++l) {
    if (l < nl)
      std::memcpy(&R[l], src + l * stride, sizeof(R[l]));
    else
      R[l] = typename Lanes<T>::V{};
  }
}

// The first `cols` values of R[l] to dst + l * stride, l < nl (whole vectors by fixed-size
// copies: a copy of a run-time size becomes `rep movs`, 20% of the forward's time).
template <class T>
[[gnu::always_inline]] inline void store_rows(const typename Lanes<T>::V* R, int64_t nl, int64_t cols, T* dst,
                                              int64_t stride) {
  if (cols == Lanes<T>::L) {
    #pragma GCC unroll 16
    for (int64_t l = 0; l < nl; ++l) std::memcpy(dst + l * stride, &R[l], sizeof(R[l]));
    return;
  }
  constexpr int64_t q = 16 / int64_t(sizeof(T));  // values of 16 bytes
  const int64_t cq = cols / q * q;
  for (int64_t l = 0; l < nl; ++l) {  // the last columns of a spectrum row (2 nfs = 4 mod 16 at k = 16 .. 64)
    for (int64_t c = 0; c < cq; c += q) std::memcpy(dst + l * stride + c, reinterpret_cast<const T*>(&R[l]) + c, 16);
    for (int64_t c = cq; c < cols; ++c) dst[l * stride + c] = R[l][c];
  }
}

// n with its log2(m) bits reversed (a constant wherever the kernels use it: unrolled loops).
template <int64_t m>
constexpr int64_t bitrev(int64_t n) {
  int64_t r = 0;
  for (int64_t b = 1; b < m; b *= 2, n /= 2) r = 2 * r + (n & 1);
  return r;
}

// Complex vectors of L lanes and their products with a scalar twiddle (c = e^{-2 pi i t}, or
// its conjugate for Inv).
template <class V>
struct Cv {
  V r, i;
};
template <bool Inv, class T, class V>
[[gnu::always_inline]] inline Cv<V> twiddle(const T* cr, const T* ci, int64_t t, Cv<V> a) {
  const T c = cr[t], s = Inv ? -ci[t] : ci[t];
  return {c * a.r - s * a.i, c * a.i + s * a.r};
}

// In-place complex FFT of length m on (zr, zi), input in bit-reversed order (decimation in
// time); Inv: e^{+2 pi i}. Two radix-2 stages per pass (stages h and 2h over 4 values kept in
// registers): the stores, not the arithmetic, bound these kernels (one 64-byte store takes two
// cycles on this VM's CPU), so a pass per stage pair halves them.
template <bool Inv, int64_t m, class T, class V>
[[gnu::always_inline]] inline void cfft(const Radix2Tables<T>& w, V* __restrict zr, V* __restrict zi) {
  const T* __restrict cr = w.cr.data();
  const T* __restrict ci = w.ci.data();
#pragma GCC unroll 4
  for (int64_t h = 1; 4 * h <= m; h *= 4) {
    const int64_t s1 = m / (2 * h), s2 = m / (4 * h);  // twiddle strides of stages h and 2h
#pragma GCC unroll 32
    for (int64_t b = 0; b < m; b += 4 * h)
#pragma GCC unroll 32
      for (int64_t j = 0; j < h; ++j) {
        const int64_t q = b + j;
        const Cv<V> a0{zr[q], zi[q]}, a2{zr[q + 2 * h], zi[q + 2 * h]};
        const Cv<V> a1 = twiddle<Inv>(cr, ci, j * s1, Cv<V>{zr[q + h], zi[q + h]});
        const Cv<V> a3 = twiddle<Inv>(cr, ci, j * s1, Cv<V>{zr[q + 3 * h], zi[q + 3 * h]});
        const Cv<V> b0{a0.r + a1.r, a0.i + a1.i}, b1{a0.r - a1.r, a0.i - a1.i};
        const Cv<V> b2 = twiddle<Inv>(cr, ci, j * s2, Cv<V>{a2.r + a3.r, a2.i + a3.i});
        const Cv<V> b3 = twiddle<Inv>(cr, ci, (j + h) * s2, Cv<V>{a2.r - a3.r, a2.i - a3.i});
        zr[q] = b0.r + b2.r;
        zi[q] = b0.i + b2.i;
        zr[q + 2 * h] = b0.r - b2.r;
        zi[q + 2 * h] = b0.i - b2.i;
        zr[q + h] = b1.r + b3.r;
        zi[q + h] = b1.i + b3.i;
        zr[q + 3 * h] = b1.r - b3.r;
        zi[q + 3 * h] = b1.i - b3.i;
      }
  }
  if constexpr ((m & 0xAAAAAAAA) != 0) {  // log2 m odd: one radix-2 stage left, h = m / 2
    constexpr int64_t h = m / 2;
#pragma GCC unroll 32
    for (int64_t j = 0; j < h; ++j) {
      const Cv<V> a1 = twiddle<Inv>(cr, ci, j, Cv<V>{zr[j + h], zi[j + h]});
      const V r0 = zr[j], i0 = zi[j];
      zr[j] = r0 + a1.r;
      zi[j] = i0 + a1.i;
      zr[j + h] = r0 - a1.r;
      zi[j + h] = i0 - a1.i;
    }
  }
}

// Forward of `rows` rows (src row stride k) into spectra rows of stride nfs (padding zeroed).
// Rows go into lanes and back by L x L transposes of whole vectors (k >= L): z_n = x_{2n} + i x_{2n+1} is stored at rev(n) as it comes out of the transpose,
// and each group of L/2 frequencies goes back to the rows as soon as it is made.
template <int64_t m, class T>
[[gnu::always_inline]] inline void fwd_rows(const Radix2Tables<T>& w, const T* src, int64_t rows,
                                            std::complex<T>* dst, int64_t nfs) {
  using V = typename Lanes<T>::V;
  constexpr int64_t L = Lanes<T>::L, k = 2 * m;
  static_assert(k >= L, "rows of whole vectors");
  const T* pr = w.pr.data();
  const T* pi = w.pi.data();
  alignas(64) V zr[m], zi[m], R[L];
  for (int64_t r0 = 0; r0 < rows; r0 += L) {
    const int64_t nl = std::min(L, rows - r0);
    const T* s0 = src + r0 * k;
    for (int64_t c0 = 0; c0 < k; c0 += L) {
      load_rows(s0 + c0, k, nl, R);
      transpose<T>(R);  // R[c] = x_{c0 + c} of the L rows
#pragma GCC unroll 16
      for (int64_t c = 0; c < L; c += 2) {
        zr[bitrev<m>((c0 + c) / 2)] = R[c];
        zi[bitrev<m>((c0 + c) / 2)] = R[c + 1];
      }
    }
    cfft<false, m>(w, zr, zi);
    T* d0 = reinterpret_cast<T*>(dst + r0 * nfs);
    for (int64_t c0 = 0; c0 < 2 * nfs; c0 += L) {  // R[2g], R[2g + 1] = X_f, f = c0 / 2 + g
      #pragma GCC unroll 16
      for (int64_t g = 0; g < L / 2; ++g) {
        const int64_t f = c0 / 2 + g;
        if (f > m) {
          R[2 * g] = R[2 * g + 1] = V{};  // padding
          continue;
        }
        const int64_t a = f == m ? 0 : f, b = f == 0 ? 0 : m - f;  // f and m - f, mod m
        const V er = zr[a] + zr[b], ei = zi[a] - zi[b];  // 2 E_f
        const V orr = zi[a] + zi[b], oi = zr[b] - zr[a];  // 2 O_f
        R[2 * g] = T(0.5) * (er + (pr[f] * orr - pi[f] * oi));
        R[2 * g + 1] = (f == 0 || f == m) ? V{} : T(0.5) * (ei + (pr[f] * oi + pi[f] * orr));  // exact 0 as FFTW
      }
      transpose<T>(R);
      store_rows<T>(R, nl, std::min(L, 2 * nfs - c0), d0 + c0, 2 * nfs);
    }
  }
}

// Inverse of `rows` spectra rows (stride nfs; imaginary parts at 0 and m ignored) into rows of
// length k at dst (row stride k), times scale.
template <int64_t m, class T>
[[gnu::always_inline]] inline void inv_rows(const Radix2Tables<T>& w, const std::complex<T>* src, int64_t nfs,
                                            int64_t rows, T* dst, T scale) {
  using V = typename Lanes<T>::V;
  constexpr int64_t L = Lanes<T>::L, k = 2 * m, nc = 2 * m + 2;
  static_assert(k >= L, "rows of whole vectors");
  const T* pr = w.pr.data();
  const T* pi = w.pi.data();
  alignas(64) V zr[m], zi[m], x[2 * m + L], R[L];
  for (int64_t r0 = 0; r0 < rows; r0 += L) {
    const int64_t nl = std::min(L, rows - r0);
    const T* s0 = reinterpret_cast<const T*>(src + r0 * nfs);
    for (int64_t c0 = 0; c0 < nc; c0 += L) {  // x[2f], x[2f + 1] = X_f
      if (c0 + L <= 2 * nfs) {
        load_rows(s0 + c0, 2 * nfs, nl, R);
      } else {  // the last columns of a row whose stride is not a whole vector
        for (int64_t l = 0; l < L; ++l) {
          R[l] = V{};
          if (l < nl) std::memcpy(&R[l], s0 + l * 2 * nfs + c0, size_t(nc - c0) * sizeof(T));
        }
      }
      transpose<T>(R);
      #pragma GCC unroll 16
      for (int64_t c = 0; c < L; ++c) x[c0 + c] = R[c];
    }
    x[1] = x[2 * m + 1] = V{};
    for (int64_t f = 0; f < m; ++f) {
      const V ar = x[2 * f] + x[2 * (m - f)], ai = x[2 * f + 1] - x[2 * (m - f) + 1];  // X_f + conj X_{m-f}
      const V dr = x[2 * f] - x[2 * (m - f)], di = x[2 * f + 1] + x[2 * (m - f) + 1];  // X_f - conj X_{m-f}
      const T c = pr[f], s = -pi[f];                                                   // W^{-f}
      const V qr = c * dr - s * di, qi = c * di + s * dr;
      zr[bitrev<m>(f)] = ar - qi;
      zi[bitrev<m>(f)] = ai + qr;
    }
    cfft<true, m>(w, zr, zi);
    T* d0 = dst + r0 * k;
    for (int64_t c0 = 0; c0 < k; c0 += L) {
#pragma GCC unroll 16
      for (int64_t c = 0; c < L; c += 2) {
        R[c] = scale * zr[(c0 + c) / 2];
        R[c + 1] = scale * zi[(c0 + c) / 2];
      }
      transpose<T>(R);
      store_rows<T>(R, nl, L, d0 + c0, k);
    }
  }
}

// The length as a template argument (every loop of the kernels unrolled, every index a
// constant): the one switch from the run-time m. Always inlined into the clones below (a
// lambda here would be compiled for the baseline target only: 64-byte vectors in SSE, 10x
// slower).
template <class T>
[[gnu::always_inline]] inline void fwd_any(const Radix2Tables<T>& w, const T* src, int64_t rows,
                                           std::complex<T>* dst, int64_t nfs) {
  switch (w.m) {
    case 8: return fwd_rows<8>(w, src, rows, dst, nfs);
    case 16: return fwd_rows<16>(w, src, rows, dst, nfs);
    default: return fwd_rows<32>(w, src, rows, dst, nfs);
  }
}
template <class T>
[[gnu::always_inline]] inline void inv_any(const Radix2Tables<T>& w, const std::complex<T>* src, int64_t nfs,
                                           int64_t rows, T* dst, T scale) {
  switch (w.m) {
    case 8: return inv_rows<8>(w, src, nfs, rows, dst, scale);
    case 16: return inv_rows<16>(w, src, nfs, rows, dst, scale);
    default: return inv_rows<32>(w, src, nfs, rows, dst, scale);
  }
}
static_assert(kRadix2MaxK == 64, "the switches cover k = 16, 32, 64");

}  // namespace

#define STRUX_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
STRUX_CLONES void radix2_forward(const Radix2Tables<float>& w, const float* src, int64_t rows,
                                 std::complex<float>* dst, int64_t nfs) {
  fwd_any(w, src, rows, dst, nfs);
}
STRUX_CLONES void radix2_forward(const Radix2Tables<double>& w, const double* src, int64_t rows,
                                 std::complex<double>* dst, int64_t nfs) {
  fwd_any(w, src, rows, dst, nfs);
}
STRUX_CLONES void radix2_inverse(const Radix2Tables<float>& w, const std::complex<float>* src, int64_t nfs,
                                 int64_t rows, float* dst, float scale) {
  inv_any(w, src, nfs, rows, dst, scale);
}
STRUX_CLONES void radix2_inverse(const Radix2Tables<double>& w, const std::complex<double>* src, int64_t nfs,
                                 int64_t rows, double* dst, double scale) {
  inv_any(w, src, nfs, rows, dst, scale);
}
#undef STRUX_CLONES

}  // namespace strux::cpu::scan
