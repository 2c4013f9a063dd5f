// Cases from an audit of the C++ API against DESIGN.md's contract: sizes whose products pass
// int64 throw the library's errors before anything is allocated, required pointers are checked,
// forbidden aliasing is refused, and nothing prints and continues.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "strux/fftconv.hpp"
#include "strux/ks.hpp"
#include "strux/scan.hpp"
#include "strux/strux.hpp"
#include "strux/toeplitz.hpp"

namespace {

using strux::DType;
using strux::View;
namespace op = strux::op;

constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 2;
constexpr int64_t k2p31 = int64_t(1) << 31;

// Runs f, which must throw E (a strux error) whose message names `arg`.
template <class E, class F>
void expect_error(F&& f, const std::string& arg) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << arg << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find("'" + arg + "'"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type for '" << arg << "': " << e.what();
  }
}

// FFTConv: y aliasing postgate silently gave a wrong result (the header forbids every gate).
TEST(ContractAudit, FFTConvOutputMayNotAliasPostgate) {
  const int64_t B = 1, H = 1, L = 16, Lk = 4;
  std::vector<double> u(L, 1.0), k(Lk, 0.5), post(L, 2.0);
  op::FFTConv conv({B, H, L, Lk, strux::ConvMode::Causal, DType::f64});
  expect_error<strux::ValueError>(
      [&] {
        conv.forward({View(u.data(), {B, H, L}), View(k.data(), {H, Lk}), View(post.data(), {B, H, L}), View(),
                      View(post.data(), {B, H, L})});
      },
      "y");
  strux::FFTConvPlan<double> plan(B, H, L, k.data(), Lk);
  expect_error<strux::ValueError>([&] { plan.forward(u.data(), nullptr, post.data(), nullptr, post.data()); }, "y");
  expect_error<strux::ValueError>([&] { plan.forward(u.data(), nullptr, nullptr, nullptr, u.data()); }, "y");
}

// FFTConv: a causal filter longer than the row is allowed (taps s >= L never matter), but the
// operator allocated Lk values up front: std::length_error / std::bad_alloc instead of a check.
TEST(ContractAudit, FFTConvHugeSizesThrowBeforeAllocating) {
  expect_error<strux::ValueError>([] { op::FFTConv({1, 1, 4, kHuge}); }, "problem.Lk");
  expect_error<strux::ValueError>([] { op::FFTConv({kHuge, 4, 4, 2}); }, "problem.B");
  // A long causal filter whose H x Lk fits works, reading only the taps used.
  const int64_t H = 2, L = 4, Lk = int64_t(1) << 40;
  op::FFTConv conv({1, H, L, Lk});
  EXPECT_NE(conv.describe().find("direct"), std::string::npos) << conv.describe();
  std::vector<float> k(H * L, 1.0f);
  expect_error<strux::ValueError>([&] { strux::FFTConvPlan<float>(1, 4, L, k.data(), kHuge); }, "k");
  expect_error<strux::ValueError>([&] { strux::FFTConvPlan<float>(kHuge, 4, L, k.data(), 1); }, "B");
  strux::FFTConvPlan<float> p(1, 4, L, k.data(), 1);
  expect_error<strux::ValueError>([&] { p.with_batch(kHuge); }, "B");
  std::vector<std::complex<float>> kh(4);
  expect_error<strux::ValueError>([&] { strux::SpectralConvPlan<float>(kHuge, 4, L, kh.data(), 1); }, "B");
}

// BlockToeplitz: a huge R reached BLAS, which printed "On entry to CGEMM parameter number 3 had
// an illegal value" and returned, leaving d unwritten.
TEST(ContractAudit, ToeplitzHugeRightHandSidesThrow) {
  std::vector<float> blocks(8, 1.0f), m(8), d(8);
  strux::BlockToeplitzPlan<float> P(blocks.data(), 2, 2, 2);
  expect_error<strux::ValueError>([&] { P.matvec(m.data(), d.data(), kHuge); }, "R");
  expect_error<strux::ValueError>([&] { P.rmatvec(d.data(), m.data(), kHuge); }, "R");
  expect_error<strux::ValueError>([&] { P.grad_blocks(m.data(), d.data(), blocks.data(), kHuge); }, "R");
  expect_error<strux::ValueError>([&] { P.matvec(m.data(), d.data(), k2p31); }, "R");
  strux::ToeplitzPrecision half;
  half.fhat = strux::ToeplitzStorage::BFloat16;
  strux::BlockToeplitzPlan<float> Ph(blocks.data(), 2, 2, 2, half);
  expect_error<strux::ValueError>([&] { Ph.matvec(m.data(), d.data(), kHuge); }, "R");
  // The operator checks its problem's products when it is made.
  expect_error<strux::ValueError>([] { op::BlockToeplitz({k2p31, k2p31, k2p31}); }, "problem.Nd");
  expect_error<strux::ValueError>([] { op::BlockToeplitz({k2p31, 1, 1, k2p31}); }, "problem.R");
}

