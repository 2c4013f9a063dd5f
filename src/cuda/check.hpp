// Return-code checks for CUDA, cuFFT and cuBLAS. A failure throws strux::BackendError naming
// file:line and the call, so nothing prints and continues (DESIGN.md "Errors are loud").
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include "strux/core.hpp"

namespace strux::cuda {

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw BackendError(msg(file, ":", line, ": ", call, " failed: ", cudaGetErrorName(e), " (",
                           cudaGetErrorString(e), ")"));
}

inline void check_cufft(cufftResult r, const char* call, const char* file, int line) {
  if (r != CUFFT_SUCCESS)
    throw BackendError(msg(file, ":", line, ": ", call, " failed: cufftResult ", int(r)));
}

inline void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw BackendError(msg(file, ":", line, ": ", call, " failed: ", cublasGetStatusName(s)));
}

}  // namespace strux::cuda

#define STRUX_CUDA(call) ::strux::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define STRUX_CUFFT(call) ::strux::cuda::check_cufft((call), #call, __FILE__, __LINE__)
#define STRUX_CUBLAS(call) ::strux::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After every kernel launch: catches bad launch configurations at once (asynchronous faults
// surface at the next checked call on the stream).
#define STRUX_LAUNCH(name) \
  ::strux::cuda::check_cuda(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)
