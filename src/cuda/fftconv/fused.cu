// dtype dispatch of the fused fftconv launches (instantiated in fused_<dtype>.cu) and the dK̂
// reduction over batch chunks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/check.hpp"
#include "cuda/fftconv/fused.hpp"

namespace strux::cuda::fused {

template <class T>
Launch plan_forward_t(int64_t N, int64_t B, int64_t H);
template <class T>
Launch plan_backward_t(int64_t N, int64_t B, int64_t H);
template <class T>
void spectrum_t(const Launch& g, const T* k, int64_t H, int64_t Lk, int64_t Lmin, float scale, float2* khat,
                cudaStream_t s);
template <class T>
void forward_t(const Launch& g, const T* u, const T* pre, const T* post, const T* skip, float2* khat, T* y,
               int64_t B, int64_t H, int64_t L, const OwnFilter& own, cudaStream_t s);
template <class T>
void backward_t(const Launch& g, const T* dy, const T* u, const T* pre, const T* post, const T* skip,
                const float2* khat, float2* dkpart, float2* vh_global, T* du, T* dpre, T* dpost, int64_t B,
                int64_t H, int64_t L, cudaStream_t s);

bool supported_n(int64_t N) { return N >= kMinN && N <= kMaxN && (N & (N - 1)) == 0; }

namespace {
template <class F>
void with_type(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
    default: check_arg(false, "dtype", "the fused fftconv kernels take float32, float16 or bfloat16");
  }
}
template <class T>
const T* cp(const void* p) { return static_cast<const T*>(p); }
template <class T>
T* mp(void* p) { return static_cast<T*>(p); }

__global__ void reduce_dk_kernel(const float2* __restrict__ part, int nchunk, int64_t n, float scale,
                                 float2* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float2 acc = part[i];
  for (int c = 1; c < nchunk; ++c) {
    const float2 p = part[c * n + i];
    acc.x += p.x;
    acc.y += p.y;
  }
  out[i] = {acc.x * scale, acc.y * scale};
}
}  // namespace

Launch plan_forward(DType dt, int64_t N, int64_t B, int64_t H) {
  Launch g;
  with_type(dt, [&](auto t) { g = plan_forward_t<decltype(t)>(N, B, H); });
  return g;
}

Launch plan_backward(DType dt, int64_t N, int64_t B, int64_t H) {
  Launch g;
  with_type(dt, [&](auto t) { g = plan_backward_t<decltype(t)>(N, B, H); });
  return g;
}

void spectrum(DType dt, const Launch& g, const void* k, int64_t H, int64_t Lk, int64_t Lmin, float scale,
              float2* khat, cudaStream_t s) {
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    spectrum_t<T>(g, cp<T>(k), H, Lk, Lmin, scale, khat, s);
  });
}

void forward(DType dt, const Launch& g, const void* u, const void* pre, const void* post, const void* skip,
             float2* khat, void* y, int64_t B, int64_t H, int64_t L, const OwnFilter& own, cudaStream_t s) {
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    forward_t<T>(g, cp<T>(u), cp<T>(pre), cp<T>(post), cp<T>(skip), khat, mp<T>(y), B, H, L, own, s);
  });
}

void backward(DType dt, const Launch& g, const void* dy, const void* u, const void* pre, const void* post,
              const void* skip, const float2* khat, float2* dkpart, float2* vh_global, void* du, void* dpre,
              void* dpost, int64_t B, int64_t H, int64_t L, cudaStream_t s) {
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    backward_t<T>(g, cp<T>(dy), cp<T>(u), cp<T>(pre), cp<T>(post), cp<T>(skip), khat, dkpart, vh_global, mp<T>(du),
                  mp<T>(dpre), mp<T>(dpost), B, H, L, s);
  });
}

void reduce_dk(const float2* dkpart, int nchunk, int64_t H, int64_t nf, float scale, float2* dkhat, cudaStream_t s) {
  const int64_t n = H * nf;
  reduce_dk_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(dkpart, nchunk, n, scale, dkhat);
  STRUX_LAUNCH("fftconv fused reduce_dk");
}

}  // namespace strux::cuda::fused
