// The gradient for the blocks of a block Toeplitz operator on the GPU (see cuda_toeplitz_grad.cu):
// dblocks[t] = Σ_r Σ_{i >= t} dd[i, :, r] m[i - t, :, r]ᵀ, (Nt, Nd, Nm); m and dd in the
// problem's layout with R right-hand sides. float32 or float64.
#pragma once

#include <cstdint>

#include "strux/api/types.hpp"

namespace strux::api {

void toeplitz_grad_blocks(DType t, int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, bool space_major, const void* m,
                          const void* dd, void* dblocks, Stream s);

}  // namespace strux::api
