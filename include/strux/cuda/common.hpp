// Types shared by the CUDA plans' public headers. No CUDA header is needed to use them:
// a stream travels as the opaque cudaStream_t pointer type.
#pragma once

#include <cstdint>

struct CUstream_st;

namespace strux::cuda {

using Stream = CUstream_st*;  // == cudaStream_t; nullptr is the legacy default stream

// Element types at the array boundary. Arithmetic is float32 for f16/bf16/f32/c64, float64 for
// f64/c128.
enum class DType : int { f32 = 0, f64 = 1, f16 = 2, bf16 = 3, c64 = 4, c128 = 5 };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::f16: return "float16";
    case DType::c64: return "complex64";
    case DType::bf16: return "bfloat16";
    case DType::c128: return "complex128";
  }
  return "?";
}

}  // namespace strux::cuda
