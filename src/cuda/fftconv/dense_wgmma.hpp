// Geometry and launch of the dense fftconv forward on wgmma (dense_wgmma.cuh; sm_90a, float16 /
// bfloat16, ungated calls of a dense plan whose Plan::Wgmma says so: forced by algo 17 or chosen by
// dense::automatic_wgmma; gated calls and the gradients run the mma.sync kernels of dense.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "strux/cuda/common.hpp"

namespace strux::cuda::dense::wg {

constexpr int kB = 64;          // block length: the M of a product and the K of one tap block
constexpr int kN = 128;         // output columns (rows n of V) per tile: the N of m64n128k16
constexpr int kThreads = 256;   // two warpgroups
constexpr int kPadRows = 128;   // zero rows before V (causal) / V's first rows again after it (circular)
constexpr int kSt = 72;         // the output staging's row stride in elements (144 bytes)

// Rows of the V buffer: the pad, V, and one tile of slack (columns past V read there; unused).
__host__ __device__ constexpr int rows_of(int NR) { return kPadRows + NR + kN; }

struct Geometry {
  int NI = 0, D = 0, R = 0, nchunk = 0, kwords = 0, ntile = 0;
  int per_sm = 1;        // CTAs per SM (shared memory; registers allow two)
  double cta_ns = 0;     // the model's time of one CTA (dense_wgmma.cu): it picks R
  size_t smem = 0;
  bool smem_fits = false;  // smem within the device's per-block limit
  bool fits = false;       // and the grid, H × nchunk CTAs, within 2^31 − 1
};

// Float16 / bfloat16 on a device of compute capability 9.0 that loads this file's sm_90a image (a probe
// kernel, once per device), circular L a multiple of 64.
bool supported(DType dt, bool circular, int64_t L, int64_t Lk);
// Rows per CTA R for B rows of H filters (a model of waves and the busier warpgroup's work).
Geometry plan(int64_t B, int64_t H, int64_t L, int64_t m, bool circular);
// y = taps * u (no gates), rows of H filters of m taps.
void forward(DType dt, const Geometry& g, const void* taps, const void* u, void* y, int64_t B, int64_t H, int64_t L,
             int64_t m, bool circular, cudaStream_t s);

}  // namespace strux::cuda::dense::wg
