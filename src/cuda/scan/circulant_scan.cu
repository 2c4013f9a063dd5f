// CirculantScanPlan: h_t = circ(a_t) h_{t-1} + u_t as rfft over n -> complex diagonal scan of
// the half spectra (circ(a) is diagonal in the Fourier basis) -> irfft. The 1/n of the inverse
// transform is folded into the scan's inputs (the scan is linear in u and h0). float32 runs
// R2C/C2R and the complex64 scan; float64 D2Z/Z2D and the complex128 scan.
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <initializer_list>
#include <string>

#include "cuda/check.hpp"
#include "cuda/scan/circulant_fused.hpp"
#include "cuda/scan/fft_rows.hpp"
#include "cuda/staging.hpp"
#include "strux/core.hpp"
#include "strux/cuda/scan.hpp"

namespace strux::cuda {

namespace {
int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

DType checked_real(DType dt) {
  check_arg(dt == DType::f32 || dt == DType::f64, "dtype", "expected float32 or float64, got ",
            dtype_name(dt));
  return dt;
}
}  // namespace

CirculantScanPlan::CirculantScanPlan(int64_t B, int64_t T, int64_t n, DType dtype, const CirculantScanOptions& opt)
    : B_(B), T_(T), n_(n), nf_(n / 2 + 1), dtype_(checked_real(dtype)),
      scan_(B, T, n / 2 + 1, dtype == DType::f64 ? DType::c128 : DType::c64) {
  check_positive(B, "B");
  check_positive(T, "T");
  check_positive(n, "n");
  const bool f64 = dtype_ == DType::f64;
  r2c_ = make_rows_plan(n, B * T, f64 ? CUFFT_D2Z : CUFFT_R2C, &fft_work_);
  c2r_ = make_rows_plan(n, B * T, f64 ? CUFFT_Z2D : CUFFT_C2R, &fft_work_);
  r2c0_ = make_rows_plan(n, B, f64 ? CUFFT_D2Z : CUFFT_R2C, &fft_work_);
  c2r0_ = make_rows_plan(n, B, f64 ? CUFFT_Z2D : CUFFT_C2R, &fft_work_);
  // Where the single-pass kernel runs at all: float32, n of the kernel, B within what the GPU tests
  // covered, and tickets that fit the kernel's 32-bit counter.
  const bool kernel_fits =
      !f64 && circulant_fused_applies(n) && B <= 65535 && B * (T + 1) < (int64_t(1) << 31);
  // Unset, forward: the single-pass kernel only where it was measured faster than the cuFFT path,
  // n = 256 and 1024, and n = 512 between them (same kernel template); n = 64 measured a tie and
  // n = 128 not at all, so they keep cuFFT (bench/NOTES-gpu-scan-circulant.md).
  const bool fits = kernel_fits && n >= 256;
  fused_ = opt.fused.value_or(fits);
  one_pass_ = opt.fused.has_value() ? opt.one_pass : fits;
  // forward_fourier: the kernel's Fourier form wherever it runs (n = 64 … 1024): 1.11-1.48x the
  // cuFFT path on an H100 at B = 16, T = 2048, also at n = 512 and 1024 where the chunk's â leaves
  // one block per SM and a few registers spill; "onepass" forces it, "fft" and "fused" (no
  // three-launch Fourier form) keep cuFFT (bench/NOTES-gpu-scan-circulant.md "Fourier form", outcome).
  fourier_one_pass_ = opt.fused.has_value() ? (*opt.fused && opt.one_pass) : kernel_fits;
  if (fused_) {
    check_arg(!f64 && circulant_fused_applies(n), "fused", "the fused circulant scan takes float32 with n a power "
              "of two in [64, 1024], got ", dtype_name(dtype_), " with n = ", n);
    if (one_pass_)
      check_arg(B * (T + 1) < (int64_t(1) << 31), "B", "the single-pass circulant scan takes B * (T + 1) < 2^31, got B = ",
                B, ", T = ", T);
    else
      check_arg(B <= 65535, "B", "the fused circulant scan takes B <= 65535, got ", B);
    int dev = 0, sms = 0;
    STRUX_CUDA(cudaGetDevice(&dev));
    STRUX_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const CircFusedShape sh = one_pass_ ? circulant_onepass_shape(B, T, n, sms) : circulant_fused_shape(B, T, n, sms);
    fused_L_ = sh.L, fused_C_ = sh.C, fused_grid_ = sh.grid;
  } else {
    check_arg(!opt.one_pass, "one_pass", "the single-pass circulant scan is a fused kernel: it needs fused = true");
  }
  if (fourier_one_pass_) {
    int dev = 0, sms = 0;
    STRUX_CUDA(cudaGetDevice(&dev));
    STRUX_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const CircFusedShape sh = circulant_onepass_shape(B, T, n, sms, true);
    fourier_L_ = sh.L, fourier_C_ = sh.C, fourier_grid_ = sh.grid;
  }
}

std::string CirculantScanPlan::describe() const {
  std::string s = "circulant_scan " + std::string(dtype_name(dtype_)) + " B=" + std::to_string(B_) +
                  " T=" + std::to_string(T_) + " n=" + std::to_string(n_) + ": forward ";
  if (fused_ && one_pass_)
    s += "single-pass fused kernel (" + std::to_string(fused_L_) + " virtual steps per chunk, " +
         std::to_string(fused_C_) + " chunks, look-back, " + std::to_string(fused_grid_) + " persistent blocks)";
  else if (fused_)
    s += "three-launch fused kernels (" + std::to_string(fused_C_) + " chunks of " + std::to_string(fused_L_) + " steps)";
  else
    s += "cuFFT rfft, complex diagonal scan, irfft";
  s += "; forward_fourier ";
  if (fourier_one_pass_)
    s += "Fourier-form one-launch kernel (" + std::to_string(fourier_L_) + " virtual steps per chunk, " +
         std::to_string(fourier_C_) + " chunks, look-back, " + std::to_string(fourier_grid_) + " persistent blocks)";
  else
    s += "cuFFT around the complex diagonal scan";
  return s + "; backward: cuFFT around the complex diagonal scan";
}

CirculantScanPlan::~CirculantScanPlan() {
  cufftDestroy(r2c_);
  cufftDestroy(c2r_);
  cufftDestroy(r2c0_);
  cufftDestroy(c2r0_);
}

// [fft work | ah | s1 | s2 | s3 (4 spectra (B,T,nf)) | h0h | dh0h ((B,nf)) | scan ws].
// forward: ah = A, s1 = U then H. backward: s1 = H, s2 = DH then G, s3 = the spectrum of da.
// Real arrays not aligned to a complex element (staging.hpp) are staged through whichever
// spectrum buffer is idle at that point: (B, T, nf) complex values hold (B, T, n) reals.
namespace {
struct CircWs {
  void* fwork;
  char *ah, *s1, *s2, *s3, *h0h, *dh0h;  // complex64 or complex128 spectra
  void* sws;
};

// cs = bytes of one complex element (8 or 16).
CircWs carve(void* w0, int64_t fft_work, int64_t B, int64_t T, int64_t nf, int64_t cs) {
  char* w = static_cast<char*>(w0);
  const int64_t spec = align256(B * T * nf * cs), small = align256(B * nf * cs);
  CircWs c;
  c.fwork = w;
  w += align256(fft_work);
  c.ah = w;
  c.s1 = w + spec;
  c.s2 = w + 2 * spec;
  c.s3 = w + 3 * spec;
  w += 4 * spec;
  c.h0h = w;
  c.dh0h = w + small;
  c.sws = w + 2 * small;
  return c;
}

// One real <-> half-spectrum transform of either precision. cuFFT takes non-const inputs but
// does not write them out of place.
void r2c(int plan, bool f64, const void* in, void* out) {
  if (f64)
    STRUX_CUFFT(cufftExecD2Z(plan, static_cast<cufftDoubleReal*>(const_cast<void*>(in)),
                             static_cast<cufftDoubleComplex*>(out)));
  else
    STRUX_CUFFT(cufftExecR2C(plan, static_cast<cufftReal*>(const_cast<void*>(in)), static_cast<cufftComplex*>(out)));
}
void c2r(int plan, bool f64, void* in, void* out) {
  if (f64)
    STRUX_CUFFT(cufftExecZ2D(plan, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleReal*>(out)));
  else
    STRUX_CUFFT(cufftExecC2R(plan, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(out)));
}

// irfft ignores the imaginary parts at frequency 0 and (even n) n/2: so must the scan. With
// weight, also the chain rule through irfft for a Fourier-form gradient: x_k *= 2 for the bins
// that stand for two frequencies (0 < k < n/2).
template <class C>
__global__ void fix_bins(C* x, int64_t rows, int64_t nf, int64_t n, bool weight) {
  const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  C* row = x + r * nf;
  row[0].y = 0;
  if (n % 2 == 0) row[nf - 1].y = 0;
  if (weight) {
    const int64_t hi = n % 2 == 0 ? nf - 1 : nf;
    for (int64_t k = 1; k < hi; ++k) row[k].x *= 2, row[k].y *= 2;
  }
}

template <class C>
__global__ void scale_c(C* x, int64_t count, double s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    x[i].x *= s, x[i].y *= s;
}

unsigned blocks_for(int64_t count, int threads) {
  return unsigned(std::min<int64_t>((count + threads - 1) / threads, int64_t(1) << 20));
}

void launch_fix_bins(bool f64, void* x, int64_t rows, int64_t nf, int64_t n, bool weight, cudaStream_t s) {
  if (f64)
    fix_bins<<<blocks_for(rows, 256), 256, 0, s>>>(static_cast<double2*>(x), rows, nf, n, weight);
  else
    fix_bins<<<blocks_for(rows, 256), 256, 0, s>>>(static_cast<float2*>(x), rows, nf, n, weight);
  STRUX_LAUNCH("fix_bins");
}

void launch_scale(bool f64, void* x, int64_t count, double scale, cudaStream_t s) {
  if (f64)
    scale_c<<<blocks_for(count, 256), 256, 0, s>>>(static_cast<double2*>(x), count, scale);
  else
    scale_c<<<blocks_for(count, 256), 256, 0, s>>>(static_cast<float2*>(x), count, scale);
  STRUX_LAUNCH("scale_c");
}
}  // namespace

int64_t CirculantScanPlan::workspace_bytes() const {
  const int64_t cs = csize(), spec = align256(B_ * T_ * nf_ * cs), small = align256(B_ * nf_ * cs);
  const CircFusedShape sh{fused_L_, fused_C_, fused_grid_};
  const int64_t fused = !fused_ ? 0 : one_pass_ ? circulant_onepass_workspace(B_, n_, sh)
                                                : circulant_fused_workspace(B_, n_, sh);
  const int64_t fourier = !fourier_one_pass_ ? 0 : circulant_onepass_workspace(
                                                       B_, n_, CircFusedShape{fourier_L_, fourier_C_, fourier_grid_});
  return std::max({align256(fft_work_) + 4 * spec + 2 * small + scan_.workspace_bytes(), fused, fourier});
}

void CirculantScanPlan::spectra_of_a(const void* a, const void* a_hat, void* ah, void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  const bool f64 = dtype_ == DType::f64;
  if (a) return r2c(r2c_, f64, a, ah);
  STRUX_CUDA(cudaMemcpyAsync(ah, a_hat, size_t(B_ * T_ * nf_ * csize()), cudaMemcpyDeviceToDevice, s));
  launch_fix_bins(f64, ah, B_ * T_, nf_, n_, false, s);
}

void CirculantScanPlan::forward(const void* a, const void* u, const void* h0, void* h,
                                void* workspace, void* stream) const {
  if (fused_ && one_pass_)
    return circulant_onepass_forward(B_, T_, n_, CircFusedShape{fused_L_, fused_C_, fused_grid_},
                                     static_cast<const float*>(a), static_cast<const float*>(u),
                                     static_cast<const float*>(h0), static_cast<float*>(h), workspace,
                                     static_cast<cudaStream_t>(stream));
  if (fused_)
    return circulant_fused_forward(B_, T_, n_, CircFusedShape{fused_L_, fused_C_}, static_cast<const float*>(a),
                                   static_cast<const float*>(u), static_cast<const float*>(h0),
                                   static_cast<float*>(h), workspace, static_cast<cudaStream_t>(stream));
  forward_any(a, nullptr, u, h0, h, workspace, stream);
}

void CirculantScanPlan::forward_fourier(const void* a_hat, const void* u, const void* h0, void* h,
                                        void* workspace, void* stream) const {
  if (fourier_one_pass_)
    return circulant_onepass_forward_fourier(B_, T_, n_, CircFusedShape{fourier_L_, fourier_C_, fourier_grid_}, a_hat,
                                             static_cast<const float*>(u), static_cast<const float*>(h0),
                                             static_cast<float*>(h), workspace, static_cast<cudaStream_t>(stream));
  forward_any(nullptr, a_hat, u, h0, h, workspace, stream);
}

void CirculantScanPlan::forward_any(const void* a, const void* a_hat, const void* u, const void* h0,
                                    void* h, void* workspace, void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  const bool f64 = dtype_ == DType::f64;
  const CircWs w = carve(workspace, fft_work_, B_, T_, nf_, csize());
  const int64_t cs = csize(), big = B_ * T_ * n_ * cs / 2, small = B_ * n_ * cs / 2;  // real bytes
  bind_plans({r2c_, c2r_, r2c0_, c2r0_}, w.fwork, s);
  spectra_of_a(staged_in(a, big, w.s1, cs, s), a_hat, w.ah, stream);
  r2c(r2c_, f64, staged_in(u, big, w.s2, cs, s), w.s1);
  if (h0) r2c(r2c0_, f64, staged_in(h0, small, w.dh0h, cs, s), w.h0h);
  // Each scan thread reads all its inputs before writing, at the same indices: in place is safe.
  scan_.forward(w.ah, w.s1, h0 ? w.h0h : nullptr, w.s1, w.sws, stream, 1.0 / double(n_));
  void* ht = out_target(h, w.s2, cs);
  c2r(c2r_, f64, w.s1, ht);
  finish_out(h, ht, big, s);
}

// In the Fourier basis circ(a)^T has the spectrum conj(A) and the cyclic cross-correlation
// da_t = g_t (*) h_{t-1} has the spectrum G conj(H_{t-1}): exactly the complex diagonal scan's
// backward (g = dh + conj(a) g, da = g conj(h_prev)) on the half spectra. With the 1/n of the
// inverse transform folded into DH, C2R of G gives du, of G conj(H) da, of conj(A_0) G_0 dh0.
// The gradient for a_hat is (w_k / n) rfft(da)_k = w_k (G/n) conj(H): no transform at all.
void CirculantScanPlan::backward(const void* a, const void* a_hat, const void* u, const void* h0,
                                 const void* dh, void* da, void* du, void* dh0, void* workspace,
                                 void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  const bool f64 = dtype_ == DType::f64;
  const CircWs w = carve(workspace, fft_work_, B_, T_, nf_, csize());
  const int64_t cs = csize(), big = B_ * T_ * n_ * cs / 2, small = B_ * n_ * cs / 2;  // real bytes
  bind_plans({r2c_, c2r_, r2c0_, c2r0_}, w.fwork, s);
  spectra_of_a(staged_in(a, big, w.s2, cs, s), a_hat, w.ah, stream);
  r2c(r2c_, f64, staged_in(u, big, w.s3, cs, s), w.s1);
  if (h0) r2c(r2c0_, f64, staged_in(h0, small, w.dh0h, cs, s), w.h0h);
  scan_.forward(w.ah, w.s1, h0 ? w.h0h : nullptr, w.s1, w.sws, stream, 1.0);  // H = rfft(h)
  r2c(r2c_, f64, staged_in(dh, big, w.s3, cs, s), w.s2);
  launch_scale(f64, w.s2, B_ * T_ * nf_, 1.0 / double(n_), s);
  void* dah = a ? static_cast<void*>(w.s3) : da;  // the Fourier form's gradient is this spectrum
  // db in place over dh: each scan thread reads dh_t before it writes db_t (same index).
  scan_.backward(w.ah, w.s1, h0 ? w.h0h : nullptr, w.s2, dah, w.s2, dh0 ? w.dh0h : nullptr, w.sws, stream);
  // H (s1) and h0's spectrum are no longer needed: they stage misaligned outputs.
  void* dut = out_target(du, w.s1, cs);
  c2r(c2r_, f64, w.s2, dut);
  finish_out(du, dut, big, s);
  if (a) {
    void* dat = out_target(da, w.s1, cs);
    c2r(c2r_, f64, w.s3, dat);
    finish_out(da, dat, big, s);
  } else {
    launch_fix_bins(f64, da, B_ * T_, nf_, n_, true, s);  // da: a complex output, element-aligned
  }
  if (dh0) {
    void* d0t = out_target(dh0, w.h0h, cs);
    c2r(c2r0_, f64, w.dh0h, d0t);
    finish_out(dh0, d0t, small, s);
  }
}

}  // namespace strux::cuda
