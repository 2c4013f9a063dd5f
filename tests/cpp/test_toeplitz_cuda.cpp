// op::BlockToeplitz on CUDA with a precision: a bfloat16 / float16 F̂ (float32 vectors) against a
// float64 loop, within the error model's bound and of its size; and the precisions CUDA refuses.
// Skipped without a CUDA device.
#ifdef STRUX_HAVE_CUDA

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "strux/strux.hpp"
#include "toeplitz_ref.hpp"

namespace {

using strux::Device;
using strux::ToeplitzLayout;
using strux::View;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct Dev {
  void* p = nullptr;
  size_t bytes;
  explicit Dev(const std::vector<float>& h) : bytes(h.size() * sizeof(float)) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 4)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  std::vector<float> get() const {
    std::vector<float> h(bytes / sizeof(float));
    cudaDeviceSynchronize();
    cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost);
    return h;
  }
};

std::vector<float> randf(size_t n, std::mt19937_64& g) {
  std::normal_distribution<double> d;
  std::vector<float> v(n);
  for (auto& x : v) x = float(d(g));
  return v;
}

// Time-major, R right-hand sides: y = F x (adjoint: Fᵀ x) in float64.
std::vector<double> ref(const std::vector<float>& b, const std::vector<float>& x, int64_t nt, int64_t nd, int64_t nm,
                        int64_t R, bool adjoint) {
  return strux::test::ref_apply(std::vector<double>(b.begin(), b.end()), std::vector<double>(x.begin(), x.end()),
                                nt, nd, nm, R, strux::ToeplitzLayout::TimeMajor, adjoint);
}

double rel(const std::vector<float>& got, const std::vector<double>& want) {
  double n = 0, d = 0;
  for (size_t i = 0; i < want.size(); ++i) n += (got[i] - want[i]) * (got[i] - want[i]), d += want[i] * want[i];
  return std::sqrt(n / std::max(d, 1e-300));
}

TEST(ToeplitzPrecisionCuda, HalfSpectrum) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 g(5);
  for (auto storage : {strux::ToeplitzStorage::BFloat16, strux::ToeplitzStorage::Float16})
    for (auto [nt, nd, nm, R] : std::vector<std::array<int64_t, 4>>{{30, 6, 20, 1}, {17, 5, 9, 3}, {8, 3, 64, 1}}) {
      SCOPED_TRACE(testing::Message() << strux::toeplitz_storage_name(storage) << " Nt=" << nt << " Nd=" << nd
                                      << " Nm=" << nm << " R=" << R);
      strux::op::BlockToeplitzProblem p{nt, nd, nm, R, ToeplitzLayout::TimeMajor, strux::DType::f32, Device::cuda(0)};
      p.precision.fhat = storage;
      strux::op::BlockToeplitz F(p);
      const auto b = randf(size_t(nt * nd * nm), g), m = randf(size_t(nt * nm * R), g), dd = randf(size_t(nt * nd * R), g);
      Dev B(b), M(m), DD(dd), D(std::vector<float>(size_t(nt * nd * R))), DM(std::vector<float>(size_t(nt * nm * R)));
      auto vec = [&](const Dev& x, int64_t n) {
        return R == 1 ? View(static_cast<float*>(x.p), {nt, n}, Device::cuda(0))
                      : View(static_cast<float*>(x.p), {nt, n, R}, Device::cuda(0));
      };
      F.set_blocks(View(static_cast<float*>(B.p), {nt, nd, nm}, Device::cuda(0)));
      F.forward({vec(M, nm), vec(D, nd)});
      F.backward({vec(DD, nd), vec(DM, nm)});
      const double e1 = rel(D.get(), ref(b, m, nt, nd, nm, R, false));
      const double e2 = rel(DM.get(), ref(b, dd, nt, nd, nm, R, true));
      const double bound = strux::toeplitz_error_estimate(p.precision, false, nt, std::max(nd, nm));
      EXPECT_LE(e1, bound);
      EXPECT_LE(e2, bound);
      const double rms = strux::toeplitz_error_rms(p.precision, false, nt, std::min(nd, nm));
      EXPECT_GE(std::min(e1, e2), rms / 8);  // the 16-bit F̂ is really used
    }
}

TEST(ToeplitzPrecisionCuda, RefusedPrecisions) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  strux::op::BlockToeplitzProblem p{8, 2, 3, 1, ToeplitzLayout::TimeMajor, strux::DType::f32, Device::cuda(0)};
  p.precision.fft = strux::ToeplitzPrecisionKind::Double;  // mixed phases: CPU only
  EXPECT_THROW(strux::op::BlockToeplitz{p}, strux::ValueError);
  strux::op::BlockToeplitzProblem q{8, 2, 3, 1, ToeplitzLayout::TimeMajor, strux::DType::f64, Device::cuda(0)};
  q.precision.fhat = strux::ToeplitzStorage::BFloat16;  // a 16-bit F̂ needs float32 vectors on CUDA
  EXPECT_THROW(strux::op::BlockToeplitz{q}, strux::ValueError);
}

}  // namespace

#endif  // STRUX_HAVE_CUDA
