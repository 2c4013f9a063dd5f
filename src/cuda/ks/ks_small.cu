// The small-batch ks path (KsPath::small): at batch 1-256 the bytes that must cross HBM are the
// weights (a*b*c*d values, a*d times fewer than a dense K) and a few activation rows, so the
// kernels parallelise over output features and read each weight once per tile of RB batch
// rows, which stay in registers (no tensor cores, no shared-memory staging of W). The rule and
// its measurements: bench/NOTES-gpu-ks-small.md.
//
// Two shapes of the same sum y[n, (i, k, j)] = sum_l w[i, k, l, j] x[n, (i, l, j)]:
// - rows_kernel, where w is contiguous along the sum index l (sl == 1: forward with d == 1):
//   one warp per output feature, lanes along l (coalesced W and x), a warp reduction;
// - cols_kernel otherwise: one thread per output feature (lanes along j then k: W and x
//   coalesced along j), the sum over l split over the block's 8 thread rows and reduced in
//   shared memory, so that few output features still make enough blocks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/check.hpp"
#include "cuda/ks/ks_kernels.cuh"
#include "cuda/ks/ks_small.hpp"

namespace strux::cuda::ks {
namespace {

constexpr int kThreads = 256;
constexpr int kSplit = 8;  // cols_kernel: thread rows splitting the sum over l
constexpr int kCols = kThreads / kSplit;

// x[n, col] and y[n, row] of either layout (N, M: the feature counts).
template <bool BL>
__device__ __forceinline__ int64_t at(int64_t feat, int64_t n, int64_t width, int64_t batch) {
  return BL ? feat * batch + n : n * width + feat;
}

// Grid: x = ceil(M / 8) (a warp per output feature), y = batch tiles of RB rows.
template <class T, bool BL, int RB>
__global__ void __launch_bounds__(kThreads) rows_kernel(ProdProblem<T, BL> pr) {
  const int64_t M = pr.a * pr.b * pr.d, N = pr.a * pr.c * pr.d;
  const int64_t o = int64_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (o >= M) return;  // (a whole warp: no shuffle below misses a lane)
  const int64_t j = o % pr.d, k = (o / pr.d) % pr.b, i = o / (pr.b * pr.d);
  const int64_t n0 = int64_t(blockIdx.y) * RB;
  const int nr = pr.batch - n0 < RB ? int(pr.batch - n0) : RB;
  const T* w = pr.w + i * pr.si + k * pr.sk + j * pr.sj;
  // x's feature (i, l, j) of row n0 + r: x0 + l xl + r xr
  const T* x0 = pr.x + at<BL>(i * pr.c * pr.d + j, n0, N, pr.batch);
  const int64_t xl = BL ? pr.d * pr.batch : pr.d, xr = BL ? 1 : N;
  float acc[RB];
#pragma unroll
  for (int r = 0; r < RB; ++r) acc[r] = 0.f;
#pragma unroll 2
  for (int64_t l = lane; l < pr.c; l += 32) {
    const float wv = ld(w + l * pr.sl);
    const T* xp = x0 + l * xl;
#pragma unroll
    for (int r = 0; r < RB; ++r)
      if (r < nr) acc[r] += wv * ld(xp + r * xr);
  }
#pragma unroll
  for (int r = 0; r < RB; ++r) {
#pragma unroll
    for (int s = 16; s > 0; s /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], s);
  }
  // lane r writes row n0 + r (batch-last: RB neighbouring values)
#pragma unroll
  for (int r = 0; r < RB; ++r)
    if (lane == r && r < nr) st(pr.y + at<BL>(o, n0 + r, M, pr.batch), acc[r]);
}

// Grid: x = ceil(M / 32) (32 output features per block), y = batch tiles of RB rows.
template <class T, bool BL, int RB>
__global__ void __launch_bounds__(kThreads) cols_kernel(ProdProblem<T, BL> pr) {
  __shared__ float part[kSplit - 1][RB][kCols];
  const int64_t M = pr.a * pr.b * pr.d, N = pr.a * pr.c * pr.d;
  const int tx = threadIdx.x % kCols, ty = threadIdx.x / kCols;
  const int64_t o = int64_t(blockIdx.x) * kCols + tx;
  const int64_t n0 = int64_t(blockIdx.y) * RB;
  const int nr = pr.batch - n0 < RB ? int(pr.batch - n0) : RB;
  float acc[RB];
#pragma unroll
  for (int r = 0; r < RB; ++r) acc[r] = 0.f;
  if (o < M) {
    const int64_t j = o % pr.d, k = (o / pr.d) % pr.b, i = o / (pr.b * pr.d);
    const T* w = pr.w + i * pr.si + k * pr.sk + j * pr.sj;
    const T* x0 = pr.x + at<BL>(i * pr.c * pr.d + j, n0, N, pr.batch);
    const int64_t xl = BL ? pr.d * pr.batch : pr.d, xr = BL ? 1 : N;
#pragma unroll 2
    for (int64_t l = ty; l < pr.c; l += kSplit) {
      const float wv = ld(w + l * pr.sl);
      const T* xp = x0 + l * xl;
#pragma unroll
      for (int r = 0; r < RB; ++r)
        if (r < nr) acc[r] += wv * ld(xp + r * xr);
    }
  }
  if (ty > 0) {
#pragma unroll
    for (int r = 0; r < RB; ++r) part[ty - 1][r][tx] = acc[r];
  }
  __syncthreads();
  if (ty > 0 || o >= M) return;
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    float v = acc[r];
#pragma unroll
    for (int s = 0; s < kSplit - 1; ++s) v += part[s][r][tx];
    if (r < nr) st(pr.y + at<BL>(o, n0 + r, M, pr.batch), v);
  }
}

