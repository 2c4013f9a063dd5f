// Return-code checks for CUDA, cuFFT and cuBLAS. A failure throws strux::BackendError naming
// file:line and the call, so nothing prints and continues (DESIGN.md "Errors are loud").
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include "strux/core.hpp"

namespace strux::cuda {

// A failed runtime call also leaves its error in this host thread's last-error slot. The
// exception reports it, so it is taken out of the slot first: left there, the next library to read
// the slot after its own launches reports it as its own failure, in an unrelated later call of
// the same thread (cuFFT's exec returns CUFFT_EXEC_FAILED, PyTorch's launch check raises). A
// sticky error (a kernel fault) stays: every later call reports it anyway.
inline void clear_last_error() { (void)cudaGetLastError(); }

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) {
    clear_last_error();
    throw BackendError(msg(file, ":", line, ": ", call, " failed: ", cudaGetErrorName(e), " (",
                           cudaGetErrorString(e), ")"));
  }
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
