// The reversed filter of the dense fftconv kernels (dense.cuh, mma.sync; dense_wgmma.cuh, wgmma) as
// they keep it in shared memory: two parity copies of 16-bit pairs, so that every (k[x], k[x − 1])
// operand pair is one aligned 32-bit load.
#pragma once

#include <cstdint>

namespace strux::cuda::dense {

template <class T>
__device__ __forceinline__ uint16_t bits_of(const T* p, int64_t i) {
  return reinterpret_cast<const uint16_t*>(p)[i];
}
__device__ __forceinline__ uint32_t pack_bits(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

// kE[w] = (r[2w], r[2w + 1]), kO[w] = (r[2w + 1], r[2w + 2]) for w < kwords, with r[z] = k[Z0 − z] (zero
// outside 0 <= Z0 − z < m): the m taps of one filter (k + kb), reversed; by the CTA's `threads`.
template <class T>
__device__ __forceinline__ void stage_reversed_taps(const T* k, int64_t kb, int m, int Z0, int kwords, uint32_t* kE,
                                                    uint32_t* kO, int threads) {
  const auto kr = [&](int z) -> uint16_t {
    const int x = Z0 - z;
    return (x >= 0 && x < m) ? bits_of(k, kb + x) : uint16_t(0);
  };
  for (int w = threadIdx.x; w < kwords; w += threads) {
    const uint16_t a = kr(2 * w), b = kr(2 * w + 1), c = kr(2 * w + 2);
    kE[w] = pack_bits(a, b);
    kO[w] = pack_bits(b, c);
  }
}

}  // namespace strux::cuda::dense
