// BlockCirculantScanPlan: rfft over k -> per-frequency p x p complex recurrence -> irfft, forward
// and backward. Kernels in block_scan_kernels.cuh; this file owns the cuFFT plans, the workspace
// layout and the choice of kernel family (made when the plan is built).
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

#include "cuda/check.hpp"
#include "cuda/scan/block_scan_group.cuh"
#include "cuda/scan/block_scan_kernels.cuh"
#include "cuda/scan/fft_rows.hpp"
#include "cuda/staging.hpp"
#include "strux/core.hpp"
#include "strux/cuda/scan.hpp"

namespace strux::cuda {

namespace {
int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

// k == 1: the "spectrum" of a real x is x + 0i and the inverse takes the real part.
__global__ void real_to_complex(const float* x, float2* y, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = make_float2(x[i], 0.f);
}
__global__ void complex_to_real(const float2* x, float* y, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i].x;
}
unsigned blocks_for(int64_t count) { return unsigned(std::min<int64_t>((count + 255) / 256, int64_t(1) << 20)); }

int sm_count() {
  int dev = 0, sms = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

constexpr int64_t MAX_CHUNK_P = 4;  // register kernels (chunk_*<P>) exist for p <= 4
// Chunked kernels: one thread per chain (p <= 4) or a group of p lanes (p = 8, 16).
bool has_chunked(int64_t p) { return p <= MAX_CHUNK_P || p == 8 || p == 16; }
int64_t lanes_per_chain(int64_t p) { return p <= MAX_CHUNK_P ? 1 : p; }

}  // namespace

// Kernel family, at plan time (bench/NOTES-gpu-ks-scan.md#scan-solver-rule): the chunked
// kernels where they exist (registers for p <= 4, groups of p lanes for p = 8, 16), else the
// generic ones. The seq kernels make one dependent round trip to memory per time step per
// (batch, frequency) thread, so with few threads (B * kf small) the GPU idles on latency. Cutting
// time into C chunks costs 2 chunk passes of L = T/C steps plus a carry pass of C steps (forward;
// twice that backward), minimised near C = sqrt(2T); C is capped so that the chains' threads
// (B*kf*C, times p for the groups) stay within ~8 resident waves (groups: ~1), and chunking is
// skipped when the sequence alone fills the GPU. BlockCirculantScanOptions forces either family.
BlockCirculantScanPlan::BlockCirculantScanPlan(int64_t B, int64_t T, int64_t p, int64_t k,
                                               const BlockCirculantScanOptions& opt)
    : B_(B), T_(T), p_(p), k_(k), kf_(k / 2 + 1) {
  check_positive(B, "B");
  check_positive(T, "T");
  check_positive(p, "p");
  check_positive(k, "k");
  check_arg(B < 65536, "u", "batch B = ", B, " too large for the GPU kernel (B < 65536)");
  check_arg(2 * p * bscan::SEQ_THREADS * 8 <= 48 * 1024, "a", "block grid p = ", p,
            " too large for the GPU kernel (p <= 96)");
  check_arg(opt.chunk >= 0, "chunk", "expected a chunk length >= 1 (0: automatic), got ", opt.chunk);
  check_arg(!(opt.registers == false && opt.chunk > 0), "chunk",
            "the generic kernels do not run in chunks (got chunk = ", opt.chunk, ")");
  const bool forced_regs = opt.registers.value_or(false) || opt.chunk > 0;
  check_arg(!forced_regs || has_chunked(p), "registers", "the chunked kernels need p <= ", MAX_CHUNK_P,
            ", 8 or 16, got p = ", p);
  regs_ = opt.registers.value_or(has_chunked(p));
  L_ = T;
  if (opt.chunk > 0) {
    L_ = std::min<int64_t>(opt.chunk, T);
  } else if (regs_ && !opt.registers) {
    // The group kernels (up to 128 registers, ~4 blocks of 128 per SM) stop near one resident
    // wave: past it more chunks only lengthen the carry pass, a chain of dependent round trips.
    const int64_t per_sm = p <= MAX_CHUNK_P ? 2048 * 8 : 512;
    const int64_t threads = B * kf_ * lanes_per_chain(p), cap = int64_t(sm_count()) * per_sm;
    int64_t C = std::min<int64_t>(int64_t(std::ceil(std::sqrt(2.0 * double(T)))), cap / threads);
    if (threads < int64_t(sm_count()) * 1024 && C >= 4) L_ = (T + C - 1) / C;
  }
  C_ = (T + L_ - 1) / L_;
  if (k > 1) {
    r2c_a_ = make_rows_plan(k, B * T * p * p, CUFFT_R2C, &fft_work_);
    r2c_u_ = make_rows_plan(k, B * T * p, CUFFT_R2C, &fft_work_);
    r2c_h0_ = make_rows_plan(k, B * p, CUFFT_R2C, &fft_work_);
    c2r_ = make_rows_plan(k, B * T * p, CUFFT_C2R, &fft_work_);
    c2r_a_ = make_rows_plan(k, B * T * p * p, CUFFT_C2R, &fft_work_);
    c2r_h0_ = make_rows_plan(k, B * p, CUFFT_C2R, &fft_work_);
  }
}

std::string BlockCirculantScanPlan::describe() const {
  std::string s = "block_circulant_scan (" + std::to_string(B_) + ", " + std::to_string(T_) + ", " +
                  std::to_string(p_) + ", " + std::to_string(k_) + ") float32: " +
                  (!regs_ ? "generic kernels" : p_ <= MAX_CHUNK_P ? "register kernels" : "group kernels");
  if (L_ < T_) s += ", chunks of " + std::to_string(L_) + " steps";
  return s;
}

BlockCirculantScanPlan::~BlockCirculantScanPlan() {
  if (k_ > 1)
    for (int pl : {r2c_a_, r2c_u_, r2c_h0_, c2r_, c2r_a_, c2r_h0_}) cufftDestroy(pl);
}

// Workspace: the forward's buffers first, the backward's extra ones after them.
//   [fft work | Ah (B,T,p,p,kf) | UH (B,T,p,kf) | H0h (B,p,kf) | S, Car (B,C,p,kf) | M (B,C,p,p,kf)]
//     [| Stage (B,T,p,k) float32, k > 1 only]
//   + backward: [DG (B,T,p,kf) | DLh, dH0h (B,p,kf)]
// Backward reuses S for R and Car for E (the forward's S and carries are spent by then).
// Stage takes real arrays cuFFT refuses (not 8-byte aligned, staging.hpp): every spectrum buffer
// is busy while a's spectrum is being written, so it is a region of its own, u's size; a (p times
// that) is transformed in p pieces of u's rows. k == 1 runs no cuFFT and needs no stage.
namespace {
struct BcWs {
  void* fwork;
  float2 *ah, *uh, *h0h, *s, *car, *m, *dg, *dlh, *dh0h;
  float* stage;
};
}  // namespace

static BcWs carve(void* w0, int64_t fft_work, int64_t B, int64_t T, int64_t p, int64_t k, int64_t kf, int64_t C,
                  bool chunked, int64_t* fwd_bytes, int64_t* bwd_bytes) {
  char* w = static_cast<char*>(w0);
  char* const base = w;
  BcWs r{};
  auto take = [&](int64_t bytes) {
    char* q = w;
    w += align256(bytes);
    return reinterpret_cast<float2*>(q);
  };
  r.fwork = take(fft_work);
  r.ah = take(B * T * p * p * kf * 8);
  r.uh = take(B * T * p * kf * 8);
  r.h0h = take(B * p * kf * 8);
  if (chunked) {
    r.s = take(B * C * p * kf * 8);
    r.car = take(B * C * p * kf * 8);
    r.m = take(B * C * p * p * kf * 8);
  }
  if (k > 1) r.stage = reinterpret_cast<float*>(take(B * T * p * k * 4));
  if (fwd_bytes) *fwd_bytes = w - base;
  r.dg = take(B * T * p * kf * 8);
  r.dlh = take(B * p * kf * 8);
  r.dh0h = take(B * p * kf * 8);
  if (bwd_bytes) *bwd_bytes = w - base;
  return r;
}

int64_t BlockCirculantScanPlan::workspace_bytes() const {
  int64_t f = 0;
  carve(nullptr, fft_work_, B_, T_, p_, k_, kf_, C_, C_ > 1, &f, nullptr);
  return f;
}

int64_t BlockCirculantScanPlan::backward_workspace_bytes() const {
  int64_t b = 0;
  carve(nullptr, fft_work_, B_, T_, p_, k_, kf_, C_, C_ > 1, nullptr, &b);
  return b;
}

void BlockCirculantScanPlan::r2c(int plan, const float* x, void* y, int64_t rows, void* stream) const {
  if (k_ > 1) {
    // cuFFT's R2C takes a non-const input pointer but does not write it (out of place).
    STRUX_CUFFT(cufftExecR2C(plan, const_cast<float*>(x), static_cast<cufftComplex*>(y)));
  } else {
    real_to_complex<<<blocks_for(rows), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, static_cast<float2*>(y),
                                                                                     rows);
    STRUX_LAUNCH("real_to_complex");
  }
}

