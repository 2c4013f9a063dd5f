// What the C++ tests of the operator API and the scans share: normal random arrays (each test
// file keeps its own generator and seed) and the relative error of a result against a reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

namespace strux::test {

// count entries drawn from N(0, scale²) by g; complex T draws the real, then the imaginary part.
template <class T>
std::vector<T> randn(std::mt19937_64& g, int64_t count, double scale = 1.0) {
  std::normal_distribution<double> d(0.0, scale);
  std::vector<T> v(static_cast<size_t>(count));
  for (auto& x : v) {
    if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>)
      x = T(d(g), d(g));
    else
      x = T(d(g));
  }
  return v;
}

// max |ref - got| / max(1, max |ref|), in complex float64; a size mismatch fails the test.
template <class A, class B>
double rel_err(const std::vector<A>& ref, const std::vector<B>& got) {
  using cd = std::complex<double>;
  EXPECT_EQ(ref.size(), got.size());
  double e = 0, m = 1;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    e = std::max(e, std::abs(cd(ref[i]) - cd(got[i])));
    m = std::max(m, std::abs(cd(ref[i])));
  }
  return e / m;
}

}  // namespace strux::test
