// Linear recurrences on NVIDIA GPUs (DESIGN.md "scan"). Shapes (B, T, n), channels-last,
// C-contiguous device memory; work goes on `stream` (a cudaStream_t).
//
// diag_scan is one pass over the data. With many channels (B*n >= 96 per SM) one thread walks
// one channel (or 16 bytes of channels) through the whole sequence, keeping a ring of loads in
// flight (src/cuda/scan/diag_scan_seq.cuh). Otherwise each thread block scans a time chunk of 32 channels
// (lanes run along n: coalesced), publishes the chunk's aggregate (A-product, local h), finds
// its incoming state by a decoupled look-back over earlier chunks, and writes h from registers.
// So a, b are read once and h written once, and long sequences still fill the GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "strux/cuda/ks.hpp"  // DType

namespace strux::cuda {

// diag_scan's kernels: the chunked look-back kernel, the streaming one with one channel (seq1)
// or 16 bytes of channels (seqv) per thread, or the chunked kernel with 16 bytes of channels per
// lane (8 for half types) and a look-back over windows of 8 chunks in a plan-owned workspace
// (chunk; not float64 / complex128; vector lanes where n and the call's pointers allow, else one
// element); pipe: chunk's decomposition on a persistent grid that copies the next chunks into
// shared memory (cp.async) during the look-back of the current one, with a wider look-back window;
// rows: n = 1, one block per row of time; tile: one block per tile of channels (16 bytes per lane,
// tile_bytes of each time step) for the whole sequence, chunks of time copied into shared memory
// several chunks ahead (no look-back, no workspace; one element per lane where n or a call's
// pointers do not allow 16 bytes).
enum class DiagScanAlgo { lookback, seq1, seqv, chunk, pipe, rows, tile };
// "lookback", "seq1", "seqv", "chunk", "pipe", "rows", "tile"
const char* diag_scan_algo_name(DiagScanAlgo a);

// the chunk / pipe kernels' workspace and the order of the calls using it; the tile kernel's
// launch shape
struct DiagScanOwned;

// Explicit choices for a DiagScanPlan (tests, benchmarks); unset: the solver table decides. A
// forced streaming kernel for float64 / complex128, or seqv with n not a multiple of the vector
// width, is a ValueError; a forced seqv runs seq1 on calls whose pointers are not 16-byte
// aligned (alignment is a property of the call, not of the plan).
struct DiagScanOptions {
  std::optional<DiagScanAlgo> algo;
  // tile only: bytes of each time step a block owns, 32, 64, 128 or 256 (0: the plan picks the
  // widest that leaves a tile for 15 of 16 SMs); other values, or with another algo, are a
  // ValueError.
  int tile_bytes = 0;
};

class DiagScanPlan {
 public:
  // dtype: f32, f16, bf16 (computed in float32), c64, or f64 / c128 (computed in float64; the
  // look-back kernel only).
  DiagScanPlan(int64_t B, int64_t T, int64_t n, DType dtype, const DiagScanOptions& opt = {});

  // The kernel the plan runs (seqv: on calls whose pointers are 16-byte aligned, else seq1).
  DiagScanAlgo algo() const { return algo_; }
  std::string describe() const;

  // Device scratch (bytes) each call needs; the caller allocates it (stream-ordered). 0 for the
  // streaming kernels and for chunk, whose workspace the plan owns: allocated and zeroed once,
  // it needs no reset between calls, and a call on another stream than the previous call's
  // first waits for that call (not while a stream is capturing a CUDA graph).
  int64_t workspace_bytes() const;

  // h_t = a_t h_{t-1} + scale * b_t, h_{-1} = scale * h0 (h0 (B, n) or null for zeros).
  void forward(const void* a, const void* b, const void* h0, void* h, void* workspace,
               void* stream, double scale = 1.0) const;

  // Given dh = dL/dconj(h) (B, T, n) and the forward's h:
  //   g_t = dh_t + conj(a_{t+1}) g_{t+1}; db = g; da_t = g_t conj(h_{t-1}) (h_{-1} = h0 or 0);
  //   dh0 = conj(a_0) g_0 (written when dh0 is not null).
  void backward(const void* a, const void* h, const void* h0, const void* dh, void* da, void* db,
                void* dh0, void* workspace, void* stream) const;

