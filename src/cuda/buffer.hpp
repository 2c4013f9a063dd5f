// Device memory owned by a plan: allocated once at plan time, freed with the plan.
#pragma once

#include <cstddef>
#include <utility>

#include "cuda/check.hpp"

namespace strux::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { allocate(bytes); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~DeviceBuffer() { release(); }  // never throws from a destructor
  void allocate(size_t bytes) {
    release();
    n_ = bytes;
    if (!bytes) return;
    const cudaError_t e = cudaMalloc(&p_, bytes);
    if (e == cudaErrorMemoryAllocation) {
      clear_own_error(e);  // the next call must not see it (check.hpp)
      p_ = nullptr;
      n_ = 0;
      throw MemoryError(msg("out of device memory allocating ", bytes, " bytes"));
    }
    STRUX_CUDA(e);
  }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  void* get() const { return p_; }
  size_t bytes() const { return n_; }

 private:
  // A failed free is not reported (destructors do not throw), and not left in the thread's
  // last-error slot either (see clear_own_error).
  void release() {
    if (p_) clear_own_error(cudaFree(p_));
    p_ = nullptr;
  }
  void* p_ = nullptr;
  size_t n_ = 0;
};

// A cuFFT plan handle, destroyed with its owner.
class FFTPlan {
 public:
  FFTPlan() = default;
  FFTPlan(const FFTPlan&) = delete;
  FFTPlan& operator=(const FFTPlan&) = delete;
  ~FFTPlan() {
    if (made_) cufftDestroy(h_);
  }
  // 1-D transforms of length n, `batch` of them, advanced layout (elements, not bytes).
  // Work area is not auto-allocated: the owner gives one (see work_size / set_work).
  void make(int64_t n, int64_t batch, int64_t istride, int64_t idist, int64_t inembed,
            int64_t ostride, int64_t odist, int64_t onembed, cufftType type) {
    STRUX_CUFFT(cufftCreate(&h_));
    made_ = true;
    STRUX_CUFFT(cufftSetAutoAllocation(h_, 0));
    long long nn[1] = {n}, in[1] = {inembed}, on[1] = {onembed};
    size_t ws = 0;
    STRUX_CUFFT(cufftMakePlanMany64(h_, 1, nn, in, istride, idist, on, ostride, odist, type, batch, &ws));
    work_ = ws;
  }
  size_t work_size() const { return work_; }
  void set_work(void* p) { STRUX_CUFFT(cufftSetWorkArea(h_, p)); }
  cufftHandle get() const { return h_; }

 private:
  cufftHandle h_{};
  bool made_ = false;
  size_t work_ = 0;
};

// Sizes whose only prime factors are 2, 3, 5, 7: cuFFT's fast radices.
inline int64_t good_fft_size(int64_t n) {
  if (n <= 1) return 1;
  for (int64_t m = n;; ++m) {
    int64_t r = m;
    for (int64_t p : {2, 3, 5, 7})
      while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}

}  // namespace strux::cuda
