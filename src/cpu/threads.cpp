#include "cpu/threads.hpp"

#include <atomic>

#include "strux/core.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace strux::cpu {

namespace {
// Atomics: a Python thread may change the count while another is inside a call.
std::atomic<int> g_threads{0};
std::atomic<int> g_default{0};

void check_count(int n, const char* arg) {
  check_arg(n >= 0 && n <= kMaxThreads, arg, "expected an integer in [0, ", kMaxThreads,
            "] (0 = the default), got ", n);
}
}  // namespace

int default_threads() {
  const int d = g_default.load(std::memory_order_relaxed);
  if (d > 0) return d;
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int num_threads() {
#ifdef _OPENMP
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : default_threads();
#else
  return 1;
#endif
}

void set_num_threads(int n) {
  check_count(n, "threads");
  g_threads.store(n, std::memory_order_relaxed);
}

void set_default_threads(int n) {
  check_count(n, "default_threads");
  g_default.store(n, std::memory_order_relaxed);
}

int thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

void serial_blas_in_region() {
#ifdef _OPENMP
  omp_set_num_threads(1);
#endif
}

BlasThreads::BlasThreads() {
#ifdef _OPENMP
  saved_ = omp_get_max_threads();
  omp_set_num_threads(num_threads());
#else
  saved_ = 1;
#endif
}

BlasThreads::~BlasThreads() {
#ifdef _OPENMP
  omp_set_num_threads(saved_);
#endif
}

}  // namespace strux::cpu
