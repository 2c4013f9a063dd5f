// Element conversions and complex helpers for the CUDA kernels. Half types load/store through
// float32; float64 stays float64.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cufft.h>

#include "cuda/check.hpp"

namespace strux::cuda {

__device__ __forceinline__ float to_c(float x) { return x; }
__device__ __forceinline__ double to_c(double x) { return x; }
__device__ __forceinline__ float to_c(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_c(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
struct From;
template <>
struct From<float> {
  static __device__ __forceinline__ float of(float x) { return x; }
};
template <>
struct From<double> {
  static __device__ __forceinline__ double of(double x) { return x; }
};
template <>
struct From<__half> {
  static __device__ __forceinline__ __half of(float x) { return __float2half_rn(x); }
};
template <>
struct From<__nv_bfloat16> {
  static __device__ __forceinline__ __nv_bfloat16 of(float x) { return __float2bfloat16_rn(x); }
};

// Compute type (Tc) per element type: float for all but double.
template <class T>
struct Compute {
  using type = float;
};
template <>
struct Compute<double> {
  using type = double;
};

// Complex type and cuFFT entry points per compute type.
template <class Tc>
struct Fft;
template <>
struct Fft<float> {
  using C = float2;
  static constexpr cufftType r2c = CUFFT_R2C, c2r = CUFFT_C2R;
  static void forward(cufftHandle p, float* in, C* out) {
    STRUX_CUFFT(cufftExecR2C(p, in, reinterpret_cast<cufftComplex*>(out)));
  }
  static void inverse(cufftHandle p, C* in, float* out) {
    STRUX_CUFFT(cufftExecC2R(p, reinterpret_cast<cufftComplex*>(in), out));
  }
};
template <>
struct Fft<double> {
  using C = double2;
  static constexpr cufftType r2c = CUFFT_D2Z, c2r = CUFFT_Z2D;
  static void forward(cufftHandle p, double* in, C* out) {
    STRUX_CUFFT(cufftExecD2Z(p, in, reinterpret_cast<cufftDoubleComplex*>(out)));
  }
  static void inverse(cufftHandle p, C* in, double* out) {
    STRUX_CUFFT(cufftExecZ2D(p, reinterpret_cast<cufftDoubleComplex*>(in), out));
  }
};

template <class C>
__device__ __forceinline__ C cmul(C a, C b) {
  return C{a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x};
}
// conj(a) * b
template <class C>
__device__ __forceinline__ C cmulc(C a, C b) {
  return C{a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x};
}

// Grid for (columns, rows) work: x covers columns, y strides over rows (rows may pass 65535).
inline dim3 grid2(int64_t cols, int64_t rows, int threads) {
  int64_t gx = (cols + threads - 1) / threads;
  int64_t gy = rows < 65535 ? rows : 65535;
  return dim3(unsigned(gx), unsigned(gy > 0 ? gy : 1));
}

}  // namespace strux::cuda
