// cp.async (sm_80+): global → shared copies that bypass registers, in commit groups, so a CTA's
// next tile is in flight while it computes on the current one.
#pragma once

#include <cstdint>

namespace strux::cuda {

// A 16-byte copy with zero fill: when !ok no byte is read (src must still be a valid address) and
// the 16 bytes at dst become zero. dst and src 16-byte aligned; .cg: cached in L2 only.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight (a barrier makes
// the other threads' copies visible).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace strux::cuda
