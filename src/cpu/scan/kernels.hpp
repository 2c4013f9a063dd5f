// Private element-wise kernels of the scan family, on one contiguous run of `len` channels.
//
// Why hand-written complex arithmetic: std::complex operator* goes through __mulsc3 (C99
// Annex G inf/NaN recovery) unless -ffast-math, which blocks vectorisation; the plain formula
// on interleaved (re, im) pairs vectorises and still propagates NaN.
// Pointers marked __restrict never alias; the *_inplace variants update y with y's own value.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <type_traits>

#include "strux/scan.hpp"  // DiagLayout

namespace strux::cpu::scan {

template <class S>
struct Elem {
  using R = S;
  static constexpr bool cplx = false;
};
template <class T>
struct Elem<std::complex<T>> {
  using R = T;
  static constexpr bool cplx = true;
};

template <class S>
inline typename Elem<S>::R* re(S* p) { return reinterpret_cast<typename Elem<S>::R*>(p); }
template <class S>
inline const typename Elem<S>::R* re(const S* p) { return reinterpret_cast<const typename Elem<S>::R*>(p); }

// y = a * x + b
template <class S>
inline void fma_step(const S* __restrict a_, const S* __restrict x_, const S* __restrict b_,
                     S* __restrict y_, int64_t len) {
  auto a = re(a_); auto x = re(x_); auto b = re(b_); auto y = re(y_);
  if constexpr (!Elem<S>::cplx) {
    for (int64_t i = 0; i < len; ++i) y[i] = a[i] * x[i] + b[i];
  } else {
    for (int64_t i = 0; i < len; ++i) {
      const auto ar = a[2 * i], ai = a[2 * i + 1], xr = x[2 * i], xi = x[2 * i + 1];
      y[2 * i] = ar * xr - ai * xi + b[2 * i];
      y[2 * i + 1] = ar * xi + ai * xr + b[2 * i + 1];
    }
  }
}

// y += a * x
template <class S>
inline void fma_inplace(const S* __restrict a_, const S* __restrict x_, S* __restrict y_, int64_t len) {
  auto a = re(a_); auto x = re(x_); auto y = re(y_);
  if constexpr (!Elem<S>::cplx) {
    for (int64_t i = 0; i < len; ++i) y[i] += a[i] * x[i];
  } else {
    for (int64_t i = 0; i < len; ++i) {
      const auto ar = a[2 * i], ai = a[2 * i + 1], xr = x[2 * i], xi = x[2 * i + 1];
      y[2 * i] += ar * xr - ai * xi;
      y[2 * i + 1] += ar * xi + ai * xr;
    }
  }
}

// y = conj(a) * x + d
template <class S>
inline void conj_fma_step(const S* __restrict a_, const S* __restrict x_, const S* __restrict d_,
                          S* __restrict y_, int64_t len) {
  auto a = re(a_); auto x = re(x_); auto d = re(d_); auto y = re(y_);
  if constexpr (!Elem<S>::cplx) {
    for (int64_t i = 0; i < len; ++i) y[i] = a[i] * x[i] + d[i];
  } else {
    for (int64_t i = 0; i < len; ++i) {
      const auto ar = a[2 * i], ai = a[2 * i + 1], xr = x[2 * i], xi = x[2 * i + 1];
      y[2 * i] = ar * xr + ai * xi + d[2 * i];
      y[2 * i + 1] = ar * xi - ai * xr + d[2 * i + 1];
    }
  }
}

// y += conj(a) * x
template <class S>
inline void conj_fma_inplace(const S* __restrict a_, const S* __restrict x_, S* __restrict y_,
                             int64_t len) {
  auto a = re(a_); auto x = re(x_); auto y = re(y_);
  if constexpr (!Elem<S>::cplx) {
    for (int64_t i = 0; i < len; ++i) y[i] += a[i] * x[i];
  } else {
    for (int64_t i = 0; i < len; ++i) {
      const auto ar = a[2 * i], ai = a[2 * i + 1], xr = x[2 * i], xi = x[2 * i + 1];
      y[2 * i] += ar * xr + ai * xi;
      y[2 * i + 1] += ar * xi - ai * xr;
    }
  }
}

// y = g * conj(h)
template <class S>
inline void mul_conj(const S* __restrict g_, const S* __restrict h_, S* __restrict y_, int64_t len) {
  auto g = re(g_); auto h = re(h_); auto y = re(y_);
  if constexpr (!Elem<S>::cplx) {
    for (int64_t i = 0; i < len; ++i) y[i] = g[i] * h[i];
  } else {
    for (int64_t i = 0; i < len; ++i) {
      const auto gr = g[2 * i], gi = g[2 * i + 1], hr = h[2 * i], hi = h[2 * i + 1];
      y[2 * i] = gr * hr + gi * hi;
      y[2 * i + 1] = gi * hr - gr * hi;
    }
  }
}

// y += g * conj(h)
template <class S>
inline void mul_conj_add(const S* __restrict g_, const S* __restrict h_, S* __restrict y_, int64_t len) {
  auto g = re(g_); auto h = re(h_); auto y = re(y_);
  if constexpr (!Elem<S>::cplx) {
    for (int64_t i = 0; i < len; ++i) y[i] += g[i] * h[i];
  } else {
    for (int64_t i = 0; i < len; ++i) {
      const auto gr = g[2 * i], gi = g[2 * i + 1], hr = h[2 * i], hi = h[2 * i + 1];
      y[2 * i] += gr * hr + gi * hi;
      y[2 * i + 1] += gi * hr - gr * hi;
    }
  }
}

// y = g * conj(y)
template <class S>
inline void mul_conj_inplace(const S* __restrict g_, S* __restrict y_, int64_t len) {
  auto g = re(g_); auto y = re(y_);
  if constexpr (!Elem<S>::cplx) {
    for (int64_t i = 0; i < len; ++i) y[i] = g[i] * y[i];
  } else {
    for (int64_t i = 0; i < len; ++i) {
      const auto gr = g[2 * i], gi = g[2 * i + 1], hr = y[2 * i], hi = y[2 * i + 1];
      y[2 * i] = gr * hr + gi * hi;
      y[2 * i + 1] = gi * hr - gr * hi;
    }
  }
}

// y = a * y + b (y updated in place: the running state of a time segment)
template <class S>
inline void step_inplace(const S* __restrict a_, const S* __restrict b_, S* __restrict y_, int64_t len) {
  auto a = re(a_); auto b = re(b_); auto y = re(y_);
  if constexpr (!Elem<S>::cplx) {
    for (int64_t i = 0; i < len; ++i) y[i] = a[i] * y[i] + b[i];
  } else {
    for (int64_t i = 0; i < len; ++i) {
      const auto ar = a[2 * i], ai = a[2 * i + 1], yr = y[2 * i], yi = y[2 * i + 1];
      y[2 * i] = ar * yr - ai * yi + b[2 * i];
      y[2 * i + 1] = ar * yi + ai * yr + b[2 * i + 1];
    }
  }
}

// y = a * y
template <class S>
inline void mul_inplace(const S* __restrict a_, S* __restrict y_, int64_t len) {
  auto a = re(a_); auto y = re(y_);
  if constexpr (!Elem<S>::cplx) {
    for (int64_t i = 0; i < len; ++i) y[i] = a[i] * y[i];
  } else {
    for (int64_t i = 0; i < len; ++i) {
      const auto ar = a[2 * i], ai = a[2 * i + 1], yr = y[2 * i], yi = y[2 * i + 1];
      y[2 * i] = ar * yr - ai * yi;
      y[2 * i + 1] = ar * yi + ai * yr;
    }
  }
}

// y = x (+ z when z is not null)
template <class S>
inline void copy_add(const S* __restrict x, const S* __restrict z, S* __restrict y, int64_t len) {
  if (z)
    for (int64_t i = 0; i < len; ++i) y[i] = x[i] + z[i];
  else
    for (int64_t i = 0; i < len; ++i) y[i] = x[i];
}

// y += a * 0: y is unchanged unless a holds a NaN or an infinity, which then makes y NaN. The
// first step multiplies a_0 by the zero initial state (h_{-1} = 0 when no h0 is given), and the
// DESIGN formula evaluated in IEEE arithmetic gives NaN there: NaN in, NaN out.
template <class S>
inline void add_times_zero(const S* __restrict a, S* __restrict y, int64_t len) {
  using R = decltype(std::abs(S{}));
  for (int64_t i = 0; i < len; ++i) y[i] += a[i] * R(0);
}

template <class S>
inline void fill_zero(S* y, int64_t len) {
  for (int64_t i = 0; i < len; ++i) y[i] = S(0);
}

// Channel chunk of the (batch, chunk) OpenMP tasks: enough tasks to balance the threads,
// at least min_chunk channels (16: whole cache lines, so that each inner loop vectorises).
int64_t scan_chunk(int64_t B, int64_t n, int64_t min_chunk = 16);

// Whole-tensor diagonal scans over (B, T, n) with row stride n; OpenMP over (b, chunk).
// forward: h = scan(a, b, h0); h may equal b (in place), h0 may be null.
template <class S>
void diag_forward(int64_t B, int64_t T, int64_t n, const S* a, const S* b, const S* h0, S* h,
                  const DiagLayout& L = {}, bool time_split = false);
// backward: see include/strux/scan.hpp. db may equal dh (in place) when a is not broadcast;
// dh_last, h0, dh0 may be null.
template <class S>
void diag_backward(int64_t B, int64_t T, int64_t n, const S* dh, const S* dh_last, const S* a,
                   const S* b, const S* h0, S* da, S* db, S* dh0, const DiagLayout& L = {});

// The time-last layouts (DiagLayout::time_last, arrays (B, n, T)): diag_tiles.cpp.
template <class S>
void diag_forward_time_last(int64_t B, int64_t T, int64_t n, const S* a, const S* b, const S* h0, S* h,
                            const DiagLayout& L);
template <class S>
void diag_backward_time_last(int64_t B, int64_t T, int64_t n, const S* dh, const S* dh_last, const S* a,
                             const S* b, const S* h0, S* da, S* db, S* dh0, const DiagLayout& L);

}  // namespace strux::cpu::scan
