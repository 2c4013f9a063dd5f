// Array plumbing shared by the bindings: typed C-contiguous CPU inputs and freshly owned
// numpy outputs. The Python layer (strux/_arrays.py) has already validated names, ranks,
// dtypes and made inputs contiguous; these types re-check so that C++ never misreads memory.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/complex.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <complex>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <utility>
#include <vector>

#include "core/checked_size.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace nb = nanobind;

namespace strux::py {

// Read-only, C-contiguous, CPU array of element type T (any rank).
template <class T>
using In = nb::ndarray<const T, nb::c_contig, nb::device::cpu>;

// Owned numpy array returned to Python.
template <class T>
using Out = nb::ndarray<nb::numpy, T>;

// Allocates an uninitialised numpy array of `shape`, freed when Python drops it. `arg` names the
// argument whose sizes gave the shape: an overflowing shape is a ValueError, an allocation that
// fails a MemoryError with the byte count, both naming it.
template <class T>
Out<T> new_array(const std::vector<int64_t>& shape, const char* arg = "result") {
  int64_t count = 1;
  std::vector<size_t> s;
  for (int64_t v : shape) {
    s.push_back(size_t(v));
    count = checked_mul(count, v, arg);
  }
  const int64_t bytes = checked_bytes_of(arg, count, int64_t(sizeof(T)));
  T* data = new (std::nothrow) T[size_t(count > 0 ? count : 1)];
  if (!data)
    throw MemoryError(msg("argument '", arg, "': out of memory allocating a result of shape ",
                          shape_str(shape), " (", bytes, " bytes)"));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Transparent huge pages for the 2 MiB-aligned inside of a large result, as numpy does for
  // its own arrays: where the allocator hands out fresh memory, a 16 MiB result takes 8 page
  // faults instead of 4096 (~3 ms on first write, as long as a butterfly chain's whole product:
  // bench/NOTES-cpu.md "ks pairs"); memory it reuses is left as it is. Advice only.
  constexpr uintptr_t kHuge = uintptr_t(1) << 21;
  if (bytes >= int64_t(4 * kHuge)) {
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(data) + uintptr_t(bytes)) & ~(kHuge - 1);
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
#endif
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return Out<T>(data, s.size(), s.data(), owner);
}

// Runs f with the GIL released; out-of-memory inside becomes MemoryError naming `arg`.
template <class F>
decltype(auto) run_nogil(const char* arg, F&& f) {
  nb::gil_scoped_release nogil;
  return with_oom_context(arg, std::forward<F>(f));
}

template <class Arr>
std::vector<int64_t> shape_of(const Arr& a) {
  std::vector<int64_t> s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = int64_t(a.shape(i));
  return s;
}

}  // namespace strux::py
