// strux::op::FFTConv: long depthwise convolution (DESIGN.md "fftconv", <strux/fftconv.hpp>).
//
// Views (C-contiguous, dtype and device of the problem): u, y, pregate, postgate, dy, du,
// dpregate, dpostgate (B, H, L); k, dk (H, Lk); skip, dskip (H,).
// dtypes: CPU float32, float64; CUDA float16, bfloat16, float32 (float32 arithmetic), float64.
// The filter k is an operand of every call (like FlashFFTConv): its spectrum is computed per
// call, so one plan serves filters that change (training).
// Not here: the spectral form (filter given by its lowest frequencies) and a float32 filter with
// half-type inputs (DESIGN.md lists them; not in this API yet).
// Solvers (options.solver): CPU "" (automatic: "direct" where at most 16 taps are used, else
// "blocks" where L >= 16384 and its block FFT is at most an eighth of "fft"'s, else "fft"), "fft"
// (FFTW), "direct" (sums over the taps, no transform; at most 64 taps used: causal min(Lk, L),
// circular Lk; ValueError otherwise), "blocks" (overlap-save over blocks of FFT size N of a few
// times the taps used, for filters much shorter than the row); CUDA "direct" (the direct kernels,
// same limit, every dtype), "" (automatic: "direct" where at most 32 taps are used, else "dense"
// for float16/bfloat16 where a cost model (2 FLOP per tap and output at 310 TFLOP/s, or on a device
// of compute capability 9.0 the wgmma kernel's 420 TFLOP/s times its live share, against the FFT
// solvers' measured time at their FFT size) says it is faster and min(B, 64)·ceil(L/32) >= 128
// (gated calls and gradients by the FFT solvers where the model or the measured gradients say so;
// src/cuda/fftconv/dense.hpp), else "blocks"
// for causal float32/float16/bfloat16 rows with more than 32 taps used (m = min(Lk, L)) where
// L + m - 1 > 32768 and the block FFT N is at most an eighth of L + m - 1 (measured 2.5-4.9x the
// whole-row solvers on an H200: bench/NOTES-gpu-fftconv-blocks.md), else "tensor" for float16/bfloat16 at nfft 256
// and 512, else "fused" where it applies, else "fourstep" for
// float32/float16/bfloat16 where it applies (causal L + min(Lk, L) - 1 > 32768, circular L a power
// of two >= 65536; nfft <= 4194304), else "cufft"), "fused" (one kernel with its FFTs in shared
// memory; ValueError where it does not apply), "cufft", "tensor" (tensor-core kernels for the forward,
// float16/bfloat16, nfft 256 … 16384, ValueError where it does not apply; gradients by "fused"
// where it applies, else "cufft"), "fourstep" (four-step kernels at FFT sizes 65536 … 4194304,
// float32/float16/bfloat16, ValueError elsewhere; forward and gradients; under "auto" the
// gradients go to "cufft" where B > 1 and H·(M1/2 + 1) row pairs are under two per SM), "blocks"
// (overlap-save over blocks of N = the power of two >= max(1024, 8m, min(16m, 4096)), >= 4m past
// 32768, through an inner circular plan of length N, float32 arithmetic inside for the 16-bit
// types; every dtype, causal and circular, any L and Lk; forward and gradients), "dense" (the
// convolution as products of 32×32 Toeplitz blocks of the filter on tensor cores, no transform,
// float32 accumulation; float16/bfloat16, at most 8192 taps used, L <= 32768, circular L a
// multiple of 32, ValueError elsewhere; forward and gradients, the gradients by the FFT solvers
// where their shared memory does not fit), "dense_wgmma" (as "dense" with the ungated forward on
// wgmma: compute capability 9.0 with the sm_90a build, circular L a multiple of 64, rows whose CTA
// fits in shared memory (about L <= 8000 at Lk = L); ValueError elsewhere).
#pragma once

#include <cstdint>

#include "strux/api/operator.hpp"
#include "strux/fftconv.hpp"  // ConvMode

namespace strux::op {

struct FFTConvProblem {
  int64_t B = 1, H = 1, L = 1, Lk = 1;
  ConvMode mode = ConvMode::Causal;
  DType dtype = DType::f32;
  Device device{};
};

// y = postgate ⊙ (k * v + skip ⊙ v), v = u ⊙ pregate; empty optional views are absent.
struct FFTConvForward {
  View u, k, y;
  View pregate, postgate, skip;
};

// Gradients for the cotangent dy: du and dk always; dpregate, dpostgate, dskip when given
// (their input must be given too).
struct FFTConvBackward {
  View dy, u, k, du, dk;
  View pregate, postgate, skip;
  View dpregate, dpostgate, dskip;
};

class FFTConv : public detail::Operator<FFTConvProblem, FFTConvForward, FFTConvBackward> {
 public:
  explicit FFTConv(const Problem& problem, const Options& options = {});
  void forward(const Forward& args, Workspace ws = {}, Stream s = {});
  void backward(const Backward& args, Workspace ws = {}, Stream s = {});
};

}  // namespace strux::op
