// Return-code checks for CUDA, cuFFT and cuBLAS. A failure throws strux::BackendError (MemoryError
// when out of memory) naming
// file:line and the call, so nothing prints and continues (DESIGN.md "Errors are loud").
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <string>
#include <utility>

#include "core/checked_size.hpp"
#include "strux/core.hpp"

namespace strux::cuda {

// The runtime keeps one last-error slot per host thread; a failed runtime call sets it, and
// STRUX_LAUNCH (cudaGetLastError) reads it after our launches. A strux call that fails must
// leave no error of its own in the slot, or the next valid call (a cached plan's first launch)
// would raise it again. A sticky error (a faulted context) cannot be cleared this way and keeps
// surfacing, as it should. Only an error that is our own is cleared: the one this call returned.
inline void clear_own_error(cudaError_t e) {
  if (e != cudaSuccess && cudaPeekAtLastError() == e) (void)cudaGetLastError();
}

// Out of device memory is strux::MemoryError (Python: MemoryError); everything else BackendError.
inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  clear_own_error(e);
  std::string m = msg(file, ":", line, ": ", call, " failed: ", cudaGetErrorName(e), " (",
                      cudaGetErrorString(e), ")");
  if (e == cudaErrorMemoryAllocation) throw MemoryError(std::move(m));
  throw BackendError(std::move(m));
}

// cuFFT and cuBLAS launch through the same runtime: when one of them fails, an error it left in
// the slot (a failed launch or allocation of its own) is part of this failure. It is cleared and
// named in the message, so nothing is lost and the next call starts clean.
inline std::string take_runtime_error() {
  const cudaError_t e = cudaPeekAtLastError();
  if (e == cudaSuccess) return std::string();
  (void)cudaGetLastError();
  return msg(" (runtime error: ", cudaGetErrorName(e), ")");
}

inline void check_cufft(cufftResult r, const char* call, const char* file, int line) {
  if (r == CUFFT_SUCCESS) return;
  std::string m = msg(file, ":", line, ": ", call, " failed: cufftResult ", int(r), take_runtime_error());
  if (r == CUFFT_ALLOC_FAILED) throw MemoryError(std::move(m));
  throw BackendError(std::move(m));
}

inline void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::string m = msg(file, ":", line, ": ", call, " failed: ", cublasGetStatusName(s), take_runtime_error());
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw MemoryError(std::move(m));
  throw BackendError(std::move(m));
}

}  // namespace strux::cuda

#define STRUX_CUDA(call) ::strux::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define STRUX_CUFFT(call) ::strux::cuda::check_cufft((call), #call, __FILE__, __LINE__)
#define STRUX_CUBLAS(call) ::strux::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After every kernel launch: catches bad launch configurations at once (asynchronous faults
// surface at the next checked call on the stream).
#define STRUX_LAUNCH(name) \
  ::strux::cuda::check_cuda(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)
