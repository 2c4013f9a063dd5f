// strux core: library version, errors and argument checks shared by every family.
//
// Glossary (used across the headers):
//   B batch, H channels, L sequence length, Lk filter length, nfft FFT length,
//   Nt time steps, Nd/Nm observation/parameter dimension, R right-hand sides,
//   (a, b, c, d) Kronecker-sparse pattern, T time, n state channels.
// All arrays at the C++ API are dense row-major (C-contiguous) unless a stride says otherwise.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace strux {

inline constexpr const char* kVersion = "0.1.0";
// The library version, e.g. "0.1.0" (the version of the headers and the library are one).
inline const char* version() { return kVersion; }

// Bad value or shape of an argument. Python sees ValueError.
struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// Bad type (dtype) of an argument. Python sees TypeError.
struct TypeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// Failure of a library underneath (FFTW, BLAS, HDF5, CUDA). Python sees RuntimeError.
struct BackendError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

// Builds a message from pieces: msg("argument 'k': expected ", a, ", got ", b).
template <class... Parts>
std::string msg(const Parts&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  return os.str();
}

inline std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ',';
  os << ')';
  return os.str();
}

// Throws ValueError naming the argument unless `ok`.
template <class... Parts>
void check_arg(bool ok, const char* arg, const Parts&... what) {
  if (!ok) throw ValueError(msg("argument '", arg, "': ", what...));
}

// Throws ValueError unless x > 0 (sizes must be at least 1).
inline void check_positive(int64_t x, const char* arg) {
  check_arg(x >= 1, arg, "expected a size >= 1, got ", x);
}

}  // namespace strux
