// float32 batch-first ks product with d > 1 through one in-row transposition of x, cuBLAS
// SGEMM and one in-place in-row transposition of y (ks_tr.cu; private to src/cuda/ks).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::ks {

// Whether the path applies: batch-first, d > 1, every (i) segment of a row (c*d and b*d floats)
// fits one block's shared memory, all sizes within cuBLAS's int arguments.
bool tr_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool batch_last);
// Makes the calling thread's resources for the current device (a side stream, events, the
// transposed-input buffer for `batch` rows of max(c_in) = `cin` features per (i, j) group) and
// returns the number of batch chunks calls of this plan pipeline over (STRUX_KS_TR_CHUNKS forces
// it; the bench's knob). Allocates; called at plan construction, with ks::blas_reserve.
int tr_reserve(int64_t a, int64_t cin, int64_t d, int64_t batch);
// y (batch, a*b*d) = x (batch, a*c*d) K'^T for pattern (a, b, c, d) with weight strides
// (si, sk, sl, sj), in `chunks` batch chunks (tr_reserve's answer); launches only.
void tr_prod(const float* x, const float* w, float* y, int64_t a, int64_t b, int64_t c, int64_t d,
             int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj, int chunks,
             cudaStream_t s);

}  // namespace strux::cuda::ks
