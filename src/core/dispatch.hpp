// The one dtype -> template dispatch (causal-conv1d's static_switch.h, as a function): turns a
// runtime strux::DType into a C++ element type, once per call, in the operator layer.
//
//   dispatch<CpuScalars>(dt, "problem.dtype", "the CPU backend", [&](auto tag) {
//     using T = typename decltype(tag)::type;
//     ...
//   });
//
// A type set maps each DType to an element type, or to void where it is not supported; an
// unsupported dtype is a TypeError naming the argument and listing the supported ones.
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>

#include "strux/api/types.hpp"
#include "strux/core.hpp"

namespace strux::core {

template <class T>
struct Tag {
  using type = T;
};

// Type sets. CUDA adds its half types in its own translation units (src/api/cuda_util.cuh).
struct RealScalars {
  using f16 = void;
  using bf16 = void;
  using f32 = float;
  using f64 = double;
  using c64 = void;
  using c128 = void;
};
struct CpuScalars : RealScalars {
  using c64 = std::complex<float>;
  using c128 = std::complex<double>;
};

template <class Set>
std::string supported_dtypes() {
  std::string s;
  auto add = [&](bool ok, DType t) {
    if (ok) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  };
  add(!std::is_void_v<typename Set::f16>, DType::f16);
  add(!std::is_void_v<typename Set::bf16>, DType::bf16);
  add(!std::is_void_v<typename Set::f32>, DType::f32);
  add(!std::is_void_v<typename Set::f64>, DType::f64);
  add(!std::is_void_v<typename Set::c64>, DType::c64);
  add(!std::is_void_v<typename Set::c128>, DType::c128);
  return s;
}

namespace detail {
template <class Set, class T, class F>
void call(F& f, DType dt, const char* arg, const char* where) {
  if constexpr (std::is_void_v<T>) {
    throw TypeError(msg("argument '", arg, "': ", where, " supports ", supported_dtypes<Set>(),
                        "; got ", dtype_name(dt)));
  } else {
    f(Tag<T>{});
  }
}
}  // namespace detail

// Calls f(Tag<T>{}) with T = Set's type for dt. f returns void (results go through captures).
template <class Set, class F>
void dispatch(DType dt, const char* arg, const char* where, F&& f) {
  switch (dt) {
    case DType::f16: return detail::call<Set, typename Set::f16>(f, dt, arg, where);
    case DType::bf16: return detail::call<Set, typename Set::bf16>(f, dt, arg, where);
    case DType::f32: return detail::call<Set, typename Set::f32>(f, dt, arg, where);
    case DType::f64: return detail::call<Set, typename Set::f64>(f, dt, arg, where);
    case DType::c64: return detail::call<Set, typename Set::c64>(f, dt, arg, where);
    case DType::c128: return detail::call<Set, typename Set::c128>(f, dt, arg, where);
  }
  throw TypeError(msg("argument '", arg, "': unknown dtype code ", int(dt)));
}

// The size dispatch of kernels compiled per power of two: calls f(std::integral_constant<int, N>{})
// for the run-time n when n is a power of two in [Lo, Hi] and returns true; false otherwise (the
// caller says what is missing in its own words).
template <int Lo, int Hi, class F>
bool dispatch_pow2(int64_t n, F&& f) {
  if constexpr (Lo > Hi) {
    return false;
  } else {
    if (n == Lo) {
      f(std::integral_constant<int, Lo>{});
      return true;
    }
    return dispatch_pow2<2 * Lo, Hi>(n, f);
  }
}

}  // namespace strux::core
