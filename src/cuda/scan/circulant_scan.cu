// CirculantScanPlan: h_t = circ(a_t) h_{t-1} + u_t as rfft over n -> complex diagonal scan of
// the half spectra (circ(a) is diagonal in the Fourier basis) -> irfft. The 1/n of the inverse
// transform is folded into the scan's inputs (the scan is linear in u and h0).
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <initializer_list>

#include "cuda/check.hpp"
#include "cuda/scan/fft_rows.hpp"
#include "strux/core.hpp"
#include "strux/cuda/scan.hpp"

namespace strux::cuda {

namespace {
int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

}  // namespace

CirculantScanPlan::CirculantScanPlan(int64_t B, int64_t T, int64_t n)
    : B_(B), T_(T), n_(n), nf_(n / 2 + 1), scan_(B, T, n / 2 + 1, DType::c64) {
  check_positive(B, "B");
  check_positive(T, "T");
  check_positive(n, "n");
  r2c_ = make_rows_plan(n, B * T, CUFFT_R2C, &fft_work_);
  c2r_ = make_rows_plan(n, B * T, CUFFT_C2R, &fft_work_);
  r2c0_ = make_rows_plan(n, B, CUFFT_R2C, &fft_work_);
  c2r0_ = make_rows_plan(n, B, CUFFT_C2R, &fft_work_);
}

CirculantScanPlan::~CirculantScanPlan() {
  cufftDestroy(r2c_);
  cufftDestroy(c2r_);
  cufftDestroy(r2c0_);
  cufftDestroy(c2r0_);
}

// [fft work | ah | s1 | s2 | s3 (4 spectra (B,T,nf)) | h0h | dh0h ((B,nf)) | scan ws].
// forward: ah = A, s1 = U then H. backward: s1 = H, s2 = DH then G, s3 = the spectrum of da.
namespace {
struct CircWs {
  void* fwork;
  cufftComplex *ah, *s1, *s2, *s3, *h0h, *dh0h;
  void* sws;
};

CircWs carve(void* w0, int64_t fft_work, int64_t B, int64_t T, int64_t nf) {
  char* w = static_cast<char*>(w0);
  const int64_t spec = align256(B * T * nf * 8), small = align256(B * nf * 8);
  CircWs c;
  c.fwork = w;
  w += align256(fft_work);
  c.ah = reinterpret_cast<cufftComplex*>(w);
  c.s1 = reinterpret_cast<cufftComplex*>(w + spec);
  c.s2 = reinterpret_cast<cufftComplex*>(w + 2 * spec);
  c.s3 = reinterpret_cast<cufftComplex*>(w + 3 * spec);
  w += 4 * spec;
  c.h0h = reinterpret_cast<cufftComplex*>(w);
  c.dh0h = reinterpret_cast<cufftComplex*>(w + small);
  c.sws = w + 2 * small;
  return c;
}

// irfft ignores the imaginary parts at frequency 0 and (even n) n/2: so must the scan. With
// weight, also the chain rule through irfft for a Fourier-form gradient: x_k *= 2 for the bins
// that stand for two frequencies (0 < k < n/2).
__global__ void fix_bins(float2* x, int64_t rows, int64_t nf, int64_t n, bool weight) {
  const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  float2* row = x + r * nf;
  row[0].y = 0.f;
  if (n % 2 == 0) row[nf - 1].y = 0.f;
  if (weight) {
    const int64_t hi = n % 2 == 0 ? nf - 1 : nf;
    for (int64_t k = 1; k < hi; ++k) row[k].x *= 2.f, row[k].y *= 2.f;
  }
}

__global__ void scale_c(float2* x, int64_t count, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    x[i].x *= s, x[i].y *= s;
}

unsigned blocks_for(int64_t count, int threads) {
  return unsigned(std::min<int64_t>((count + threads - 1) / threads, int64_t(1) << 20));
}
}  // namespace

int64_t CirculantScanPlan::workspace_bytes() const {
  const int64_t spec = align256(B_ * T_ * nf_ * 8), small = align256(B_ * nf_ * 8);
  return align256(fft_work_) + 4 * spec + 2 * small + scan_.workspace_bytes();
}

void CirculantScanPlan::spectra_of_a(const float* a, const void* a_hat, void* ah, void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  if (a) {
    // cuFFT's R2C takes a non-const input pointer but does not write it (out of place).
    STRUX_CUFFT(cufftExecR2C(r2c_, const_cast<float*>(a), static_cast<cufftComplex*>(ah)));
    return;
  }
  STRUX_CUDA(cudaMemcpyAsync(ah, a_hat, size_t(B_ * T_ * nf_ * 8), cudaMemcpyDeviceToDevice, s));
  fix_bins<<<blocks_for(B_ * T_, 256), 256, 0, s>>>(static_cast<float2*>(ah), B_ * T_, nf_, n_, false);
  STRUX_LAUNCH("fix_bins");
}

static void bind_plans(std::initializer_list<int> plans, void* fwork, cudaStream_t s) {
  for (int p : plans) {
    STRUX_CUFFT(cufftSetStream(p, s));
    STRUX_CUFFT(cufftSetWorkArea(p, fwork));
  }
}

void CirculantScanPlan::forward(const float* a, const float* u, const float* h0, float* h,
                                void* workspace, void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  const CircWs w = carve(workspace, fft_work_, B_, T_, nf_);
  bind_plans({r2c_, c2r_, r2c0_, c2r0_}, w.fwork, s);
  spectra_of_a(a, nullptr, w.ah, stream);
  STRUX_CUFFT(cufftExecR2C(r2c_, const_cast<float*>(u), w.s1));
  if (h0) STRUX_CUFFT(cufftExecR2C(r2c0_, const_cast<float*>(h0), w.h0h));
  // Each scan thread reads all its inputs before writing, at the same indices: in place is safe.
  scan_.forward(w.ah, w.s1, h0 ? w.h0h : nullptr, w.s1, w.sws, stream, 1.f / float(n_));
  STRUX_CUFFT(cufftExecC2R(c2r_, w.s1, h));
}

void CirculantScanPlan::forward_fourier(const void* a_hat, const float* u, const float* h0, float* h,
                                        void* workspace, void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  const CircWs w = carve(workspace, fft_work_, B_, T_, nf_);
  bind_plans({r2c_, c2r_, r2c0_, c2r0_}, w.fwork, s);
  spectra_of_a(nullptr, a_hat, w.ah, stream);
  STRUX_CUFFT(cufftExecR2C(r2c_, const_cast<float*>(u), w.s1));
  if (h0) STRUX_CUFFT(cufftExecR2C(r2c0_, const_cast<float*>(h0), w.h0h));
  scan_.forward(w.ah, w.s1, h0 ? w.h0h : nullptr, w.s1, w.sws, stream, 1.f / float(n_));
  STRUX_CUFFT(cufftExecC2R(c2r_, w.s1, h));
}

// In the Fourier basis circ(a)^T has the spectrum conj(A) and the cyclic cross-correlation
// da_t = g_t (*) h_{t-1} has the spectrum G conj(H_{t-1}): exactly the complex diagonal scan's
// backward (g = dh + conj(a) g, da = g conj(h_prev)) on the half spectra. With the 1/n of the
// inverse transform folded into DH, C2R of G gives du, of G conj(H) da, of conj(A_0) G_0 dh0.
// The gradient for a_hat is (w_k / n) rfft(da)_k = w_k (G/n) conj(H): no transform at all.
void CirculantScanPlan::backward(const float* a, const void* a_hat, const float* u, const float* h0,
                                 const float* dh, void* da, float* du, float* dh0, void* workspace,
                                 void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  const CircWs w = carve(workspace, fft_work_, B_, T_, nf_);
  bind_plans({r2c_, c2r_, r2c0_, c2r0_}, w.fwork, s);
  spectra_of_a(a, a_hat, w.ah, stream);
  STRUX_CUFFT(cufftExecR2C(r2c_, const_cast<float*>(u), w.s1));
  if (h0) STRUX_CUFFT(cufftExecR2C(r2c0_, const_cast<float*>(h0), w.h0h));
  scan_.forward(w.ah, w.s1, h0 ? w.h0h : nullptr, w.s1, w.sws, stream, 1.f);  // H = rfft(h)
  STRUX_CUFFT(cufftExecR2C(r2c_, const_cast<float*>(dh), w.s2));
  scale_c<<<blocks_for(B_ * T_ * nf_, 256), 256, 0, s>>>(reinterpret_cast<float2*>(w.s2), B_ * T_ * nf_,
                                                          1.f / float(n_));
  STRUX_LAUNCH("scale_c");
  void* dah = a ? static_cast<void*>(w.s3) : da;  // the Fourier form's gradient is this spectrum
  // db in place over dh: each scan thread reads dh_t before it writes db_t (same index).
  scan_.backward(w.ah, w.s1, h0 ? w.h0h : nullptr, w.s2, dah, w.s2, dh0 ? w.dh0h : nullptr, w.sws, stream);
  STRUX_CUFFT(cufftExecC2R(c2r_, w.s2, du));
  if (a) {
    STRUX_CUFFT(cufftExecC2R(c2r_, w.s3, static_cast<float*>(da)));
  } else {
    fix_bins<<<blocks_for(B_ * T_, 256), 256, 0, s>>>(static_cast<float2*>(da), B_ * T_, nf_, n_, true);
    STRUX_LAUNCH("fix_bins");
  }
  if (dh0) STRUX_CUFFT(cufftExecC2R(c2r0_, w.dh0h, dh0));
}

}  // namespace strux::cuda
