// The row passes of the CPU fftconv plans (fftconv.cpp, spectral_conv.cpp): per (b, h) row of
// length L, padded to n, the gates, the skip term and the zero padding around the transforms,
// and the OpenMP drivers over rows (forward) and over (h, chunk of b) tasks (backward). Both
// plans run the same arithmetic in the same order, so it lives here once; the spectral
// products between the transforms are each plan's own, passed in as functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/fft.hpp"
#include "cpu/thread_scratch.hpp"
#include "cpu/threads.hpp"

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

// y for every row r = b·H + h: copy-in -> r2c -> spectral(X, h) -> c2r -> copy-out. Rows
// are handed out dynamically: they cost the same, but on a shared machine a thread that
// loses its core would otherwise hold a static share hostage.
template <class T, class Spectral>
void rows_forward(const RealFFT<T>& fft, int64_t rows, int64_t H, int64_t L, int64_t n, const T* u, const T* pre,
                  const T* post, const T* skip, T* y, Spectral spectral) {
  const int nth = num_threads();
  const ThreadScratch<T> sa(nth, n);
  const ThreadScratch<cplx<T>> sx(nth, n / 2 + 1);
#pragma omp parallel num_threads(nth) if (rows > 1)
  {
    const AlignedView<T> a{sa.mine()};
    const AlignedView<cplx<T>> X{sx.mine()};
#pragma omp for schedule(dynamic)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t h = r % H, o = r * L;
      const T* ur = u + o;
      const T* pr = pre ? pre + o : nullptr;
      row_load_v(a.data(), ur, pr, L, n);  // copy-in: v = u ⊙ pregate, zero-padded
      fft.forward(a.data(), X.data());
      spectral(X.data(), h);
      fft.inverse(X.data(), a.data());
      // copy-out: the first L samples, plus skip ⊙ v, times postgate
      row_store_y(y + o, a.data(), ur, pr, post ? post + o : nullptr, skip ? skip + h : nullptr, L);
    }
  }
}

// The backward's split of the batch: tasks (h, chunk of b), nchunk chunks per h. With H >=
// threads one chunk per h; with fewer channels the batch is cut so every thread has work.
// "threads" is partition_threads(), so the chunks (and the summation order of the filter
// gradient) do not depend on the team that runs them.
inline int64_t backward_chunks(int64_t B, int64_t H) {
  const int np = partition_threads();
  return std::min<int64_t>(B, std::max<int64_t>(1, (np + H - 1) / H));
}

// The backward over tasks (h, chunk of b), h = task / nchunk. For each row: V = rfft(v); with a
// postgate and dpost, z_spectrum(W, V, h) gives the forward's product for dpostgate; G = rfft(dz)
// in W, then grad(A, W, V, h) accumulates the filter gradient into the task's acc row
// A = acc + task·acc_stride (its first nacc bins zeroed first) and turns W into the dv spectrum;
// then du, dpregate and the task's Σ dz v. Then, per h in the same team, reduce(h, a) with a
// thread scratch row a of n reals; last dskip[h] = Σ over the chunks (in double).
template <class T, class ZSpectrum, class Grad, class Reduce>
void rows_backward(const RealFFT<T>& fft, int64_t B, int64_t H, int64_t L, int64_t n, int64_t nchunk, const T* dy,
                   const T* u, const T* pre, const T* post, const T* skip, T* du, T* dpre, T* dpost, T* dskip,
                   cplx<T>* acc, int64_t acc_stride, int64_t nacc, ZSpectrum z_spectrum, Grad grad, Reduce reduce) {
  const int nth = num_threads();
  const int64_t ntask = H * nchunk;
  std::vector<double> skip_part(size_t(skip ? ntask : 0), 0.0);
  if (!pre) dpre = nullptr;
  if (!post) dpost = nullptr;

  const ThreadScratch<T> sa(nth, n);
  const ThreadScratch<cplx<T>> sv(nth, n / 2 + 1), sw(nth, n / 2 + 1);
#pragma omp parallel num_threads(nth) if (ntask > 1)
  {
    const AlignedView<T> a{sa.mine()};
    const AlignedView<cplx<T>> V{sv.mine()}, W{sw.mine()};
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < ntask; ++task) {
      const int64_t h = task / nchunk, chunk = task % nchunk;
      const int64_t b0 = chunk * B / nchunk, b1 = (chunk + 1) * B / nchunk;
      cplx<T>* A = acc + task * acc_stride;
      std::fill(A, A + nacc, cplx<T>(0));
      const T sk = skip ? skip[h] : T(0);
      double ssum = 0.0;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t o = (b * H + h) * L;
        const T* ur = u + o;
        const T* pr = pre ? pre + o : nullptr;
        const T* po = post ? post + o : nullptr;
        const T* dyr = dy + o;
        row_load_v(a.data(), ur, pr, L, n);  // V = rfft(v)
        fft.forward(a.data(), V.data());
        // a = dz (zero-padded); with a postgate the forward's z is needed first, for dpostgate.
        if (po && dpost) {
          z_spectrum(W.data(), V.data(), h);
          fft.inverse(W.data(), a.data());
          row_dpost(dpost + o, dyr, a.data(), ur, pr, sk, L);
        }
        row_load_dz(a.data(), dyr, po, L, n);
        fft.forward(a.data(), W.data());
        grad(A, W.data(), V.data(), h);
        fft.inverse(W.data(), a.data());
        row_store_dv(du + o, dpre ? dpre + o : nullptr, a.data(), dyr, ur, pr, po, skip != nullptr, sk, L, ssum);
      }
      if (skip) skip_part[size_t(task)] = ssum;
    }
#pragma omp for schedule(static)
    for (int64_t h = 0; h < H; ++h) reduce(h, a.data());
  }
  if (skip && dskip) {
    for (int64_t h = 0; h < H; ++h) {
      double s = 0.0;
      for (int64_t ch = 0; ch < nchunk; ++ch) s += skip_part[size_t(h * nchunk + ch)];
      dskip[h] = T(s);
    }
  }
}

}  // namespace strux::cpu
