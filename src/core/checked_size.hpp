// Overflow-checked sizes: every product of sizes that decides an allocation goes through here
// before anything is allocated, so a huge or hostile size (an argument, a line of a file) is a
// clear error naming its source instead of a wrapped count and a write past a small buffer.
//
//   checked_count("nt", {nt, nd, nm})            element count, ValueError on int64 overflow
//   checked_bytes("nt", {nt, nd, nm}, sizeof(T)) the same in bytes, MemoryError above kMaxBytes
//   with_oom_context("k", f)                     runs f; any out-of-memory becomes MemoryError
//                                                naming the argument (with the byte count when known)
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include "strux/core.hpp"

namespace strux {

// Out of memory, with the byte count and the argument whose sizes asked for it. Derives from
// std::bad_alloc so that code catching that still does; Python sees MemoryError(what()).
class MemoryError : public std::bad_alloc {
 public:
  explicit MemoryError(std::string m) : msg_(std::move(m)) {}
  const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

// No allocation may exceed this (1 PiB): far beyond any machine's memory, small enough that
// byte counts and the index arithmetic on them (x 16 for complex double) stay far from 2^63.
inline constexpr int64_t kMaxBytes = int64_t(1) << 50;

// a * b, or ValueError naming `arg` when the product of non-negative sizes passes int64.
inline int64_t checked_mul(int64_t a, int64_t b, const char* arg) {
  check_arg(a >= 0 && b >= 0, arg, "expected sizes >= 0, got ", a, " and ", b);
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a)
    throw ValueError(msg("argument '", arg, "': sizes ", a, " x ", b,
                         " overflow a 64-bit element count"));
  return a * b;
}

// Product of `dims` (each >= 0), ValueError naming `arg` on overflow.
inline int64_t checked_count(const char* arg, std::initializer_list<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n = checked_mul(n, d, arg);
  return n;
}

// Bytes of `count` elements of `elem` bytes; MemoryError naming `arg` above kMaxBytes.
inline int64_t checked_bytes_of(const char* arg, int64_t count, int64_t elem) {
  const int64_t bytes = checked_mul(count, elem, arg);
  if (bytes > kMaxBytes)
    throw MemoryError(msg("argument '", arg, "': ", count, " elements (", bytes,
                          " bytes) exceed the largest allocation strux makes (", kMaxBytes, " bytes)"));
  return bytes;
}

inline int64_t checked_bytes(const char* arg, std::initializer_list<int64_t> dims, int64_t elem) {
  return checked_bytes_of(arg, checked_count(arg, dims), elem);
}

// Runs f(); an out-of-memory inside becomes MemoryError naming `arg`. A MemoryError that
// already names an argument passes unchanged; one from a buffer (byte count, no argument)
// gets the argument prepended; a bare std::bad_alloc gets the argument and the hint.
template <class F>
decltype(auto) with_oom_context(const char* arg, F&& f) {
  try {
    return f();
  } catch (const MemoryError& e) {
    const std::string w = e.what();
    if (w.rfind("argument '", 0) == 0) throw;
    throw MemoryError(msg("argument '", arg, "': ", w));
  } catch (const std::bad_alloc& e) {
    throw MemoryError(msg("argument '", arg, "': out of memory for the buffers its sizes need (",
                          e.what(), ")"));
  }
}

}  // namespace strux
