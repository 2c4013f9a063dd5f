// What the CUDA backends of the operator layer share: the dtype mapping to the CUDA plans, the
// device guard, the workspace (the caller's or the backend's own) and two small elementwise
// kernels (a cotangent's last step folded into a copy; float32 rounded to the element type).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "api/common.hpp"
#include "core/dispatch.hpp"
#include "cuda/buffer.hpp"
#include "cuda/device.hpp"
#include "cuda/elem.cuh"
#include "strux/cuda/common.hpp"

namespace strux::api {

inline cuda::DType to_cuda(DType t) {
  switch (t) {
    case DType::f16: return cuda::DType::f16;
    case DType::bf16: return cuda::DType::bf16;
    case DType::f32: return cuda::DType::f32;
    case DType::f64: return cuda::DType::f64;
    case DType::c64: return cuda::DType::c64;
    case DType::c128: return cuda::DType::c128;
  }
  throw TypeError(msg("unknown dtype code ", int(t)));
}

inline cuda::Stream stream_of(Stream s) { return static_cast<cuda::Stream>(s.handle); }

// Element types of the CUDA backends (complex ones travel as their real pairs in the kernels here).
struct CudaReals : core::RealScalars {
  using f16 = __half;
  using bf16 = __nv_bfloat16;
};

// Makes the problem's device current for the guard's lifetime (plans allocate on the current
// device and kernels launch there). ValueError naming 'problem.device' for a missing device.
class DeviceGuard {
 public:
  explicit DeviceGuard(const Device& d) {
    STRUX_CUDA(cudaGetDevice(&prev_));
    if (prev_ != d.index) STRUX_CUDA(cudaSetDevice(d.index));
  }
  ~DeviceGuard() {
    int cur = prev_;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != prev_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

inline void check_cuda_device(const Device& d) {
  const int n = cuda::device_count();
  check_arg(d.index >= 0 && d.index < n, "problem.device", "expected a CUDA device index in [0, ", n,
            "), got ", d.index, n == 0 ? " (no CUDA device is visible)" : "");
}

// TypeError naming 'problem.dtype' (`where` supports ...; got ...) unless Set has an element
// type for dt.
template <class Set>
void check_dtype(DType dt, const char* where) {
  core::dispatch<Set>(dt, "problem.dtype", where, [](auto) {});
}

// The CUDA backend Impl of problem p, once p.device is checked to be a visible device.
template <class Impl, class P>
std::unique_ptr<Impl> make_cuda(const P& p, const Options& o) {
  check_cuda_device(p.device);
  return std::make_unique<Impl>(p, o);
}

// Offsets of a workspace cut into parts, each 256-byte aligned.
inline size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The caller's workspace, or the backend's own (allocated at the first call that needs one).
class Scratch {
 public:
  void* get(void* caller, size_t need) {
    if (caller || need == 0) return caller;
    if (own_.bytes() < need) own_.allocate(need);
    return own_.get();
  }
  size_t owned() const { return own_.bytes(); }

 private:
  cuda::DeviceBuffer own_;
};

// out = dh with dh_last added to its last time step (B, T, n) of dtype t, on stream s.
void fold_last(DType t, const void* dh, const void* last, void* out, int64_t B, int64_t T, int64_t n, Stream s);

// y (dtype t: f16 or bf16) = x rounded from float32, on stream s.
void round_from_f32(DType t, const float* x, void* y, int64_t count, Stream s);

}  // namespace strux::api
