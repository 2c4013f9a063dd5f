// Host side of the direct fftconv kernels (direct.cuh): short filters summed tap by tap, no
// transform. Which problems they cover, the launch geometry chosen once at plan time, and the
// launches.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda/buffer.hpp"
#include "strux/cuda/common.hpp"

namespace strux::cuda::direct {

// The most taps used (causal min(Lk, L), circular Lk) with a compiled kernel: buckets of 4, 8,
// 16, 32 and 64 taps (the bucket's taps beyond the used ones are skipped, never multiplied, so
// a non-finite sample reaches only the outputs the contract says).
constexpr int64_t kMaxTaps = 64;
// The automatic choice (plan algo 0) takes the direct kernels up to this many taps used, every
// dtype and length: measured faster than the FFT solvers there, forward and backward (at 64 taps
// the float32 backward is slower than the fused FFT path; bench/NOTES-gpu-fftconv-direct.md).
constexpr int64_t kAutoTaps = 32;
// Taps used: causal min(Lk, L), circular Lk (<= L).
int64_t taps(bool circular, int64_t L, int64_t Lk);
bool supported(bool circular, int64_t L, int64_t Lk);

// Groups of 4 outputs per forward thread (direct.cuh forward_kernel): 2 for 2-byte types, so a
// thread has 16 bytes of each stream in flight as a float32 thread has with one vector; the
// forward is latency-bound and its bandwidth follows the bytes in flight per SM.
constexpr int fwd_groups(size_t elem_bytes) { return elem_bytes == 2 ? 2 : 1; }

struct Launch {
  int K = 0;                 // the taps bucket
  int fwd_tx = 0, fwd_ry = 0;  // forward CTA: fwd_tx threads along time × fwd_ry rows
  int fwd_nv = 1;            // forward: groups of 4 outputs per thread (fwd_groups)
  int bwd_tx = 0;            // backward CTA: bwd_tx threads along time, one h, a chunk of the batch
  int64_t fwd_tiles = 0, bwd_tiles = 0, nchunk = 1;
  size_t part_bytes = 0;     // backward partial sums of dk and dskip: [nchunk·bwd_tiles][H][K + 1]
};

// The plan algo code (strux/cuda/fftconv.hpp FFTConvPlan) that forces these kernels.
constexpr int kAlgo = 9;
// Whether the automatic choice (algo 0) takes them for this problem (kAutoTaps).
bool automatic(bool circular, int64_t L, int64_t Lk);

// Geometry for one plan (B, H, L, taps m) on the current device.
Launch plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t m);

// taps: the plan's copy of the filter, (H, m) in the plan dtype. y = postgate ⊙ (taps * v +
// skip ⊙ v), v = u ⊙ pregate; null gates/skip are absent.
void forward(DType dt, const Launch& g, const void* taps, const void* u, const void* pre, const void* post,
             const void* skip, void* y, int64_t B, int64_t H, int64_t L, int64_t m, bool circular,
             cudaStream_t s);
// Gradients: du, dk (H, Lk; taps s >= m get 0) and, where the pointers are not null, dpre, dpost,
// dskip. part: g.part_bytes of workspace. dk and dskip are summed in a fixed order (per CTA, then
// over CTAs in double by a second small kernel): the same bits run after run.
void backward(DType dt, const Launch& g, const void* taps, const void* dy, const void* u, const void* pre,
              const void* post, const void* skip, void* du, void* dk, void* dpre, void* dpost, void* dskip, void* part,
              int64_t B, int64_t H, int64_t L, int64_t m, int64_t Lk, bool circular, cudaStream_t s);

// What an FFTConvPlan keeps for these kernels: the geometry, its copy of the taps (set_filter)
// and the backward's partial sums.
class Plan {
 public:
  Plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, bool with_backward);
  // taps = k[:, :m] (k (H, Lk) on the device, the plan dtype), copied on `s`.
  void set_filter(const void* k, cudaStream_t s);
  void forward(const void* u, const void* pre, const void* post, const void* skip, void* y, cudaStream_t s) const;
  void backward(const void* dy, const void* u, const void* pre, const void* post, const void* skip, void* du,
                void* dk, void* dpre, void* dpost, void* dskip, cudaStream_t s) const;
  size_t workspace_bytes() const { return taps_.bytes() + part_.bytes(); }

 private:
  DType dt_;
  int64_t B_, H_, L_, Lk_, m_;
  bool circular_;
  Launch g_;
  DeviceBuffer taps_, part_;
};

}  // namespace strux::cuda::direct
