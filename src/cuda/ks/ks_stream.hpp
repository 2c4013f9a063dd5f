// float32 batch-last ks product streaming batch tiles past a W held in shared memory
// (ks_stream.cuh; private to src/cuda/ks).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::ks {

// Batch tile and ring depth of the streaming kernel; tn == 0: it does not apply.
struct StreamCfg {
  int tn = 0, stages = 0;
  bool ok() const { return tn > 0; }
};

// The tile for a batch-last group of b outputs and c inputs on the current device: the first of
// (128, 3), (64, 4), (128, 2), (64, 3), (64, 2), (32, 4), (32, 3), (32, 2) whose W and ring fit
// in one block's shared memory; tn_force (32, 64 or 128; 0 = any) keeps only that tile width.
StreamCfg stream_pick(int64_t b, int64_t c, int tn_force);
// y = K' x (batch-last) for pattern (a, b, c, d), weight strides (si, sk, sl, sj); launches only.
void stream_prod(const float* x, const float* w, float* y, int64_t a, int64_t b, int64_t c,
                 int64_t d, int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj,
                 StreamCfg cfg, cudaStream_t s);

}  // namespace strux::cuda::ks
