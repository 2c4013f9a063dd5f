// The CPU runtime: smooth sizes for any length, the bounded plan cache, planning effort,
// thread-count bounds and the team tuner's rule.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "cpu/fft.hpp"
#include "cpu/threads.hpp"
#include "strux/core.hpp"

using namespace strux;

namespace {
bool smooth(int64_t m) {
  for (int64_t p : {2, 3, 5, 7})
    while (m % p == 0) m /= p;
  return m == 1;
}
}  // namespace

TEST(CpuRuntime, GoodFftSizeIsFastForHugeLengths) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t n : {(int64_t(1) << 40) + 1, (int64_t(1) << 40) - 3, (int64_t(1) << 61) + 7, int64_t(1) << 62}) {
    const int64_t m = cpu::good_fft_size(n);
    EXPECT_GE(m, n);
    EXPECT_TRUE(smooth(m)) << m;
    EXPECT_LT(m - n, n / 50 + 1) << n;  // 7-smooth numbers are dense
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
  EXPECT_THROW(cpu::good_fft_size((int64_t(1) << 62) + 1), ValueError);
  EXPECT_EQ(cpu::good_fft_size(1000003), 1000188);
}

TEST(CpuRuntime, PlanCacheIsBoundedAndLivePlansSurviveEviction) {
  auto keep = cpu::RealFFT<float>::get(48);
  for (int64_t n = 100; n < 100 + 2 * int64_t(cpu::kFFTCacheSize); ++n) cpu::RealFFT<float>::get(n);
  // evicted from the cache, still usable by its owner
  cpu::AlignedBuffer<float> x(48);
  cpu::AlignedBuffer<cpu::cplx<float>> X(25);
  for (int i = 0; i < 48; ++i) x[i] = 1.0f;
  keep->forward(x.data(), X.data());
  EXPECT_FLOAT_EQ(X[0].real(), 48.0f);
  EXPECT_NEAR(std::abs(X[3]), 0.0f, 1e-4f);
}

TEST(CpuRuntime, PlanningEffortIsParsedAndUpgradesCachedPlans) {
  EXPECT_EQ(cpu::fft_planning(), cpu::FFTPlanning::Estimate);
  EXPECT_THROW(cpu::parse_fft_planning("exhaustive"), ValueError);
  auto a = cpu::RealFFT<double>::get(60);
  EXPECT_EQ(a->effort(), cpu::FFTPlanning::Estimate);
  cpu::set_fft_planning(cpu::FFTPlanning::Measure);
  auto b = cpu::RealFFT<double>::get(60);
  cpu::set_fft_planning(cpu::FFTPlanning::Estimate);
  EXPECT_EQ(b->effort(), cpu::FFTPlanning::Measure);
  EXPECT_EQ(cpu::RealFFT<double>::get(60), b);  // a measured plan serves estimate lookups too
}

TEST(CpuRuntime, ThreadCountsAreBounded) {
  EXPECT_THROW(cpu::set_num_threads(-1), ValueError);
  EXPECT_THROW(cpu::set_num_threads(cpu::kMaxThreads + 1), ValueError);
  EXPECT_THROW(cpu::set_default_threads(100000), ValueError);
  cpu::set_num_threads(3);
  EXPECT_EQ(cpu::num_threads(), 3);
  EXPECT_EQ(cpu::partition_threads(), 3);
  cpu::set_num_threads(0);
  EXPECT_FALSE(cpu::threads_explicit());
}

TEST(CpuRuntime, TunerGoesSerialWhenThreadsDoNotPayAndProbesAgain) {
  cpu::TeamTuner t;
  EXPECT_EQ(t.threads(2), 2);
  t.record(2, 1.0, 1.9);  // parallel (wall / cpu 0.53): stays
  EXPECT_EQ(t.threads(2), 2);
  int serial = 0;
  for (int i = 0; i < 10; ++i) {  // no speedup, repeatedly
    if (t.threads(2) == 1) {
      ++serial;
      break;
    }
    t.record(2, 1.0, 1.0);
  }
  while (t.threads(2) == 1) ++serial;  // a serial stretch, then a probe of the team
  EXPECT_GE(serial, 1);
  for (int i = 0; i < 200; ++i) {  // the machine is free again: probes pay off
    if (t.threads(2) == 2) t.record(2, 1.0, 2.0);
  }
  EXPECT_EQ(t.threads(2), 2);
  EXPECT_EQ(t.threads(1), 1);
}

TEST(CpuRuntime, TeamSetsTheCallsThreadCountAndNests) {
  cpu::set_num_threads(0);
  cpu::TeamTuner t;
  {
    cpu::Team outer(t);
    EXPECT_EQ(cpu::num_threads(), outer.size());
    cpu::TeamTuner t2;
    cpu::Team inner(t2);
    EXPECT_EQ(inner.size(), outer.size());
  }
  EXPECT_EQ(cpu::num_threads(), cpu::default_threads());
}
