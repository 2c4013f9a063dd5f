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
#include "cpu/fftconv/blocks.hpp"
#include "cpu/fftconv/direct.hpp"
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

ConvSolver parse_conv_solver(const std::string& solver) {
  if (solver.empty() || solver == "automatic") return ConvSolver::Automatic;
  if (solver == "fft") return ConvSolver::FFT;
  if (solver == "direct") return ConvSolver::Direct;
  if (solver == "blocks") return ConvSolver::Blocks;
  throw ValueError(
      msg("argument 'solver': expected '' (automatic), 'fft', 'direct' or 'blocks', got '", solver, "'"));
}

const char* conv_solver_name(ConvSolver solver) {
  switch (solver) {
    case ConvSolver::FFT: return "fft";
    case ConvSolver::Direct: return "direct";
    case ConvSolver::Blocks: return "blocks";
    default: return "automatic";
  }
}

namespace {

// The automatic rule's choice of the blocks solver over one transform of the row, for m taps
// used (> kDirectAutoTaps): rows of at least kBlocksAutoMinLength whose block transform is at
// most 1/kBlocksAutoRatio of the whole row's (bench/NOTES-cpu.md "fftconv-blocks").
bool blocks_pay(int64_t L, int64_t m, ConvMode mode) {
  if (L < kBlocksAutoMinLength) return false;
  const int64_t whole = mode == ConvMode::Causal ? cpu::good_fft_size(L + m - 1) : L;
  return kBlocksAutoRatio * cpu::blocks_fft_size(L, m) <= whole;
}

}  // namespace

template <class T>
struct FFTConvPlan<T>::Impl {
  int64_t H, L, Lk, Lk_used, nfft, nfreq;
  int64_t cs;  // stride of spectra stored back to back: nfreq rounded up to 8 (64 bytes)
  ConvMode mode;
  bool direct;
  bool blocks;  // nfft is then the block transform size (blocks.hpp)
  std::shared_ptr<const RealFFT<T>> fft;
  AlignedBuffer<cplx<T>> K;  // (H, cs), scaled by 1/nfft (FFT and blocks solvers)
  AlignedBuffer<T> taps;     // (H, Lk_used) (direct solver)
};

