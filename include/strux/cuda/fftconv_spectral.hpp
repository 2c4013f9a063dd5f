// fftconv_spectral on NVIDIA GPUs: the filter given by its lowest m frequencies (DESIGN.md,
// "fftconv"). n = L (circular) or 2L (causal), fixed by the contract; K̂ = k_hat zero-padded to
// n/2 + 1 bins; y = irfft(rfft(v, n) ⊙ K̂, n)[:L], v = u ⊙ pregate, then skip and postgate.
//
// u, gates, y (B, H, L) and skip (H,) of the plan dtype (f16, bf16, f32 computed in float32;
// f64 in float64), k_hat / dk_hat (H, m) complex64 (complex128 with f64): interleaved (re, im)
// pairs, dense row-major, on the plan's device. cuFFT R2C / C2R at n (in place, one row per
// (b, h)); the product with k_hat (scaled by 1/n on the fly, so k_hat is read per call and
// nothing is cached but plans and workspace) and the gates/skip epilogue are fused kernels.
//
// The plan owns the cuFFT plans and all workspace (allocated at plan time): calls only launch
// work on the caller's stream. One plan runs one call at a time.
#pragma once

#include <cstdint>
#include <memory>

#include "strux/cuda/common.hpp"

namespace strux::cuda {

class SpectralConvPlan {
 public:
  // dtype: that of u (f32, f64, f16, bf16). with_backward also allocates what backward() needs.
  SpectralConvPlan(int64_t B, int64_t H, int64_t L, int64_t m, bool circular, DType dtype, bool with_backward);
  ~SpectralConvPlan();
  SpectralConvPlan(const SpectralConvPlan&) = delete;
  SpectralConvPlan& operator=(const SpectralConvPlan&) = delete;

  // y = postgate ⊙ (irfft(rfft(v, n) ⊙ K̂, n)[:L] + skip ⊙ v); null gates/skip are absent.
  void forward(const void* u, const void* k_hat, const void* pregate, const void* postgate, const void* skip,
               void* y, Stream s);
  // Gradients: du (B,H,L), dk_hat (H,m) (PyTorch's convention for complex inputs, dL/dRe + i dL/dIm)
  // and, when the matching input is given and the pointer is not null, dpregate, dpostgate
  // (B,H,L) and dskip (H,). Needs with_backward.
  void backward(const void* dy, const void* u, const void* k_hat, const void* pregate, const void* postgate,
                const void* skip, void* du, void* dk_hat, void* dpregate, void* dpostgate, void* dskip, Stream s);

  int64_t nfft() const;
  size_t workspace_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strux::cuda
