// The blocks solver of the CPU fftconv plan (blocks.hpp): rows in parallel (forward) or tasks
// (h, chunk of b) (backward) as the FFT solver cuts them, each row block by block with per-thread
// buffers allocated before the region opens.
#include "cpu/fftconv/blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/fft.hpp"
#include "cpu/fftconv/direct.hpp"
#include "cpu/fftconv/rows.hpp"
#include "cpu/fftconv/spectral.hpp"
#include "cpu/thread_scratch.hpp"
#include "cpu/threads.hpp"

namespace strux::cpu {

// Modelled cost of a row in blocks of N: transforms of N log N plus about two passes per point
// (copies, product, gates).
double blocks_cost(int64_t L, int64_t m, int64_t N) {
  const int64_t S = N - m + 1, nb = (L + S - 1) / S;
  return double(nb) * double(N) * (std::log2(double(N)) + 2.0);
}

int64_t blocks_fft_size(int64_t L, int64_t m) {
  // The whole row is no candidate unless every block would reach it: the model undervalues
  // small transforms (in cache, powers of two), and whether blocks pay at all is the
  // automatic rule's call, from measurements.
  const int64_t whole = good_fft_size(L + m - 1);
  int64_t best = 0;
  for (int64_t f : {4, 8, 16}) {
    const int64_t N = std::min(good_fft_size(std::max(f * m, kBlocksMinFFT)), whole);
    if (best == 0 || blocks_cost(L, m, N) < blocks_cost(L, m, best)) best = N;
  }
  return best;
}

namespace {

// x[0, m - 1) = history before t = 0 (zeros, or v[L - m + 1, L) in circular mode; m <= L there),
// x[m - 1, m - 1 + L) = v = u ⊙ pre, x[m - 1 + L, n) = 0.
template <class T>
void load_frames(T* x, const T* u, const T* pre, int64_t L, int64_t m, bool circular, int64_t n) {
  load_history(x, u, pre, L, m, circular);
  std::fill(x + (m - 1) + L, x + n, T(0));
}

// g[0, L) = dz = dy ⊙ post; g[L, L + m - 1) = what follows t = L - 1 for the correlation: zeros
// (causal) or dz[0, m - 1) (circular); g[L + m - 1, n) = 0.
template <class T>
void load_dz(T* g, const T* dy, const T* post, int64_t L, int64_t m, bool circular, int64_t n) {
  load_future(g, dy, post, L, m, circular);
  std::fill(g + L + (m - 1), g + n, T(0));
}

// a[0, n) = v[t0, t0 + n) = (u ⊙ pre)[t0, t0 + n), a[n, N) = 0.
template <class T>
void load_block(T* a, const T* u, const T* pre, int64_t t0, int64_t n, int64_t N) {
  if (pre) {
    for (int64_t i = 0; i < n; ++i) a[i] = u[t0 + i] * pre[t0 + i];
  } else {
    std::memcpy(a, u + t0, sizeof(T) * size_t(n));
  }
  std::fill(a + n, a + N, T(0));
}

}  // namespace

template <class T>
void blocks_forward(const RealFFT<T>& fft, int64_t rows, int64_t H, int64_t L, int64_t m, bool circular,
                    const cplx<T>* K, int64_t cs, const T* u, const T* pre, const T* post, const T* skip, T* y) {
  const int64_t N = fft.n();
  const int64_t S = N - m + 1, nb = (L + S - 1) / S, nx = nb * S + m - 1, nfreq = N / 2 + 1;
  const int nth = num_threads();
  const ThreadScratch<T> sx(nth, nx), sa(nth, N);
  const ThreadScratch<cplx<T>> sf(nth, nfreq);
#pragma omp parallel num_threads(nth) if (rows > 1)
  {
    T* x = sx.mine();
    const AlignedView<T> a{sa.mine()};
    const AlignedView<cplx<T>> X{sf.mine()};
#pragma omp for schedule(dynamic)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t h = r % H, o = r * L;
      const T* ur = u + o;
      const T* pr = pre ? pre + o : nullptr;
      const T* po = post ? post + o : nullptr;
      T* yr = y + o;
      const cplx<T>* Kh = K + h * cs;
      load_frames(x, ur, pr, L, m, circular, nx);
      const T* v = x + (m - 1);
      for (int64_t t0 = 0; t0 < L; t0 += S) {
        // Frame x[t0, t0 + N) = v[t0 - m + 1, t0 + S): copied so FFTW gets its aligned buffer.
        std::memcpy(a.data(), x + t0, sizeof(T) * size_t(N));
        fft.forward(a.data(), X.data());
        spec_mul(X.data(), Kh, nfreq);
        fft.inverse(X.data(), a.data());
        const T* c = a.data() + (m - 1);  // outputs t0 .. t0 + S - 1, past the wrapped part
        const int64_t n = std::min(S, L - t0);
        if (skip) {
          const T sk = skip[h];
          for (int64_t q = 0; q < n; ++q) yr[t0 + q] = c[q] + sk * v[t0 + q];
        } else {
          std::memcpy(yr + t0, c, sizeof(T) * size_t(n));
        }
        if (po)
          for (int64_t q = 0; q < n; ++q) yr[t0 + q] *= po[t0 + q];
      }
    }
  }
}

