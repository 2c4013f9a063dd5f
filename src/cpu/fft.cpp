#include "cpu/fft.hpp"

#include <fftw3.h>

#include <map>
#include <mutex>

#include "core/checked_size.hpp"
#include "strux/core.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace strux::cpu {

int64_t good_fft_size(int64_t n) {
  check_positive(n, "fft size");
  for (int64_t m = n;; ++m) {
    int64_t r = m;
    for (int64_t p : {2, 3, 5, 7})
      while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}

namespace {
// FFTW's planner is not thread-safe: one lock for every planner call of both precisions.
std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}
bool smooth(int64_t n) { return good_fft_size(n) == n; }
// MEASURE pays for itself on the large smooth sizes we reuse; for odd sizes ESTIMATE
// avoids seconds of planning on a size seen once.
unsigned plan_flags(int64_t n) { return (smooth(n) && n >= 256) ? FFTW_MEASURE : FFTW_ESTIMATE; }

template <class T> struct Fftw;
template <> struct Fftw<float> {
  using C = fftwf_complex;
  static void* malloc(size_t b) { return fftwf_malloc(b); }
  static void free(void* p) { fftwf_free(p); }
  static void* r2c(int n, float* i, C* o, unsigned f) { return fftwf_plan_dft_r2c_1d(n, i, o, f); }
  static void* c2r(int n, C* i, float* o, unsigned f) { return fftwf_plan_dft_c2r_1d(n, i, o, f); }
  static void exec_r2c(void* p, float* i, C* o) { fftwf_execute_dft_r2c((fftwf_plan)p, i, o); }
  static void exec_c2r(void* p, C* i, float* o) { fftwf_execute_dft_c2r((fftwf_plan)p, i, o); }
  static void destroy(void* p) { fftwf_destroy_plan((fftwf_plan)p); }
};
template <> struct Fftw<double> {
  using C = fftw_complex;
  static void* malloc(size_t b) { return fftw_malloc(b); }
  static void free(void* p) { fftw_free(p); }
  static void* r2c(int n, double* i, C* o, unsigned f) { return fftw_plan_dft_r2c_1d(n, i, o, f); }
  static void* c2r(int n, C* i, double* o, unsigned f) { return fftw_plan_dft_c2r_1d(n, i, o, f); }
  static void exec_r2c(void* p, double* i, C* o) { fftw_execute_dft_r2c((fftw_plan)p, i, o); }
  static void exec_c2r(void* p, C* i, double* o) { fftw_execute_dft_c2r((fftw_plan)p, i, o); }
  static void destroy(void* p) { fftw_destroy_plan((fftw_plan)p); }
};
}  // namespace

template <class T>
AlignedBuffer<T>::AlignedBuffer(int64_t count) : n_(count) {
  if (count > 0) {
    // Callers check their size products (core/checked_size.hpp); this bound keeps the byte count
    // itself from wrapping. Out of memory is MemoryError; bindings add the argument's name.
    if (count <= kMaxBytes / int64_t(sizeof(T)))
      p_ = static_cast<T*>(Fftw<float>::malloc(sizeof(T) * size_t(count)));
    if (!p_)
      throw MemoryError(msg("out of memory allocating ", count, " x ", sizeof(T), " = ",
                            count <= kMaxBytes ? msg(count * int64_t(sizeof(T))) : std::string("more than 2^50"),
                            " bytes"));
  }
}
template <class T>
AlignedBuffer<T>& AlignedBuffer<T>::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) Fftw<float>::free(p_);
    p_ = o.p_; n_ = o.n_; o.p_ = nullptr; o.n_ = 0;
  }
  return *this;
}
template <class T>
AlignedBuffer<T>::~AlignedBuffer() {
  if (p_) Fftw<float>::free(p_);
}

template <class T>
RealFFT<T>::RealFFT(int64_t n) : n_(n) {
  check_positive(n, "fft size");
  check_arg(n <= INT32_MAX, "fft size", "expected at most 2^31-1 points, got ", n);
  AlignedBuffer<T> re(n);
  AlignedBuffer<cplx<T>> ce(n / 2 + 1);
  using C = typename Fftw<T>::C;
  auto* cp = reinterpret_cast<C*>(ce.data());
  std::lock_guard<std::mutex> lock(planner_mutex());
  unsigned f = plan_flags(n);
  fwd_ = Fftw<T>::r2c(int(n), re.data(), cp, f);
  inv_ = Fftw<T>::c2r(int(n), cp, re.data(), f);
  if (!fwd_ || !inv_) throw BackendError(msg("FFTW could not plan a real transform of size ", n));
}

template <class T>
RealFFT<T>::~RealFFT() {
  std::lock_guard<std::mutex> lock(planner_mutex());
  if (fwd_) Fftw<T>::destroy(fwd_);
  if (inv_) Fftw<T>::destroy(inv_);
}

template <class T>
std::shared_ptr<const RealFFT<T>> RealFFT<T>::get(int64_t n) {
  static std::mutex m;
  static std::map<int64_t, std::shared_ptr<const RealFFT<T>>> cache;
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  auto p = std::make_shared<const RealFFT<T>>(n);
  cache.emplace(n, p);
  return p;
}

template <class T>
void RealFFT<T>::forward(T* in, cplx<T>* out) const {
  Fftw<T>::exec_r2c(fwd_, in, reinterpret_cast<typename Fftw<T>::C*>(out));
}
template <class T>
void RealFFT<T>::inverse(cplx<T>* in, T* out) const {
  Fftw<T>::exec_c2r(inv_, reinterpret_cast<typename Fftw<T>::C*>(in), out);
}

template class AlignedBuffer<float>;
template class AlignedBuffer<double>;
template class AlignedBuffer<cplx<float>>;
template class AlignedBuffer<cplx<double>>;
template class RealFFT<float>;
template class RealFFT<double>;

namespace {
int g_threads = 0;
}
int num_threads() {
#ifdef _OPENMP
  return g_threads > 0 ? g_threads : omp_get_max_threads();
#else
  return 1;
#endif
}
void set_num_threads(int n) {
  // An OpenMP team of 10^5 threads exhausts the process's stacks and crashes inside libgomp.
  check_arg(n >= 0 && n <= kMaxThreads, "threads", "expected 0 (default) to ", kMaxThreads, ", got ", n);
  g_threads = n;
}

}  // namespace strux::cpu
