// Host side of the four-step fftconv kernels (fourstep.cuh): which FFT sizes they cover, the
// split M = M1·M2 chosen once per plan, and the launches of one call. The plan owns the
// intermediate X ([rows][M] complex float) and the filter spectrum (khat_bytes, pass B's order);
// for backward two X of B·H rows (v and dz) and one of H rows (dK̂).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include <cuda_runtime.h>

#include "strux/cuda/common.hpp"

namespace strux::cuda::fourstep {

// Whether every pointer (null ones pass) is `bytes`-aligned: row bases that take vector loads.
inline bool aligned(std::initializer_list<const void*> ptrs, size_t bytes) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % bytes != 0) return false;
  return true;
}

// FFT sizes with kernels: powers of two from just past the fused kernels (32768) to 4M.
constexpr int64_t kMinNfft = 65536, kMaxNfft = int64_t(1) << 22;
bool supported_dtype(DType dt);
// nfft for a problem, 0 when none fits: causal the next power of two >= max(kMinNfft,
// L + Lmin - 1); circular L itself (a power of two in range).
int64_t fft_size(bool circular, int64_t L, int64_t Lmin);

// M = nfft / 2 = M1·M2: M2 = 2^min(11, log2 M − 7) (rows of pass B: 256 … 2048 points, two per
// CTA), M1 = M / M2 (columns of passes A and C: 128 … 1024 points, 8192 per CTA).
struct Geometry {
  int M1 = 0, M2 = 0;
  // Pass B's grid with k1 fastest (row by row, round 1's order) instead of the batch rows of one
  // (h, k1) together: a benchmark probe (plan algo 14), K̂'s block then read once per row.
  bool rows_by_k1 = false;
};
// Sets the kernels' shared-memory limits for dtype dt (the backward's row pass too).
Geometry plan(DType dt, int64_t nfft);
size_t scratch_bytes(const Geometry& g, int64_t rows);  // X for `rows` rows
size_t khat_bytes(const Geometry& g, int64_t H);        // K̂ of H filter rows, in pass B's order

// khat = rfft(scale · k[h, :Lmin] zero-padded to nfft) for each h, in pass B's loop order
// (fourstep.cuh khat_block: per (h, k1) the pairs' K̂[f] and K̂[M − f]); X: scratch of >= H rows.
void spectrum(DType dt, const Geometry& g, const void* k, int64_t H, int64_t Lk, int64_t Lmin, float scale,
              float2* X, float2* khat, cudaStream_t s);
// y = post ⊙ (irfft(rfft(v)·khat[h]) + skip·v), v = u ⊙ pre, for rows b·H + h of length L.
void forward(DType dt, const Geometry& g, const void* u, const void* pre, const void* post, const void* skip,
             const float2* khat, float2* X, void* y, int64_t B, int64_t H, int64_t L, cudaStream_t s);
// The gradients of forward (kernels.cuh's contract: backward_spectra, epilogue_backward, filter_grad):
// dz = dy ⊙ post, dv = irfft(conj(khat)·rfft(dz))[t < L] + skip·dz, du = dv ⊙ pre, dpre = dv ⊙ u,
// dpost = dy ⊙ (z + skip·v), dk[h, s] = Σ_b irfft(conj(rfft(v))·rfft(dz))[s] for s < Lmin, 0 up to
// Lk, dskip[h] = the same at s = 0. dpre, dpost, dskip may be null (not wanted). Xv, Xg: scratch of
// B·H rows, Xdk of H rows (scratch_bytes).
void backward(DType dt, const Geometry& g, const void* dy, const void* u, const void* pre, const void* post,
              const void* skip, const float2* khat, float2* Xv, float2* Xg, float2* Xdk, void* du, void* dk,
              void* dpre, void* dpost, void* dskip, int64_t B, int64_t H, int64_t L, int64_t Lk, int64_t Lmin,
              cudaStream_t s);

namespace detail {  // the column passes, instantiated per element type in fourstep_cols.cu
template <class T>
void prepare_cols(int M1);
template <class T>
void cols_forward(const T* x, const T* gate, int64_t rows, int64_t ld, int64_t nvalid, float scale, const Geometry& g,
                  bool vec, float2* X, cudaStream_t s);
// pass C with the forward epilogue (fourstep_epi.cuh EpiForward)
template <class T>
void cols_inverse(const float2* X, const T* u, const T* pre, const T* post, const T* skip, int64_t rows, int64_t H,
                  int64_t L, const Geometry& g, bool vec, T* y, cudaStream_t s);
// pass C with the input-gradient epilogue (EpiGrad: du, dpre)
template <class T>
void cols_grad(const float2* X, const T* dy, const T* u, const T* pre, const T* post, const T* skip, int64_t rows,
               int64_t H, int64_t L, const Geometry& g, bool vec, T* du, T* dpre, cudaStream_t s);
// pass C with the filter-gradient epilogue (EpiFilter: dk[:, :Lmin], dskip) on H rows
template <class T>
void cols_filter(const float2* X, int64_t H, int64_t Lk, int64_t Lmin, const Geometry& g, bool vec, T* dk, T* dskip,
                 cudaStream_t s);
}  // namespace detail

}  // namespace strux::cuda::fourstep
