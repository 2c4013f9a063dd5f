// The operator API's overlap rule (src/api/common.hpp check_overlaps): outputs may not share a byte
// with one another nor partly overlap an input; the very same array as an input is allowed where
// the family runs in place (the scans and toeplitz, against a plain loop here), not in fftconv
// and ks, nor toeplitz's dm on m with dblocks (its gradient reads m after dm is written).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "strux/strux.hpp"

namespace {

using strux::DType;
using strux::View;
namespace op = strux::op;

// Runs f, which must throw strux::ValueError whose message names `arg` and contains `what`.
template <class F>
void expect_overlap_error(F&& f, const std::string& arg, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << arg << "'";
  } catch (const strux::ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'" + arg + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  }
}

std::vector<double> ramp(size_t n, double scale) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7 * double(i) + 0.3);
  return v;
}

TEST(ApiOverlap, FFTConvOutputPartlyOverInput) {
  const int64_t B = 2, H = 1, L = 8, Lk = 3;
  std::vector<double> buf = ramp(3 * B * H * L, 1.0), k = ramp(H * Lk, 0.5);
  op::FFTConv conv({B, H, L, Lk, strux::ConvMode::Causal, DType::f64});
  // y starts one sample into u: a partial overlap
  expect_overlap_error(
      [&] {
        conv.forward({View(buf.data(), {B, H, L}), View(k.data(), {H, Lk}), View(buf.data() + 1, {B, H, L})});
      },
      "y", "overlapping arrays");
  // y over the filter
  std::vector<double> u = ramp(B * H * L, 1.0);
  std::vector<double> yk(B * H * L + 4);
  expect_overlap_error(
      [&] { conv.forward({View(u.data(), {B, H, L}), View(yk.data() + 2, {H, Lk}), View(yk.data(), {B, H, L})}); }, "y",
      "overlapping arrays");
  // two gradients on the same memory
  std::vector<double> dy = ramp(B * H * L, 1.0), g(2 * B * H * L);
  expect_overlap_error(
      [&] {
        conv.backward({View(dy.data(), {B, H, L}), View(u.data(), {B, H, L}), View(k.data(), {H, Lk}),
                       View(g.data(), {B, H, L}), View(g.data() + 1, {H, Lk})});
      },
      "du", "two outputs");
  // apart: fine
  std::vector<double> y(B * H * L);
  conv.forward({View(u.data(), {B, H, L}), View(k.data(), {H, Lk}), View(y.data(), {B, H, L})});
  EXPECT_DOUBLE_EQ(y[0], k[0] * u[0]);
}

TEST(ApiOverlap, ScanInPlaceWorksAndPartialOverlapIsRefused) {
  const int64_t B = 1, T = 5, n = 3;
  std::vector<double> a = ramp(B * T * n, 0.6), b = ramp(B * T * n + 1, 1.0);
  // the loop of the contract, h_t = a_t h_{t-1} + b_t
  std::vector<double> want(B * T * n);
  for (int64_t c = 0; c < n; ++c) {
    double h = 0;
    for (int64_t t = 0; t < T; ++t) want[t * n + c] = h = a[t * n + c] * h + b[t * n + c];
  }
  op::DiagScan scan({B, T, n, DType::f64});
  std::vector<double> inplace(b.begin(), b.begin() + B * T * n);
  scan.forward({View(a.data(), {B, T, n}), View(inplace.data(), {B, T, n}), View(inplace.data(), {B, T, n})});
  for (int64_t i = 0; i < B * T * n; ++i) EXPECT_NEAR(inplace[i], want[i], 1e-14) << i;
  expect_overlap_error(
      [&] { scan.forward({View(a.data(), {B, T, n}), View(b.data() + 1, {B, T, n}), View(b.data(), {B, T, n})}); }, "h",
      "partial overlap");
  std::vector<double> dh = ramp(B * T * n, 1.0), g(2 * B * T * n);
  expect_overlap_error(
      [&] {
        scan.backward({View(dh.data(), {B, T, n}), View(a.data(), {B, T, n}), View(inplace.data(), {B, T, n}),
                       View(g.data(), {B, T, n}), View(g.data() + 2, {B, T, n})});
      },
      "da", "two outputs");
}

TEST(ApiOverlap, ToeplitzAndKs) {
  const int64_t Nt = 3, N = 2;
  std::vector<double> blocks = ramp(Nt * N * N, 1.0), mbuf = ramp(Nt * N + 1, 1.0);
  op::BlockToeplitz F({Nt, N, N, 1, strux::ToeplitzLayout::TimeMajor, DType::f64});
  F.set_blocks(View(blocks.data(), {Nt, N, N}));
  expect_overlap_error([&] { F.forward({View(mbuf.data(), {Nt, N}), View(mbuf.data() + 1, {Nt, N})}); }, "d",
                       "partial overlap");
  std::vector<double> m(mbuf.begin(), mbuf.begin() + Nt * N), d(Nt * N);
  F.forward({View(m.data(), {Nt, N}), View(d.data(), {Nt, N})});
  F.forward({View(m.data(), {Nt, N}), View(m.data(), {Nt, N})});  // in place: d = F m over m
  for (int64_t i = 0; i < Nt * N; ++i) EXPECT_NEAR(m[i], d[i], 1e-13) << i;
  std::vector<double> dd = ramp(Nt * N, 1.0), dblocks(Nt * N * N);
  expect_overlap_error(
      [&] {
        F.backward({View(dd.data(), {Nt, N}), View(m.data(), {Nt, N}), View(m.data(), {Nt, N}),
                    View(dblocks.data(), {Nt, N, N})});
      },
      "dm", "overlapping arrays");

  const strux::KSPattern q{1, 2, 2, 1};
  const int64_t batch = 3;
  std::vector<double> w = ramp(4, 1.0), xy = ramp(batch * 2 + 1, 1.0);
  op::KSFactor K({q, batch, strux::KSLayout::BatchFirst, DType::f64});
  expect_overlap_error(
      [&] { K.forward({View(xy.data(), {batch, 2}), View(w.data(), {1, 2, 2, 1}), View(xy.data() + 1, {batch, 2})}); },
      "y", "overlapping arrays");
  std::vector<double> x = ramp(batch * 2, 1.0);
  expect_overlap_error(
      [&] { K.forward({View(x.data(), {batch, 2}), View(w.data(), {1, 2, 2, 1}), View(x.data(), {batch, 2})}); }, "y",
      "overlapping arrays");
}

}  // namespace