template <class T>
FFTConvPlan<T>::FFTConvPlan(int64_t B, int64_t H, int64_t L, const T* k, int64_t Lk, ConvMode mode,
                            ConvSolver solver)
    : B_(B) {
  check_positive(B, "B");
  check_positive(H, "H");
  check_positive(L, "L");
  check_positive(Lk, "k");
  check_arg(k != nullptr, "k", "expected a filter pointer, got null");
  // u, y (B, H, L) and k (H, Lk) must be addressable: their byte counts fit int64.
  checked_count("B", {B, H, L, int64_t(sizeof(T))});
  checked_count("k", {H, Lk, int64_t(sizeof(T))});
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
  if (solver == ConvSolver::Direct)
    check_arg(p->Lk_used <= kDirectMaxTaps, "solver", "'direct' takes at most ", kDirectMaxTaps,
              " taps used (causal min(Lk, L), circular Lk), got ", p->Lk_used);
  p->direct = solver == ConvSolver::Direct || (solver == ConvSolver::Automatic && p->Lk_used <= kDirectAutoTaps);
  p->blocks = !p->direct && (solver == ConvSolver::Blocks ||
                             (solver == ConvSolver::Automatic && blocks_pay(L, p->Lk_used, mode)));
  if (p->direct) {  // keeps the taps: no transform, no spectrum
    p->nfft = p->nfreq = p->cs = 0;
    p->taps = AlignedBuffer<T>(checked_bytes("k", {H, p->Lk_used}, sizeof(T)) / int64_t(sizeof(T)));
    for (int64_t h = 0; h < H; ++h) std::copy(k + h * Lk, k + h * Lk + p->Lk_used, p->taps.data() + h * p->Lk_used);
    impl_ = std::move(p);
    return;
  }
  if (p->blocks) {
    p->nfft = cpu::blocks_fft_size(L, p->Lk_used);
    check_arg(p->nfft <= INT32_MAX, "L", "expected a block FFT length of at most 2^31-1, got ", p->nfft);
  } else {
    p->nfft = mode == ConvMode::Causal ? cpu::good_fft_size(L + p->Lk_used - 1) : L;
  }
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
  checked_count("B", {B, impl_->H, impl_->L, int64_t(sizeof(T))});
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
template <class T> ConvSolver FFTConvPlan<T>::solver() const {
  return impl_->direct ? ConvSolver::Direct : impl_->blocks ? ConvSolver::Blocks : ConvSolver::FFT;
}
template <class T> const std::complex<T>* FFTConvPlan<T>::filter_spectrum() const {
  return impl_->direct ? nullptr : impl_->K.data();
}

template <class T>
void FFTConvPlan<T>::forward(const T* u, const T* pre, const T* post, const T* skip, T* y) const {
  check_arg(u != nullptr, "u", "expected an input pointer, got null");
  check_arg(y != nullptr, "y", "expected an output pointer, got null");
  check_arg(y != u && y != pre && y != post, "y", "may not alias u, pregate or postgate");
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const Impl& c = *impl_;
  if (c.direct) {
    cpu::direct_forward(B_ * c.H, c.H, c.L, c.Lk_used, c.mode == ConvMode::Circular, c.taps.data(), u, pre, post,
                        skip, y);
    return;
  }
  if (c.blocks) {
    cpu::blocks_forward(*c.fft, B_ * c.H, c.H, c.L, c.Lk_used, c.mode == ConvMode::Circular, c.K.data(), c.cs, u,
                        pre, post, skip, y);
    return;
  }
  const int64_t cs = c.cs, nfreq = c.nfreq;
  const cplx<T>* K = c.K.data();
  cpu::rows_forward(*c.fft, B_ * c.H, c.H, c.L, c.nfft, u, pre, post, skip, y,
                    [=](cplx<T>* X, int64_t h) { cpu::spec_mul(X, K + h * cs, nfreq); });
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
  if (c.direct) {
    cpu::direct_backward(B_, c.H, c.L, c.Lk_used, c.Lk, c.mode == ConvMode::Circular, c.taps.data(), dy, u, pre,
                         post, skip, du, dk, dpre, dpost, dskip);
    return;
  }
  if (c.blocks) {
    cpu::blocks_backward(*c.fft, B_, c.H, c.L, c.Lk_used, c.Lk, c.mode == ConvMode::Circular, c.K.data(), c.cs, dy,
                         u, pre, post, skip, du, dk, dpre, dpost, dskip);
    return;
  }
  const int64_t H = c.H, nfft = c.nfft, nfreq = c.nfreq, cs = c.cs;
  const int64_t nchunk = cpu::backward_chunks(B_, H);  // fixes the summation order of dk, not nth
  AlignedBuffer<cplx<T>> acc(H * nchunk * cs);
  const cplx<T>* K = c.K.data();
  const RealFFT<T>& fft = *c.fft;
  const T scale = T(1) / T(nfft);
  cpu::rows_backward(
      fft, B_, H, c.L, nfft, nchunk, dy, u, pre, post, skip, du, dpre, dpost, dskip, acc.data(), cs, nfreq,
      [=](cplx<T>* W, const cplx<T>* V, int64_t h) { cpu::spec_mul_to(W, V, K + h * cs, nfreq); },
      [=](cplx<T>* A, cplx<T>* W, const cplx<T>* V, int64_t h) {
        cpu::spec_mac_conj(A, W, V, nfreq);        // dk: Σ DZ conj(V)
        cpu::spec_mul_conj(W, K + h * cs, nfreq);  // dv: DZ conj(K) / nfft
      },
      // Reduce the chunks of each h and transform back: dk[h, s] for s < Lk_used.
      [&](int64_t h, T* a) {
        cplx<T>* A0 = acc.data() + h * nchunk * cs;
        for (int64_t ch = 1; ch < nchunk; ++ch) cpu::spec_add(A0, A0 + ch * cs, nfreq);
        fft.inverse(A0, a);
        T* dkr = dk + h * c.Lk;
        for (int64_t s = 0; s < c.Lk_used; ++s) dkr[s] = a[s] * scale;
        std::fill(dkr + c.Lk_used, dkr + c.Lk, T(0));  // taps s >= L never reach an output
      });
}

template class FFTConvPlan<float>;
template class FFTConvPlan<double>;

}  // namespace strux
