// Elementwise products of half spectra for fftconv.
//
// Written on the (re, im) pairs rather than with std::complex operator*: without
// -ffast-math that operator calls __mulsc3/__muldc3 (C99 Annex G inf/nan recovery) per
// element, several times slower and not vectorised. Plain products still propagate NaN.
#pragma once

#include <cstdint>

#include "cpu/fft.hpp"

namespace strux::cpu {

// Row stride for spectra stored back to back: FFTW's new-array execute needs every row to
// keep the SIMD alignment of the planning buffers, so round nfreq up to 64 bytes' worth.
inline int64_t spectrum_stride(int64_t nfreq) { return (nfreq + 7) / 8 * 8; }

// x *= k
template <class T>
inline void spec_mul(cplx<T>* __restrict x, const cplx<T>* __restrict k, int64_t n) {
  T* a = reinterpret_cast<T*>(x);
  const T* b = reinterpret_cast<const T*>(k);
  for (int64_t i = 0; i < n; ++i) {
    const T ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];
    a[2 * i] = ar * br - ai * bi;
    a[2 * i + 1] = ar * bi + ai * br;
  }
}

// out = x * k
template <class T>
inline void spec_mul_to(cplx<T>* __restrict out, const cplx<T>* __restrict x, const cplx<T>* __restrict k,
                        int64_t n) {
  T* o = reinterpret_cast<T*>(out);
  const T* a = reinterpret_cast<const T*>(x);
  const T* b = reinterpret_cast<const T*>(k);
  for (int64_t i = 0; i < n; ++i) {
    const T ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];
    o[2 * i] = ar * br - ai * bi;
    o[2 * i + 1] = ar * bi + ai * br;
  }
}

// x *= conj(k)
template <class T>
inline void spec_mul_conj(cplx<T>* __restrict x, const cplx<T>* __restrict k, int64_t n) {
  T* a = reinterpret_cast<T*>(x);
  const T* b = reinterpret_cast<const T*>(k);
  for (int64_t i = 0; i < n; ++i) {
    const T ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];
    a[2 * i] = ar * br + ai * bi;
    a[2 * i + 1] = ai * br - ar * bi;
  }
}

// acc += x * conj(y)
template <class T>
inline void spec_mac_conj(cplx<T>* __restrict acc, const cplx<T>* __restrict x, const cplx<T>* __restrict y,
                          int64_t n) {
  T* o = reinterpret_cast<T*>(acc);
  const T* a = reinterpret_cast<const T*>(x);
  const T* b = reinterpret_cast<const T*>(y);
  for (int64_t i = 0; i < n; ++i) {
    const T ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];
    o[2 * i] += ar * br + ai * bi;
    o[2 * i + 1] += ai * br - ar * bi;
  }
}

// acc += x
template <class T>
inline void spec_add(cplx<T>* __restrict acc, const cplx<T>* __restrict x, int64_t n) {
  T* o = reinterpret_cast<T*>(acc);
  const T* a = reinterpret_cast<const T*>(x);
  for (int64_t i = 0; i < 2 * n; ++i) o[i] += a[i];
}

}  // namespace strux::cpu
