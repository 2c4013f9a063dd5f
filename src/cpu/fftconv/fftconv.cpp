// CPU backend of fftconv: one FFT row per (b, h), OpenMP over rows, per-thread buffers.
// Rows are handed out dynamically: they cost the same, but on a shared machine a thread
// that loses its core would otherwise hold a static share hostage (one row is ~10 µs of
// work, so the extra atomic per row is free).
//
// Every row goes copy-in (gate multiply + zero padding fused) -> r2c -> spectrum product ->
// c2r -> copy-out (skip and output gate fused), so each element of u, the gates and y is
// touched once per pass and nothing of size B*H*nfft is ever stored.
#include "strux/fftconv.hpp"

#include <algorithm>
#include <vector>

#include "cpu/fft.hpp"
#include "cpu/fftconv/rows.hpp"
#include "cpu/fftconv/spectral.hpp"
#include "cpu/thread_scratch.hpp"
#include "strux/core.hpp"

namespace strux {

using cpu::AlignedBuffer;
using cpu::cplx;
using cpu::RealFFT;

ConvMode parse_conv_mode(const std::string& mode) {
  if (mode == "causal") return ConvMode::Causal;
  if (mode == "circular") return ConvMode::Circular;
  throw ValueError(msg("argument 'mode': expected 'causal' or 'circular', got '", mode, "'"));
}

const char* conv_mode_name(ConvMode mode) { return mode == ConvMode::Causal ? "causal" : "circular"; }

template <class T>
struct FFTConvPlan<T>::Impl {
  int64_t H, L, Lk, Lk_used, nfft, nfreq;
  int64_t cs;  // stride of spectra stored back to back: nfreq rounded up to 8 (64 bytes)
  ConvMode mode;
  std::shared_ptr<const RealFFT<T>> fft;
  AlignedBuffer<cplx<T>> K;  // (H, cs), scaled by 1/nfft
};

template <class T>
FFTConvPlan<T>::FFTConvPlan(int64_t B, int64_t H, int64_t L, const T* k, int64_t Lk, ConvMode mode) : B_(B) {
  check_positive(B, "B");
  check_positive(H, "H");
  check_positive(L, "L");
  check_positive(Lk, "k");
  check_arg(k != nullptr, "k", "expected a filter pointer, got null");
  check_arg(mode == ConvMode::Causal || Lk <= L, "k",
            "circular mode needs a filter no longer than the sequence (Lk <= L), got Lk = ", Lk, ", L = ", L);
  // FFTW takes 32-bit sizes; checked before the smooth-size search so that a huge L fails at once.
  check_arg(L <= INT32_MAX && (mode == ConvMode::Circular || L + std::min(Lk, L) - 1 <= INT32_MAX), "L",
            "expected an FFT length of at most 2^31-1 (L, or L + min(Lk, L) - 1 in causal mode), got L = ", L,
            ", Lk = ", Lk);
  auto p = std::make_shared<Impl>();
  p->H = H;
  p->L = L;
  p->Lk = Lk;
  p->mode = mode;
  p->Lk_used = mode == ConvMode::Causal ? std::min(Lk, L) : Lk;
  p->nfft = mode == ConvMode::Causal ? cpu::good_fft_size(L + p->Lk_used - 1) : L;
  p->nfreq = p->nfft / 2 + 1;
  p->cs = cpu::spectrum_stride(p->nfreq);
  p->fft = RealFFT<T>::get(p->nfft);
  p->K = AlignedBuffer<cplx<T>>(checked_bytes("k", {H, p->cs}, sizeof(cplx<T>)) / int64_t(sizeof(cplx<T>)));

  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const Impl& c = *p;
  const T scale = T(1) / T(c.nfft);
  const int nth = cpu::num_threads();
  const cpu::ThreadScratch<T> sa(nth, c.nfft);
#pragma omp parallel num_threads(nth) if (H > 1)
  {
    T* a = sa.mine();
#pragma omp for schedule(dynamic)
    for (int64_t h = 0; h < H; ++h) {
      const T* kr = k + h * Lk;
      // Prescaling by 1/nfft here folds the inverse FFT's normalisation into the product.
      for (int64_t s = 0; s < c.Lk_used; ++s) a[s] = kr[s] * scale;
      std::fill(a + c.Lk_used, a + c.nfft, T(0));
      c.fft->forward(a, c.K.data() + h * c.cs);
    }
  }
  impl_ = std::move(p);
}

template <class T>
FFTConvPlan<T> FFTConvPlan<T>::with_batch(int64_t B) const {
  check_positive(B, "B");
  return FFTConvPlan(impl_, B);
}

template <class T> int64_t FFTConvPlan<T>::channels() const { return impl_->H; }
template <class T> int64_t FFTConvPlan<T>::length() const { return impl_->L; }
template <class T> int64_t FFTConvPlan<T>::filter_length() const { return impl_->Lk; }
template <class T> int64_t FFTConvPlan<T>::taps_used() const { return impl_->Lk_used; }
template <class T> int64_t FFTConvPlan<T>::nfft() const { return impl_->nfft; }
template <class T> int64_t FFTConvPlan<T>::nfreq() const { return impl_->nfreq; }
template <class T> int64_t FFTConvPlan<T>::spectrum_stride() const { return impl_->cs; }
template <class T> ConvMode FFTConvPlan<T>::mode() const { return impl_->mode; }
template <class T> const std::complex<T>* FFTConvPlan<T>::filter_spectrum() const { return impl_->K.data(); }

template <class T>
void FFTConvPlan<T>::forward(const T* u, const T* pre, const T* post, const T* skip, T* y) const {
  check_arg(u != nullptr, "u", "expected an input pointer, got null");
  check_arg(y != nullptr, "y", "expected an output pointer, got null");
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const Impl& c = *impl_;
  const int64_t L = c.L, nfft = c.nfft, nfreq = c.nfreq, H = c.H, rows = B_ * H;
  const int nth = cpu::num_threads();
  const cpu::ThreadScratch<T> sa(nth, nfft);
  const cpu::ThreadScratch<cplx<T>> sx(nth, nfreq);
#pragma omp parallel num_threads(nth) if (rows > 1)
  {
    const cpu::AlignedView<T> a{sa.mine()};
    const cpu::AlignedView<cplx<T>> X{sx.mine()};
#pragma omp for schedule(dynamic)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t h = r % H, o = r * L;
      const T* ur = u + o;
      const T* pr = pre ? pre + o : nullptr;
      cpu::row_load_v(a.data(), ur, pr, L, nfft);  // copy-in: v = u ⊙ pregate, zero-padded
      c.fft->forward(a.data(), X.data());
      cpu::spec_mul(X.data(), c.K.data() + h * c.cs, nfreq);
      c.fft->inverse(X.data(), a.data());
      // copy-out: the first L samples, plus skip ⊙ v, times postgate
      cpu::row_store_y(y + o, a.data(), ur, pr, post ? post + o : nullptr, skip ? skip + h : nullptr, L);
    }
  }
}

