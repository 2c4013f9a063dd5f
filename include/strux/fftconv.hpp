// fftconv: long depthwise convolution y = k * u over the last axis, causal or circular,
// with optional input gate, output gate and skip term (DESIGN.md, "fftconv").
//
//   v = u ⊙ pregate                                   (v = u without pregate)
//   causal:   y[b,h,t] = Σ_{s=0}^{min(t, Lk-1)} k[h,s] v[b,h,t-s]          t < L
//   circular: y[b,h,t] = Σ_{s=0}^{Lk-1} k[h,s] v[b,h,(t-s) mod L]          (Lk <= L)
//   y += skip[h] v;  y ⊙= postgate
//
// Shapes (row-major, C-contiguous): u, pregate, postgate, y: (B, H, L); k: (H, Lk); skip: (H,).
//
// Solvers. FFT: FFTW real transforms (the FFT size below). Direct (short filters, at most
// kDirectMaxTaps taps used): each output summed tap by tap, no transform; cost B·H·L·taps.
// Blocks (filters much shorter than the row): overlap-save over blocks, FFTs of a size N of a few
// times the taps used (src/cpu/fftconv/blocks.hpp), causal and circular.
// Automatic: Direct where taps used <= kDirectAutoTaps (bench/NOTES-cpu.md "fftconv-direct"),
// else Blocks where L >= kBlocksAutoMinLength and kBlocksAutoRatio·N <= nfft (bench/NOTES-cpu.md
// "fftconv-blocks"), else FFT.
//
// FFT size. Causal: taps s >= L never reach an output t < L, so only the first
// Lk_used = min(Lk, L) taps matter and a linear convolution of length L + Lk_used - 1 is
// enough: nfft = good_fft_size(L + Lk_used - 1) (never more than about 2L, often much less
// for short filters). Circular: nfft = L exactly (FFTW handles any length).
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>

namespace strux {

enum class ConvMode { Causal, Circular };

// "causal" / "circular" -> ConvMode; anything else is a ValueError naming 'mode'.
ConvMode parse_conv_mode(const std::string& mode);
const char* conv_mode_name(ConvMode mode);

enum class ConvSolver { Automatic, FFT, Direct, Blocks };
// The most taps (causal min(Lk, L), circular Lk) the direct solver takes, forced or automatic.
inline constexpr int64_t kDirectMaxTaps = 64;
// The automatic choice takes the direct solver up to this many taps used.
inline constexpr int64_t kDirectAutoTaps = 16;
// The automatic choice takes the blocks solver (more taps than kDirectAutoTaps) for rows of at
// least this length whose block FFT size N is at most 1/kBlocksAutoRatio of the FFT solver's nfft.
inline constexpr int64_t kBlocksAutoMinLength = 16384;
inline constexpr int64_t kBlocksAutoRatio = 8;
// "" / "automatic", "fft", "direct", "blocks" -> ConvSolver; anything else is a ValueError naming
// 'solver'.
ConvSolver parse_conv_solver(const std::string& solver);
// "fft" / "direct" / "blocks" ("automatic" for Automatic)
const char* conv_solver_name(ConvSolver solver);

// Plan for one (B, H, L, k, mode): owns the cached FFTW plans and the filter spectrum
// (H x nfreq, scaled by 1/nfft). Immutable after construction, so forward/backward may
// be called from several threads at once. Copies share the spectrum.
template <class T>
class FFTConvPlan {
 public:
  // k: (H, Lk) row-major; read during construction only. solver: Automatic (the rule above), FFT,
  // Direct (ValueError naming 'solver' when more than kDirectMaxTaps taps are used) or Blocks.
  FFTConvPlan(int64_t B, int64_t H, int64_t L, const T* k, int64_t Lk, ConvMode mode = ConvMode::Causal,
              ConvSolver solver = ConvSolver::Automatic);

  // The same filter for another batch size (shares the spectrum, no FFTs).
  FFTConvPlan with_batch(int64_t B) const;