 private:
  int64_t B_, T_, n_;
  DType dtype_;
  DiagScanAlgo algo_ = DiagScanAlgo::lookback;
  std::shared_ptr<DiagScanOwned> own_;  // chunk, pipe and tile only
};

// circulant_scan, float32 or float64: h_t = circ(a_t) h_{t-1} + u_t through cuFFT rfft over n,
// the complex diagonal scan of the half spectra (complex64 / complex128), and irfft. Plans are
// made once per plan object. Real arrays are of the plan's dtype, spectra of its complex type.
//
// Explicit choices (tests, benchmarks). fused = true: the forward with spatial a runs the fused
// kernels (src/cuda/scan/circulant_fused.cuh: the FFT over n, the Fourier-domain scan and the
// inverse FFT inside the kernels, no spectra in device memory); float32 with n a power of two in
// [64, 1024] only (else a ValueError). one_pass (with fused): the single-pass kernel
// (circulant_onepass.cuh: a, u read once, a look-back over chunks) in place of the three-launch
// one. fused = false: the cuFFT path. Unset: the single-pass kernel where measured faster (float32,
// n = 256, 512 or 1024, B <= 65535, B (T + 1) < 2^31), else the cuFFT path. The single-pass kernel
// inverts two steps in one complex FFT, so a NaN / Inf entering at step t may also reach h_{t-1}
// of the same row. forward_fourier (a given as its half spectra): the single-pass kernel's Fourier
// form (â and u read once, h written once) when unset with float32, n a power of two in [64, 1024] (the same
// B limits), or forced by fused = true with one_pass; the cuFFT path otherwise (fused = false, or
// fused = true without one_pass: there is no three-launch Fourier form). backward: the cuFFT path.
struct CirculantScanOptions {
  std::optional<bool> fused;
  bool one_pass = false;
};

class CirculantScanPlan {
 public:
  CirculantScanPlan(int64_t B, int64_t T, int64_t n, DType dtype = DType::f32,
                    const CirculantScanOptions& opt = {});
  bool fused() const { return fused_; }
  bool one_pass() const { return one_pass_; }
  bool fourier_one_pass() const { return fourier_one_pass_; }  // what forward_fourier runs
  std::string describe() const;  // what the forward runs, in words
  ~CirculantScanPlan();
  CirculantScanPlan(const CirculantScanPlan&) = delete;
  CirculantScanPlan& operator=(const CirculantScanPlan&) = delete;
  // Scratch for forward, forward_fourier and backward.
  int64_t workspace_bytes() const;
  void forward(const void* a, const void* u, const void* h0, void* h, void* workspace, void* stream) const;
  // a_hat: the half spectra rfft(a_t) (B, T, n/2+1) complex; the imaginary parts at
  // frequency 0 and (even n) n/2 are ignored, as irfft does.
  void forward_fourier(const void* a_hat, const void* u, const void* h0, void* h, void* workspace,
                       void* stream) const;
  // Gradients given dh = dL/dh (B, T, n) (h is recomputed in the Fourier domain). With
  // g_t = dh_t + circ(a_{t+1})^T g_{t+1}: du = g, dh0 = circ(a_0)^T g_0 (when dh0 is not null),
  // da_t[m] = sum_i g_t[i] h_{t-1}[(i - m) mod n] written to da (B, T, n), or, when a_hat is
  // given instead of a (a null), the gradient for a_hat written to da as (B, T, n/2+1)
  // complex: dL/dRe + i dL/dIm (PyTorch's packing).
  void backward(const void* a, const void* a_hat, const void* u, const void* h0, const void* dh,
                void* da, void* du, void* dh0, void* workspace, void* stream) const;
  DType dtype() const { return dtype_; }

