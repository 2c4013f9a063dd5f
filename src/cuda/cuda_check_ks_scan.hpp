// Return-code checks for the ks and scan CUDA files (to be merged with cuda/check.hpp):
// a failure throws strux::BackendError naming file:line and the call.
#pragma once

#include <cuda_runtime.h>
#include <cufft.h>

#include "strux/core.hpp"

namespace strux::cuda::kss {

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw BackendError(msg(file, ":", line, ": ", call, " failed: ", cudaGetErrorName(e), " (",
                           cudaGetErrorString(e), ")"));
}

inline void check_cufft(cufftResult r, const char* call, const char* file, int line) {
  if (r != CUFFT_SUCCESS)
    throw BackendError(msg(file, ":", line, ": ", call, " failed: cufftResult ", int(r)));
}

}  // namespace strux::cuda::kss

#define STRUX_KSS_CUDA(call) ::strux::cuda::kss::check_cuda((call), #call, __FILE__, __LINE__)
#define STRUX_KSS_CUFFT(call) ::strux::cuda::kss::check_cufft((call), #call, __FILE__, __LINE__)
// After every launch: bad configurations fail at once; faults surface at the next checked call.
#define STRUX_KSS_LAUNCH(name) \
  ::strux::cuda::kss::check_cuda(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)
