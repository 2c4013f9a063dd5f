// Own per-frequency products with F̂ for any number of right-hand sides (algo 2): F̂ is streamed
// from HBM once per call for up to 16 right-hand sides, instead of cuBLAS's skinny cgemm tiles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::toeplitz_detail {

// Frequency-major buffers: X (nfreq, Nin, R) → Y (nfreq, Nout, R), F̂ (nfreq, Nd, Nm).
// matvec: Y[f] = alpha · F̂[f] X[f]   (Nin = Nm, Nout = Nd)
// adjoint: Y[f] = alpha · F̂[f]^H X[f] (Nin = Nd, Nout = Nm)
template <class T>
void apply_fhat_multi(const void* fhat, const void* X, void* Y, int64_t nfreq, int64_t Nd, int64_t Nm, int64_t R,
                      bool adjoint, T alpha, cudaStream_t s);

}  // namespace strux::cuda::toeplitz_detail
