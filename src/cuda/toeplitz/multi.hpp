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

// The same products (float32 spectra and accumulation) with F̂ stored as (re, im) pairs of
// bfloat16 (bf16) or float16, (nfreq, Nd, Nm) pairs of 4 bytes: the one-right-hand-side kernels
// of apply_fhat_multi reading half the bytes, once per right-hand side.
void apply_fhat_half(const void* fhat, bool bf16, const void* X, void* Y, int64_t nfreq, int64_t Nd, int64_t Nm,
                     int64_t R, bool adjoint, float alpha, cudaStream_t s);

}  // namespace strux::cuda::toeplitz_detail
