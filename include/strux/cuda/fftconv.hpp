// fftconv on NVIDIA GPUs: cuFFT R2C/C2R with fused kernels around them.
//
// Contract: DESIGN.md "fftconv". u (B, H, L), k (H, Lk), optional pregate/postgate (B, H, L),
// skip (H,), all of one dtype (f16, bf16, f32 computed in float32; f64 in float64), dense
// row-major, on the plan's device. cuFFT path: causal nfft = a 2·3·5·7-smooth size >=
// L + min(Lk, L) - 1, circular nfft = L (Lk <= L). Fused path: see the constructor.
//
// The plan owns cuFFT plans, the filter spectrum and all workspace (allocated here, at plan
// time): execute calls only launch work on the caller's stream and never allocate or sync.
// One plan runs one call at a time (its workspace is shared): do not run the same plan on two
// streams concurrently.
#pragma once

#include <cstdint>
#include <memory>

#include "strux/cuda/common.hpp"

namespace strux::cuda {

class FFTConvPlan {
 public:
  // with_backward also allocates the workspace that backward() needs. algo 4: the fused
  // single-kernel path (own FFTs in shared memory) where it applies (f32/f16/bf16; causal with
  // L + min(Lk, L) - 1 <= 32768, nfft then the next power of two >= 1024; circular with L a
  // power of two in [1024, 32768]), else cuFFT; algo 1: always cuFFT; algo 2: the tensor-core
  // kernels (float16/bfloat16; causal nfft = the next power of two >= max(256, L + min(Lk, L) - 1),
  // circular L a power of two; nfft in [256, 16384]; else an error) for the forward, algo 4 for
  // the gradients; algo 3: as 2 with one tensor-core product per real product instead of three
  // (a benchmark probe of the hi/lo splits' cost; float16 error about 5–6e-4); algo 0 (automatic):
  // algo 9 where at most 32 taps are used (causal min(Lk, L), circular Lk), else algo 2 for
  // float16/bfloat16 where its nfft is 256 or 512, else algo 4 where the fused kernels
  // apply, else algo 8 where it applies (f32/f16/bf16; causal L + min(Lk, L) - 1 > 32768, circular
  // L a power of two >= 65536; nfft <= 4194304), else cuFFT; algo 5: as 2 with short mma chains,
  // algo 6: as 5 with the radix-r passes' indices out of their loops (variants, forced only),
  // algo 7: as 2 with factored twiddles (variants to measure); algo 8: the four-step kernels
  // (f32/f16/bf16; causal nfft = the next power of two >= max(65536, L + min(Lk, L) - 1),
  // circular L a power of two; nfft <= 4194304; else an error), forward and gradients; algo 9: the direct kernels (sums over the taps, no transform; at most 64 taps
  // used: causal min(Lk, L), circular Lk; all dtypes); algo 10: "blocks", overlap-save over blocks
  // of a transform size N (the power of two >= max(1024, 8m, min(16m, 4096)), >= 4m past 32768;
  // m taps used) through an inner circular plan of length N (its own choice: the fused kernels at
  // N <= 32768), blocks in the input dtype with float32 arithmetic for the 16-bit types; every
  // dtype, causal and circular, any L and Lk; algos 11, 12, 13: as 10 with N >= 8m, 16m, 4m (probes
  // of the block size); algo 14: as 8 with its row pass's grid row by row (a probe). Algo 0 takes it, after the direct kernels, where it pays by the operation
  // counts (causal or circular, float32/float16/bfloat16, m > 32, L + m - 1 > 32768 and
  // 8·N4 <= L + m - 1, N4 the size at 4m; src/cuda/fftconv/blocks.hpp).
  FFTConvPlan(int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, DType dtype, bool with_backward,
              int algo = 0);
  ~FFTConvPlan();
  FFTConvPlan(const FFTConvPlan&) = delete;
  FFTConvPlan& operator=(const FFTConvPlan&) = delete;

  // Filter k (H, Lk) in the plan dtype, on the device: its spectrum is computed on `s` and kept.
  void set_filter(const void* k, Stream s);
  // y = postgate ⊙ (k * (u ⊙ pregate) + skip ⊙ (u ⊙ pregate)); null gates/skip are absent.
  void forward(const void* u, const void* pregate, const void* postgate, const void* skip, void* y, Stream s);
  // set_filter(k) then forward(...), in one kernel launch where the plan can (the spectrum is
  // then computed inside the forward kernel); the spectrum is kept as after set_filter.
  void forward(const void* k, const void* u, const void* pregate, const void* postgate, const void* skip, void* y,
               Stream s);
  // Gradients for the filter last given to set_filter. Outputs du (B,H,L), dk (H,Lk) and, when
  // the matching input is given, dpregate, dpostgate (B,H,L) and dskip (H,). Needs with_backward.
  void backward(const void* dy, const void* u, const void* pregate, const void* postgate, const void* skip,
                void* du, void* dk, void* dpregate, void* dpostgate, void* dskip, Stream s);

  int64_t nfft() const;
  bool fused() const;   // true when this plan runs the fused kernels
  bool tensor() const;  // true when this plan runs the tensor-core kernels
  bool fourstep() const;  // true when this plan runs the four-step kernels
  bool direct() const;  // true when this plan runs the direct kernels (short filters; algo 9)
  bool dense() const;   // true when this plan runs the dense kernels (Toeplitz blocks on tensor cores; algo 15)
  bool dense_gated() const;     // dense, and calls with a pregate run them too (else the FFT solvers)
  bool dense_wgmma() const;     // dense, and ungated forwards run the wgmma kernel (sm_90a)
  bool dense_backward() const;  // dense, and backward() runs them too (else the FFT solvers)
  bool blocks() const;  // true when this plan runs the blocks solver (algo 10); nfft() is then N
  int64_t blocks_per_row() const;       // the blocks solver's blocks per row, else 0
  const FFTConvPlan* inner() const;     // the blocks solver's inner plan (B·nb, H, N), else null
  bool filter_set() const;
  size_t workspace_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strux::cuda
