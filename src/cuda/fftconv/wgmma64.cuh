// One warpgroup tensor-core product for the dense fftconv kernel on sm_90a (dense_wgmma.cuh):
// D (64 × 128, float32, in registers) += A (64 × 16, 16-bit, in registers) · B (16 × 128, 16-bit,
// K-major in shared memory with the 128-byte swizzle, by descriptor). Generated operand lists
// (64 accumulator registers); the sm_90a-only instructions compile to nothing elsewhere.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace strux::cuda::dense::wg {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define STRUX_DENSE_WGMMA 1
#endif

__device__ __forceinline__ void wgmma_fence() {
#ifdef STRUX_DENSE_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef STRUX_DENSE_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef STRUX_DENSE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Pins registers in place for the compiler (no instruction): accesses to the accumulators and to
// the A registers stay on their side of wgmma.fence / wgmma.wait_group. The PTX rules (wgmma.fence:
// a fence between any register access and a wgmma that reads or writes the same registers;
// wgmma.wait_group: no access to them before the wait that retires it) are about PTX order, and
// the asm statements above order memory only, not register code such as the zeroing or the f32 to
// 16-bit conversion of the accumulators.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N, int M>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// Shared-memory writes by ordinary stores made visible to wgmma's reads (the async proxy).
__device__ __forceinline__ void fence_proxy_async() {
#ifdef STRUX_DENSE_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Descriptor of a K-major operand with the 128-byte swizzle: rows of 128 bytes, 8-row atoms
// 1024 bytes apart (SBO), the leading offset unused for this layout (1), base offset 0 (the start
// row is a multiple of 8 in a 1024-byte aligned buffer; a start 32·kk bytes into the row selects
// the k-step).
__device__ __forceinline__ uint64_t desc_sw128(uint32_t smem_addr) {
  uint64_t d = 0;
  d |= uint64_t((smem_addr & 0x3FFFF) >> 4);
  d |= uint64_t(1) << 16;
  d |= uint64_t(1024 >> 4) << 32;
  d |= uint64_t(1) << 62;
  return d;
}

// One m64n128k16 product, float32 accumulators d, A (AB: f16 or bf16) in registers, B by descriptor;
// accumulate 0 zeroes d first (scale-d).
#define STRUX_WGMMA_M64N128K16(AB) \
  asm volatile( \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." AB "." AB " " \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, " \
      "{%64,%65,%66,%67}, %69, p, 1, 1, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(desc))

template <class T>
struct Wgmma;
template <>
struct Wgmma<__half> {
  static __device__ __forceinline__ void mma(float (&d)[64], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#ifdef STRUX_DENSE_WGMMA
    STRUX_WGMMA_M64N128K16("f16");
#endif
  }
};
template <>
struct Wgmma<__nv_bfloat16> {
  static __device__ __forceinline__ void mma(float (&d)[64], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#ifdef STRUX_DENSE_WGMMA
    STRUX_WGMMA_M64N128K16("bf16");
#endif
  }
};
#undef STRUX_WGMMA_M64N128K16

}  // namespace strux::cuda::dense::wg
