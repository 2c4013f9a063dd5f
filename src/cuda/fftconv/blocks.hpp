// The "blocks" solver of the CUDA fftconv plan (plan.cu, algo 10): a filter much shorter than the
// row runs overlap-save over blocks of a transform size N of a few times the m taps used, instead
// of one transform of the whole padded row (the CPU's src/cpu/fftconv/blocks.hpp, on the GPU).
//
// The blocks of a (B, H, L) problem form an inner problem (B·nb, H, N), block row
// rb = (b·nb + j)·H + h (so rb mod H = h and the inner plan's filter row is the right one), which
// an inner FFTConvPlan in circular mode of length N runs with its own solver choice (the fused
// kernels at N = 1024 … 32768). With S = N − (m − 1) outputs per block and nb = ceil(L / S):
//   forward:  x_j[i] = v[jS − (m − 1) + i], i < N (v = u ⊙ pregate; zero before 0 in causal mode,
//             v[t + L] in circular mode; zero past L), then y[jS + q] = (k ⊛_N x_j)[m − 1 + q]
//             for q < S: the outputs that no wrap-around reaches (the circular sum at position
//             i ≥ m − 1 reads x_j[i − s], s < m, without wrapping).
//   backward (float32 / float64; the 16-bit one below): the inner backward on the gathered
//             dz = dy ⊙ postgate, zero at the discarded positions i < m − 1 (and past L), gives dk
//             already summed over every block (its batch holds them) and dv per block; dv[t] is
//             the sum of the (at most two: S > m − 1) blocks holding t, plus block 0's head for
//             circular t ≥ L − (m − 1).
// skip goes to the inner plan (its v at output position m − 1 + q is v[jS + q], and its dz is zero
// where an output is discarded, so skip·v, skip·dz and dskip = dk[0] come out once per t).
//
// The blocks are in the input dtype (the inner plan's), and no value is rounded to it on the way
// that the whole-row solvers keep in float32 (DESIGN.md: arithmetic at least float32):
// - float32 / float64: the gates are applied in the gather and the scatter, in that type.
// - float16 / bfloat16 (the "16-bit path", half the block bytes of float32 blocks): the blocks are
//   copies of u, the gates and dy, and the gates go to the inner plan as blocks of their own, so
//   u ⊙ pregate, the postgate product and z + skip·v are formed in float32 inside the inner
//   kernels and the output is rounded once (each y equals the float32 path's, rounded). The
//   backward cannot sum 16-bit partial dv of two blocks (that would round before the overlap
//   sum), so it runs the inner backward on blocks laid out ahead instead of behind: block j holds
//   v[jS + i] at i < S (zero past) and dz[jS + i] at every i < N (the m − 1 past the block's S
//   outputs are what its correlation reads; circular: the row's start past L), so each dv[t], and
//   du = dv ⊙ pre, dpre = dv ⊙ u, come whole from one block, computed in float32 and rounded once;
//   dk and dskip are the inner plan's own (float32 sums over every block, rounded once); dpost =
//   dy ⊙ (z + skip·v) is the forward with dy as its postgate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <cuda_runtime.h>

#include "cuda/buffer.hpp"
#include "strux/cuda/fftconv.hpp"

