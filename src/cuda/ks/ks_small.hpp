// The small-batch ks path (KsPath::small, ks_small.cu): products at batch 1-256 that read each
// weight once per tile of batch rows held in registers (private to src/cuda/ks).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::ks {

// The largest batch the path takes (a weight is read once per 8 batch rows beyond batch 4).
constexpr int64_t kSmallMaxBatch = 4096;

bool small_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch);

// y = x K'^T (batch-first) or K' x (batch-last) for pattern (a, b, c, d), weights
// w[i*si + k*sk + l*sl + j*sj] (forward: w's own strides; dx: the middle two swapped).
template <class T>
void small_prod(const T* x, const T* w, T* y, int64_t a, int64_t b, int64_t c, int64_t d,
                int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj, bool bl,
                cudaStream_t s);

}  // namespace strux::cuda::ks
