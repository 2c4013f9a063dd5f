// Block-circulant scan: A_t is a p x p grid of k x k circulant blocks, block (i, j) = circ(a_t[i, j]).
//
// The real DFT along k diagonalises every block at once, so per frequency f the recurrence
// is a p x p complex matrix-vector one:
//   H_t[i, f] = sum_j A_t[i, j, f] H_{t-1}[j, f] + U_t[i, f],   A = rfft(a) along k.
// Spectra are stored (B, T, p, p, kfs) and (B, T, p, kfs) with frequency innermost, so the
// p x p products run as unit-stride element-wise updates over a chunk of frequencies; OpenMP
// splits (batch, frequency chunk).
// Backward (G_t = rfft(g_t)): G_t[j] = D_t[j] + sum_i conj(A_{t+1}[i, j]) G_{t+1}[i]
// (the adjoint: blocks transposed and each circ^T is conj in frequency), du = irfft(G) / k,
// da_t[i, j] = irfft(G_t[i] conj(H_{t-1}[j])) / k, dh0[j] = irfft(sum_i conj(A_0[i, j]) G_0[i]) / k.
// The da spectrum of step t+1 is written over A_{t+1} as soon as G_t has used it, so the
// backward pass needs no buffer beyond the forward one plus G.
#include <algorithm>
#include <complex>

#include "cpu/fft.hpp"
#include "cpu/scan/kernels.hpp"
#include "cpu/scan/spectra.hpp"
#include "strux/core.hpp"
#include "strux/scan.hpp"

namespace strux {

using cpu::AlignedBuffer;
using cpu::RealFFT;
namespace kern = cpu::scan;

template <class R>
BlockCirculantScan<R>::BlockCirculantScan(int64_t B, int64_t T_, int64_t p, int64_t k)
    : B_(B), T_(T_), p_(p), k_(k) {
  check_positive(B, "B");
  check_positive(T_, "T");
  check_positive(p, "p");
  check_positive(k, "k");
  kfs_ = kern::padded_stride<R>(k / 2 + 1);
  fft_ = RealFFT<R>::get(k);
}

namespace {

template <class R>
struct Spectra {
  int64_t B, nt, p, kfs;
  std::complex<R>* A;  // (B, T, p, p, kfs)
  std::complex<R>* H;  // (B, T, p, kfs)
  const std::complex<R>* H0;  // (B, p, kfs) or null
  std::complex<R>* a(int64_t b, int64_t t, int64_t i, int64_t j) const {
    return A + (((b * nt + t) * p + i) * p + j) * kfs;
  }
  std::complex<R>* h(int64_t b, int64_t t, int64_t i) const { return H + ((b * nt + t) * p + i) * kfs; }
};

// H (holding U on entry) becomes the scanned state spectra.
template <class R>
void block_forward_scan(const Spectra<R>& s) {
  using C = std::complex<R>;
  const int64_t chunk = kern::scan_chunk(s.B, s.kfs), nch = (s.kfs + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) num_threads(cpu::num_threads())
  for (int64_t task = 0; task < s.B * nch; ++task) {
    const int64_t b = task / nch, f0 = (task % nch) * chunk, len = std::min(chunk, s.kfs - f0);
    for (int64_t t = 0; t < s.nt; ++t) {
      if (t == 0 && !s.H0) continue;  // h_{-1} = 0: H_0 = U_0
      for (int64_t i = 0; i < s.p; ++i) {
        C* y = s.h(b, t, i) + f0;
        for (int64_t j = 0; j < s.p; ++j) {
          const C* x = (t == 0 ? s.H0 + (b * s.p + j) * s.kfs : s.h(b, t - 1, j)) + f0;
          kern::fma_inplace(s.a(b, t, i, j) + f0, x, y, len);
        }
      }
    }
  }
}

// G: D on entry, G on exit. A: overwritten by the da spectra X. dH0: conj(A_0)^T G_0 or null.
template <class R>
void block_backward_scan(const Spectra<R>& s, std::complex<R>* Gbuf, std::complex<R>* dH0) {
  using C = std::complex<R>;
  const int64_t chunk = kern::scan_chunk(s.B, s.kfs), nch = (s.kfs + chunk - 1) / chunk;
  const int64_t p = s.p, kfs = s.kfs;
  auto g = [&](int64_t b, int64_t t, int64_t i) { return Gbuf + ((b * s.nt + t) * p + i) * kfs; };
#pragma omp parallel for schedule(static) num_threads(cpu::num_threads())
  for (int64_t task = 0; task < s.B * nch; ++task) {
    const int64_t b = task / nch, f0 = (task % nch) * chunk, len = std::min(chunk, kfs - f0);
    for (int64_t t = s.nt - 2; t >= 0; --t) {
      // G_t += A_{t+1}^H G_{t+1}
      for (int64_t j = 0; j < p; ++j)
        for (int64_t i = 0; i < p; ++i)
          kern::conj_fma_inplace(s.a(b, t + 1, i, j) + f0, g(b, t + 1, i) + f0, g(b, t, j) + f0, len);
      // A_{t+1} is no longer needed: X_{t+1}[i, j] = G_{t+1}[i] conj(H_t[j]) takes its place.
      for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < p; ++j)
          kern::mul_conj(g(b, t + 1, i) + f0, s.h(b, t, j) + f0, s.a(b, t + 1, i, j) + f0, len);
    }
    if (dH0) {
      for (int64_t j = 0; j < p; ++j) {
        C* y = dH0 + (b * p + j) * kfs + f0;
        kern::fill_zero(y, len);
        for (int64_t i = 0; i < p; ++i) kern::conj_fma_inplace(s.a(b, 0, i, j) + f0, g(b, 0, i) + f0, y, len);
      }
    }
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < p; ++j) {
        if (s.H0)
          kern::mul_conj(g(b, 0, i) + f0, s.H0 + (b * p + j) * kfs + f0, s.a(b, 0, i, j) + f0, len);
        else
          kern::fill_zero(s.a(b, 0, i, j) + f0, len);
      }
  }
}

}  // namespace