namespace strux::cuda::blocks {

// The plan algo code (strux/cuda/fftconv.hpp FFTConvPlan) that forces this solver.
constexpr int kAlgo = 10;
// Smallest block transform: the fused kernels' smallest circular size.
constexpr int64_t kMinN = 1024;
// The automatic rule's least ratio of the padded row L + m - 1 to the block transform N.
constexpr int64_t kAutoRatio = 8;
// The largest block transform: N <= 2^25 keeps the kernels' grid.y (N / 1024 CTAs per block row)
// in range; at the default ratio 4 that is m <= 2^23 taps used.
constexpr int64_t kMaxN = int64_t(1) << 25;
// The solver's own block size (algo 10 and the automatic rule) is auto_fft_size; the probes of the
// block size force N >= ratio · m: algos 11, 12, 13 → ratios 8, 16, 4 (bench/gpu_fftconv_blocks.py).
constexpr int kAutoSize = 0;
// The least ratio N / m of every size here, and so the most taps used.
constexpr int kRatio = 4;
constexpr int64_t kMaxTaps = kMaxN / kRatio;
// Whether a plan algo is this solver's (10 … 13), and the ratio it forces (10 → kAutoSize).
bool is_algo(int algo);
int ratio_of(int algo);

// Block transform size for m taps used: the power of two >= max(kMinN, ratio · m); ratio kAutoSize
// → auto_fft_size(m).
int64_t fft_size(int64_t m, int ratio = kAutoSize);
// The solver's own size: the power of two >= max(1024, 8m, min(16m, 4096)) while that stays in the
// fused kernels' range (N <= 32768), else >= 4m. Measured on an H100 (2026-11-28,
// bench/NOTES-gpu-fftconv-blocks.md "Version 2: outcome"): the inner fused transform does more work
// per point at small N, so N = 4096 (m = 256) and 8192 (m = 1024) beat N = 4m by 7–25%; 16m at
// m = 1024 (N = 16384) was slower again.
int64_t auto_fft_size(int64_t m);

// Whether the automatic choice (plan algo 0) takes this solver: causal, float32/float16/bfloat16
// (the inner plan then runs the fused kernels), more taps used than the direct kernels take
// (direct::kAutoTaps), a row past the fused kernels' (L + m − 1 > 32768, where the whole row
// would go to the four-step kernels or cuFFT) and a ratio-4 block transform at most an eighth of
// the row (8N <= L + m − 1), the CPU rule's ratio. Causal and circular. Measured on an H200
// (bench/NOTES-gpu-fftconv-blocks.md "Version 1: outcome (GPU)"): 2.5–4.9× the whole-row solvers
// where it applies, 1.07× at the one measured row it leaves out; circular on an H100 ("Version 2:
// outcome"): 2.0–3.5× the whole-row solvers (four-step, cuFFT) at every measured row.
bool automatic(bool circular, DType dt, int64_t L, int64_t Lk);

// The blocks of one plan: the whole host-to-kernel contract of blocks.cu's kernels. Block row
// rb = (b·nb + j)·H + h holds x_j of row (b, h); block rows number fewer than 2^31 (the plan checks),
// so the kernels split rb with 32-bit divisions.
struct Geom {
  int64_t L, N, S, m;  // row length, block transform size, outputs per block N - (m - 1), taps used
  unsigned H, nb;      // channels, blocks per row
  bool circular;
};

class Plan {
 public:
  Plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, bool with_backward,
       int ratio = kAutoSize);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // The calls take T = the plan dtype's element type (float, double, __half, __nv_bfloat16;
  // instantiated in blocks.cu): plan.cu's FFTConvPlan dispatches once, and this solver with it.
  // k (H, Lk): its first m taps, in the compute type, go to the inner plan.
  template <class T>
  void set_filter(const T* k, cudaStream_t s);
  template <class T>
  void forward(const T* u, const T* pre, const T* post, const T* skip, T* y, cudaStream_t s);
  // As FFTConvPlan::backward: du, dk (taps s >= m get 0) and, where not null, dpre, dpost, dskip.
  template <class T>
  void backward(const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du, T* dk, T* dpre,
                T* dpost, T* dskip, cudaStream_t s);

  int64_t fft_size() const { return N_; }
  int64_t blocks_per_row() const { return nb_; }
  const FFTConvPlan& inner() const { return *inner_; }
  size_t workspace_bytes() const;

 private:
  // The 16-bit path (top of this file): copies in, the gates to the inner plan, copies out.
  template <class T>
  void forward16(const T* u, const T* pre, const T* post, const T* skip, T* y, cudaStream_t s);
  template <class T>
  void backward16(const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du, T* dk, T* dpre,
                  T* dpost, T* dskip, cudaStream_t s);

  DType dt_;  // the plan's dtype: the blocks' and the inner plan's
  int64_t B_, H_, L_, Lk_, m_, N_, S_, nb_, rows_;  // rows_ = B·nb·H block rows
  bool circular_, with_backward_;
  Geom geom_;
  std::unique_ptr<FFTConvPlan> inner_;  // circular, (B·nb, H, N), m taps, dtype dt_
  // (rows_, N) in dt_. float32 / float64: x_, the blocks of v; z_, those of dz (backward), then of
  // z + skip·v (for dpostgate); o_, the inner plan's output (the blocks of y or of dv).
  // 16-bit: x_ the blocks of u, p_ of the pregate, q_ of the postgate, o_ of y (forward); in the
  // backward also z_ of dy, o_ of du and r_ of dpregate (forward-only plans: no z_, r_).
  DeviceBuffer x_, z_, o_, p_, q_, r_;
  DeviceBuffer taps_, dtaps_;  // (H, m), (H, m) in dt_
};

}  // namespace strux::cuda::blocks
