// 16-bit tensor-core operands for mma.sync m16n8k16 with float32 accumulation (sm_80 and later):
// rounding and packing of float pairs into one operand register, the product, and ldmatrix.
// Shared by the fftconv tensor-core kernels (tensor.cuh) and dense kernels (dense.cuh).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace strux::cuda {

template <class E>
struct Mma16;
template <>
struct Mma16<__half> {
  static constexpr float kLo = 2048.f;  // 2^11: lo halves (x − round(x))·kLo stay normal f16
  static __device__ __forceinline__ float round(float x) { return __half2float(__float2half_rn(x)); }
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct Mma16<__nv_bfloat16> {
  static constexpr float kLo = 256.f;  // 2^8
  static __device__ __forceinline__ float round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// Four 8×8 matrices of 16-bit elements from shared memory: lane l gives the shared-space address
// (__cvta_generic_to_shared) of row l % 8 of matrix l / 8 (16 bytes each); a[j] receives matrix j
// in the mma fragment layout.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(row));
}

// As ldmatrix_x4, each 8×8 matrix transposed: lane 4·g + c receives elements (2c, g) and
// (2c + 1, g) of its matrix (rows as addressed), the mma fragment of the transposed matrix.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&a)[4], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(row));
}

}  // namespace strux::cuda