template <class T>
void blocks_backward(const RealFFT<T>& fft, int64_t B, int64_t H, int64_t L, int64_t m, int64_t Lk, bool circular,
                     const cplx<T>* K, int64_t cs, const T* dy, const T* u, const T* pre, const T* post,
                     const T* skip, T* du, T* dk, T* dpre, T* dpost, T* dskip) {
  const int64_t N = fft.n();
  const int64_t S = N - m + 1, nb = (L + S - 1) / S, ng = nb * S + m - 1, nfreq = N / 2 + 1;
  const int nth = num_threads();
  const int64_t nchunk = backward_chunks(B, H);  // fixes the summation order of dk, not nth
  const int64_t ntask = H * nchunk;
  if (!pre) dpre = nullptr;
  if (!post) dpost = nullptr;
  AlignedBuffer<cplx<T>> acc(ntask * cs);
  std::vector<double> skip_part(size_t(skip ? ntask : 0), 0.0);
  const ThreadScratch<T> sg(nth, ng), sz(nth, dpost ? ng : 1), sa(nth, N);
  const ThreadScratch<cplx<T>> sv(nth, nfreq), sw(nth, nfreq);
  const T scale = T(1) / T(N);
#pragma omp parallel num_threads(nth) if (ntask > 1)
  {
    T* g = sg.mine();
    T* z = sz.mine();
    const AlignedView<T> a{sa.mine()};
    const AlignedView<cplx<T>> V{sv.mine()}, W{sw.mine()};
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < ntask; ++task) {
      const int64_t h = task / nchunk, chunk = task % nchunk;
      const int64_t b0 = chunk * B / nchunk, b1 = (chunk + 1) * B / nchunk;
      const cplx<T>* Kh = K + h * cs;
      cplx<T>* A = acc.data() + task * cs;
      std::fill(A, A + nfreq, cplx<T>(0));
      const T sk = skip ? skip[h] : T(0);
      double ssum = 0.0;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t o = (b * H + h) * L;
        const T* ur = u + o;
        const T* pr = pre ? pre + o : nullptr;
        const T* po = post ? post + o : nullptr;
        const T* dyr = dy + o;
        const bool want_z = po && dpost;
        load_dz(g, dyr, po, L, m, circular, ng);
        if (want_z) std::fill(z, z + ng, T(0));
        for (int64_t t0 = 0; t0 < L; t0 += S) {
          const int64_t n = std::min(S, L - t0);
          load_block(a.data(), ur, pr, t0, n, N);  // V = rfft(v block, zero-padded)
          fft.forward(a.data(), V.data());
          if (want_z) {  // overlap-add of the block's linear convolution (N = S + m - 1 outputs)
            spec_mul_to(W.data(), V.data(), Kh, nfreq);
            fft.inverse(W.data(), a.data());
            for (int64_t i = 0; i < N; ++i) z[t0 + i] += a[i];
          }
          std::memcpy(a.data(), g + t0, sizeof(T) * size_t(N));  // DZ = rfft(dz[t0, t0 + N))
          fft.forward(a.data(), W.data());
          spec_mac_conj(A, W.data(), V.data(), nfreq);  // dk: Σ DZ conj(V)
          spec_mul_conj(W.data(), Kh, nfreq);            // dv: DZ conj(K) / N
          fft.inverse(W.data(), a.data());
          row_store_dv(du + o + t0, dpre ? dpre + o + t0 : nullptr, a.data(), dyr + t0, ur + t0,
                       pr ? pr + t0 : nullptr, po ? po + t0 : nullptr, skip != nullptr, sk, n, ssum);
        }
        if (want_z) {
          // Circular: the linear convolution's tail past L wraps onto its start.
          if (circular)
            for (int64_t t = 0; t < m - 1; ++t) z[t] += z[L + t];
          row_dpost(dpost + o, dyr, z, ur, pr, sk, L);
        }
      }
      if (skip) skip_part[size_t(task)] = ssum;
    }
    // Reduce the chunks of each h in chunk order and transform back: dk[h, s] for s < m.
#pragma omp for schedule(static)
    for (int64_t h = 0; h < H; ++h) {
      cplx<T>* A0 = acc.data() + h * nchunk * cs;
      for (int64_t ch = 1; ch < nchunk; ++ch) spec_add(A0, A0 + ch * cs, nfreq);
      fft.inverse(A0, a.data());
      T* dkr = dk + h * Lk;
      for (int64_t s = 0; s < m; ++s) dkr[s] = a[s] * scale;
      std::fill(dkr + m, dkr + Lk, T(0));  // causal taps s >= L never reach an output
    }
  }
  if (skip && dskip) {
    for (int64_t h = 0; h < H; ++h) {
      double s = 0.0;
      for (int64_t ch = 0; ch < nchunk; ++ch) s += skip_part[size_t(h * nchunk + ch)];
      dskip[h] = T(s);
    }
  }
}

#define STRUX_BLOCKS(T)                                                                                 \
  template void blocks_forward<T>(const RealFFT<T>&, int64_t, int64_t, int64_t, int64_t, bool, const cplx<T>*, \
                                  int64_t, const T*, const T*, const T*, const T*, T*);                       \
  template void blocks_backward<T>(const RealFFT<T>&, int64_t, int64_t, int64_t, int64_t, int64_t, bool,      \
                                   const cplx<T>*, int64_t, const T*, const T*, const T*, const T*, const T*,  \
                                   T*, T*, T*, T*, T*);
STRUX_BLOCKS(float)
STRUX_BLOCKS(double)
#undef STRUX_BLOCKS

}  // namespace strux::cpu