// KS: null data pointers crashed (SIGSEGV) instead of a ValueError naming the argument.
TEST(ContractAudit, KSNullPointersThrow) {
  strux::KSPlan<float> P({1, 2, 2, 1});
  std::vector<float> x(4), w(4), y(4);
  expect_error<strux::ValueError>([&] { P.forward(nullptr, w.data(), y.data(), 2); }, "x");
  expect_error<strux::ValueError>([&] { P.forward(x.data(), nullptr, y.data(), 2); }, "w");
  expect_error<strux::ValueError>([&] { P.forward(x.data(), w.data(), nullptr, 2); }, "y");
  expect_error<strux::ValueError>([&] { P.backward(nullptr, x.data(), w.data(), x.data(), w.data(), 2); }, "dy");
  expect_error<strux::ValueError>([&] { P.backward(y.data(), nullptr, w.data(), x.data(), w.data(), 2); }, "x");
  expect_error<strux::ValueError>([&] { P.backward(y.data(), x.data(), nullptr, x.data(), w.data(), 2); }, "w");
  strux::KSChainPlan<float> C({{1, 2, 2, 1}, {1, 2, 2, 1}});
  const float* wp[2] = {w.data(), nullptr};
  expect_error<strux::ValueError>([&] { C.forward(x.data(), nullptr, y.data(), 2); }, "w");
  expect_error<strux::ValueError>([&] { C.forward(x.data(), wp, y.data(), 2); }, "w");
  wp[1] = w.data();
  expect_error<strux::ValueError>([&] { C.forward(nullptr, wp, y.data(), 2); }, "x");
  expect_error<strux::ValueError>([&] { C.forward(x.data(), wp, nullptr, 2); }, "y");
  expect_error<strux::ValueError>([&] { C.backward(nullptr, x.data(), wp, x.data(), nullptr, 2); }, "dy");
  // The operator checks batch x width when it is made.
  expect_error<strux::ValueError>([] { op::KSFactor({strux::KSPattern{1, k2p31, k2p31, 1}, int64_t(1) << 62}); },
                                  "problem.batch");
  expect_error<strux::ValueError>(
      [] { op::KSChain({{strux::KSPattern{1, k2p31, k2p31, 1}}, int64_t(1) << 62}); }, "problem.batch");
}

// Scans: B·T·n (and p·p·k) past int64 was accepted; the float16 scan threw std::bad_alloc.
TEST(ContractAudit, ScanSizesOverflowThrow) {
  expect_error<strux::ValueError>([] { strux::DiagScan<float>(k2p31, k2p31, k2p31); }, "n");
  expect_error<strux::ValueError>([] { op::DiagScan({k2p31, k2p31, k2p31}); }, "problem.n");
  expect_error<strux::ValueError>([] { strux::CirculantScan<float>(k2p31, k2p31, 8); }, "n");
  expect_error<strux::ValueError>([] { strux::BlockCirculantScan<float>(1, 1, k2p31 * 2, 2); }, "p");
  expect_error<strux::ValueError>([] { op::BlockCirculantScan({1, 1, k2p31 * 2, 2}); }, "problem.p");
  std::vector<uint16_t> x(4);
  expect_error<strux::ValueError>(
      [&] { strux::diag_scan_forward_half(k2p31, k2p31, k2p31, x.data(), x.data(), nullptr, x.data()); }, "n");
}

// A View whose ndim is outside [0, kMaxDims] was read past its shape array while the message
// was built; it is a ValueError naming the argument.
TEST(ContractAudit, ViewRankOutOfRangeThrows) {
  std::vector<float> u(4), k(2), y(4);
  op::FFTConv conv({1, 1, 4, 2});
  View bad(u.data(), {1, 1, 4});
  bad.ndim = 100;
  expect_error<strux::ValueError>([&] { conv.forward({bad, View(k.data(), {1, 2}), View(y.data(), {1, 1, 4})}); },
                                  "u");
  bad.ndim = -3;
  expect_error<strux::ValueError>([&] { conv.forward({bad, View(k.data(), {1, 2}), View(y.data(), {1, 1, 4})}); },
                                  "u");
}

}  // namespace
