// ToeplitzPlan construction: argument checks, the resolved product and transform layout, the
// cuFFT plans and the workspace sized for them (execute.cu runs the plan).
// The transform layouts (fft 0, 1, 2) are described in transforms.cuh.
#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "cuda/buffer.hpp"
#include "cuda/elem.cuh"
#include "cuda/toeplitz/plan_impl.hpp"
#include "strux/cuda/toeplitz.hpp"

namespace strux::cuda {

namespace {

void check_int(int64_t v, const char* arg) {
  check_arg(v <= INT_MAX, arg, "expected a size below 2^31 (cuBLAS dimension), got ", v);
}

// Zero a plan buffer once, finished before the constructor returns (no stream of the caller's
// is involved: the constructor may run while another thread captures a graph).
void zero_now(DeviceBuffer& b) {
  cudaStream_t st;
  STRUX_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  STRUX_CUDA(cudaMemsetAsync(b.get(), 0, b.bytes(), st));
  STRUX_CUDA(cudaStreamSynchronize(st));
  STRUX_CUDA(cudaStreamDestroy(st));
}

// W^f = e^{-2πi f/nfft}, f = 0..nfft/2, in the plan's precision (computed in double).
template <class C>
void upload_twiddles(DeviceBuffer& b, int64_t nfft) {
  const int64_t n = nfft / 2 + 1;
  std::vector<C> w(static_cast<size_t>(n));
  const double pi = 3.14159265358979323846;
  for (int64_t f = 0; f < n; ++f) {
    const double a = -2.0 * pi * double(f) / double(nfft);
    w[size_t(f)].x = decltype(C{}.x)(std::cos(a));
    w[size_t(f)].y = decltype(C{}.x)(std::sin(a));
  }
  b.allocate(size_t(n) * sizeof(C));
  STRUX_CUDA(cudaMemcpy(b.get(), w.data(), b.bytes(), cudaMemcpyHostToDevice));
}

}  // namespace

ToeplitzPlan::ToeplitzPlan(int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, bool space_major, DType dtype, int algo,
                           int fft, int storage)
    : impl_(new Impl) {
  check_positive(Nt, "Nt");
  check_positive(Nd, "Nd");
  check_positive(Nm, "Nm");
  check_positive(R, "R");
  if (dtype != DType::f32 && dtype != DType::f64)
    throw TypeError(msg("argument 'dtype': expected float32 or float64, got ", dtype_name(dtype)));
  check_arg(algo >= -1 && algo <= 3, "algo",
            "expected -1 (automatic), 0 (cuBLAS gemv/gemm), 1 (cuBLAS gemm), 2 (own kernels) or 3 (real gemm), got ",
            algo);
  check_arg(fft >= -1 && fft <= 2, "fft",
            "expected -1 (automatic), 0 (strided R2C/C2R), 1 (paired C2C) or 2 (contiguous), got ", fft);
  check_arg(storage >= 0 && storage <= 2, "storage", "expected 0 (complex), 1 (bfloat16) or 2 (float16), got ", storage);
  check_arg(storage == 0 || dtype == DType::f32, "storage", "expected a float32 plan for a 16-bit F̂, got ",
            dtype_name(dtype));
  check_int(Nd * Nm, "Nd*Nm");
  check_int(std::max(Nd, Nm) * R, "R");
  Impl& p = *impl_;
  p.Nt = Nt, p.Nd = Nd, p.Nm = Nm, p.R = R, p.space_major = space_major, p.dtype = dtype;
  p.algo = algo < 0 ? toeplitz_auto_algo(Nd, Nm, R, dtype, false) : algo;
  p.algo_adj = algo < 0 ? toeplitz_auto_algo(Nd, Nm, R, dtype, true) : algo;
  p.fft = fft < 0 ? toeplitz_auto_fft(Nd, Nm, R, dtype, space_major) : fft;
  // algo 3 (one real gemm per frequency) is a matvec product for R > 1 with fft 2; elsewhere, and
  // where its real dimensions would pass 2^31, it is algo 0.
  if (p.algo == 3 && (R == 1 || p.fft != 2 || 4 * std::max(Nd, Nm) * R > INT_MAX)) p.algo = 0;
  if (p.algo_adj == 3) p.algo_adj = 0;
  // A 16-bit F̂: the own kernels' product (apply_fhat_half) in both directions, which keeps the
  // standard frequency-major spectra (no time reversal, no real-gemm layout).
  p.storage = storage;
  if (storage != 0) p.algo = p.algo_adj = 2;
  p.nfft = toeplitz_nfft(Nt);
  p.nfreq = p.nfft / 2 + 1;
  check_int(p.nfreq, "Nt");
  const bool dbl = dtype == DType::f64;
  const size_t tr = dbl ? 8 : 4;
  const cufftType r2c = dbl ? CUFFT_D2Z : CUFFT_R2C, c2r = dbl ? CUFFT_Z2D : CUFFT_C2R;
  const cufftType c2c = dbl ? CUFFT_Z2Z : CUFFT_C2C;
  const int64_t cm = Nm * R, cd = Nd * R, nfft = p.nfft, nfreq = p.nfreq;
  const int64_t hm = (Nm + 1) / 2 * R, hd = (Nd + 1) / 2 * R;  // complex columns of fft 1
  std::vector<FFTPlan*> made;
  if (p.fft == 0) {
    // Transform along time with stride = columns, one transform per column: frequency-major out.
    p.r2c_m.make(nfft, cm, cm, 1, nfft, cm, 1, nfreq, r2c);
    p.c2r_m.make(nfft, cm, cm, 1, nfreq, cm, 1, nfft, c2r);
    p.r2c_d.make(nfft, cd, cd, 1, nfft, cd, 1, nfreq, r2c);
    p.c2r_d.make(nfft, cd, cd, 1, nfreq, cd, 1, nfft, c2r);
    made = {&p.r2c_m, &p.c2r_m, &p.r2c_d, &p.c2r_d};
    p.P.allocate(size_t(nfft) * std::max(cm, cd) * tr);
  } else if (p.fft == 1) {
    // Strided C2C over h complex columns (pairs of real ones), in place, both directions.
    p.r2c_m.make(nfft, hm, hm, 1, nfft, hm, 1, nfft, c2c);
    p.r2c_d.make(nfft, hd, hd, 1, nfft, hd, 1, nfft, c2c);
    made = {&p.r2c_m, &p.r2c_d};
    p.P.allocate(size_t(nfft) * 2 * std::max(hm, hd) * tr);
  } else {
    // Contiguous rows: column c's nfft samples at P[c·nfft], spectra at T1[c·nfreq]. Even nfft:
    // the forward transform is the length-nfft/2 C2C of the rows read as complex (cuFFT's R2C
    // runs that same C2C plus a post pass over all spectra; the post step is fused into the
    // transpose instead), and the inverse is that C2C run backwards after the back transpose
    // has done the C2R pre step (no C2R plans). Odd nfft: cuFFT's R2C and C2R. The inverse
    // writes into the product's output buffer, not P.
    p.half = nfft % 2 == 0;
    if (p.half) {
      const int64_t M = nfft / 2;
      p.r2c_m.make(M, cm, 1, M, M, 1, M, M, c2c);
      p.r2c_d.make(M, cd, 1, M, M, 1, M, M, c2c);
      if (dbl)
        upload_twiddles<double2>(p.Wt, nfft);
      else
        upload_twiddles<float2>(p.Wt, nfft);
      made = {&p.r2c_m, &p.r2c_d};
    } else {
      p.r2c_m.make(nfft, cm, 1, nfft, nfft, 1, nfreq, nfreq, r2c);
      p.r2c_d.make(nfft, cd, 1, nfft, nfft, 1, nfreq, nfreq, r2c);
      p.c2r_m.make(nfft, cm, 1, nfreq, nfreq, 1, nfft, nfft, c2r);
      p.c2r_d.make(nfft, cd, 1, nfreq, nfreq, 1, nfft, nfft, c2r);
      made = {&p.r2c_m, &p.c2r_m, &p.r2c_d, &p.c2r_d};
    }
    p.P.allocate(size_t(nfft) * std::max(cm, cd) * tr);
    zero_now(p.P);
    if (R == 1 && p.algo_adj == 0) {
      p.Prev.allocate(size_t(nfft) * cd * tr);
      zero_now(p.Prev);
    }
    p.T1.allocate(size_t(nfreq) * std::max(cm, cd) * 2 * tr);
  }
  size_t ws = 256;
  for (FFTPlan* f : made) ws = std::max(ws, f->work_size());
  p.work.allocate(ws);
  for (FFTPlan* f : made) f->set_work(p.work.get());
  p.X.allocate(size_t(nfreq) * cm * (p.algo == 3 ? 4 : 2) * tr);  // algo 3: real operand 2Nm × 2R
  p.Y.allocate(size_t(nfreq) * cd * 2 * tr);
  STRUX_CUBLAS(cublasCreate(&p.blas));
  // Own cuBLAS workspace, so no allocation happens inside a call (or a graph capture).
  p.blas_work.allocate(size_t(32) << 20);
}

ToeplitzPlan::~ToeplitzPlan() = default;
int64_t ToeplitzPlan::nfft() const { return impl_->nfft; }
int64_t ToeplitzPlan::nfreq() const { return impl_->nfreq; }
int ToeplitzPlan::algo(bool adjoint) const { return adjoint ? impl_->algo_adj : impl_->algo; }
int ToeplitzPlan::fft() const { return impl_->fft; }
size_t ToeplitzPlan::workspace_bytes() const {
  const Impl& p = *impl_;
  return p.P.bytes() + p.Prev.bytes() + p.X.bytes() + p.Y.bytes() + p.T1.bytes() + p.Wt.bytes() + p.work.bytes() +
         p.blas_work.bytes();
}

}  // namespace strux::cuda
