// cuFFT plans over contiguous rows for the circulant scans: `batch` real rows of length n
// (R2C / D2Z) or half spectra of n/2 + 1 (C2R / Z2D). No auto-allocated work area: the largest size is
// accumulated into *work for the owner to provide. Returns the raw handle (owner destroys it).
#pragma once

#include <cufft.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "cuda/check.hpp"

namespace strux::cuda {

inline int make_rows_plan(int64_t n, int64_t batch, cufftType type, int64_t* work) {
  cufftHandle h;
  STRUX_CUFFT(cufftCreate(&h));
  STRUX_CUFFT(cufftSetAutoAllocation(h, 0));
  long long nn[1] = {n};
  const long long nf = n / 2 + 1;
  const bool r2c = type == CUFFT_R2C || type == CUFFT_D2Z;
  long long inem[1] = {r2c ? n : nf}, onem[1] = {r2c ? nf : n};
  size_t ws = 0;
  STRUX_CUFFT(cufftMakePlanMany64(h, 1, nn, inem, 1, inem[0], onem, 1, onem[0], type, batch, &ws));
  *work = std::max<int64_t>(*work, int64_t(ws));
  return h;
}

// Puts the plans on stream s with the caller's work area (each call: the stream is the caller's).
inline void bind_plans(std::initializer_list<int> plans, void* fwork, cudaStream_t s) {
  for (int p : plans) {
    STRUX_CUFFT(cufftSetStream(p, s));
    STRUX_CUFFT(cufftSetWorkArea(p, fwork));
  }
}

}  // namespace strux::cuda