// Unnormalized inverse (the 1/k is folded into the recurrence's inputs); cuFFT's C2R may
// overwrite its input, which is spent by then.
void BlockCirculantScanPlan::c2r(int plan, void* x, float* y, int64_t rows, void* stream) const {
  if (k_ > 1) {
    STRUX_CUFFT(cufftExecC2R(plan, static_cast<cufftComplex*>(x), y));
  } else {
    complex_to_real<<<blocks_for(rows), 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<float2*>(x), y,
                                                                                     rows);
    STRUX_LAUNCH("complex_to_real");
  }
}

namespace {
// The chunked kernels of one p: chunk_*<P> (a thread per chain) for P <= 4, group_*<P> (P lanes
// per chain) for P = 8, 16; the same arguments and passes.
template <int P, bool G = (P > MAX_CHUNK_P)>
struct Kern;
template <int P>
struct Kern<P, false> {
  static constexpr int lanes = 1;
  static constexpr auto summary = bscan::chunk_summary<P>;
  static constexpr auto carry = bscan::chunk_carry<P>;
  static constexpr auto apply = bscan::chunk_apply<P>;
  static constexpr auto summary_bwd = bscan::chunk_summary_bwd<P>;
  static constexpr auto carry_bwd = bscan::chunk_carry_bwd<P>;
  static constexpr auto apply_bwd = bscan::chunk_apply_bwd<P>;
};
template <int P>
struct Kern<P, true> {
  static constexpr int lanes = P;
  static constexpr auto summary = bscan::group_summary<P>;
  static constexpr auto carry = bscan::group_carry<P>;
  static constexpr auto apply = bscan::group_apply<P>;
  static constexpr auto summary_bwd = bscan::group_summary_bwd<P>;
  static constexpr auto carry_bwd = bscan::group_carry_bwd<P>;
  static constexpr auto apply_bwd = bscan::group_apply_bwd<P>;
};

// Grid of `chains` chains per batch row (blockIdx.y = b).
template <int P>
dim3 chain_grid(int64_t chains, int64_t B) {
  const int64_t threads = chains * Kern<P>::lanes;
  return dim3(unsigned((threads + bscan::CHUNK_THREADS - 1) / bscan::CHUNK_THREADS), unsigned(B));
}

template <int P>
void chunk_forward(float2* ah, float2* uh, const float2* h0h, float2* S, float2* M, float2* Car, int64_t B,
                   int64_t T, int64_t L, int64_t C, int64_t kf, float s, cudaStream_t st) {
  using K = Kern<P>;
  constexpr int NT = bscan::CHUNK_THREADS;
  const dim3 grid = chain_grid<P>(C * kf, B);
  if (C == 1) {
    K::apply<<<grid, NT, 0, st>>>(ah, uh, h0h, T, L, 1, kf, s, s);
    STRUX_LAUNCH("block_scan apply");
    return;
  }
  K::summary<<<grid, NT, 0, st>>>(ah, uh, S, M, T, L, C, kf, s);
  STRUX_LAUNCH("block_scan summary");
  K::carry<<<chain_grid<P>(kf, B), NT, 0, st>>>(S, M, h0h, Car, C, kf, s);
  STRUX_LAUNCH("block_scan carry");
  K::apply<<<grid, NT, 0, st>>>(ah, uh, Car, T, L, C, kf, s, 1.f);
  STRUX_LAUNCH("block_scan apply");
}

// Needs M from chunk_forward (C > 1); R, E may alias S, Car.
template <int P>
void chunk_backward(float2* ax, const float2* H, float2* dg, const float2* h0h, const float2* dlh, float2* dh0h,
                    float2* R, const float2* M, float2* E, int64_t B, int64_t T, int64_t L, int64_t C, int64_t kf,
                    float s, cudaStream_t st) {
  using K = Kern<P>;
  constexpr int NT = bscan::CHUNK_THREADS;
  const dim3 grid = chain_grid<P>(C * kf, B);
  if (C > 1) {
    K::summary_bwd<<<grid, NT, 0, st>>>(ax, dg, dlh, R, T, L, C, kf, s);
    STRUX_LAUNCH("block_scan summary_bwd");
    K::carry_bwd<<<chain_grid<P>(kf, B), NT, 0, st>>>(R, M, E, C, kf);
    STRUX_LAUNCH("block_scan carry_bwd");
  }
  K::apply_bwd<<<grid, NT, 0, st>>>(ax, H, dg, h0h, dlh, C > 1 ? E : nullptr, dh0h, T, L, C, kf, s);
  STRUX_LAUNCH("block_scan apply_bwd");
}
}  // namespace

