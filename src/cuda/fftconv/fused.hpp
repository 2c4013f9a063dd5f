// Host side of the fused fftconv kernels (fused.cuh): which sizes they cover, launch geometry
// chosen once at plan time, and the launches.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "strux/cuda/common.hpp"

namespace strux::cuda::fused {

// Complex half-lengths N = nfft / 2 with a compiled kernel: nfft = 1024 … 32768.
constexpr int64_t kMinN = 512, kMaxN = 16384;
bool supported_n(int64_t N);

// Geometry of one kernel for one plan: grid = H · nchunk CTAs of `threads`, each over
// rows_per_cta batch rows of one h.
struct Launch {
  int N = 0, threads = 0, nchunk = 1, rows_per_cta = 1;
  size_t smem = 0;
  bool vh_smem = false;  // backward: V̂ kept in shared memory (else a global scratch slice)
};

// Sets the kernels' shared-memory limits and picks nchunk from their occupancy.
Launch plan_forward(DType dt, int64_t N, int64_t B, int64_t H);
Launch plan_backward(DType dt, int64_t N, int64_t B, int64_t H);

// khat[h] = rfft(scale · k[h, :Lmin], zero-padded to nfft) for k (H, Lk): [H][N + 1] complex float.
void spectrum(DType dt, const Launch& g, const void* k, int64_t H, int64_t Lk, int64_t Lmin, float scale,
              float2* khat, cudaStream_t s);
// The filter (H, Lk) a forward launch transforms itself, scaled (k null: none; khat was set by
// spectrum()).
struct OwnFilter {
  const void* k = nullptr;
  int64_t Lk = 0, Lmin = 0;
  float scale = 0.f;
};
// khat: [H][N + 1] complex float, scaled by 1/nfft; with own.k (only when g.nchunk = 1) the
// kernel first writes khat = spectrum(own.k) itself. Types as the plan's dtype (f16, bf16, f32).
void forward(DType dt, const Launch& g, const void* u, const void* pre, const void* post, const void* skip,
             float2* khat, void* y, int64_t B, int64_t H, int64_t L, const OwnFilter& own, cudaStream_t s);
// dkpart: [nchunk][H][N + 1]; vh_global: [H·nchunk][N + 1] when !g.vh_smem (else unused).
void backward(DType dt, const Launch& g, const void* dy, const void* u, const void* pre, const void* post,
              const void* skip, const float2* khat, float2* dkpart, float2* vh_global, void* du, void* dpre,
              void* dpost, int64_t B, int64_t H, int64_t L, cudaStream_t s);
// dkhat[h][f] = scale · Σ_c dkpart[c][h][f], f < nf = N + 1.
void reduce_dk(const float2* dkpart, int nchunk, int64_t H, int64_t nf, float scale, float2* dkhat, cudaStream_t s);

}  // namespace strux::cuda::fused
