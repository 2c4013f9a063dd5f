// Launch templates of the fused fftconv kernels for one element type T; instantiated once per
// dtype in fused_<dtype>.cu (so the build compiles the three in parallel), dispatched by
// fused.cu.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/dispatch.hpp"
#include "cuda/check.hpp"
#include "cuda/fftconv/fused.cuh"
#include "cuda/fftconv/fused.hpp"

namespace strux::cuda::fused {

// Calls f(integral_constant<int, N>) for the run-time N.
template <class F>
void with_n(int64_t N, F&& f) {
  if (!core::dispatch_pow2<int(kMinN), int(kMaxN)>(N, f))
    check_arg(false, "nfft", "no fused kernel for nfft = ", 2 * N);
}

// nchunk so that the grid holds about `waves` full waves of resident CTAs (at least one CTA
// per h, at most one row per CTA).
inline void choose_chunks(Launch& g, const void* kernel, int64_t B, int64_t H, int waves) {
  int dev = 0, sms = 0, per_sm = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  STRUX_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, g.threads, g.smem));
  check_arg(per_sm > 0, "nfft", "the fused fftconv kernel does not fit on this device (", g.smem,
            " bytes of shared memory)");
  const int64_t want = int64_t(waves) * sms * per_sm;
  const int64_t nchunk = std::clamp<int64_t>((want + H - 1) / H, 1, B);
  const int64_t rows = (B + nchunk - 1) / nchunk;
  g.rows_per_cta = int(rows);
  g.nchunk = int((B + rows - 1) / rows);
}

inline void set_smem(const void* kernel, size_t bytes) {
  STRUX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

inline size_t optin_smem() {
  int dev = 0, v = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return size_t(v);
}

// Pairs of elements load as one 2-vector only when every row base is 2-element aligned.
inline bool aligned2(const void* p, size_t elem) {
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % (2 * elem) == 0;
}

template <class T>
Launch plan_forward_t(int64_t N, int64_t B, int64_t H) {
  Launch g;
  with_n(N, [&](auto nn) {
    constexpr int NN = decltype(nn)::value;
    const void* k = reinterpret_cast<const void*>(&forward_kernel<T, NN, false>);
    g.N = NN;
    g.threads = threads_for(NN);
    g.smem = size_t(padded(NN)) * sizeof(float2);
    set_smem(k, g.smem);
    set_smem(reinterpret_cast<const void*>(&forward_kernel<T, NN, true>), g.smem);
    set_smem(reinterpret_cast<const void*>(&spectrum_kernel<T, NN>), g.smem);  // same buffer
    choose_chunks(g, k, B, H, 8);
  });
  return g;
}

template <class T>
Launch plan_backward_t(int64_t N, int64_t B, int64_t H) {
  Launch g;
  with_n(N, [&](auto nn) {
    constexpr int NN = decltype(nn)::value;
    const void* k = reinterpret_cast<const void*>(&backward_kernel<T, NN>);
    g.N = NN;
    g.threads = threads_for(NN);
    const size_t work = size_t(padded(NN)) * sizeof(float2), vh = size_t(NN + 1) * sizeof(float2);
    g.vh_smem = work + vh <= optin_smem();
    g.smem = g.vh_smem ? work + vh : work;
    set_smem(k, g.smem);
    choose_chunks(g, k, B, H, 2);
  });
  return g;
}

// One CTA per filter row, with the forward kernel's threads and shared memory (plan_forward_t).
template <class T>
void spectrum_t(const Launch& g, const T* k, int64_t H, int64_t Lk, int64_t Lmin, float scale, float2* khat,
                cudaStream_t s) {
  with_n(g.N, [&](auto nn) {
    constexpr int NN = decltype(nn)::value;
    spectrum_kernel<T, NN><<<unsigned(H), g.threads, g.smem, s>>>(k, Lk, Lmin, scale, khat);
    STRUX_LAUNCH("fftconv fused spectrum");
  });
}

template <class T>
void forward_t(const Launch& g, const T* u, const T* pre, const T* post, const T* skip, float2* khat, T* y,
               int64_t B, int64_t H, int64_t L, const OwnFilter& own, cudaStream_t s) {
  const bool vec = L % 2 == 0 && aligned2(u, sizeof(T)) && aligned2(pre, sizeof(T)) && aligned2(post, sizeof(T)) &&
                   aligned2(y, sizeof(T));
  with_n(g.N, [&](auto nn) {
    constexpr int NN = decltype(nn)::value;
    const unsigned grid = unsigned(H * g.nchunk);
    if (own.k) {
      check_arg(g.nchunk == 1, "nchunk", "the filter transform runs in the forward kernel only with one CTA per h");
      forward_kernel<T, NN, true><<<grid, g.threads, g.smem, s>>>(u, pre, post, skip, khat, y, B, H, L, g.nchunk,
                                                                  g.rows_per_cta, vec, own);
    } else {
      forward_kernel<T, NN, false><<<grid, g.threads, g.smem, s>>>(u, pre, post, skip, khat, y, B, H, L, g.nchunk,
                                                                   g.rows_per_cta, vec, own);
    }
    STRUX_LAUNCH("fftconv fused forward");
  });
}

template <class T>
void backward_t(const Launch& g, const T* dy, const T* u, const T* pre, const T* post, const T* skip,
                const float2* khat, float2* dkpart, float2* vh_global, T* du, T* dpre, T* dpost, int64_t B,
                int64_t H, int64_t L, cudaStream_t s) {
  const bool vec = L % 2 == 0 && aligned2(dy, sizeof(T)) && aligned2(u, sizeof(T)) && aligned2(pre, sizeof(T)) &&
                   aligned2(post, sizeof(T)) && aligned2(du, sizeof(T)) && aligned2(dpre, sizeof(T)) &&
                   aligned2(dpost, sizeof(T));
  with_n(g.N, [&](auto nn) {
    constexpr int NN = decltype(nn)::value;
    backward_kernel<T, NN><<<unsigned(H * g.nchunk), g.threads, g.smem, s>>>(
        dy, u, pre, post, skip, khat, dkpart, vh_global, du, dpre, dpost, B, H, L, g.nchunk, g.rows_per_cta, vec,
        g.vh_smem);
    STRUX_LAUNCH("fftconv fused backward");
  });
}

#define STRUX_FUSED_INSTANTIATE(T)                                                                           \
  template Launch plan_forward_t<T>(int64_t, int64_t, int64_t);                                              \
  template Launch plan_backward_t<T>(int64_t, int64_t, int64_t);                                             \
  template void spectrum_t<T>(const Launch&, const T*, int64_t, int64_t, int64_t, float, float2*, cudaStream_t); \
  template void forward_t<T>(const Launch&, const T*, const T*, const T*, const T*, float2*, T*, int64_t,       \
                             int64_t, int64_t, const OwnFilter&, cudaStream_t);                              \
  template void backward_t<T>(const Launch&, const T*, const T*, const T*, const T*, const T*, const float2*,   \
                              float2*, float2*, T*, T*, T*, int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace strux::cuda::fused