 private:
  void spectra_of_a(const void* a, const void* a_hat, void* ah, void* stream) const;
  void forward_any(const void* a, const void* a_hat, const void* u, const void* h0, void* h,
                   void* workspace, void* stream) const;
  int64_t csize() const { return dtype_ == DType::f64 ? 16 : 8; }
  int64_t B_, T_, n_, nf_;
  DType dtype_;
  int r2c_ = 0, c2r_ = 0, r2c0_ = 0, c2r0_ = 0;  // cufftHandle
  int64_t fft_work_ = 0;
  DiagScanPlan scan_;
  bool fused_ = false;
  bool one_pass_ = false;
  int64_t fused_L_ = 0, fused_C_ = 0, fused_grid_ = 0;  // the fused kernels' chunks (CircFusedShape)
  bool fourier_one_pass_ = false;                        // forward_fourier: the single-pass kernel
  int64_t fourier_L_ = 0, fourier_C_ = 0, fourier_grid_ = 0;
};

// block_circulant_scan, float32: a (B, T, p, p, k), u (B, T, n = p k). cuFFT rfft over k turns
// each k x k circulant block into a diagonal, so each of the k/2+1 frequencies carries its own
// p x p complex recurrence H_t = A_t H_{t-1} + U_t; irfft over k gives h. The 1/k of the inverse
// is folded into U, H0 (and into dh, dh_last backward). The recurrence runs one thread per
// (batch, frequency) through the whole sequence, or, for p <= 4 (a thread per chain) and p = 8,
// 16 (a group of p lanes per chain) when B*kf is too small to fill the GPU, in chunks of time
// with a carry pass (src/cuda/scan/block_scan_kernels.cuh, block_scan_group.cuh); the choice is
// made at plan time, or forced through BlockCirculantScanOptions.

// Explicit choices for a BlockCirculantScanPlan (tests, benchmarks); unset: the plan's rule.
// registers: false = the any-p shared-memory kernels ("generic"), true = the chunked kernels
// (p <= 4, 8 or 16, else a ValueError); chunk > 0: the chunked kernels in chunks of that many
// time steps (0 with registers = true: one chunk).
struct BlockCirculantScanOptions {
  std::optional<bool> registers;
  int64_t chunk = 0;
};

class BlockCirculantScanPlan {
 public:
  BlockCirculantScanPlan(int64_t B, int64_t T, int64_t p, int64_t k,
                         const BlockCirculantScanOptions& opt = {});
  std::string describe() const;
  ~BlockCirculantScanPlan();
  BlockCirculantScanPlan(const BlockCirculantScanPlan&) = delete;
  BlockCirculantScanPlan& operator=(const BlockCirculantScanPlan&) = delete;
  int64_t workspace_bytes() const;           // forward
  int64_t backward_workspace_bytes() const;  // backward (a superset of the forward's)
  void forward(const float* a, const float* u, const float* h0, float* h, void* workspace, void* stream) const;
  // Gradients given dh = dL/dh (B, T, n) and dh_last (B, n) or null, the cotangent of h[:, -1]
  // (added to dh's last step); h is recomputed. With g_t = dh_t + A_{t+1}^T g_{t+1}: du = g,
  // da_t[i, j, m] = sum_r g_t[i k + r] h_{t-1}[j k + (r - m) mod k] (h_{-1} = h0 or 0),
  // dh0 = A_0^T g_0 (written when dh0 is not null).
  void backward(const float* a, const float* u, const float* h0, const float* dh, const float* dh_last, float* da,
                float* du, float* dh0, void* workspace, void* stream) const;
  // Time steps per chunk of the recurrence (T: not chunked) and whether the chunked kernels run.
  int64_t chunk_length() const { return L_; }
  bool register_kernels() const { return regs_; }

 private:
  void r2c(int plan, const float* x, void* y, int64_t rows, void* stream) const;
  void c2r(int plan, void* x, float* y, int64_t rows, void* stream) const;
  void scan_forward(void* ah, void* uh, const void* h0h, void* S, void* M, void* Car, float s, void* stream) const;
  int64_t B_, T_, p_, k_, kf_;
  int64_t L_ = 0, C_ = 1;  // chunk length and count
  bool regs_ = false;
  int r2c_a_ = 0, r2c_u_ = 0, r2c_h0_ = 0, c2r_ = 0, c2r_a_ = 0, c2r_h0_ = 0;  // cufftHandle (k > 1)
  int64_t fft_work_ = 0;
};

}  // namespace strux::cuda