// H = the state spectra in place over UH (U on entry); U and H0 scaled by s as read.
void BlockCirculantScanPlan::scan_forward(void* ah_, void* uh_, const void* h0h_, void* S_, void* M_, void* Car_,
                                          float s, void* stream) const {
  auto st = static_cast<cudaStream_t>(stream);
  auto* ah = static_cast<float2*>(ah_);
  auto* uh = static_cast<float2*>(uh_);
  auto* h0h = static_cast<const float2*>(h0h_);
  auto *S = static_cast<float2*>(S_), *M = static_cast<float2*>(M_), *Car = static_cast<float2*>(Car_);
  if (!regs_) {
    const dim3 grid(unsigned((kf_ + bscan::SEQ_THREADS - 1) / bscan::SEQ_THREADS), unsigned(B_));
    bscan::seq_forward<<<grid, bscan::SEQ_THREADS, size_t(2 * p_ * bscan::SEQ_THREADS * 8), st>>>(ah, uh, h0h, T_,
                                                                                                p_, kf_, s, s);
    STRUX_LAUNCH("seq_forward");
    return;
  }
  switch (p_) {
    case 1: chunk_forward<1>(ah, uh, h0h, S, M, Car, B_, T_, L_, C_, kf_, s, st); break;
    case 2: chunk_forward<2>(ah, uh, h0h, S, M, Car, B_, T_, L_, C_, kf_, s, st); break;
    case 3: chunk_forward<3>(ah, uh, h0h, S, M, Car, B_, T_, L_, C_, kf_, s, st); break;
    case 4: chunk_forward<4>(ah, uh, h0h, S, M, Car, B_, T_, L_, C_, kf_, s, st); break;
    case 8: chunk_forward<8>(ah, uh, h0h, S, M, Car, B_, T_, L_, C_, kf_, s, st); break;
    default: chunk_forward<16>(ah, uh, h0h, S, M, Car, B_, T_, L_, C_, kf_, s, st); break;
  }
}

