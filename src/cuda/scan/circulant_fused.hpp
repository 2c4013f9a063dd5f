// The fused circulant scan forward (circulant_fused.cuh), for CirculantScanPlan (private).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda {

struct CircFusedShape {
  int64_t L, C;       // time steps per chunk, chunks (one pass: virtual steps of T + 1, see below)
  int64_t grid = 0;   // one pass: persistent blocks
};

bool circulant_fused_applies(int64_t n);  // a power of two in [64, 1024]
CircFusedShape circulant_fused_shape(int64_t B, int64_t T, int64_t n, int64_t sms);
int64_t circulant_fused_workspace(int64_t B, int64_t n, const CircFusedShape& sh);
// float32 a, u (B, T, n), h0 (B, n) or null, h (B, T, n); ws: circulant_fused_workspace bytes.
void circulant_fused_forward(int64_t B, int64_t T, int64_t n, const CircFusedShape& sh, const float* a,
                             const float* u, const float* h0, float* h, void* ws, cudaStream_t s);

// The single-pass kernel (circulant_onepass.cuh): a and u read once, h written once. fourier:
// the shape of the Fourier-form kernel (a_hat read instead of a: more shared memory per block).
CircFusedShape circulant_onepass_shape(int64_t B, int64_t T, int64_t n, int64_t sms, bool fourier = false);
int64_t circulant_onepass_workspace(int64_t B, int64_t n, const CircFusedShape& sh);
void circulant_onepass_forward(int64_t B, int64_t T, int64_t n, const CircFusedShape& sh, const float* a,
                               const float* u, const float* h0, float* h, void* ws, cudaStream_t s);
// The same for the Fourier form: a_hat (B, T, n/2 + 1) complex64 (the imaginary parts at
// frequency 0 and n/2 ignored); the workspace as circulant_onepass_workspace, the shape from
// circulant_onepass_shape(..., fourier = true).
void circulant_onepass_forward_fourier(int64_t B, int64_t T, int64_t n, const CircFusedShape& sh, const void* a_hat,
                                       const float* u, const float* h0, float* h, void* ws, cudaStream_t s);

}  // namespace strux::cuda
