// Block lower-triangular Toeplitz matvec / adjoint on NVIDIA GPUs (DESIGN.md "toeplitz").
//
// F̂ (nfreq, Nd, Nm) is the real FFT of the zero-padded blocks along time, complex64 for
// float32 and complex128 for float64; nfft = a 2·3·5·7-smooth size >= 2·Nt - 1 and
// nfreq = nfft/2 + 1. The caller owns F̂ (e.g. a torch tensor); build_toeplitz_fhat fills it.
//
// matvec: pad + forward FFT of the Nm·R columns into frequency-major spectra (layout `fft`,
// see toeplitz_auto_fft) + per-frequency gemv (gemm for R > 1) on F̂ + inverse FFT + truncate.
// rmatvec reads the SAME F̂: F^H d = conj(Fᵀ conj(d)); conj(rfft(d)) is the rfft of d time-reversed mod nfft, so the
// conjugations are folded into the pad and truncate kernels (gemm uses op C directly).
// A plan owns cuFFT/cuBLAS handles and workspace; execute never allocates or syncs. One call at
// a time per plan.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "strux/cuda/common.hpp"

namespace strux::cuda {

int64_t toeplitz_nfft(int64_t Nt);

// blocks (Nt, Nd, Nm) real (f32 or f64) → fhat (nfreq, Nd, Nm) complex. Plan-time work: it
// allocates a temporary buffer and synchronizes `s` before returning.
void build_toeplitz_fhat(int64_t Nt, int64_t Nd, int64_t Nm, DType dtype, const void* blocks, void* fhat, Stream s);

// blocks (Nt, Nd, Nm) float32 → fhat (nfreq, Nd, Nm) of (re, im) pairs of bfloat16 (bf16) or
// float16, 4 bytes each: F̂ / scale, scale the power of two that puts F̂'s largest part near the
// top of the 16-bit range (exact; float16 then keeps 2^28 of range below it). Returns scale,
// to be passed to matvec / rmatvec. Plan-time work (allocates, synchronizes `s`).
double build_toeplitz_fhat_half(int64_t Nt, int64_t Nd, int64_t Nm, const void* blocks, void* fhat, bool bf16,
                                Stream s);

// The product algo = -1 resolves to for this shape and direction (one dispatch point).
int toeplitz_auto_algo(int64_t Nd, int64_t Nm, int64_t R, DType dtype, bool adjoint);

// The transform layout fft = -1 resolves to (one dispatch point): 0 = strided R2C/C2R,
// 1 = two real columns per complex column through one strided C2C, 2 = contiguous R2C/C2R with
// tiled transposes to and from the frequency-major product layout.
int toeplitz_auto_fft(int64_t Nd, int64_t Nm, int64_t R, DType dtype, bool space_major);

class ToeplitzPlan {
 public:
  // R right-hand sides (R = 1 for plain vectors); space_major: m (Nm, Nt[, R]) → d (Nd, Nt[, R]),
  // else m (Nt, Nm[, R]) → d (Nt, Nd[, R]). algo: -1 = automatic (toeplitz_auto_algo), 0 = cuBLAS
  // gemv for R = 1 and gemm for R > 1, 1 = cuBLAS gemm always, 2 = own kernels streaming F̂ once
  // per 16 right-hand sides (8 for float64), 3 = matvec with R > 1 as one real
  // gemm per frequency (F̂ read as real Nd × 2Nm; elsewhere 0; rmatvec never uses it). fft: -1 = automatic (toeplitz_auto_fft), else the
  // transform layout 0, 1 or 2 (kept selectable for benchmarks).
  // storage: how the caller's F̂ is stored, 0 = complex of dtype, 1 = bfloat16 pairs, 2 = float16
  // pairs (float32 only; see build_toeplitz_fhat_half): the products then run strux's
  // one-right-hand-side kernels reading the 4-byte pairs (algo is ignored).
  ToeplitzPlan(int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, bool space_major, DType dtype, int algo = -1,
               int fft = -1, int storage = 0);
  ~ToeplitzPlan();
  ToeplitzPlan(const ToeplitzPlan&) = delete;
  ToeplitzPlan& operator=(const ToeplitzPlan&) = delete;

  // fhat_scale: the factor a 16-bit F̂ was divided by (build_toeplitz_fhat_half); 1 otherwise.
  void matvec(const void* fhat, const void* m, void* d, Stream s, double fhat_scale = 1);
  void rmatvec(const void* fhat, const void* d, void* m, Stream s, double fhat_scale = 1);

  // The three stages of a product, for products whose phases run in different precisions (one
  // plan per precision, fft 2 and algo 2 in each; toeplitz_mixed_apply): the input's transforms
  // into frequency-major spectra (nfreq, n_in·R) held by the plan, the product on them into the
  // output spectra (nfreq, n_out·R), the output's inverse transforms from those.
  void transform_in(const void* x, bool adjoint, Stream s);
  // spectra_in: the input spectra to read instead of the plan's own (another plan's, of the same
  // nfft, input columns, dtype and product: the row blocks of one input); null: the plan's.
  void product_only(const void* fhat, bool adjoint, Stream s, double fhat_scale = 1,
                    const void* spectra_in = nullptr);
  void transform_out(void* y, bool adjoint, Stream s);
  // The plan's input (output = false) or output spectra buffer for the direction.
  void* spectra(bool adjoint, bool output) const;
  DType dtype() const;
  std::array<int64_t, 5> problem() const;  // {Nt, Nd, Nm, R, space_major}

  int64_t nfft() const;
  int64_t nfreq() const;
  int algo(bool adjoint = false) const;  // the product in use per direction (0 to 3; -1 resolved)
  int fft() const;                       // the transform layout in use (0 to 3; -1 resolved)
  size_t workspace_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// y = F x (adjoint: Fᵀ x) with the phases in different precisions: the forward transforms of
// `in` (x of its dtype, the fft precision), the product of `prod` (its dtype, the product
// precision; F̂ stored as it expects), the inverse transforms of `out` (y of its dtype); the
// spectra are converted between the plans' precisions in between. The plans share the problem
// (Nt, Nd, Nm, R, layout) and use fft 2 and algo 2 (ValueError otherwise); they may be the same
// plan where two precisions agree.
void toeplitz_mixed_apply(ToeplitzPlan& in, ToeplitzPlan& prod, ToeplitzPlan& out, const void* fhat, const void* x,
                          void* y, bool adjoint, Stream s, double fhat_scale = 1);

}  // namespace strux::cuda
