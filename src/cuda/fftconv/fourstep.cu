// The four-step fftconv solver's host side (fourstep.hpp): size rules, dtype dispatch and the
// row pass (fourstep.cuh rows_kernel) launches; the column passes are in fourstep_cols.cu.
#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/dispatch.hpp"
#include "cuda/check.hpp"
#include "cuda/fftconv/fourstep.cuh"

namespace strux::cuda::fourstep {
namespace {

template <class F>
void with_type(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
    default: check_arg(false, "dtype", "the four-step fftconv kernels take float32, float16 or bfloat16, got ",
                       dtype_name(dt));
  }
}

template <class F>
void with_m2(int M2, F&& f) {
  if (!core::dispatch_pow2<256, 2048>(M2, f)) check_arg(false, "nfft", "no four-step row kernel for M2 = ", M2);
}

template <bool Spectrum>
void rows(const Geometry& g, float2* X, const float2* khat, float2* khat_out, int64_t B, int64_t H,
          cudaStream_t s) {
  with_m2(g.M2, [&](auto m) {
    constexpr int N = decltype(m)::value;
    const unsigned grid = unsigned(B * H * (g.M1 / 2 + 1));
    rows_kernel<N, Spectrum><<<grid, row_threads(N), row_smem(N), s>>>(X, khat, khat_out, g.M1, B, H);
    STRUX_LAUNCH("fftconv four-step pass B");
  });
}

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Pairs of elements load as one 2-vector only when every row base is 2-element aligned.
bool aligned2(const void* p, size_t elem) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % (2 * elem) == 0; }

}  // namespace

bool supported_dtype(DType dt) { return dt == DType::f32 || dt == DType::f16 || dt == DType::bf16; }

int64_t fft_size(bool circular, int64_t L, int64_t Lmin) {
  if (circular) return is_pow2(L) && L >= kMinNfft && L <= kMaxNfft ? L : 0;
  int64_t n = kMinNfft;
  while (n < L + Lmin - 1 && n <= kMaxNfft) n *= 2;
  return n <= kMaxNfft ? n : 0;
}

Geometry plan(DType dt, int64_t nfft) {
  check_arg(is_pow2(nfft) && nfft >= kMinNfft && nfft <= kMaxNfft, "nfft",
            "the four-step kernels take a power of two in [65536, 4194304], got ", nfft);
  const int64_t M = nfft / 2;
  int lm = 0;
  while ((int64_t(1) << lm) < M) ++lm;
  Geometry g;
  g.M2 = 1 << std::min(11, lm - 7);
  g.M1 = int(M / g.M2);
  with_type(dt, [&](auto t) { detail::prepare_cols<decltype(t)>(g.M1); });
  // row_smem(2048) is ~35 KB: under the default limit, no attribute needed
  return g;
}

size_t khat_bytes(const Geometry& g, int64_t H) { return size_t(khat_block(H, 0, g.M1, g.M2)) * sizeof(float2); }

size_t scratch_bytes(const Geometry& g, int64_t rows) {
  return size_t(rows) * size_t(g.M1) * size_t(g.M2) * sizeof(float2);
}

void spectrum(DType dt, const Geometry& g, const void* k, int64_t H, int64_t Lk, int64_t Lmin, float scale,
              float2* X, float2* khat, cudaStream_t s) {
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    detail::cols_forward<T>(static_cast<const T*>(k), nullptr, H, Lk, Lmin, scale, g, false, X, s);
  });
  rows<true>(g, X, nullptr, khat, 1, H, s);
}

void forward(DType dt, const Geometry& g, const void* u, const void* pre, const void* post, const void* skip,
             const float2* khat, float2* X, void* y, int64_t B, int64_t H, int64_t L, cudaStream_t s) {
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    const size_t e = sizeof(T);
    const bool vec = L % 2 == 0 && aligned2(u, e) && aligned2(pre, e) && aligned2(post, e) && aligned2(y, e);
    const int64_t nrows = B * H;
    detail::cols_forward<T>(static_cast<const T*>(u), static_cast<const T*>(pre), nrows, L, L, 1.f, g, vec, X, s);
    rows<false>(g, X, khat, nullptr, B, H, s);
    detail::cols_inverse<T>(X, static_cast<const T*>(u), static_cast<const T*>(pre), static_cast<const T*>(post),
                            static_cast<const T*>(skip), nrows, H, L, g, vec, static_cast<T*>(y), s);
  });
}

}  // namespace strux::cuda::fourstep
