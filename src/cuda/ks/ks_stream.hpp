// float32 batch-last ks product streaming batch tiles past a W held in shared memory
// (ks_stream.cuh; private to src/cuda/ks).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::ks {

// Batch tile, ring depth and m16 tiles per warp item of the streaming kernel; tn == 0: it does
// not apply.
struct StreamCfg {
  int tn = 0, stages = 0, mt = 0;
  bool ok() const { return tn > 0; }
};

// The tile for a batch-last group of b outputs and c inputs on the current device (ks_stream.cu:
// the order and why); tn_force (32, 64 or 128) and mt_force (1 or 2) keep only that value
// (0 = any). tn == 0 when W and two stages do not fit in one block's shared memory.
StreamCfg stream_pick(int64_t b, int64_t c, int tn_force, int mt_force);
// y = K' x (batch-last) for pattern (a, b, c, d), weight strides (si, sk, sl, sj); launches only.
void stream_prod(const float* x, const float* w, float* y, int64_t a, int64_t b, int64_t c,
                 int64_t d, int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj,
                 StreamCfg cfg, cudaStream_t s);

}  // namespace strux::cuda::ks
