// Host side of the dense fftconv kernels (dense.cuh): the convolution as products of 32×32
// Toeplitz blocks of the filter on tensor cores, no transform. 2·taps FLOPs per output instead of
// the FFT's O(log n), but at the tensor-core rate: for float16 / bfloat16 rows up to a few thousand
// taps that is below or near the HBM time of reading u and writing y, where the FFT kernels are
// bound by their own latency (bench/NOTES-gpu-fftconv-dense.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <cuda_runtime.h>

#include "cuda/buffer.hpp"
#include "cuda/fftconv/dense_wgmma.hpp"
#include "strux/cuda/common.hpp"

namespace strux::cuda::dense {

constexpr int kPb = 32;       // outputs t = 32·i + p, inputs s = 32·j + q: blocks of 32
constexpr int kThreads = 128;  // 4 warps per CTA
// The plan algo code (strux/cuda/fftconv.hpp FFTConvPlan) that forces these kernels, and the one
// its gradient plan uses: the automatic choice without them.
constexpr int kAlgo = 15;
constexpr int kAlgoNoDense = 16;
// Forces the ungated forward on wgmma (sm_90a, dense_wgmma.hpp), the rest as algo 15.
constexpr int kAlgoWgmma = 17;
// The automatic choice takes these kernels for float16 / bfloat16 where a cost model says they beat
// the FFT solvers (the lesser of dense_ns_per_row and wgmma_ns_per_row <= fft_ns_per_row, anchored on
// H200 runs, bench/NOTES-gpu-fftconv-dense.md rounds 8, 9 and 12) and a CTA's rows give its four warps two tiles
// each (min(B, 64)·⌈L/32⌉ >= kAutoMinRows). A pregate doubles the products (v as hi + lo): a plan
// whose gated forward the model gives to the FFT solvers runs gated calls there. The backward runs
// here where the dense forward is at most kAutoBwdRatio of the FFT forward: the dense vjp costs
// ≈ 3.9× its forward (three passes and the filter gradient), the FFT vjp ≈ 2.2× its own.
constexpr double kAutoBwdRatio = 0.57;
// The dense forward's rate on the large products (mma.sync, float32 accumulation): 300–370 TFLOP/s
// measured, in FLOP per ns; the wgmma kernel's (sm_90a, ungated forward): 370–540, times the share
// of live columns in its tiles (NOTES round 11).
constexpr double kDenseFlopPerNs = 310e3;
constexpr double kWgmmaFlopPerNs = 420e3;
constexpr int64_t kAutoMinRows = 128;
// Limits: taps used (causal min(Lk, L), circular Lk) and the row length whose CTA (one row at
// least, in shared memory) fits.
constexpr int64_t kMaxTaps = 8192;
constexpr int64_t kMaxL = 32768;

bool supported_dtype(DType dt);
// The dense kernels' shared memory per CTA aims at this: rows per CTA are halved until it fits.
constexpr size_t kSmemTarget = 48 * 1024;
constexpr size_t kGradSmemTarget = 55 * 1024;  // the filter gradient kernel's (four CTAs per SM)
// Float16 / bfloat16, taps used <= kMaxTaps, L <= kMaxL, circular L a multiple of 32.
bool supported(DType dt, bool circular, int64_t L, int64_t Lk);
// The automatic rule above: the ungated forward, the gated forward, the backward.
bool automatic(DType dt, bool circular, int64_t B, int64_t H, int64_t L, int64_t Lk);
// Whether the ungated forward takes the wgmma kernel: the device runs it and its model beats the
// mma.sync kernel's (wgmma_ns_per_row; +inf where it does not apply).
bool automatic_wgmma(DType dt, bool circular, int64_t B, int64_t H, int64_t L, int64_t Lk);
double wgmma_ns_per_row(DType dt, bool circular, int64_t B, int64_t H, int64_t L, int64_t Lk);
bool automatic_gated(bool circular, int64_t L, int64_t Lk);
bool automatic_backward(bool circular, int64_t L, int64_t Lk);
// The cost model's two sides, forward time per row of L outputs in ns: the products here (2 FLOP per
// tap and output, twice with a pregate) and the FFT solvers' (a table by FFT size, nfft: circular L,
// causal the power of two >= L + m − 1, the size the tensor and fused kernels take; circular L not
// a power of two runs cuFFT, priced at its measured ×2.9).
double dense_ns_per_row(bool circular, int64_t L, int64_t Lk, bool gated);
double fft_ns_per_row(bool circular, int64_t L, int64_t Lk);
// Taps per output: circular m, causal m − m²/(2L) (the mean over the row; m the taps used).
double taps_per_output(bool circular, int64_t L, int64_t Lk);

struct Geometry {
  int NI = 0;     // blocks of 32 outputs per row
  int S = 0;      // a row's stride in shared memory, in blocks (odd: conflict-free ldmatrix)
  int D = 0;      // tap blocks: k index 32·d + p − q, d < D
  int R = 0;      // batch rows per CTA (one h)
  int nchunk = 0;  // CTAs per h
  int kwords = 0;  // forward: 32-bit words per copy of the reversed filter in shared memory
  size_t smem = 0;
  bool fits = false;  // smem within the device's per-block limit
};

// The forward kernel's geometry (split: v = u ⊙ pregate as hi + lo, two row buffers).
Geometry plan(int64_t B, int64_t H, int64_t L, int64_t m, bool split);
// The filter-gradient kernel's (v and dz = dy ⊙ postgate, each split or not).
Geometry plan_grad(int64_t B, int64_t H, int64_t L, int64_t m, bool split_v, bool split_dz);

// What an FFTConvPlan keeps for these kernels: the geometries, its copy of the taps (set_filter)
// and the filter gradient's per-CTA partial sums.
class Plan {
 public:
  // Ungated forwards by the wgmma kernel (dense_wgmma.hpp): never, forced (ValueError naming 'algo'
  // where it does not apply) or by automatic_wgmma.
  enum class Wgmma { off, forced, automatic };
  Plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, bool with_backward,
       Wgmma wgmma = Wgmma::off);
  bool wgmma() const { return wgmma_; }
  void set_filter(const void* k, cudaStream_t s);
  // The plan's copy of the taps used, (H, m) with m = taps_used (what set_filter last copied).
  const void* taps() const { return taps_.get(); }
  int64_t taps_count() const { return m_; }
  // y = postgate ⊙ (taps * v + skip ⊙ v), v = u ⊙ pregate; null gates/skip are absent.
  void forward(const void* u, const void* pre, const void* post, const void* skip, void* y, cudaStream_t s) const;
  // Whether backward() runs here (its shared memory fits; else the FFTConvPlan's gradient plan).
  bool has_backward() const { return has_backward_; }
  // du, dk (H, Lk; taps >= m get 0) and, where the pointers are not null, dpre, dpost, dskip: three
  // passes of the tensor-core products (dpost: the forward with dy as its postgate; du and dpre:
  // the forward on reversed rows of dz = dy ⊙ postgate; dk and dskip: filter_grad_kernel) and a
  // fixed-order sum of the filter gradient's partials.
  void backward(const void* dy, const void* u, const void* pre, const void* post, const void* skip, void* du,
                void* dk, void* dpre, void* dpost, void* dskip, cudaStream_t s) const;
  size_t workspace_bytes() const { return taps_.bytes() + part_.bytes(); }

 private:
  DType dt_;
  int64_t B_, H_, L_, Lk_, m_;
  bool circular_, has_backward_ = false;
  Geometry g_, g_split_, gg_[4];  // gg_[2·split_v + split_dz]
  bool wgmma_ = false;
  wg::Geometry wg_;
  int64_t part_stride_ = 0;       // floats of dk partials before the dskip partials
  DeviceBuffer taps_, part_;
};

}  // namespace strux::cuda::dense
