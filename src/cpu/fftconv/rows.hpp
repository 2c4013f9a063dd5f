// The per-row prologue and epilogue of the CPU fftconv plans (fftconv.cpp, spectral_conv.cpp):
// the gates, the skip term and the zero padding around the transforms of one (b, h) row of
// length L, padded to n. Both plans run the same elementwise arithmetic in the same order, so
// it lives here once; the spectral products between the transforms are each plan's own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace strux::cpu {

// a[0, L) = v = u ⊙ pre (u when pre is null), a[L, n) = 0.
template <class T>
inline void row_load_v(T* a, const T* u, const T* pre, int64_t L, int64_t n) {
  if (pre) {
    for (int64_t t = 0; t < L; ++t) a[t] = u[t] * pre[t];
  } else {
    std::memcpy(a, u, sizeof(T) * size_t(L));
  }
  std::fill(a + L, a + n, T(0));
}

// y = (conv + skip_h · v) ⊙ post, v = u ⊙ pre; null skip / pre / post leave their term out.
template <class T>
inline void row_store_y(T* y, const T* conv, const T* u, const T* pre, const T* post, const T* skip_h, int64_t L) {
  if (skip_h) {
    const T sk = *skip_h;
    if (pre) {
      for (int64_t t = 0; t < L; ++t) y[t] = conv[t] + sk * (u[t] * pre[t]);
    } else {
      for (int64_t t = 0; t < L; ++t) y[t] = conv[t] + sk * u[t];
    }
  } else {
    std::memcpy(y, conv, sizeof(T) * size_t(L));
  }
  if (post)
    for (int64_t t = 0; t < L; ++t) y[t] *= post[t];
}

// dpost = dy ⊙ z, z = conv + sk · v the output before the postgate (sk = 0 without a skip).
template <class T>
inline void row_dpost(T* dpost, const T* dy, const T* conv, const T* u, const T* pre, T sk, int64_t L) {
  for (int64_t t = 0; t < L; ++t) {
    const T v = pre ? u[t] * pre[t] : u[t];
    dpost[t] = dy[t] * (conv[t] + sk * v);
  }
}

// a[0, L) = dz = dy ⊙ post (dy when post is null), a[L, n) = 0.
template <class T>
inline void row_load_dz(T* a, const T* dy, const T* post, int64_t L, int64_t n) {
  if (post) {
    for (int64_t t = 0; t < L; ++t) a[t] = dy[t] * post[t];
  } else {
    std::memcpy(a, dy, sizeof(T) * size_t(L));
  }
  std::fill(a + L, a + n, T(0));
}

// dv = corr + sk · dz, du = dv ⊙ pre, dpre = dv ⊙ u (dpre may be null); with a skip, adds
// Σ_t dz v to ssum (in double, in t order) for dskip.
template <class T>
inline void row_store_dv(T* du, T* dpre, const T* corr, const T* dy, const T* u, const T* pre, const T* post,
                         bool skip, T sk, int64_t L, double& ssum) {
  for (int64_t t = 0; t < L; ++t) {
    const T dz = post ? dy[t] * post[t] : dy[t];
    T dv = corr[t];
    if (skip) {
      const T v = pre ? u[t] * pre[t] : u[t];
      dv += sk * dz;
      ssum += double(dz) * double(v);
    }
    if (pre) {
      du[t] = dv * pre[t];
      if (dpre) dpre[t] = dv * u[t];
    } else {
      du[t] = dv;
    }
  }
}

}  // namespace strux::cpu
