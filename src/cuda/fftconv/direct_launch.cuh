// Launch templates of the direct fftconv kernels for one element type T; instantiated once per
// dtype in direct_<dtype>.cu (so the build compiles them in parallel), dispatched by direct.cu.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "cuda/check.hpp"
#include "cuda/fftconv/direct.cuh"
#include "cuda/fftconv/direct.hpp"

namespace strux::cuda::direct {

// Calls f(integral_constant<int, K>) for the plan's bucket K.
template <class F>
void with_k(int K, F&& f) {
  switch (K) {
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    default: check_arg(false, "Lk", "no direct fftconv kernel for a taps bucket of ", K);
  }
}

// 16-byte vector access applies when every row starts 16-byte aligned: aligned pointers and
// L a multiple of kV (kV·sizeof(T) is 8, 16 or 32 bytes).
inline bool aligned(std::initializer_list<const void*> ps, int64_t L) {
  if (L % kV) return false;
  for (const void* q : ps)
    if (reinterpret_cast<uintptr_t>(q) % 16) return false;
  return true;
}

template <class T>
void forward_t(const Launch& g, const T* k, const T* u, const T* pre, const T* post, const T* skip, T* y,
               int64_t B, int64_t H, int64_t L, int64_t m, bool circular, cudaStream_t s) {
  using A = typename Compute<T>::type;
  Params<T> p{k, u, pre, post, skip, nullptr, y, nullptr, nullptr, nullptr, nullptr, B, H, L, B * H, int(m), circular};
  const bool vec = aligned({u, pre, post, y}, L);
  const dim3 block(g.fwd_tx, g.fwd_ry);
  const dim3 grid(unsigned((p.rows + g.fwd_ry - 1) / g.fwd_ry), unsigned(g.fwd_tiles));
  const size_t smem = size_t(g.fwd_ry) * (2 * g.K + g.fwd_nv * g.fwd_tx * kV) * sizeof(A);
  with_k(g.K, [&](auto kc) {
    constexpr int K = decltype(kc)::value;
    if (vec)
      forward_kernel<T, K, true><<<grid, block, smem, s>>>(p);
    else
      forward_kernel<T, K, false><<<grid, block, smem, s>>>(p);
  });
  STRUX_LAUNCH("fftconv direct forward");
}

template <class T>
void backward_t(const Launch& g, const T* k, const T* dy, const T* u, const T* pre, const T* post, const T* skip,
                T* du, T* dk, T* dpre, T* dpost, T* dskip, void* part, int64_t B, int64_t H, int64_t L, int64_t m,
                int64_t Lk, bool circular, cudaStream_t s) {
  using A = typename Compute<T>::type;
  Params<T> p{k, u, pre, post, skip, dy, nullptr, du, pre ? dpre : nullptr, post ? dpost : nullptr, part,
              B, H, L, B * H, int(m), circular};
  const bool vec = aligned({u, pre, post, dy, du, dpre, dpost}, L);
  const dim3 grid(unsigned(H * g.bwd_tiles), unsigned(g.nchunk));
  const size_t smem = (g.K + 2 * (g.bwd_tx * kV + g.K) + (g.bwd_tx / 32) * (g.K + 1)) * sizeof(A);
  with_k(g.K, [&](auto kc) {
    constexpr int K = decltype(kc)::value;
    if (vec)
      backward_kernel<T, K, true><<<grid, g.bwd_tx, smem, s>>>(p, g.bwd_tiles, g.nchunk);
    else
      backward_kernel<T, K, false><<<grid, g.bwd_tx, smem, s>>>(p, g.bwd_tiles, g.nchunk);
  });
  STRUX_LAUNCH("fftconv direct backward");
  const int64_t n = H * (Lk + 1);
  reduce_part<T, A><<<unsigned((n + 255) / 256), 256, 0, s>>>(static_cast<const A*>(part), g.nchunk * g.bwd_tiles,
                                                             H, g.K, int(m), Lk, dk, skip ? dskip : nullptr);
  STRUX_LAUNCH("fftconv direct reduce");
}

#define STRUX_DIRECT_INSTANTIATE(T)                                                                                \
  template void forward_t<T>(const Launch&, const T*, const T*, const T*, const T*, const T*, T*, int64_t, int64_t, \
                             int64_t, int64_t, bool, cudaStream_t);                                                 \
  template void backward_t<T>(const Launch&, const T*, const T*, const T*, const T*, const T*, const T*, T*, T*,    \
                              T*, T*, T*, void*, int64_t, int64_t, int64_t, int64_t, int64_t, bool, cudaStream_t);

}  // namespace strux::cuda::direct
