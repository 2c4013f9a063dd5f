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
#include <vector>

namespace nb = nanobind;

namespace strux::py {

// Read-only, C-contiguous, CPU array of element type T (any rank).
template <class T>
using In = nb::ndarray<const T, nb::c_contig, nb::device::cpu>;

// Owned numpy array returned to Python.
template <class T>
using Out = nb::ndarray<nb::numpy, T>;

// Allocates an uninitialised numpy array of `shape`, freed when Python drops it.
template <class T>
Out<T> new_array(const std::vector<int64_t>& shape) {
  size_t count = 1;
  std::vector<size_t> s;
  for (int64_t v : shape) {
    s.push_back(size_t(v));
    count *= size_t(v);
  }
  T* data = new T[count > 0 ? count : 1];
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return Out<T>(data, s.size(), s.data(), owner);
}

template <class Arr>
std::vector<int64_t> shape_of(const Arr& a) {
  std::vector<int64_t> s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = int64_t(a.shape(i));
  return s;
}

}  // namespace strux::py
