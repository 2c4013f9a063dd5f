// Launch templates of the tensor-core fftconv kernels for one element type T; instantiated once
// per dtype in tensor_<dtype>.cu (compiled in parallel), dispatched by tensor.cu.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dispatch.hpp"
#include "cuda/check.hpp"
#include "cuda/fftconv/tensor.cuh"
#include "cuda/fftconv/tensor.hpp"

namespace strux::cuda::tensor {

// Calls f(integral_constant<int, N>) for the run-time N.
template <class F>
void with_n(int64_t N, F&& f) {
  if (!core::dispatch_pow2<int(kMinN), int(kMaxN)>(N, f))
    check_arg(false, "nfft", "no tensor-core fftconv kernel for nfft = ", N);
}

template <class T>
void plan_t(int64_t N, Launch& g) {
  with_n(N, [&](auto nn) {
    constexpr int NN = decltype(nn)::value / 2;  // the kernels' complex length M = nfft/2
    g.N = 2 * NN;
    g.threads = threads_for(NN);
    g.seqs = seqs_for(NN);
    g.smem = size_t(g.seqs) * NN * sizeof(float2);
    int dev = 0, optin = 0;
    STRUX_CUDA(cudaGetDevice(&dev));
    STRUX_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    check_arg(g.smem + 1024 <= size_t(optin), "nfft", "the tensor-core fftconv kernel for nfft = ", g.N, " needs ",
              g.smem, " bytes of shared memory per block; this device allows ", optin);
    for (const void* k : {reinterpret_cast<const void*>(&forward_kernel<T, NN, 1, false>),
                          reinterpret_cast<const void*>(&forward_kernel<T, NN, 1, false, true, false>),
                          reinterpret_cast<const void*>(&forward_kernel<T, NN, 1, false, true, true>),
                          reinterpret_cast<const void*>(&forward_kernel<T, NN, 1, true>),
                          reinterpret_cast<const void*>(&spectrum_kernel<T, NN>)})
      STRUX_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(g.smem)));
  });
}

template <class T>
void spectrum_t(const Launch& g, const T* k, int64_t H, int64_t Lk, int64_t Lmin, float2* khat, cudaStream_t s) {
  with_n(g.N, [&](auto nn) {
    constexpr int NN = decltype(nn)::value / 2;
    constexpr int SEQ = spec_seqs_for(NN);
    const int64_t grid = (H + SEQ - 1) / SEQ;
    spectrum_kernel<T, NN><<<unsigned(grid), g.threads, size_t(SEQ) * NN * sizeof(float2), s>>>(
        k, H, Lk, Lmin, g.tw.as<float2>(), reinterpret_cast<float4*>(khat));
    STRUX_LAUNCH("fftconv tensor spectrum");
  });
}

template <class T>
void forward_t(const Launch& g, const T* u, const T* pre, const T* post, const T* skip, const float2* khat, T* y,
               int64_t B, int64_t H, int64_t L, bool split, int variant, cudaStream_t s) {
  with_n(g.N, [&](auto nn) {
    constexpr int NN = decltype(nn)::value / 2;
    const int64_t nseq = B * H, grid = (nseq + g.seqs - 1) / g.seqs;
    check_arg(grid < (int64_t(1) << 31), "B", "too many rows for one launch: ", B, " x ", H);
    // variant 1 (algo 5): short mma chains; 2 (algo 6): short chains and the radix-r passes' indices
    // out of their loops; 3 (algo 7): factored twiddles (tensor.cuh)
    auto* kernel = variant == 3   ? &forward_kernel<T, NN, 1, true>
                   : variant == 2 ? &forward_kernel<T, NN, 1, false, true, true>
                   : variant == 1 ? &forward_kernel<T, NN, 1, false, true, false>
                                  : &forward_kernel<T, NN, 1, false>;
    auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; };
    const bool vec = L % 2 == 0 && al(u) && al(pre) && al(post) && al(y);
    kernel<<<unsigned(grid), g.threads, g.smem, s>>>(u, pre, post, skip, reinterpret_cast<const float4*>(khat),
                                                     g.tw.as<float2>(), y, B, H, L, split, vec);
    STRUX_LAUNCH("fftconv tensor forward");
  });
}

#define STRUX_TENSOR_INSTANTIATE(T)                                                                          \
  template void plan_t<T>(int64_t, Launch&);                                                                 \
  template void spectrum_t<T>(const Launch&, const T*, int64_t, int64_t, int64_t, float2*, cudaStream_t);   \
  template void forward_t<T>(const Launch&, const T*, const T*, const T*, const T*, const float2*, T*, int64_t, \
                             int64_t, int64_t, bool, int, cudaStream_t);

}  // namespace strux::cuda::tensor