namespace {
// Real rows of k in and out of the transforms. An array cuFFT refuses (k > 1, not 8-byte aligned)
// is copied through the stage, in pieces of at most `piece` rows (the stage's size); run(x, y,
// rows) is the transform of `rows` rows, x real and y spectra.
struct RealRows {
  int64_t k, kf, piece;
  float* stage;
  cudaStream_t s;
  template <class F>
  void in(const float* x, float2* y, int64_t rows, F run) const {
    if (k == 1 || aligned_to(x, 8)) return run(x, y, rows);
    const int64_t n = std::min(rows, piece);
    for (int64_t r = 0; r < rows; r += n)
      run(static_cast<const float*>(staged_in(x + r * k, n * k * 4, stage, 8, s)), y + r * kf, n);
  }
  template <class F>
  void out(float2* y, float* x, int64_t rows, F run) const {
    if (k == 1 || aligned_to(x, 8)) return run(y, x, rows);
    const int64_t n = std::min(rows, piece);
    for (int64_t r = 0; r < rows; r += n) {
      auto* t = static_cast<float*>(out_target(x + r * k, stage, 8));
      run(y + r * kf, t, n);
      finish_out(x + r * k, t, n * k * 4, s);
    }
  }
};
}  // namespace

void BlockCirculantScanPlan::forward(const float* a, const float* u, const float* h0, float* h, void* workspace,
                                     void* stream) const {
  auto s = static_cast<cudaStream_t>(stream);
  const BcWs w = carve(workspace, fft_work_, B_, T_, p_, k_, kf_, C_, C_ > 1, nullptr, nullptr);
  if (k_ > 1) bind_plans({r2c_a_, r2c_u_, r2c_h0_, c2r_, c2r_a_, c2r_h0_}, w.fwork, s);
  const int64_t ru = B_ * T_ * p_, rh = B_ * p_;
  const RealRows io{k_, kf_, ru, w.stage, s};
  auto fwd = [&](const float* x, float2* y, int64_t rows) {
    r2c(rows == rh ? r2c_h0_ : rows == ru ? r2c_u_ : r2c_a_, x, y, rows, stream);
  };
  io.in(a, w.ah, ru * p_, fwd);
  io.in(u, w.uh, ru, fwd);
  if (h0) io.in(h0, w.h0h, rh, fwd);
  // The 1/k of the inverse transform goes on U and H0 as the kernels read them (the recurrence
  // is linear in both), so C2R (unnormalized) of the state gives h.
  scan_forward(w.ah, w.uh, h0 ? w.h0h : nullptr, w.s, w.m, w.car, 1.f / float(k_), stream);
  io.out(w.uh, h, ru, [&](float2* y, float* x, int64_t rows) { c2r(c2r_, y, x, rows, stream); });
}

