// Threads of the CPU backend: how many, and how BLAS is kept from opening teams of its own.
//
// Why a default set from outside: the right count depends on the process's CPU affinity and
// its cgroup CPU quota, which the Python layer reads once at import (library code reads no
// files or environment variables) and passes to set_default_threads. Without it the default is
// omp_get_max_threads() (OMP_NUM_THREADS, else the CPUs in the affinity mask).
#pragma once

#include <atomic>
#include <cstdint>

namespace strux::cpu {

// Upper bound on any thread count given to the backend: far above any machine, low enough that
// a team of that size can actually be created (100000 threads exhausts the process).
inline constexpr int kMaxThreads = 4096;

// Threads a call uses: inside a Team (below), the team's size; else set_num_threads(n) if n > 0,
// else the default.
int num_threads();
// Whether set_num_threads gave an explicit count (then Teams never adapt it).
bool threads_explicit();
// The count to cut work into parts by, wherever the parts change the rounding (per-part partial
// sums): set_num_threads(n) or the default, never the adapted team size, so that results are
// the same call after call for one setting, whichever team ran them.
int partition_threads();
// n in [0, kMaxThreads]; 0 returns to the default. ValueError naming 'threads' otherwise.
void set_num_threads(int n);
// The default when no explicit count is set; 0 = omp_get_max_threads(). Same range as above.
void set_default_threads(int n);
int default_threads();

// The calling thread's index inside a parallel region (0 outside one).
int thread_index();

// Makes BLAS calls of this thread serial for the rest of the enclosing parallel region.
// Why: OpenBLAS (OpenMP build) threads a call unless omp_in_parallel() -- false in a team of
// one, e.g. `num_threads(1)` -- or omp_get_max_threads() == 1; a BLAS team nested inside ours
// oversubscribes the cores (30-300x slower small GEMMs, see bench/NOTES-cpu.md).
// omp_set_num_threads inside a region changes only the calling task's own setting.
// Call it first thing in every parallel region that calls BLAS.
void serial_blas_in_region();

// For BLAS calls outside any parallel region: OpenBLAS takes omp_get_max_threads() threads,
// so this sets the calling thread's OpenMP setting to num_threads() for the guard's lifetime.
class BlasThreads;

// ---- adapting the team to a shared machine ----------------------------------------------------
// Why: when another process takes a core, a team of as many threads as cores waits at every
// barrier for its thread that lost the CPU (a scheduler time slice each, milliseconds), and a
// 1 ms product becomes 5-20 ms while one thread would still take 1 ms (bench/NOTES-cpu.md).
// What cannot be seen from inside a call is whether the cores are shared, but its effect can:
// a call whose threads ran in parallel used CPU time ≈ threads × wall time; one that waited for
// a descheduled thread used little more CPU time than wall time. wall / cpu estimates the time
// of the team's call over the time one thread would take (the same work, on one core). Each
// call site keeps a TeamTuner with a running mean of that ratio over its calls with the default
// count; while the mean is above 1 / kMinSpeedup the site runs one thread, trying the full team
// again after 1, 2, 4, ... 64 calls (halving the wait after each call that paid off). The mean,
// not the last call, decides, so occasional lost time slices still count in proportion.
// An explicit set_num_threads(n) is used as given.
class TeamTuner {
 public:
  static constexpr double kMinSpeedup = 1.25;
  static constexpr int kMaxBackoff = 64;
  // Threads for the next call when the default is `want`.
  int threads(int want);
  void record(int used, double wall_s, double cpu_s);

 private:
  std::atomic<double> ratio_{0.5};  // running mean of wall / cpu over the team's calls
  std::atomic<int> serial_left_{0};
  std::atomic<int> backoff_{1};
  std::atomic<bool> probing_{false};  // the next team call follows a serial stretch
};

// One public call's team: chooses its size with the site's tuner, makes num_threads() return it
// on the calling thread for the call (so every region and chunking rule of the call agrees),
// and reports the call's timings to the tuner when it ends. Nested Teams take the outer size.
//   static cpu::TeamTuner tuner;   // one per call site
//   cpu::Team team(tuner);
class Team {
 public:
  explicit Team(TeamTuner& tuner);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;
  int size() const { return size_; }

 private:
  TeamTuner* tuner_ = nullptr;  // null: nested or explicit count, nothing to record
  int size_ = 1;
  bool outer_ = false;  // the outermost Team of this thread restores num_threads()
  double wall0_ = 0, cpu0_ = 0;
};

// Inside a parallel region whose threads each run a whole piece of work (one batch item),
// makes num_threads() return 1 on the calling thread for the guard's lifetime, so the kernels
// that piece calls open no teams of their own.
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int saved_;
};

class BlasThreads {
 public:
  BlasThreads();
  ~BlasThreads();
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_;
};

}  // namespace strux::cpu
