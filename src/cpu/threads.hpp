// Threads of the CPU backend: how many, and how BLAS is kept from opening teams of its own.
//
// Why a default set from outside: the right count depends on the process's CPU affinity and
// its cgroup CPU quota, which the Python layer reads once at import (library code reads no
// files or environment variables) and passes to set_default_threads. Without it the default is
// omp_get_max_threads() (OMP_NUM_THREADS, else the CPUs in the affinity mask).
#pragma once

#include <cstdint>

namespace strux::cpu {

// Upper bound on any thread count given to the backend: far above any machine, low enough that
// a team of that size can actually be created (100000 threads exhausts the process).
inline constexpr int kMaxThreads = 4096;

// Threads a call uses: set_num_threads(n) if n > 0, else the default.
int num_threads();
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
