// The float64 reference of the block Toeplitz products (DESIGN.md "toeplitz") shared by the
// CPU and CUDA C++ tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "strux/toeplitz.hpp"

namespace strux::test {

// Index of (t, s, r) of a vector with n space entries in `layout`.
inline size_t at(ToeplitzLayout layout, int64_t nt, int64_t n, int64_t R, int64_t t, int64_t s, int64_t r) {
  return size_t(layout == ToeplitzLayout::TimeMajor ? (t * n + s) * R + r : (s * nt + t) * R + r);
}

// d[i] = sum_{j<=i} blocks[i-j] m[j] (adjoint: m[j] = sum_{i>=j} blocks[i-j]^T d[i]).
inline std::vector<double> ref_apply(const std::vector<double>& b, const std::vector<double>& x, int64_t nt,
                                     int64_t nd, int64_t nm, int64_t R, ToeplitzLayout L, bool adjoint) {
  const int64_t nout = adjoint ? nm : nd;
  std::vector<double> y(size_t(nt * nout * R), 0.0);
  for (int64_t i = 0; i < nt; ++i)
    for (int64_t j = 0; j <= i; ++j)
      for (int64_t a = 0; a < nd; ++a)
        for (int64_t c = 0; c < nm; ++c)
          for (int64_t r = 0; r < R; ++r) {
            const double f = b[size_t(((i - j) * nd + a) * nm + c)];
            if (!adjoint)
              y[at(L, nt, nd, R, i, a, r)] += f * x[at(L, nt, nm, R, j, c, r)];
            else
              y[at(L, nt, nm, R, j, c, r)] += f * x[at(L, nt, nd, R, i, a, r)];
          }
  return y;
}

}  // namespace strux::test
