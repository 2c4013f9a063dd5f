// CirculantScanPlan: h_t = circ(a_t) h_{t-1} + u_t as rfft over n -> complex diagonal scan of
// the half spectra (circ(a) is diagonal in the Fourier basis) -> irfft. The 1/n of the inverse
// transform is folded into the scan's inputs (the scan is linear in u and h0).
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>

#include "cuda/check.hpp"
#include "strux/core.hpp"
#include "strux/cuda/scan.hpp"

namespace strux::cuda {

namespace {
int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

int make_plan(int64_t n, int64_t batch, cufftType type, int64_t* work) {
  cufftHandle h;
  STRUX_CUFFT(cufftCreate(&h));
  STRUX_CUFFT(cufftSetAutoAllocation(h, 0));
  long long nn[1] = {n};
  const long long nf = n / 2 + 1;
  const bool r2c = type == CUFFT_R2C;
  long long inem[1] = {r2c ? n : nf}, onem[1] = {r2c ? nf : n};
  size_t ws = 0;
  STRUX_CUFFT(cufftMakePlanMany64(h, 1, nn, inem, 1, inem[0], onem, 1, onem[0], type, batch, &ws));
  *work = std::max<int64_t>(*work, int64_t(ws));
  return h;
}
}  // namespace

CirculantScanPlan::CirculantScanPlan(int64_t B, int64_t T, int64_t n)
    : B_(B), T_(T), n_(n), nf_(n / 2 + 1), scan_(B, T, n / 2 + 1, DType::c64) {
  check_positive(B, "B");
  check_positive(T, "T");
  check_positive(n, "n");
  r2c_ = make_plan(n, B * T, CUFFT_R2C, &fft_work_);
  c2r_ = make_plan(n, B * T, CUFFT_C2R, &fft_work_);
  r2c0_ = make_plan(n, B, CUFFT_R2C, &fft_work_);
}

CirculantScanPlan::~CirculantScanPlan() {
  cufftDestroy(r2c_);
  cufftDestroy(c2r_);
  cufftDestroy(r2c0_);
}

// [fft work | a_hat (B,T,nf) | u_hat, then h_hat in place (B,T,nf) | h0_hat (B,nf) | scan ws]
int64_t CirculantScanPlan::workspace_bytes() const {
  const int64_t spec = align256(B_ * T_ * nf_ * 8);
  return align256(fft_work_) + 2 * spec + align256(B_ * nf_ * 8) + scan_.workspace_bytes();
}

void CirculantScanPlan::forward(const float* a, const float* u, const float* h0, float* h,
                                void* workspace, void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  char* w = static_cast<char*>(workspace);
  const int64_t spec = align256(B_ * T_ * nf_ * 8);
  void* fwork = w;
  auto* ah = reinterpret_cast<cufftComplex*>(w + align256(fft_work_));
  auto* uh = reinterpret_cast<cufftComplex*>(w + align256(fft_work_) + spec);
  auto* h0h = reinterpret_cast<cufftComplex*>(w + align256(fft_work_) + 2 * spec);
  void* sws = w + align256(fft_work_) + 2 * spec + align256(B_ * nf_ * 8);
  for (int p : {r2c_, c2r_, r2c0_}) {
    STRUX_CUFFT(cufftSetStream(p, s));
    STRUX_CUFFT(cufftSetWorkArea(p, fwork));
  }
  // cuFFT's R2C takes a non-const input pointer but does not write it (out of place).
  STRUX_CUFFT(cufftExecR2C(r2c_, const_cast<float*>(a), ah));
  STRUX_CUFFT(cufftExecR2C(r2c_, const_cast<float*>(u), uh));
  if (h0) STRUX_CUFFT(cufftExecR2C(r2c0_, const_cast<float*>(h0), h0h));
  // Each scan thread reads all its inputs before writing, at the same indices: in place is safe.
  scan_.forward(ah, uh, h0 ? h0h : nullptr, uh, sws, stream, 1.f / float(n_));
  STRUX_CUFFT(cufftExecC2R(c2r_, uh, h));
}

}  // namespace strux::cuda
