// The gradient for the blocks of a block Toeplitz operator on the GPU, for the operator layer
// (cuda::ToeplitzPlan has the products only). A direct kernel: one thread per block entry
// (t, p, q) sums dd[i, p, r] · m[i - t, q, r] over i >= t and the right-hand sides r, in the
// working precision of the dtype. Exact and written for clarity; O(Nt² Nd Nm R / 2) work.
#include <algorithm>

#include "api/cuda_toeplitz_grad.hpp"
#include "api/cuda_util.cuh"

namespace strux::api {
namespace {

constexpr int kThreads = 256;

// Element (time i, space s, rhs r) of a vector with n entries per step in the layout.
__device__ __forceinline__ int64_t at(bool space_major, int64_t i, int64_t s, int64_t r, int64_t Nt, int64_t n,
                                      int64_t R) {
  return ((space_major ? s * Nt + i : i * n + s) * R + r);
}

template <class T>
__global__ void grad_blocks_kernel(const T* m, const T* dd, T* dblocks, int64_t Nt, int64_t Nd, int64_t Nm,
                                   int64_t R, bool space_major) {
  const int64_t total = Nt * Nd * Nm;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / (Nd * Nm), p = (e / Nm) % Nd, q = e % Nm;
    T acc = 0;
    for (int64_t i = t; i < Nt; ++i)
      for (int64_t r = 0; r < R; ++r)
        acc += dd[at(space_major, i, p, r, Nt, Nd, R)] * m[at(space_major, i - t, q, r, Nt, Nm, R)];
    dblocks[e] = acc;
  }
}

}  // namespace

void toeplitz_grad_blocks(DType t, int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, bool space_major, const void* m,
                          const void* dd, void* dblocks, Stream s) {
  const int64_t total = Nt * Nd * Nm;
  const unsigned grid = unsigned(std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(1) << 20));
  core::dispatch<core::RealScalars>(t, "problem.dtype", "the CUDA block Toeplitz gradient", [&](auto tag) {
    using T = typename decltype(tag)::type;
    grad_blocks_kernel<T><<<grid, kThreads, 0, stream_of(s)>>>(static_cast<const T*>(m), static_cast<const T*>(dd),
                                                               static_cast<T*>(dblocks), Nt, Nd, Nm, R, space_major);
    STRUX_LAUNCH("toeplitz grad_blocks");
  });
}

}  // namespace strux::api