template <class R>
void BlockCirculantScan<R>::forward(const R* a, const R* u, const R* h0, R* h) const {
  check_arg(a && u && h, "h", "expected non-null a, u and h");
  const int64_t k = k_, p = p_, kfs = kfs_, rows = B_ * T_ * p;
  const RealFFT<R>& fft = *fft_;
  AlignedBuffer<C> Ah(rows * p * kfs), Hh(rows * kfs), H0(h0 ? B_ * p * kfs : 0);
  auto rows_of = [k](const R* src) {
    return [src, k](int64_t r, R* x) { kern::copy_add<R>(src + r * k, nullptr, x, k); };
  };
  kern::rfft_rows(fft, rows * p, kfs, Ah.data(), rows_of(a));
  kern::rfft_rows(fft, rows, kfs, Hh.data(), rows_of(u));
  if (h0) kern::rfft_rows(fft, B_ * p, kfs, H0.data(), rows_of(h0));
  block_forward_scan(Spectra<R>{B_, T_, p, kfs, Ah.data(), Hh.data(), h0 ? H0.data() : nullptr});
  const R scale = R(1) / R(k);
  kern::irfft_rows(fft, rows, kfs, Hh.data(), [&](int64_t r, const R* x) {
    for (int64_t i = 0; i < k; ++i) h[r * k + i] = x[i] * scale;
  });
}

template <class R>
void BlockCirculantScan<R>::backward(const R* dh, const R* dh_last, const R* a, const R* u,
                                     const R* h0, R* da, R* du, R* dh0) const {
  check_arg(dh && a && u && da && du, "dh", "expected non-null dh, a, u, da and du");
  const int64_t k = k_, p = p_, kfs = kfs_, rows = B_ * T_ * p, TT = T_;
  const RealFFT<R>& fft = *fft_;
  AlignedBuffer<C> Ah(rows * p * kfs), Hh(rows * kfs), G(rows * kfs);
  AlignedBuffer<C> H0(h0 ? B_ * p * kfs : 0), dH0(dh0 ? B_ * p * kfs : 0);
  auto rows_of = [k](const R* src) {
    return [src, k](int64_t r, R* x) { kern::copy_add<R>(src + r * k, nullptr, x, k); };
  };
  kern::rfft_rows(fft, rows * p, kfs, Ah.data(), rows_of(a));
  kern::rfft_rows(fft, rows, kfs, Hh.data(), rows_of(u));
  if (h0) kern::rfft_rows(fft, B_ * p, kfs, H0.data(), rows_of(h0));
  // Row r of dh is (b, t, i) with r = (b*T + t)*p + i; dh_last adds to t = T-1.
  kern::rfft_rows(fft, rows, kfs, G.data(), [&](int64_t r, R* x) {
    const int64_t bt = r / p, b = bt / TT, t = bt % TT, i = r % p;
    const R* last = (dh_last && t == TT - 1) ? dh_last + (b * p + i) * k : nullptr;
    kern::copy_add<R>(dh + r * k, last, x, k);
  });
  const Spectra<R> s{B_, T_, p, kfs, Ah.data(), Hh.data(), h0 ? H0.data() : nullptr};
  block_forward_scan(s);
  block_backward_scan(s, G.data(), dh0 ? dH0.data() : nullptr);
  const R scale = R(1) / R(k);
  auto store_to = [k, scale](R* out) {
    return [out, k, scale](int64_t r, const R* x) {
      for (int64_t i = 0; i < k; ++i) out[r * k + i] = x[i] * scale;
    };
  };
  kern::irfft_rows(fft, rows, kfs, G.data(), store_to(du));
  kern::irfft_rows(fft, rows * p, kfs, Ah.data(), store_to(da));
  if (dh0) kern::irfft_rows(fft, B_ * p, kfs, dH0.data(), store_to(dh0));
}

template class BlockCirculantScan<float>;
template class BlockCirculantScan<double>;

}  // namespace strux
