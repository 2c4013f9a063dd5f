// Linear recurrences on NVIDIA GPUs (DESIGN.md "scan"). Shapes (B, T, n), channels-last,
// C-contiguous device memory; work goes on `stream` (a cudaStream_t).
//
// diag_scan is one pass over the data: each thread block scans a time chunk of 32 channels
// (lanes run along n: coalesced), publishes the chunk's aggregate (A-product, local h), finds
// its incoming state by a decoupled look-back over earlier chunks, and writes h from registers.
// So a, b are read once and h written once, and long sequences still fill the GPU.
#pragma once

#include <cstdint>

#include "strux/cuda/ks.hpp"  // DType

namespace strux::cuda {

class DiagScanPlan {
 public:
  // dtype: f32, f16, bf16 (computed in float32) or c64.
  DiagScanPlan(int64_t B, int64_t T, int64_t n, DType dtype);

  // Device scratch (bytes) each call needs; the caller allocates it (stream-ordered).
  int64_t workspace_bytes() const;

  // h_t = a_t h_{t-1} + scale * b_t, h_{-1} = scale * h0 (h0 (B, n) or null for zeros).
  void forward(const void* a, const void* b, const void* h0, void* h, void* workspace,
               void* stream, float scale = 1.f) const;

  // Given dh = dL/dconj(h) (B, T, n) and the forward's h:
  //   g_t = dh_t + conj(a_{t+1}) g_{t+1}; db = g; da_t = g_t conj(h_{t-1}) (h_{-1} = h0 or 0);
  //   dh0 = conj(a_0) g_0 (written when dh0 is not null).
  void backward(const void* a, const void* h, const void* h0, const void* dh, void* da, void* db,
                void* dh0, void* workspace, void* stream) const;

 private:
  int64_t B_, T_, n_;
  DType dtype_;
};

// circulant_scan, float32: h_t = circ(a_t) h_{t-1} + u_t through cuFFT rfft over n, the complex
// diagonal scan of the half spectra, and irfft. Plans are made once per plan object.
class CirculantScanPlan {
 public:
  CirculantScanPlan(int64_t B, int64_t T, int64_t n);
  ~CirculantScanPlan();
  CirculantScanPlan(const CirculantScanPlan&) = delete;
  CirculantScanPlan& operator=(const CirculantScanPlan&) = delete;
  int64_t workspace_bytes() const;
  void forward(const float* a, const float* u, const float* h0, float* h, void* workspace,
               void* stream) const;

 private:
  int64_t B_, T_, n_, nf_;
  int r2c_ = 0, c2r_ = 0, r2c0_ = 0;  // cufftHandle
  int64_t fft_work_ = 0;
  DiagScanPlan scan_;
};

}  // namespace strux::cuda
