// float32 ks product through cuBLAS on strided views (ks_blas.cu; private to src/cuda/ks).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::ks {

// Whether the strided-view cuBLAS product applies: batch-last any d, batch-first d == 1, all
// sizes within cuBLAS's int arguments.
bool blas_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool batch_last);
// Makes the calling thread's cuBLAS resources for the current device (handle, workspace) and a
// weight buffer of at least a*b*c*d floats (allocates; called at plan construction).
void blas_reserve(int64_t a, int64_t b, int64_t c, int64_t d);
// y = x K'^T or K' x for pattern (a, b, c, d), weight strides (si, sk, sl, sj); launches only.
void blas_prod(const float* x, const float* w, float* y, int64_t a, int64_t b, int64_t c,
               int64_t d, int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj,
               bool batch_last, cudaStream_t s);

// For other cuBLAS-based ks paths (ks_tr.cu): the calling thread's handle for the current
// device, on stream s with our workspace; and w re-laid out as group-major a*d matrices
// w'[((i*d + j)*b + k)*c + l] = w[i*si + k*sk + l*sl + j*sj] in the buffer blas_reserve sized
// (launches one small kernel on s; returns the buffer).
cublasHandle_t blas_handle(cudaStream_t s);
const float* blas_group_weights(const float* w, int64_t a, int64_t b, int64_t c, int64_t d,
                                int64_t si, int64_t sk, int64_t sl, int64_t sj, cudaStream_t s);

}  // namespace strux::cuda::ks