// Backward, per row with z = conv(k, v) + skip v (the pre-postgate output), dz = dy ⊙ postgate:
//   dpostgate = dy ⊙ z,   dv = corr(k, dz) + skip dz,   du = dv ⊙ pregate,   dpregate = dv ⊙ u,
//   dk[h, s] = Σ_b Σ_t dz[t] v[t - s],   dskip[h] = Σ_b Σ_t dz[t] v[t].
// corr(k, dz)[t] = Σ_s k[s] dz[t + s] is irfft(conj(K) · DZ); dk is irfft(Σ_b DZ · conj(V)).
// Zero padding to nfft >= L + Lk_used - 1 keeps both free of wrap-around in causal mode;
// in circular mode the wrap-around is the operator.
//
// The sum over b of dk is done in the frequency domain: work is split into tasks (h, chunk
// of b), each accumulating Σ DZ conj(V) into its own spectrum, so no two threads write the
// same memory; then one inverse FFT per h. With H >= threads there is one chunk per h
// ("threads" here is cpu::partition_threads(), so dk is the same whichever team runs it)
// (accumulator memory H*nfreq, as much as the filter spectrum); with fewer channels than
// threads the batch is cut into chunks so every thread has work.
template <class T>
void FFTConvPlan<T>::backward(const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du,
                              T* dk, T* dpre, T* dpost, T* dskip) const {
  check_arg(dy != nullptr, "dy", "expected a cotangent pointer, got null");
  check_arg(u != nullptr, "u", "expected an input pointer, got null");
  check_arg(du != nullptr, "du", "expected an output pointer, got null");
  check_arg(dk != nullptr, "dk", "expected an output pointer, got null");
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const Impl& c = *impl_;
  const int64_t B = B_, H = c.H, L = c.L, nfft = c.nfft, nfreq = c.nfreq, cs = c.cs;
  const int nth = cpu::num_threads();
  const int np = cpu::partition_threads();  // chunks fix the summation order of dk, not nth
  const int64_t nchunk = std::min<int64_t>(B, std::max<int64_t>(1, (np + H - 1) / H));
  const int64_t ntask = H * nchunk;
  AlignedBuffer<cplx<T>> acc(ntask * cs);
  std::vector<double> skip_part(size_t(skip ? ntask : 0), 0.0);
  if (!pre) dpre = nullptr;
  if (!post) dpost = nullptr;

  const cpu::ThreadScratch<T> sa(nth, nfft);
  const cpu::ThreadScratch<cplx<T>> sv(nth, nfreq), sw(nth, nfreq);
#pragma omp parallel num_threads(nth) if (ntask > 1)
  {
    const cpu::AlignedView<T> a{sa.mine()};
    const cpu::AlignedView<cplx<T>> V{sv.mine()}, W{sw.mine()};
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < ntask; ++task) {
      const int64_t h = task / nchunk, chunk = task % nchunk;
      const int64_t b0 = chunk * B / nchunk, b1 = (chunk + 1) * B / nchunk;
      const cplx<T>* Kh = c.K.data() + h * cs;
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
        cpu::row_load_v(a.data(), ur, pr, L, nfft);  // V = rfft(v)
        c.fft->forward(a.data(), V.data());
        // a = dz (zero-padded); with a postgate we need z first, for dpostgate.
        if (po && dpost) {
          cpu::spec_mul_to(W.data(), V.data(), Kh, nfreq);
          c.fft->inverse(W.data(), a.data());
          cpu::row_dpost(dpost + o, dyr, a.data(), ur, pr, sk, L);
        }
        cpu::row_load_dz(a.data(), dyr, po, L, nfft);
        c.fft->forward(a.data(), W.data());
        cpu::spec_mac_conj(A, W.data(), V.data(), nfreq);  // dk: Σ DZ conj(V)
        cpu::spec_mul_conj(W.data(), Kh, nfreq);           // dv: DZ conj(K) / nfft
        c.fft->inverse(W.data(), a.data());
        cpu::row_store_dv(du + o, dpre ? dpre + o : nullptr, a.data(), dyr, ur, pr, po, skip != nullptr, sk, L, ssum);
      }
      if (skip) skip_part[size_t(task)] = ssum;
    }

    // Reduce the chunks of each h and transform back: dk[h, s] for s < Lk_used.
    const T scale = T(1) / T(nfft);
#pragma omp for schedule(static)
    for (int64_t h = 0; h < H; ++h) {
      cplx<T>* A0 = acc.data() + h * nchunk * cs;
      for (int64_t ch = 1; ch < nchunk; ++ch) cpu::spec_add(A0, A0 + ch * cs, nfreq);
      c.fft->inverse(A0, a.data());
      T* dkr = dk + h * c.Lk;
      for (int64_t s = 0; s < c.Lk_used; ++s) dkr[s] = a[s] * scale;
      std::fill(dkr + c.Lk_used, dkr + c.Lk, T(0));  // taps s >= L never reach an output
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

template class FFTConvPlan<float>;
template class FFTConvPlan<double>;

}  // namespace strux
