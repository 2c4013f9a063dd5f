// Host side of the tensor-core fftconv kernels (tensor.cuh): which problems they cover, launch
// geometry and twiddle table made once at plan time, and the launches. Forward only.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda/buffer.hpp"
#include "strux/cuda/common.hpp"

namespace strux::cuda::tensor {

// FFT sizes with a compiled kernel: powers of two N = 256 … 16384 (one real row per complex
// sequence of N/2 float2 in shared memory; 64 KB per CTA at every size).
constexpr int64_t kMinN = 256, kMaxN = 16384;
bool supported_n(int64_t N);
// The automatic solver choice (plan algo 0) takes these kernels for float16 / bfloat16 up to this
// FFT size (bench/NOTES-gpu-fftconv-tensor.md: faster than the fused kernels and cuFFT at 256 and
// 512, slower from 1024). One real row per complex sequence, so a row's NaN or inf stays its own.
constexpr int64_t kAutoMaxN = 512;
// These kernels' FFT size for a problem: circular L itself, causal the next power of two
// >= max(kMinN, L + Lmin - 1) (stops past kMaxN); supported_n() says whether one is compiled.
int64_t fft_size(bool circular, int64_t L, int64_t Lmin);
// float16 and bfloat16 (the mma operand types); float32 and float64 take the other solvers.
bool supported_dtype(DType dt);

struct Launch {
  int N = 0, threads = 0, seqs = 1;  // N: nfft; seqs: complex sequences (one real row each) per CTA
  size_t smem = 0;
  DeviceBuffer tw;  // W_Q^m = exp(−2πi·m/Q), m < Q = 16^P: the radix-16 passes' twiddles
};

// Sets the kernels' shared-memory limits and uploads the twiddle table (synchronous copy).
void plan(DType dt, int64_t N, Launch& g);

// khat: [H][N/2] float4 (α, β) per position of the kernels' frequency order (tensor.cuh
// spectrum_kernel), from k[h, :Lmin] zero-padded to N; the same bytes as [H][N] complex.
void spectrum(DType dt, const Launch& g, const void* k, int64_t H, int64_t Lk, int64_t Lmin, float2* khat,
              cudaStream_t s);
// split: hi/lo operand splits (three products each, the solver); false: one product per real
// product, a benchmark probe of what the splits cost (error about 5–6e-4 for float16 out).
// variant (tensor.cuh pass16, to be measured): 0 one tile per warp in flight and direct twiddle
// lookups; 1 short mma chains (SC); 2 SC and the radix-r passes' indices out of their loops
// (RX); 3 factored twiddles.
void forward(DType dt, const Launch& g, const void* u, const void* pre, const void* post, const void* skip,
             const float2* khat, void* y, int64_t B, int64_t H, int64_t L, bool split, int variant,
             cudaStream_t s);

}  // namespace strux::cuda::tensor
