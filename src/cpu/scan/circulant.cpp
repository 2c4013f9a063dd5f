// Circulant scan h_t = circ(a_t) h_{t-1} + u_t through the real DFT along n.
//
// rfft diagonalises every circ(a_t) at once (circ(a) x = a (*) x, cyclic convolution), so the
// recurrence becomes n/2 + 1 independent complex diagonal recurrences
//   H_t = A_t H_{t-1} + U_t,  A_t = rfft(a_t), U_t = rfft(u_t), H_{-1} = rfft(h0),
// run by the diagonal-scan kernels on the padded spectra, then h_t = irfft(H_t) / n.
// Backward, with G_t = rfft(g_t), D_t = rfft(dh_t): G_t = D_t + conj(A_{t+1}) G_{t+1}
// (circ(a)^T = circ(reversed a) has spectrum conj(A)), du_t = irfft(G_t) / n,
// dh0 = irfft(conj(A_0) G_0) / n, and da_t[m] = sum_i g_t[i] h_{t-1}[i - m] (a cyclic
// cross-correlation) = irfft(G_t conj(H_{t-1})) / n. That is exactly the complex diagonal
// backward pass with (dh, a, b, h0) = (D, A, U, H_{-1}), so it is reused as is.
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
CirculantScan<R>::CirculantScan(int64_t B, int64_t T_, int64_t n) : B_(B), T_(T_), n_(n) {
  check_positive(B, "B");
  check_positive(T_, "T");
  check_positive(n, "n");
  nfs_ = kern::padded_stride<R>(n / 2 + 1);
  fft_ = RealFFT<R>::get(n);
}

namespace {
// Copies a user half spectrum (rows of nf) into padded rows, dropping the imaginary parts at
// frequency 0 and n/2 (even n): the Fourier form means circ(irfft(a_hat, n)), as numpy's irfft.
template <class R>
void load_half_spectrum(const std::complex<R>* a_hat, int64_t rows, int64_t n, int64_t nfs,
                        std::complex<R>* dst) {
  const int64_t nf = n / 2 + 1;
#pragma omp parallel for schedule(static) num_threads(cpu::num_threads())
  for (int64_t r = 0; r < rows; ++r) {
    const std::complex<R>* s = a_hat + r * nf;
    std::complex<R>* d = dst + r * nfs;
    for (int64_t f = 0; f < nf; ++f) d[f] = s[f];
    for (int64_t f = nf; f < nfs; ++f) d[f] = 0;
    d[0].imag(0);
    if (n % 2 == 0) d[nf - 1].imag(0);
  }
}
}  // namespace

template <class R>
template <bool Fourier, class A>
void CirculantScan<R>::run_forward(const A* a, const R* u, const R* h0, R* h) const {
  check_arg(a && u && h, "h", "expected non-null a, u and h");
  const int64_t rows = B_ * T_, n = n_, nfs = nfs_;
  const RealFFT<R>& fft = *fft_;
  AlignedBuffer<C> Ah(rows * nfs), Hh(rows * nfs), H0(h0 ? B_ * nfs : 0);
  if constexpr (Fourier) {
    load_half_spectrum<R>(a, rows, n, nfs, Ah.data());
  } else {
    kern::rfft_rows(fft, rows, nfs, Ah.data(), [&](int64_t r, R* x) { kern::copy_add<R>(a + r * n, nullptr, x, n); });
  }
  kern::rfft_rows(fft, rows, nfs, Hh.data(), [&](int64_t r, R* x) { kern::copy_add<R>(u + r * n, nullptr, x, n); });
  if (h0)
    kern::rfft_rows(fft, B_, nfs, H0.data(), [&](int64_t r, R* x) { kern::copy_add<R>(h0 + r * n, nullptr, x, n); });
  kern::diag_forward<C>(B_, T_, nfs, Ah.data(), Hh.data(), h0 ? H0.data() : nullptr, Hh.data());
  const R scale = R(1) / R(n);
  kern::irfft_rows(fft, rows, nfs, Hh.data(), [&](int64_t r, const R* x) {
    R* y = h + r * n;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  });
}

