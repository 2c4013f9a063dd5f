// The four-step fftconv solver's host side (fourstep.hpp): size rules, dtype dispatch and the
// row pass launches (fourstep.cuh rows_kernel, fourstep_bwd.cuh rows_backward); the column passes
// are in fourstep_cols.cu.
#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/dispatch.hpp"
#include "cuda/check.hpp"
#include "cuda/fftconv/fourstep_bwd.cuh"

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
    rows_kernel<N, Spectrum><<<grid, row_threads(N), row_smem(N), s>>>(X, khat, khat_out, g.M1, B, H,
                                                                       g.rows_by_k1);
    STRUX_LAUNCH("fftconv four-step pass B");
  });
}

void rows_bwd(const Geometry& g, float2* Xv, float2* Xg, const float2* khat, float2* Xdk, int64_t B, int64_t H,
              bool need_z, cudaStream_t s) {
  with_m2(g.M2, [&](auto m) {
    constexpr int N = decltype(m)::value;
    const unsigned grid = unsigned(H * (g.M1 / 2 + 1));
    rows_backward<N><<<grid, bwd_threads(N), bwd_smem(N), s>>>(Xv, Xg, khat, Xdk, g.M1, B, H, need_z);
    STRUX_LAUNCH("fftconv four-step backward pass B");
  });
}

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }


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
  // row_smem(2048) is ~35 KB: under the default limit, no attribute needed; bwd_smem is 51 KB at
  // M2 = 1024, 100 KB at 2048
  with_m2(g.M2, [&](auto m) {
    constexpr int N = decltype(m)::value;
    STRUX_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(&rows_backward<N>),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(bwd_smem(N))));
  });
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
    // pairs of elements load as one 2-vector only when every row base is 2-element aligned
    const bool vec = L % 2 == 0 && aligned({u, pre, post, y}, 2 * e);
    const int64_t nrows = B * H;
    detail::cols_forward<T>(static_cast<const T*>(u), static_cast<const T*>(pre), nrows, L, L, 1.f, g, vec, X, s);
    rows<false>(g, X, khat, nullptr, B, H, s);
    detail::cols_inverse<T>(X, static_cast<const T*>(u), static_cast<const T*>(pre), static_cast<const T*>(post),
                            static_cast<const T*>(skip), nrows, H, L, g, vec, static_cast<T*>(y), s);
  });
}

void backward(DType dt, const Geometry& g, const void* dy, const void* u, const void* pre, const void* post,
              const void* skip, const float2* khat, float2* Xv, float2* Xg, float2* Xdk, void* du, void* dk,
              void* dpre, void* dpost, void* dskip, int64_t B, int64_t H, int64_t L, int64_t Lk, int64_t Lmin,
              cudaStream_t s) {
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    const size_t e = sizeof(T);
    auto in = [](const void* p) { return static_cast<const T*>(p); };
    auto out = [](void* p) { return static_cast<T*>(p); };
    const bool vec = L % 2 == 0 && aligned({dy, u, pre, post, du, dpre, dpost}, 2 * e);
    const bool vec_k = Lk % 2 == 0 && Lmin % 2 == 0 && aligned({dk}, 2 * e);
    const int64_t nrows = B * H;
    detail::cols_forward<T>(in(u), in(pre), nrows, L, L, 1.f, g, vec, Xv, s);
    detail::cols_forward<T>(in(dy), in(post), nrows, L, L, 1.f, g, vec, Xg, s);
    rows_bwd(g, Xv, Xg, khat, Xdk, B, H, dpost != nullptr, s);
    detail::cols_grad<T>(Xg, in(dy), in(u), in(pre), in(post), in(skip), nrows, H, L, g, vec, out(du), out(dpre), s);
    // dpost = dy ⊙ (z + skip·v): the forward's epilogue with dy as the postgate
    if (dpost) detail::cols_inverse<T>(Xv, in(u), in(pre), in(dy), in(skip), nrows, H, L, g, vec, out(dpost), s);
    detail::cols_filter<T>(Xdk, H, Lk, Lmin, g, vec_k, out(dk), out(dskip), s);
    if (Lk > Lmin)  // causal taps at s >= L never reach an output
      STRUX_CUDA(cudaMemset2DAsync(out(dk) + Lmin, size_t(Lk) * e, 0, size_t(Lk - Lmin) * e, size_t(H), s));
  });
}

}  // namespace strux::cuda::fourstep
