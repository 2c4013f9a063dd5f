#include "cpu/threads.hpp"

#include <time.h>

#include <algorithm>
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
thread_local int t_team = 0;  // size of the Team the calling thread is in (0: none)

double seconds(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

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

bool threads_explicit() { return g_threads.load(std::memory_order_relaxed) > 0; }

int partition_threads() {
#ifdef _OPENMP
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : default_threads();
#else
  return 1;
#endif
}

int num_threads() {
#ifdef _OPENMP
  if (t_team > 0) return t_team;
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

// The races between concurrent calls of one site only blur a heuristic: relaxed atomics.
int TeamTuner::threads(int want) {
  if (want <= 1) return want;
  int left = serial_left_.load(std::memory_order_relaxed);
  while (left > 0) {
    if (serial_left_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
      if (left == 1) probing_.store(true, std::memory_order_relaxed);
      return 1;
    }
  }
  return want;
}

void TeamTuner::record(int used, double wall_s, double cpu_s) {
  if (used <= 1 || wall_s <= 0) return;
  const double r = cpu_s > 0 ? wall_s / cpu_s : 4.0;
  // A probe weighs more: it is the only news after a serial stretch.
  const double w = probing_.exchange(false, std::memory_order_relaxed) ? 0.5 : 0.25;
  const double mean = (1 - w) * ratio_.load(std::memory_order_relaxed) + w * std::min(r, 4.0);
  ratio_.store(mean, std::memory_order_relaxed);
  const int b = backoff_.load(std::memory_order_relaxed);
  if (mean * kMinSpeedup <= 1.0) {
    backoff_.store(std::max(1, b / 2), std::memory_order_relaxed);
    return;
  }
  serial_left_.store(b, std::memory_order_relaxed);
  backoff_.store(std::min(2 * b, kMaxBackoff), std::memory_order_relaxed);
}

Team::Team(TeamTuner& tuner) {
  if (t_team > 0) {  // nested: the outer call decided
    size_ = t_team;
    return;
  }
  const int want = num_threads();
  size_ = threads_explicit() ? want : tuner.threads(want);
  t_team = size_;
  outer_ = true;
  if (size_ > 1 && !threads_explicit()) {
    tuner_ = &tuner;
    wall0_ = seconds(CLOCK_MONOTONIC);
    cpu0_ = seconds(CLOCK_PROCESS_CPUTIME_ID);
  }
}

Team::~Team() {
  if (!outer_) return;
  t_team = 0;
  if (tuner_)
    tuner_->record(size_, seconds(CLOCK_MONOTONIC) - wall0_, seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0_);
}

SerialScope::SerialScope() : saved_(t_team) { t_team = 1; }
SerialScope::~SerialScope() { t_team = saved_; }

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
