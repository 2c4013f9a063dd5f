// Per-thread scratch for OpenMP regions, allocated before the region opens.
//
// Why: an exception may not leave an OpenMP region (the runtime calls std::terminate), and an
// allocation that fails inside one throws. So every buffer a region needs is allocated here,
// outside it, as one block of `nthreads` slices; a thread takes slice omp_get_thread_num().
// Slices start 64 bytes apart like AlignedBuffer's own start, so FFTW's new-array execute
// (which needs the planning buffers' alignment) accepts them.
#pragma once

#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/checked_size.hpp"
#include "cpu/fft.hpp"

namespace strux::cpu {

template <class T>
class ThreadScratch {
 public:
  ThreadScratch(int nthreads, int64_t count)
      : stride_(round_up(count)),
        buf_(checked_bytes("threads", {int64_t(nthreads < 1 ? 1 : nthreads), stride_}, sizeof(T)) /
             int64_t(sizeof(T))) {}
  // The calling thread's slice (inside a region; slice 0 outside one).
  T* mine() const { return buf_.data() + int64_t(thread()) * stride_; }

 private:
  static int64_t round_up(int64_t n) {
    const int64_t q = 64 / int64_t(sizeof(T)) > 0 ? 64 / int64_t(sizeof(T)) : 1;
    return (n + q - 1) / q * q;
  }
  static int thread() {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
  }
  int64_t stride_;
  AlignedBuffer<T> buf_;
};

// A slice seen like an AlignedBuffer (data(), operator[]), so loop bodies read the same.
template <class T>
struct AlignedView {
  T* p;
  T* data() const { return p; }
  T& operator[](int64_t i) const { return p[i]; }
};

}  // namespace strux::cpu
