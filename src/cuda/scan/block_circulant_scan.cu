// BlockCirculantScanPlan: rfft over k -> per-frequency p x p complex recurrence -> irfft.
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


constexpr int BC_THREADS = 32;  // frequencies per block (one batch row)

__device__ __forceinline__ float2 cfma(float2 a, float2 x, float2 y) {
  return make_float2(fmaf(a.x, x.x, fmaf(-a.y, x.y, y.x)), fmaf(a.x, x.y, fmaf(a.y, x.x, y.y)));
}

// Thread (b, f): H_t[:, f] = A_t[:, :, f] H_{t-1}[:, f] + U_t[:, f] in place over U (it reads
// U_t[:, f] before writing H_t[:, f], and no other thread touches column f of batch b). Its two
// state vectors live in shared memory (column per thread: conflict-free); reads of A and U run
// along f: coalesced across the block.
__global__ void block_recurrence(const float2* __restrict__ A, float2* UH, const float2* H0, int64_t T,
                                 int64_t p, int64_t kf, float scale) {
  extern __shared__ float2 st[];  // [2][p][BC_THREADS]
  const int64_t b = blockIdx.y;
  const int64_t f = int64_t(blockIdx.x) * BC_THREADS + threadIdx.x;
  if (f >= kf) return;
  float2* cur = st;
  float2* nxt = st + p * BC_THREADS;
  const int j0 = threadIdx.x;
  for (int64_t i = 0; i < p; ++i) {
    const float2 v = H0 ? H0[(b * p + i) * kf + f] : make_float2(0.f, 0.f);
    cur[i * BC_THREADS + j0] = make_float2(v.x * scale, v.y * scale);
  }
  for (int64_t t = 0; t < T; ++t) {
    const float2* At = A + ((b * T + t) * p * p) * kf + f;
    float2* Ut = UH + ((b * T + t) * p) * kf + f;
    for (int64_t i = 0; i < p; ++i) {
      float2 acc = Ut[i * kf];
      acc.x *= scale, acc.y *= scale;
      for (int64_t j = 0; j < p; ++j) acc = cfma(__ldg(At + (i * p + j) * kf), cur[j * BC_THREADS + j0], acc);
      nxt[i * BC_THREADS + j0] = acc;
      Ut[i * kf] = acc;
    }
    float2* tmp = cur;
    cur = nxt;
    nxt = tmp;
  }
}

// k == 1: the "spectrum" of a real x is x + 0i and the inverse takes the real part.
__global__ void real_to_complex(const float* x, float2* y, int64_t count, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = make_float2(x[i] * s, 0.f);
}
__global__ void complex_to_real(const float2* x, float* y, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i].x;
}
unsigned blocks_for(int64_t count) { return unsigned(std::min<int64_t>((count + 255) / 256, int64_t(1) << 20)); }
}  // namespace

BlockCirculantScanPlan::BlockCirculantScanPlan(int64_t B, int64_t T, int64_t p, int64_t k)
    : B_(B), T_(T), p_(p), k_(k), kf_(k / 2 + 1) {
  check_positive(B, "B");
  check_positive(T, "T");
  check_positive(p, "p");
  check_positive(k, "k");
  check_arg(B < 65536, "u", "batch B = ", B, " too large for the GPU kernel (B < 65536)");
  check_arg(2 * p * BC_THREADS * 8 <= 48 * 1024, "a", "block grid p = ", p, " too large for the GPU kernel (p <= 96)");
  if (k > 1) {
    r2c_a_ = make_rows_plan(k, B * T * p * p, CUFFT_R2C, &fft_work_);
    r2c_u_ = make_rows_plan(k, B * T * p, CUFFT_R2C, &fft_work_);
    r2c_h0_ = make_rows_plan(k, B * p, CUFFT_R2C, &fft_work_);
    c2r_ = make_rows_plan(k, B * T * p, CUFFT_C2R, &fft_work_);
  }
}

BlockCirculantScanPlan::~BlockCirculantScanPlan() {
  if (k_ > 1) {
    cufftDestroy(r2c_a_);
    cufftDestroy(r2c_u_);
    cufftDestroy(r2c_h0_);
    cufftDestroy(c2r_);
  }
}

// [fft work | Ah (B,T,p,p,kf) | Uh, then H (B,T,p,kf) | H0h (B,p,kf)]
int64_t BlockCirculantScanPlan::workspace_bytes() const {
  return align256(fft_work_) + align256(B_ * T_ * p_ * p_ * kf_ * 8) + align256(B_ * T_ * p_ * kf_ * 8) +
         align256(B_ * p_ * kf_ * 8);
}

void BlockCirculantScanPlan::forward(const float* a, const float* u, const float* h0, float* h, void* workspace,
                                     void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  char* w = static_cast<char*>(workspace);
  void* fwork = w;
  w += align256(fft_work_);
  auto* ah = reinterpret_cast<cufftComplex*>(w);
  w += align256(B_ * T_ * p_ * p_ * kf_ * 8);
  auto* uh = reinterpret_cast<cufftComplex*>(w);
  w += align256(B_ * T_ * p_ * kf_ * 8);
  auto* h0h = reinterpret_cast<cufftComplex*>(w);
  const float inv_k = 1.f / float(k_);
  if (k_ > 1) {
    for (int pl : {r2c_a_, r2c_u_, r2c_h0_, c2r_}) {
      STRUX_CUFFT(cufftSetStream(pl, s));
      STRUX_CUFFT(cufftSetWorkArea(pl, fwork));
    }
    // cuFFT's R2C takes a non-const input pointer but does not write it (out of place).
    STRUX_CUFFT(cufftExecR2C(r2c_a_, const_cast<float*>(a), ah));
    STRUX_CUFFT(cufftExecR2C(r2c_u_, const_cast<float*>(u), uh));
    if (h0) STRUX_CUFFT(cufftExecR2C(r2c_h0_, const_cast<float*>(h0), h0h));
  } else {
    real_to_complex<<<blocks_for(B_ * T_ * p_ * p_), 256, 0, s>>>(a, ah, B_ * T_ * p_ * p_, 1.f);
    real_to_complex<<<blocks_for(B_ * T_ * p_), 256, 0, s>>>(u, uh, B_ * T_ * p_, 1.f);
    if (h0) real_to_complex<<<blocks_for(B_ * p_), 256, 0, s>>>(h0, h0h, B_ * p_, 1.f);
    STRUX_LAUNCH("real_to_complex");
  }
  // The 1/k of the inverse transform goes on U and H0 as the kernel reads them (the recurrence
  // is linear in both), so C2R (unnormalized) of the state gives h.
  dim3 grid(unsigned((kf_ + BC_THREADS - 1) / BC_THREADS), unsigned(B_));
  block_recurrence<<<grid, BC_THREADS, size_t(2 * p_ * BC_THREADS * 8), s>>>(ah, uh, h0 ? h0h : nullptr, T_, p_,
                                                                              kf_, inv_k);
  STRUX_LAUNCH("block_recurrence");
  if (k_ > 1)
    STRUX_CUFFT(cufftExecC2R(c2r_, uh, h));
  else {
    complex_to_real<<<blocks_for(B_ * T_ * p_), 256, 0, s>>>(uh, h, B_ * T_ * p_);
    STRUX_LAUNCH("complex_to_real");
  }
}

}  // namespace strux::cuda
