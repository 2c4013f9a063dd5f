// CPU backend of fftconv_spectral: the filter given by its lowest m frequencies k_hat (H, m).
// The transform length is fixed by the contract: n = L (circular) or 2L (causal), any n
// (FFTW at exactly n). Per (b, h) row, as in fftconv.cpp: copy-in (pregate, zero padding) ->
// r2c -> product with the m given bins, zeros above -> c2r -> copy-out (skip, postgate).
//
// Scaling: FFTW's transforms are unnormalised, so the stored filter is k_hat / n (one inverse
// transform per row then gives irfft's 1/n). irfft reads only the real parts of bins 0 and n/2
// (n even); those imaginary parts are zeroed before every inverse transform, so the result
// never depends on how the FFT library treats them.
//
// Gradients (g = dz zero-padded to n, G = rfft(g), V = rfft(v)): irfft counts bin f with weight
// c_f / n (c_f = 1 for bins 0 and n/2, else 2: the Hermitian pair), so the gradient of the
// product Y = V ⊙ K̂ is (c_f / n) G_f (dL/dRe + i dL/dIm) and, Y being holomorphic in K̂,
//   dk_hat[h, f] = (c_f / n) Σ_b conj(V_f) G_f           f < m
//   dv = irfft(G ⊙ conj(K̂), n)[:L]
// (checked against torch autograd and finite differences in tests/python/test_fftconv_spectral.py).
#include <algorithm>
#include <vector>

#include "core/checked_size.hpp"
#include "cpu/fft.hpp"
#include "cpu/fftconv/rows.hpp"
#include "cpu/fftconv/spectral.hpp"
#include "cpu/thread_scratch.hpp"
#include "strux/core.hpp"
#include "strux/fftconv.hpp"