template <class T, bool BL, int RB>
void launch_rb(const ProdProblem<T, BL>& pr, cudaStream_t s) {
  const int64_t M = pr.a * pr.b * pr.d;
  const unsigned tiles = unsigned((pr.batch + RB - 1) / RB);
  if (pr.sl == 1 && pr.c >= 32) {
    rows_kernel<T, BL, RB><<<dim3(unsigned((M + 7) / 8), tiles), kThreads, 0, s>>>(pr);
    STRUX_LAUNCH("ks small rows_kernel");
  } else {
    cols_kernel<T, BL, RB><<<dim3(unsigned((M + kCols - 1) / kCols), tiles), kThreads, 0, s>>>(pr);
    STRUX_LAUNCH("ks small cols_kernel");
  }
}

template <class T, bool BL>
void launch_layout(const ProdProblem<T, BL>& pr, cudaStream_t s) {
  // RB: the fewest registers that hold the whole batch, 8 rows per tile beyond (a weight is
  // read once per tile; larger batches are the tile kernels' regime).
  if (pr.batch == 1) return launch_rb<T, BL, 1>(pr, s);
  if (pr.batch == 2) return launch_rb<T, BL, 2>(pr, s);
  if (pr.batch <= 4) return launch_rb<T, BL, 4>(pr, s);
  return launch_rb<T, BL, 8>(pr, s);
}

}  // namespace

bool small_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch) {
  // grid x: ceil(M / 8) blocks; grid y: ceil(batch / 8) tiles
  const int64_t M = a * b * d;
  return batch <= kSmallMaxBatch && (M + 7) / 8 < (int64_t(1) << 31) && c >= 1;
}

template <class T>
void small_prod(const T* x, const T* w, T* y, int64_t a, int64_t b, int64_t c, int64_t d,
                int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj, bool bl,
                cudaStream_t s) {
  if (bl)
    launch_layout(ProdProblem<T, true>{x, w, y, a, b, c, d, batch, si, sk, sl, sj}, s);
  else
    launch_layout(ProdProblem<T, false>{x, w, y, a, b, c, d, batch, si, sk, sl, sj}, s);
}

template void small_prod<float>(const float*, const float*, float*, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                                cudaStream_t);
template void small_prod<__half>(const __half*, const __half*, __half*, int64_t, int64_t, int64_t,
                                 int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                                 cudaStream_t);
template void small_prod<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                        __nv_bfloat16*, int64_t, int64_t, int64_t, int64_t,
                                        int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                                        cudaStream_t);

}  // namespace strux::cuda::ks
