// KsPlan: argument checks and dtype dispatch for the ks kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/check.hpp"
#include "strux/core.hpp"
#include "strux/cuda/ks.hpp"

namespace strux::cuda {
namespace ks {
template <class T>
void launch_prod(const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                 int64_t, int64_t, int64_t, bool, cudaStream_t);
template <class T>
void launch_gradw(const T*, const T*, float*, int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                  cudaStream_t);
}  // namespace ks

KsPlan::KsPlan(KsPattern p, int64_t batch, bool batch_last, DType dtype)
    : p_(p), batch_(batch), batch_last_(batch_last), dtype_(dtype) {
  check_positive(p.a, "a");
  check_positive(p.b, "b");
  check_positive(p.c, "c");
  check_positive(p.d, "d");
  check_positive(batch, "batch");
  check_arg(dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16, "dtype",
            "expected float32, float16 or bfloat16, got ", dtype_name(dtype));
  // Tile counts go to gridDim.x (< 2^31): generous for any batch that fits in memory.
  check_arg(batch / 128 + 1 < (int64_t(1) << 31), "batch", "too large: ", batch);
}

namespace {
template <class F>
void by_type(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    default: throw TypeError("ks: unsupported dtype");
  }
}
}  // namespace

void KsPlan::forward(const void* x, const void* w, void* y, void* stream) const {
  const int64_t a = p_.a, b = p_.b, c = p_.c, d = p_.d;
  by_type(dtype_, [&](auto z) {
    using T = decltype(z);
    ks::launch_prod<T>(static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), a,
                       b, c, d, batch_, b * c * d, c * d, d, 1, batch_last_,
                       static_cast<cudaStream_t>(stream));
  });
}

void KsPlan::backward_x(const void* dy, const void* w, void* dx, void* stream) const {
  const int64_t a = p_.a, b = p_.b, c = p_.c, d = p_.d;
  // Pattern (a, c, b, d) whose weight (i, k', l', j) is w[i, l', k', j]: the same kernel with
  // the middle strides of w swapped.
  by_type(dtype_, [&](auto z) {
    using T = decltype(z);
    ks::launch_prod<T>(static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx), a,
                       c, b, d, batch_, b * c * d, d, c * d, 1, batch_last_,
                       static_cast<cudaStream_t>(stream));
  });
}

void KsPlan::backward_w(const void* x, const void* dy, float* dw32, void* stream) const {
  const int64_t a = p_.a, b = p_.b, c = p_.c, d = p_.d;
  by_type(dtype_, [&](auto z) {
    using T = decltype(z);
    ks::launch_gradw<T>(static_cast<const T*>(x), static_cast<const T*>(dy), dw32, a, b, c, d,
                        batch_, batch_last_, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace strux::cuda