namespace strux {

using cpu::AlignedBuffer;
using cpu::cplx;
using cpu::RealFFT;

template <class T>
struct SpectralConvPlan<T>::Impl {
  int64_t H, L, m, n, nfreq;
  ConvMode mode;
  std::shared_ptr<const RealFFT<T>> fft;
  std::vector<cplx<T>> K;  // (H, m): k_hat / n
};

namespace {

// Bins [m, nfreq) to zero and the imaginary parts irfft drops (bins 0 and n/2) to zero.
template <class T>
void finish_spectrum(cplx<T>* X, int64_t m, int64_t nfreq, int64_t n) {
  std::fill(X + m, X + nfreq, cplx<T>(0));
  X[0].imag(T(0));
  if (n % 2 == 0) X[nfreq - 1].imag(T(0));
}

}  // namespace

template <class T>
SpectralConvPlan<T>::SpectralConvPlan(int64_t B, int64_t H, int64_t L, const std::complex<T>* k_hat, int64_t m,
                                      ConvMode mode)
    : B_(B) {
  check_positive(B, "B");
  check_positive(H, "H");
  check_positive(L, "L");
  check_positive(m, "k_hat");
  check_arg(k_hat != nullptr, "k_hat", "expected a filter pointer, got null");
  checked_count("B", {B, H, L, int64_t(sizeof(T))});  // u, y (B, H, L) must be addressable
  // FFTW takes 32-bit sizes; the contract fixes n, so no other length can stand in.
  check_arg(L <= (mode == ConvMode::Causal ? INT32_MAX / 2 : INT32_MAX), "L",
            "expected an FFT length n of at most 2^31-1 (n = L circular, 2L causal), got L = ", L, " (",
            conv_mode_name(mode), ")");
  const int64_t n = mode == ConvMode::Causal ? 2 * L : L;
  check_arg(m <= n / 2 + 1, "k_hat", "expected at most n/2 + 1 = ", n / 2 + 1, " frequencies (n = ", n, ", ",
            conv_mode_name(mode), " mode, L = ", L, "), got m = ", m);
  auto p = std::make_shared<Impl>();
  p->H = H;
  p->L = L;
  p->m = m;
  p->n = n;
  p->nfreq = n / 2 + 1;
  p->mode = mode;
  p->fft = RealFFT<T>::get(n);
  const int64_t count = checked_count("k_hat", {H, m});
  checked_bytes_of("k_hat", count, sizeof(cplx<T>));
  p->K.resize(size_t(count));
  const T scale = T(1) / T(n);
  for (int64_t i = 0; i < count; ++i) p->K[size_t(i)] = k_hat[i] * scale;
  impl_ = std::move(p);
}

template <class T>
SpectralConvPlan<T> SpectralConvPlan<T>::with_batch(int64_t B) const {
  check_positive(B, "B");
  checked_count("B", {B, impl_->H, impl_->L, int64_t(sizeof(T))});
  return SpectralConvPlan(impl_, B);
}

template <class T> int64_t SpectralConvPlan<T>::channels() const { return impl_->H; }
template <class T> int64_t SpectralConvPlan<T>::length() const { return impl_->L; }
template <class T> int64_t SpectralConvPlan<T>::bins() const { return impl_->m; }
template <class T> int64_t SpectralConvPlan<T>::nfft() const { return impl_->n; }
template <class T> int64_t SpectralConvPlan<T>::nfreq() const { return impl_->nfreq; }
template <class T> ConvMode SpectralConvPlan<T>::mode() const { return impl_->mode; }

template <class T>
void SpectralConvPlan<T>::forward(const T* u, const T* pre, const T* post, const T* skip, T* y) const {
  check_arg(u != nullptr, "u", "expected an input pointer, got null");
  check_arg(y != nullptr, "y", "expected an output pointer, got null");
  check_arg(y != u && y != pre && y != post, "y", "may not alias u, pregate or postgate");
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const Impl& c = *impl_;
  const int64_t n = c.n, nfreq = c.nfreq, m = c.m;
  const cplx<T>* K = c.K.data();
  cpu::rows_forward(*c.fft, B_ * c.H, c.H, c.L, n, u, pre, post, skip, y, [=](cplx<T>* X, int64_t h) {
    cpu::spec_mul(X, K + h * m, m);
    finish_spectrum(X, m, nfreq, n);
  });
}

// Backward per row, with z = irfft(V K̂)[:L] + skip v and dz = dy ⊙ postgate:
//   dpostgate = dy ⊙ z,  dv = irfft(DZ conj(K̂))[:L] + skip dz,  du = dv ⊙ pregate,
//   dpregate = dv ⊙ u,  dskip[h] = Σ_b Σ_t dz v,  dk_hat as in the file comment.
// The sum over b of dk_hat is split as in FFTConvPlan::backward: tasks (h, chunk of b), each
// accumulating Σ DZ conj(V) over the m bins into its own row, chunks fixed by
// cpu::partition_threads() so the summation order does not depend on the team that runs it.
template <class T>
void SpectralConvPlan<T>::backward(const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du,
                                   std::complex<T>* dk_hat, T* dpre, T* dpost, T* dskip) const {
  check_arg(dy != nullptr, "dy", "expected a cotangent pointer, got null");
  check_arg(u != nullptr, "u", "expected an input pointer, got null");
  check_arg(du != nullptr, "du", "expected an output pointer, got null");
  check_arg(dk_hat != nullptr, "dk_hat", "expected an output pointer, got null");
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const Impl& c = *impl_;
  const int64_t H = c.H, n = c.n, nfreq = c.nfreq, m = c.m;
  const int64_t nchunk = cpu::backward_chunks(B_, H);
  std::vector<cplx<T>> acc(size_t(checked_count("k_hat", {H * nchunk, m})));
  const cplx<T>* K = c.K.data();
  const T w1 = T(1) / T(n), w2 = T(2) / T(n);
  cpu::rows_backward(
      *c.fft, B_, H, c.L, n, nchunk, dy, u, pre, post, skip, du, dpre, dpost, dskip, acc.data(), m, m,
      [=](cplx<T>* W, const cplx<T>* V, int64_t h) {
        cpu::spec_mul_to(W, V, K + h * m, m);
        finish_spectrum(W, m, nfreq, n);
      },
      [=](cplx<T>* A, cplx<T>* W, const cplx<T>* V, int64_t h) {
        cpu::spec_mac_conj(A, W, V, m);       // dk_hat: Σ DZ conj(V)
        cpu::spec_mul_conj(W, K + h * m, m);  // dv: DZ conj(K̂) / n
        finish_spectrum(W, m, nfreq, n);
      },
      // Reduce the chunks of each h, weight each bin by c_f / n (the count irfft gives it).
      [&](int64_t h, T*) {
        const cplx<T>* A0 = acc.data() + h * nchunk * m;
        cplx<T>* dk = dk_hat + h * m;
        for (int64_t f = 0; f < m; ++f) {
          T re = A0[f].real(), im = A0[f].imag();
          for (int64_t ch = 1; ch < nchunk; ++ch) {
            re += A0[ch * m + f].real();
            im += A0[ch * m + f].imag();
          }
          const bool once = f == 0 || (n % 2 == 0 && f == n / 2);
          // Bins 0 and n/2 of real sequences are real: their imaginary part is exactly 0.
          dk[f] = once ? cplx<T>(re * w1, T(0)) : cplx<T>(re * w2, im * w2);
        }
      });
}

template class SpectralConvPlan<float>;
template class SpectralConvPlan<double>;

}  // namespace strux