template <class R>
template <bool Fourier, class A, class DA>
void CirculantScan<R>::run_backward(const R* dh, const R* dh_last, const A* a, const R* u,
                                    const R* h0, DA* da, R* du, R* dh0) const {
  check_arg(dh && a && u && da && du, "dh", "expected non-null dh, a, u, da and du");
  const int64_t rows = B_ * T_, n = n_, nfs = nfs_, nf = n / 2 + 1, TT = T_;
  const RealFFT<R>& fft = *fft_;
  AlignedBuffer<C> Ah(rows * nfs), Uh(rows * nfs), G(rows * nfs), X(rows * nfs);
  AlignedBuffer<C> H0(h0 ? B_ * nfs : 0), dH0(dh0 ? B_ * nfs : 0);
  if constexpr (Fourier) {
    load_half_spectrum<R>(a, rows, n, nfs, Ah.data());
  } else {
    kern::rfft_rows(fft, rows, nfs, Ah.data(), [&](int64_t r, R* x) { kern::copy_add<R>(a + r * n, nullptr, x, n); });
  }
  kern::rfft_rows(fft, rows, nfs, Uh.data(), [&](int64_t r, R* x) { kern::copy_add<R>(u + r * n, nullptr, x, n); });
  if (h0)
    kern::rfft_rows(fft, B_, nfs, H0.data(), [&](int64_t r, R* x) { kern::copy_add<R>(h0 + r * n, nullptr, x, n); });
  kern::rfft_rows(fft, rows, nfs, G.data(), [&](int64_t r, R* x) {
    const R* last = (dh_last && r % TT == TT - 1) ? dh_last + (r / TT) * n : nullptr;
    kern::copy_add<R>(dh + r * n, last, x, n);
  });
  // G: D in, G out (in place); X = G conj(H_{t-1}); dH0 = conj(A_0) G_0.
  kern::diag_backward<C>(B_, T_, nfs, G.data(), nullptr, Ah.data(), Uh.data(),
                       h0 ? H0.data() : nullptr, X.data(), G.data(), dh0 ? dH0.data() : nullptr);
  const R scale = R(1) / R(n);
  auto store_to = [&](R* out) {
    return [out, n, scale](int64_t r, const R* x) {
      R* y = out + r * n;
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    };
  };
  kern::irfft_rows(fft, rows, nfs, G.data(), store_to(du));
  if (dh0) kern::irfft_rows(fft, B_, nfs, dH0.data(), store_to(dh0));
  if constexpr (Fourier) {
    // dL/dRe + i dL/dIm of a_hat: a = irfft(a_hat) puts 2/n on interior frequencies, 1/n on the
    // real parts at 0 and n/2, and ignores those imaginary parts (see the header).
    const R two = R(2) / R(n), one = R(1) / R(n);
#pragma omp parallel for schedule(static) num_threads(cpu::num_threads())
    for (int64_t r = 0; r < rows; ++r) {
      const C* x = X.data() + r * nfs;
      C* y = da + r * nf;
      for (int64_t f = 0; f < nf; ++f) y[f] = x[f] * two;
      y[0] = C(x[0].real() * one, 0);
      if (n % 2 == 0) y[nf - 1] = C(x[nf - 1].real() * one, 0);
    }
  } else {
    kern::irfft_rows(fft, rows, nfs, X.data(), store_to(da));
  }
}

template <class R>
void CirculantScan<R>::forward(const R* a, const R* u, const R* h0, R* h) const {
  run_forward<false>(a, u, h0, h);
}
template <class R>
void CirculantScan<R>::forward_fourier(const C* a_hat, const R* u, const R* h0, R* h) const {
  run_forward<true>(a_hat, u, h0, h);
}
template <class R>
void CirculantScan<R>::backward(const R* dh, const R* dh_last, const R* a, const R* u, const R* h0,
                                R* da, R* du, R* dh0) const {
  run_backward<false>(dh, dh_last, a, u, h0, da, du, dh0);
}
template <class R>
void CirculantScan<R>::backward_fourier(const R* dh, const R* dh_last, const C* a_hat, const R* u,
                                        const R* h0, C* da_hat, R* du, R* dh0) const {
  run_backward<true>(dh, dh_last, a_hat, u, h0, da_hat, du, dh0);
}

template class CirculantScan<float>;
template class CirculantScan<double>;

}  // namespace strux
