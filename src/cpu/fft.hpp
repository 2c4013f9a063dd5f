// FFTW wrapper for the CPU backend: cached real 1-D plans plus aligned buffers.
//
// Why one transform per plan: every family fuses its own pre/post work (padding, gates,
// casting, spectrum products) into the copy in and out of a per-thread buffer, and runs
// independent rows in an OpenMP loop. fftw_execute_dft_* on a shared plan is thread-safe;
// planning is not, so plans are made once under a lock and cached by size.
// FFTW's new-array execute needs buffers aligned like the planning buffers: always
// allocate them with AlignedBuffer.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>

namespace strux::cpu {

template <class T>
using cplx = std::complex<T>;

// Smallest m >= n whose prime factors are 2, 3, 5 and 7 (fast FFTW sizes).
int64_t good_fft_size(int64_t n);

// Owning, SIMD-aligned, uninitialised array (fftw_malloc).
template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(int64_t count);
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();
  T* data() const { return p_; }
  int64_t size() const { return n_; }
  T& operator[](int64_t i) const { return p_[i]; }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
};

// Real <-> half-complex transform of length n (T = float or double).
// forward: n reals -> n/2+1 complex, unnormalised, e^{-2 pi i jk/n}.
// inverse: n/2+1 complex -> n reals, unnormalised (divide by n); overwrites its input.
// Pointers must come from AlignedBuffer (or share its alignment).
template <class T>
class RealFFT {
 public:
  // Cached: the same n returns the same plan. Thread-safe.
  static std::shared_ptr<const RealFFT> get(int64_t n);
  ~RealFFT();
  int64_t n() const { return n_; }
  int64_t nfreq() const { return n_ / 2 + 1; }
  void forward(T* in, cplx<T>* out) const;
  void inverse(cplx<T>* in, T* out) const;

  explicit RealFFT(int64_t n);  // use get()

 private:
  int64_t n_;
  void* fwd_ = nullptr;
  void* inv_ = nullptr;
};

// Threads the CPU backend uses (OpenMP), settable (0 = default = omp_get_max_threads(), at most
// kMaxThreads).
inline constexpr int kMaxThreads = 1024;
int num_threads();
void set_num_threads(int n);

}  // namespace strux::cpu
