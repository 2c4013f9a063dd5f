// The direct solver of the CPU fftconv plan (direct.hpp): rows in parallel, each summed tap by tap
// over tiles of time that stay in L1 across the m passes.
#include "cpu/fftconv/direct.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/fftconv/rows.hpp"
#include "cpu/thread_scratch.hpp"
#include "cpu/threads.hpp"

namespace strux::cpu {
namespace {

// Outputs per tile: 4 KB of float32 (8 KB float64), which with the input tile stays in L1 across
// the m passes over it.
constexpr int64_t kTile = 1024;
// Below this much work (multiply-adds) a call runs on one thread: opening a team costs more.
constexpr int64_t kMinParallelWork = int64_t(1) << 15;

// out[t] = Σ_{i<m} w[i] x[t + i], t < L (x holds L + m - 1 values), summed in i order.
template <class T>
void slide(const T* w, int64_t m, const T* x, T* out, int64_t L) {
  for (int64_t t0 = 0; t0 < L; t0 += kTile) {
    const int64_t n = std::min(kTile, L - t0);
    T* o = out + t0;
    const T* xs = x + t0;
    const T w0 = w[0];
#pragma omp simd
    for (int64_t t = 0; t < n; ++t) o[t] = w0 * xs[t];
    for (int64_t i = 1; i < m; ++i) {
      const T c = w[i];
      const T* xi = xs + i;
#pragma omp simd
      for (int64_t t = 0; t < n; ++t) o[t] += c * xi[t];
    }
  }
}

template <class T>
T dot(const T* a, const T* b, int64_t n) {
  T s = T(0);
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// w[i] = k[m - 1 - i]: the convolution as a sliding dot product over the history layout.
template <class T>
void reverse_taps(T* w, const T* k, int64_t m) {
  for (int64_t i = 0; i < m; ++i) w[i] = k[m - 1 - i];
}

}  // namespace

template <class T>
void direct_forward(int64_t rows, int64_t H, int64_t L, int64_t m, bool circular, const T* k, const T* u,
                    const T* pre, const T* post, const T* skip, T* y) {
  const int nth = num_threads();
  const ThreadScratch<T> sx(nth, L + m - 1), so(nth, L), sw(nth, m);
  const bool par = rows > 1 && rows * L * m >= kMinParallelWork;
#pragma omp parallel num_threads(nth) if (par)
  {
    T* x = sx.mine();
    T* o = so.mine();
    T* w = sw.mine();
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t h = r % H, off = r * L;
      const T* ur = u + off;
      const T* pr = pre ? pre + off : nullptr;
      reverse_taps(w, k + h * m, m);
      load_history(x, ur, pr, L, m, circular);
      slide(w, m, x, o, L);
      row_store_y(y + off, o, ur, pr, post ? post + off : nullptr, skip ? skip + h : nullptr, L);
    }
  }
}

template <class T>
void direct_backward(int64_t B, int64_t H, int64_t L, int64_t m, int64_t Lk, bool circular, const T* k,
                     const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du, T* dk, T* dpre,
                     T* dpost, T* dskip) {
  const int nth = num_threads();
  const int64_t nchunk = backward_chunks(B, H);  // fixes the summation order of dk, not nth
  const int64_t ntask = H * nchunk;
  std::vector<double> dk_part(size_t(ntask * m), 0.0), skip_part(size_t(skip ? ntask : 0), 0.0);
  if (!pre) dpre = nullptr;
  if (!post) dpost = nullptr;
  const ThreadScratch<T> sx(nth, L + m - 1), sg(nth, L + m - 1), so(nth, L), sw(nth, m);
  const bool par = ntask > 1 && B * H * L * m >= kMinParallelWork;
#pragma omp parallel num_threads(nth) if (par)
  {
    T* x = sx.mine();
    T* g = sg.mine();
    T* o = so.mine();
    T* w = sw.mine();
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < ntask; ++task) {
      const int64_t h = task / nchunk, chunk = task % nchunk;
      const int64_t b0 = chunk * B / nchunk, b1 = (chunk + 1) * B / nchunk;
      const T* kh = k + h * m;
      reverse_taps(w, kh, m);
      double* acc = dk_part.data() + task * m;
      const T sk = skip ? skip[h] : T(0);
      double ssum = 0.0;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t off = (b * H + h) * L;
        const T* ur = u + off;
        const T* pr = pre ? pre + off : nullptr;
        const T* po = post ? post + off : nullptr;
        const T* dyr = dy + off;
        load_history(x, ur, pr, L, m, circular);
        if (dpost) {  // dpostgate = dy ⊙ z needs the forward's z
          slide(w, m, x, o, L);
          row_dpost(dpost + off, dyr, o, ur, pr, sk, L);
        }
        load_future(g, dyr, po, L, m, circular);
        slide(kh, m, g, o, L);  // corr(k, dz)[t] = Σ_j k[j] dz[t + j]
        row_store_dv(du + off, dpre ? dpre + off : nullptr, o, dyr, ur, pr, po, skip != nullptr, sk, L, ssum);
        // dk[j] = Σ_t dz[t] v[t - j] = Σ_t g[t] x[t + m - 1 - j], by tiles summed in double.
        for (int64_t t0 = 0; t0 < L; t0 += kTile) {
          const int64_t n = std::min(kTile, L - t0);
          for (int64_t q = 0; q < m; ++q) acc[m - 1 - q] += double(dot(g + t0, x + t0 + q, n));
        }
      }
      if (skip) skip_part[size_t(task)] = ssum;
    }
  }
  for (int64_t h = 0; h < H; ++h) {
    T* dkr = dk + h * Lk;
    for (int64_t j = 0; j < m; ++j) {
      double s = 0.0;
      for (int64_t ch = 0; ch < nchunk; ++ch) s += dk_part[size_t((h * nchunk + ch) * m + j)];
      dkr[j] = T(s);
    }
    std::fill(dkr + m, dkr + Lk, T(0));  // causal taps s >= L never reach an output
    if (skip && dskip) {
      double s = 0.0;
      for (int64_t ch = 0; ch < nchunk; ++ch) s += skip_part[size_t(h * nchunk + ch)];
      dskip[h] = T(s);
    }
  }
}

#define STRUX_DIRECT(T)                                                                                          \
  template void direct_forward<T>(int64_t, int64_t, int64_t, int64_t, bool, const T*, const T*, const T*,        \
                                  const T*, const T*, T*);                                                       \
  template void direct_backward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, bool, const T*, const T*,       \
                                   const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*);
STRUX_DIRECT(float)
STRUX_DIRECT(double)
#undef STRUX_DIRECT

}  // namespace strux::cpu
