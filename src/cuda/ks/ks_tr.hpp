// float32 batch-first ks product with d > 1 through one in-row transposition of x, cuBLAS
// SGEMM and one in-place in-row transposition of y (ks_tr.cu; private to src/cuda/ks).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::ks {

// Whether the path applies: batch-first, d > 1, every (i) segment of a row (c*d and b*d floats)
// fits one block's shared memory, all sizes within cuBLAS's int arguments.
bool tr_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool batch_last);
// Makes the calling thread's transposed-input buffer for the current device, for rows of
// a*cin*d floats (cin: the largest input features per group of the directions that use this
// path), and returns how many batch rows one pass takes (all of them up to a 256 MB buffer).
// Allocates; called at plan construction, with ks::blas_reserve.
int64_t tr_reserve(int64_t a, int64_t cin, int64_t d, int64_t batch);
// y (batch, a*b*d) = x (batch, a*c*d) K'^T for pattern (a, b, c, d) with weight strides
// (si, sk, sl, sj), `rows` batch rows per pass (tr_reserve's answer); launches only.
void tr_prod(const float* x, const float* w, float* y, int64_t a, int64_t b, int64_t c, int64_t d,
             int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj, int64_t rows,
             cudaStream_t s);

}  // namespace strux::cuda::ks