// In the Fourier basis over k each circ block is diagonal and circ(v)^T has the spectrum conj(v),
// so A_t^T is, per frequency, the conjugate transpose of the p x p matrix A_t[:, :, f]; the
// cross-correlation da_t[i, j, m] = sum_r g_t[i k + r] h_{t-1}[j k + (r - m) mod k] has the
// spectrum G_t[i] conj(H_{t-1}[j]). All three gradients are real signals whose half spectra are
// computed exactly, so C2R (with the 1/k folded into D and DL) gives them with no half-spectrum
// weights. H is recomputed at scale 1 (H = rfft(h)).
void BlockCirculantScanPlan::backward(const float* a, const float* u, const float* h0, const float* dh,
                                      const float* dh_last, float* da, float* du, float* dh0, void* workspace,
                                      void* stream) const {
  auto st = static_cast<cudaStream_t>(stream);
  const BcWs w = carve(workspace, fft_work_, B_, T_, p_, k_, kf_, C_, C_ > 1, nullptr, nullptr);
  if (k_ > 1) bind_plans({r2c_a_, r2c_u_, r2c_h0_, c2r_, c2r_a_, c2r_h0_}, w.fwork, st);
  const int64_t ru = B_ * T_ * p_, rh = B_ * p_;
  const RealRows io{k_, kf_, ru, w.stage, st};
  // The plan for a row count (rh: h0's, ru: u's, else a's; equal counts have equivalent plans).
  auto fwd = [&](const float* x, float2* y, int64_t rows) {
    r2c(rows == rh ? r2c_h0_ : rows == ru ? r2c_u_ : r2c_a_, x, y, rows, stream);
  };
  auto inv = [&](float2* y, float* x, int64_t rows) {
    c2r(rows == rh ? c2r_h0_ : rows == ru ? c2r_ : c2r_a_, y, x, rows, stream);
  };
  io.in(a, w.ah, ru * p_, fwd);
  io.in(u, w.uh, ru, fwd);
  if (h0) io.in(h0, w.h0h, rh, fwd);
  const float2* h0h = h0 ? w.h0h : nullptr;
  scan_forward(w.ah, w.uh, h0h, w.s, w.m, w.car, 1.f, stream);
  io.in(dh, w.dg, ru, fwd);
  if (dh_last) io.in(dh_last, w.dlh, rh, fwd);
  const float2* dlh = dh_last ? w.dlh : nullptr;
  float2* dh0h = dh0 ? w.dh0h : nullptr;
  const float s = 1.f / float(k_);
  if (!regs_) {
    const dim3 grid(unsigned((kf_ + bscan::SEQ_THREADS - 1) / bscan::SEQ_THREADS), unsigned(B_));
    bscan::seq_backward<<<grid, bscan::SEQ_THREADS, size_t(2 * p_ * bscan::SEQ_THREADS * 8), st>>>(
        w.ah, w.uh, w.dg, h0h, dlh, dh0h, T_, p_, kf_, s);
    STRUX_LAUNCH("seq_backward");
  } else {
    switch (p_) {
      case 1: chunk_backward<1>(w.ah, w.uh, w.dg, h0h, dlh, dh0h, w.s, w.m, w.car, B_, T_, L_, C_, kf_, s, st); break;
      case 2: chunk_backward<2>(w.ah, w.uh, w.dg, h0h, dlh, dh0h, w.s, w.m, w.car, B_, T_, L_, C_, kf_, s, st); break;
      case 3: chunk_backward<3>(w.ah, w.uh, w.dg, h0h, dlh, dh0h, w.s, w.m, w.car, B_, T_, L_, C_, kf_, s, st); break;
      case 4: chunk_backward<4>(w.ah, w.uh, w.dg, h0h, dlh, dh0h, w.s, w.m, w.car, B_, T_, L_, C_, kf_, s, st); break;
      case 8: chunk_backward<8>(w.ah, w.uh, w.dg, h0h, dlh, dh0h, w.s, w.m, w.car, B_, T_, L_, C_, kf_, s, st); break;
      default: chunk_backward<16>(w.ah, w.uh, w.dg, h0h, dlh, dh0h, w.s, w.m, w.car, B_, T_, L_, C_, kf_, s, st); break;
    }
  }
  io.out(w.dg, du, ru, inv);
  io.out(w.ah, da, ru * p_, inv);
  if (dh0) io.out(w.dh0h, dh0, rh, inv);
}

}  // namespace strux::cuda
