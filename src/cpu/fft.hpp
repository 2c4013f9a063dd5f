// FFTW wrapper for the CPU backend: cached real 1-D plans plus aligned buffers.
//
// Why one transform per plan: every family fuses its own pre/post work (padding, gates,
// casting, spectrum products) into the copy in and out of a per-thread buffer, and runs
// independent rows in an OpenMP loop. fftw_execute_dft_* on a shared plan is thread-safe;
// planning is not, so plans are made under the planner lock and cached by size (a bounded
// cache; lookups never wait for another size being planned).
//
// Planning effort: FFTW_ESTIMATE by default, so a new size costs microseconds to plan, not
// seconds (FFTW_MEASURE at 2^21 points takes tens of seconds, in every new process). Long jobs
// choose Measure or Patient; what those planners learn is FFTW wisdom, which is saved to a
// directory given by the caller (the Python layer passes a user cache folder) and loaded from
// it, so a tuned plan outlives the process. Estimate plans use any wisdom that is there.
// FFTW's new-array execute needs buffers aligned like the planning buffers: always
// allocate them with AlignedBuffer.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>

#include "cpu/threads.hpp"

namespace strux::cpu {

template <class T>
using cplx = std::complex<T>;

// Smallest m >= n whose prime factors are 2, 3, 5 and 7 (fast FFTW sizes). Walks the
// products 3^i 5^j 7^k (at most a few thousand for n < 2^62) and rounds each up by a power of
// two, so it is fast for any n; ValueError for n < 1 or n > 2^62.
int64_t good_fft_size(int64_t n);

// How hard FFTW plans a new size (FFTW_ESTIMATE, FFTW_MEASURE, FFTW_PATIENT).
enum class FFTPlanning { Estimate, Measure, Patient };
// "estimate" / "measure" / "patient"; ValueError naming 'planning' otherwise.
FFTPlanning parse_fft_planning(const std::string& s);
const char* fft_planning_name(FFTPlanning p);
// Effort for sizes planned from now on (process-wide). Cached plans made with less effort are
// re-planned on their next lookup.
void set_fft_planning(FFTPlanning p);
FFTPlanning fft_planning();

// Wisdom folder: loads `<dir>/fftw3.wisdom` and `<dir>/fftw3f.wisdom` where present (a file
// that is not valid wisdom is skipped) and, from then on, rewrites them (atomically) whenever
// a Measure or Patient plan is made. Empty = no folder. Returns the number of files loaded.
int set_wisdom_dir(const std::string& dir);
std::string wisdom_dir();
// Writes both wisdom files into `dir` now (folders created). BackendError if it cannot.
void save_wisdom(const std::string& dir);

// Plans kept per precision; the least recently used is dropped beyond it (operators hold
// their own reference, so dropping never invalidates a live plan).
inline constexpr size_t kFFTCacheSize = 64;

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
  // Cached: the same n returns the same plan (made with the current planning effort, or more).
  // Thread-safe.
  static std::shared_ptr<const RealFFT> get(int64_t n);
  ~RealFFT();
  int64_t n() const { return n_; }
  int64_t nfreq() const { return n_ / 2 + 1; }
  void forward(T* in, cplx<T>* out) const;
  void inverse(cplx<T>* in, T* out) const;

  RealFFT(int64_t n, FFTPlanning effort);  // use get()
  FFTPlanning effort() const { return effort_; }

 private:
  int64_t n_;
  FFTPlanning effort_;
  void* fwd_ = nullptr;
  void* inv_ = nullptr;
};

}  // namespace strux::cpu
