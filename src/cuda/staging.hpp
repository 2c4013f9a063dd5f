// Staging of real arrays that cuFFT refuses: a real R2C input or C2R output must be aligned to the
// complex element (8 bytes for float32, 16 for float64), or cuFFT returns CUFFT_INVALID_VALUE. A
// contiguous tensor sliced at an odd element offset is such an array; every other family accepts
// it, so the circulant scans copy it through an idle, aligned part of their workspace (one device
// copy each way). Aligned arrays (every fresh allocation) pass straight through.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/check.hpp"

namespace strux::cuda {

inline bool aligned_to(const void* p, int64_t cs) {
  return reinterpret_cast<std::uintptr_t>(p) % std::uintptr_t(cs) == 0;
}

// The pointer a transform reads: p itself when aligned (or null), else `stage` holding a copy of
// its `bytes`.
inline const void* staged_in(const void* p, int64_t bytes, void* stage, int64_t cs, cudaStream_t s) {
  if (!p || aligned_to(p, cs)) return p;
  STRUX_CUDA(cudaMemcpyAsync(stage, p, size_t(bytes), cudaMemcpyDeviceToDevice, s));
  return stage;
}

// The transform writes `out` directly when it is aligned, else `stage`, copied by finish_out.
inline void* out_target(void* out, void* stage, int64_t cs) { return aligned_to(out, cs) ? out : stage; }
inline void finish_out(void* out, const void* target, int64_t bytes, cudaStream_t s) {
  if (target != out) STRUX_CUDA(cudaMemcpyAsync(out, target, size_t(bytes), cudaMemcpyDeviceToDevice, s));
}

}  // namespace strux::cuda
