// dtype dispatch of the tensor-core fftconv launches (instantiated in tensor_<dtype>.cu) and
// the twiddle table.
#include <cmath>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/check.hpp"
#include "cuda/fftconv/tensor.hpp"

namespace strux::cuda::tensor {

template <class T>
void plan_t(int64_t N, Launch& g);
template <class T>
void spectrum_t(const Launch& g, const T* k, int64_t H, int64_t Lk, int64_t Lmin, float2* khat, cudaStream_t s);
template <class T>
void forward_t(const Launch& g, const T* u, const T* pre, const T* post, const T* skip, const float2* khat, T* y,
               int64_t B, int64_t H, int64_t L, bool split, int variant, cudaStream_t s);

bool supported_n(int64_t N) { return N >= kMinN && N <= kMaxN && (N & (N - 1)) == 0; }
int64_t fft_size(bool circular, int64_t L, int64_t Lmin) {
  if (circular) return L;
  int64_t n = kMinN;
  while (n < L + Lmin - 1 && n <= kMaxN) n *= 2;
  return n;
}
bool supported_dtype(DType dt) { return dt == DType::f16 || dt == DType::bf16; }

namespace {
template <class F>
void with_type(DType dt, F&& f) {
  switch (dt) {
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
    default: check_arg(false, "dtype", "the tensor-core fftconv kernels take float16 or bfloat16");
  }
}
template <class T>
const T* cp(const void* p) { return static_cast<const T*>(p); }
}  // namespace

void plan(DType dt, int64_t N, Launch& g) {
  with_type(dt, [&](auto t) { plan_t<decltype(t)>(N, g); });
  // Q = 16^P for the complex length N/2: P = 3 from 4096, else 2 (1 at 128: no twiddles, the table
  // unused)
  const int64_t Q = N / 2 >= 4096 ? 4096 : 256;
  std::vector<float2> w(static_cast<size_t>(Q));
  const double pi = 3.14159265358979323846;
  for (int64_t m = 0; m < Q; ++m) {
    const double a = -2.0 * pi * double(m) / double(Q);
    w[size_t(m)] = {float(std::cos(a)), float(std::sin(a))};
  }
  g.tw.allocate(w.size() * sizeof(float2));
  STRUX_CUDA(cudaMemcpy(g.tw.get(), w.data(), w.size() * sizeof(float2), cudaMemcpyHostToDevice));
}

void spectrum(DType dt, const Launch& g, const void* k, int64_t H, int64_t Lk, int64_t Lmin, float2* khat,
              cudaStream_t s) {
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    spectrum_t<T>(g, cp<T>(k), H, Lk, Lmin, khat, s);
  });
}

void forward(DType dt, const Launch& g, const void* u, const void* pre, const void* post, const void* skip,
             const float2* khat, void* y, int64_t B, int64_t H, int64_t L, bool split, int variant,
             cudaStream_t s) {
  check_arg(variant >= 0 && variant <= 3, "variant", "expected 0, 1, 2 or 3, got ", variant);
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    forward_t<T>(g, cp<T>(u), cp<T>(pre), cp<T>(post), cp<T>(skip), khat, static_cast<T*>(y), B, H, L, split,
                 variant, s);
  });
}

}  // namespace strux::cuda::tensor
