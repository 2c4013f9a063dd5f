// The elementwise kernels of the CUDA operator layer (declared in cuda_util.cuh).
#include "api/cuda_util.cuh"

namespace strux::api {

namespace kern {
// out[(b·T + t)·n + i] = dh[...] + (t == T - 1 ? last[b·n + i] : 0); n counts reals (2 per complex).
template <class T>
__global__ void fold_last(const T* dh, const T* last, T* out, int64_t B, int64_t T_, int64_t n) {
  const int64_t total = B * T_ * n;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % n, bt = e / n, t = bt % T_, b = bt / T_;
    auto v = cuda::to_c(dh[e]);
    if (t == T_ - 1) v += cuda::to_c(last[b * n + i]);
    out[e] = cuda::From<T>::of(v);
  }
}

template <class T>
__global__ void round_from_f32(const float* x, T* y, int64_t count) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < count; e += int64_t(gridDim.x) * blockDim.x)
    y[e] = cuda::From<T>::of(x[e]);
}

inline unsigned grid_for(int64_t count) {
  return unsigned(std::min<int64_t>((count + 255) / 256, int64_t(65535)));
}
}  // namespace kern

// out = dh with dh_last added to its last time step (B, T, n) of dtype t, on stream s.
void fold_last(DType t, const void* dh, const void* last, void* out, int64_t B, int64_t T, int64_t n,
                      Stream s) {
  const DType real = t == DType::c64 ? DType::f32 : t == DType::c128 ? DType::f64 : t;
  const int64_t lanes = is_complex(t) ? 2 * n : n;
  core::dispatch<CudaReals>(real, "dtype", "fold_last", [&](auto tag) {
    using E = typename decltype(tag)::type;
    kern::fold_last<E><<<kern::grid_for(B * T * lanes), 256, 0, stream_of(s)>>>(
        static_cast<const E*>(dh), static_cast<const E*>(last), static_cast<E*>(out), B, T, lanes);
    STRUX_LAUNCH("fold_last");
  });
}

// y (dtype t: f16 or bf16) = x rounded from float32, on stream s.
void round_from_f32(DType t, const float* x, void* y, int64_t count, Stream s) {
  core::dispatch<CudaReals>(t, "dtype", "round_from_f32", [&](auto tag) {
    using E = typename decltype(tag)::type;
    kern::round_from_f32<E><<<kern::grid_for(count), 256, 0, stream_of(s)>>>(x, static_cast<E*>(y), count);
    STRUX_LAUNCH("round_from_f32");
  });
}

}  // namespace strux::api