  int64_t batch() const { return B_; }
  int64_t channels() const;
  int64_t length() const;
  int64_t filter_length() const;  // Lk as given
  int64_t taps_used() const;      // causal: min(Lk, L); circular: Lk
  ConvSolver solver() const;     // FFT, Direct or Blocks: what the plan runs
  int64_t nfft() const;           // 0 for the direct solver (no transform); blocks: the block size N
  int64_t nfreq() const;          // nfft / 2 + 1 (0 for the direct solver)
  int64_t spectrum_stride() const;  // row stride of filter_spectrum(), >= nfreq (alignment)
  ConvMode mode() const;
  // H rows (stride spectrum_stride()) of nfreq values: the half spectrum of the zero-padded
  // filter, already divided by nfft (null for the direct solver, which keeps the taps; at the
  // block size N for the blocks solver).
  const std::complex<T>* filter_spectrum() const;

  // y = conv(k, u ⊙ pregate) (+ skip ⊙ v) (⊙ postgate). Null pregate/postgate/skip = absent.
  // y may not alias u or a gate.
  void forward(const T* u, const T* pregate, const T* postgate, const T* skip, T* y) const;

  // Vector-Jacobian product of forward for the cotangent dy (B, H, L).
  // du (B, H, L) and dk (H, Lk) are written (taps s >= L get 0 in causal mode).
  // dpregate / dpostgate (B, H, L) and dskip (H,) are written when their input is given and
  // the pointer is not null; otherwise ignored. Outputs may not alias inputs.
  void backward(const T* dy, const T* u, const T* pregate, const T* postgate, const T* skip,
                T* du, T* dk, T* dpregate, T* dpostgate, T* dskip) const;

  struct Impl;

 private:
  FFTConvPlan(std::shared_ptr<const Impl> impl, int64_t B) : impl_(std::move(impl)), B_(B) {}
  std::shared_ptr<const Impl> impl_;
  int64_t B_;
};

extern template class FFTConvPlan<float>;
extern template class FFTConvPlan<double>;

// fftconv_spectral: the filter given by its lowest m frequencies (DESIGN.md, "fftconv"). With
// n = L (circular) or 2L (causal) and K̂ = k_hat zero-padded to n/2 + 1 bins (m <= n/2 + 1):
//   y = irfft(rfft(v, n) ⊙ K̂, n)[:L],  v = u ⊙ pregate;  y += skip[h] v;  y ⊙= postgate.
// irfft drops the imaginary parts of bins 0 and n/2 (n even), so those of k_hat have no effect.
// n is fixed by the contract (FFTW at exactly n, any n). Immutable after construction, so
// forward/backward may run from several threads at once. Copies share the stored filter.
template <class T>
class SpectralConvPlan {
 public:
  // k_hat: (H, m) complex row-major; read during construction only.
  SpectralConvPlan(int64_t B, int64_t H, int64_t L, const std::complex<T>* k_hat, int64_t m,
                   ConvMode mode = ConvMode::Causal);

  // The same filter for another batch size (shares it, no copies).
  SpectralConvPlan with_batch(int64_t B) const;

  int64_t batch() const { return B_; }
  int64_t channels() const;
  int64_t length() const;
  int64_t bins() const;   // m
  int64_t nfft() const;   // n: L (circular) or 2L (causal)
  int64_t nfreq() const;  // n / 2 + 1
  ConvMode mode() const;

  // y (B, H, L). Null pregate/postgate/skip = absent. y may not alias u or a gate.
  void forward(const T* u, const T* pregate, const T* postgate, const T* skip, T* y) const;

  // Vector-Jacobian product for the cotangent dy (B, H, L): du (B, H, L) and dk_hat (H, m), the
  // PyTorch convention for a complex input (dL/dRe + i dL/dIm; the imaginary parts of bins 0
  // and n/2 get 0). dpregate / dpostgate (B, H, L) and dskip (H,) are written when their input
  // is given and the pointer is not null. Outputs may not alias inputs.
  void backward(const T* dy, const T* u, const T* pregate, const T* postgate, const T* skip, T* du,
                std::complex<T>* dk_hat, T* dpregate, T* dpostgate, T* dskip) const;

  struct Impl;

 private:
  SpectralConvPlan(std::shared_ptr<const Impl> impl, int64_t B) : impl_(std::move(impl)), B_(B) {}
  std::shared_ptr<const Impl> impl_;
  int64_t B_;
};

extern template class SpectralConvPlan<float>;
extern template class SpectralConvPlan<double>;

}  // namespace strux
