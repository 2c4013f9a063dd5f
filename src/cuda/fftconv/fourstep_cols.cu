// Launches of the four-step column passes (fourstep.cuh cols_forward / cols_inverse with the
// epilogues of fourstep_epi.cuh) for each element type and column length M1.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/dispatch.hpp"
#include "cuda/check.hpp"
#include "cuda/fftconv/fourstep_epi.cuh"

namespace strux::cuda::fourstep::detail {
namespace {
template <class F>
void with_m1(int M1, F&& f) {
  if (!core::dispatch_pow2<128, 1024>(M1, f)) check_arg(false, "nfft", "no four-step column kernel for M1 = ", M1);
}
void set_smem(const void* kernel, size_t bytes) {
  STRUX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}
// Pass C over `rows` rows of X with epilogue epi.
template <class Epi>
void inverse(const float2* X, int64_t rows, const Geometry& g, const Epi& epi, cudaStream_t s) {
  with_m1(g.M1, [&](auto m) {
    constexpr int N = decltype(m)::value;
    const unsigned grid = unsigned(rows * (g.M2 / (kTile / N)));
    fourstep::cols_inverse<N, Epi><<<grid, kColThreads, col_smem(N), s>>>(X, g.M2, epi);
    STRUX_LAUNCH("fftconv four-step pass C");
  });
}
}  // namespace

template <class T>
void prepare_cols(int M1) {
  with_m1(M1, [&](auto m) {
    constexpr int N = decltype(m)::value;
    set_smem(reinterpret_cast<const void*>(&fourstep::cols_forward<T, N>), col_smem(N));
    set_smem(reinterpret_cast<const void*>(&fourstep::cols_inverse<N, EpiForward<T>>), col_smem(N));
    set_smem(reinterpret_cast<const void*>(&fourstep::cols_inverse<N, EpiGrad<T>>), col_smem(N));
    set_smem(reinterpret_cast<const void*>(&fourstep::cols_inverse<N, EpiFilter<T>>), col_smem(N));
  });
}

template <class T>
void cols_forward(const T* x, const T* gate, int64_t rows, int64_t ld, int64_t nvalid, float scale, const Geometry& g,
                  bool vec, float2* X, cudaStream_t s) {
  with_m1(g.M1, [&](auto m) {
    constexpr int N = decltype(m)::value;
    const unsigned grid = unsigned(rows * (g.M2 / (kTile / N)));
    // 16-bit rows whose every 4-sample group is one aligned 8-byte load (fourstep.cuh cols_forward)
    const bool quad = sizeof(T) == 2 && ld % 4 == 0 && aligned({x, gate}, 8);
    fourstep::cols_forward<T, N><<<grid, kColThreads, col_smem(N), s>>>(x, gate, ld, nvalid, scale, g.M2, vec, quad,
                                                                        X);
    STRUX_LAUNCH("fftconv four-step pass A");
  });
}

template <class T>
void cols_inverse(const float2* X, const T* u, const T* pre, const T* post, const T* skip, int64_t rows, int64_t H,
                  int64_t L, const Geometry& g, bool vec, T* y, cudaStream_t s) {
  inverse(X, rows, g, EpiForward<T>{u, pre, post, skip, H, L, vec, y}, s);
}

template <class T>
void cols_grad(const float2* X, const T* dy, const T* u, const T* pre, const T* post, const T* skip, int64_t rows,
               int64_t H, int64_t L, const Geometry& g, bool vec, T* du, T* dpre, cudaStream_t s) {
  inverse(X, rows, g, EpiGrad<T>{dy, u, pre, post, skip, H, L, vec, du, dpre}, s);
}

template <class T>
void cols_filter(const float2* X, int64_t H, int64_t Lk, int64_t Lmin, const Geometry& g, bool vec, T* dk, T* dskip,
                 cudaStream_t s) {
  inverse(X, H, g, EpiFilter<T>{Lk, Lmin, vec, dk, dskip}, s);
}

#define STRUX_FOURSTEP_COLS(T)                                                                                 \
  template void prepare_cols<T>(int);                                                                          \
  template void cols_forward<T>(const T*, const T*, int64_t, int64_t, int64_t, float, const Geometry&, bool,   \
                                float2*, cudaStream_t);                                                        \
  template void cols_inverse<T>(const float2*, const T*, const T*, const T*, const T*, int64_t, int64_t,       \
                                int64_t, const Geometry&, bool, T*, cudaStream_t);                             \
  template void cols_grad<T>(const float2*, const T*, const T*, const T*, const T*, const T*, int64_t,         \
                             int64_t, int64_t, const Geometry&, bool, T*, T*, cudaStream_t);                   \
  template void cols_filter<T>(const float2*, int64_t, int64_t, int64_t, const Geometry&, bool, T*, T*,        \
                               cudaStream_t);
STRUX_FOURSTEP_COLS(float)
STRUX_FOURSTEP_COLS(__half)
STRUX_FOURSTEP_COLS(__nv_bfloat16)

}  // namespace strux::cuda::fourstep::detail
