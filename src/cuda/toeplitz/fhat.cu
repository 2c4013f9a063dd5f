// F̂ of the blocks: the real FFT along time of the zero-padded blocks (plan-time work).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/buffer.hpp"
#include "cuda/elem.cuh"
#include "cuda/toeplitz/transforms.cuh"
#include "strux/cuda/toeplitz.hpp"

namespace strux::cuda {

using namespace toeplitz_detail;

template <class T>
static void build_fhat_t(int64_t Nt, int64_t Nd, int64_t Nm, const T* blocks, void* fhat, cudaStream_t s) {
  using C = typename Fft<T>::C;
  const int64_t nfft = toeplitz_nfft(Nt), cols = Nd * Nm;
  // Columns per pass: bounds the padded temporary to about 1 GiB.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(cols, (int64_t(1) << 30) / (nfft * int64_t(sizeof(T)))));
  DeviceBuffer P(size_t(nfft) * chunk * sizeof(T));
  for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
    const int64_t n = std::min(chunk, cols - c0);
    FFTPlan plan;
    plan.make(nfft, n, n, 1, nfft, cols, 1, nfft / 2 + 1, Fft<T>::r2c);
    DeviceBuffer work(std::max<size_t>(plan.work_size(), 256));
    plan.set_work(work.get());
    STRUX_CUFFT(cufftSetStream(plan.get(), s));
    pad_blocks<T><<<grid2(n, nfft, kThreads), kThreads, 0, s>>>(blocks, Nt, cols, c0, n, nfft, P.as<T>());
    STRUX_LAUNCH("toeplitz pad_blocks");
    Fft<T>::forward(plan.get(), P.as<T>(), static_cast<C*>(fhat) + c0);
    // The plan, its work area and P are freed or reused next: finish this pass first.
    STRUX_CUDA(cudaStreamSynchronize(s));
  }
}

void build_toeplitz_fhat(int64_t Nt, int64_t Nd, int64_t Nm, DType dtype, const void* blocks, void* fhat, Stream s) {
  check_positive(Nt, "Nt");
  check_positive(Nd, "Nd");
  check_positive(Nm, "Nm");
  check_arg(blocks && fhat, "blocks", "expected device pointers, got null");
  if (dtype == DType::f32)
    build_fhat_t<float>(Nt, Nd, Nm, static_cast<const float*>(blocks), fhat, s);
  else if (dtype == DType::f64)
    build_fhat_t<double>(Nt, Nd, Nm, static_cast<const double*>(blocks), fhat, s);
  else
    throw TypeError(msg("argument 'blocks': expected float32 or float64, got ", dtype_name(dtype)));
}

namespace {

// 16-bit pairs of F̂ / scale, grid-stride.
template <class H>
__global__ void pack_half(const float2* __restrict__ in, H* __restrict__ out, int64_t n, float inv) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float2 v = in[i];
    if constexpr (std::is_same_v<H, __nv_bfloat162>)
      out[i] = __float22bfloat162_rn(make_float2(v.x * inv, v.y * inv));
    else
      out[i] = __float22half2_rn(make_float2(v.x * inv, v.y * inv));
  }
}

}  // namespace

double build_toeplitz_fhat_half(int64_t Nt, int64_t Nd, int64_t Nm, const void* blocks, void* fhat, bool bf16,
                                Stream s) {
  check_positive(Nt, "Nt");
  check_positive(Nd, "Nd");
  check_positive(Nm, "Nm");
  check_arg(blocks && fhat, "blocks", "expected device pointers, got null");
  const int64_t n = (toeplitz_nfft(Nt) / 2 + 1) * Nd * Nm;
  DeviceBuffer full(size_t(n) * sizeof(float2));
  build_fhat_t<float>(Nt, Nd, Nm, static_cast<const float*>(blocks), full.get(), s);
  // The largest |re| or |im|: cuBLAS's isamax (1-based index, int lengths) over the 2n reals in
  // chunks of at most 2^30, so F̂ of any size packs.
  struct Handle {
    cublasHandle_t h = nullptr;
    ~Handle() { cublasDestroy(h); }
  } blas;
  STRUX_CUBLAS(cublasCreate(&blas.h));
  cublasStatus_t st = cublasSetStream(blas.h, s);
  float mx = 0;
  bool finite = true;
  const int64_t total = 2 * n, chunk = int64_t(1) << 30;
  for (int64_t off = 0; off < total && st == CUBLAS_STATUS_SUCCESS; off += chunk) {
    int idx = 0;
    st = cublasIsamax(blas.h, int(std::min(chunk, total - off)), full.as<float>() + off, 1, &idx);
    if (st != CUBLAS_STATUS_SUCCESS || idx < 1) break;
    float v = 0;
    STRUX_CUDA(cudaMemcpyAsync(&v, full.as<float>() + off + (idx - 1), sizeof(float), cudaMemcpyDeviceToHost, s));
    STRUX_CUDA(cudaStreamSynchronize(s));
    finite = finite && std::isfinite(v);
    mx = std::max(mx, std::fabs(v));
  }
  STRUX_CUBLAS(st);
  if (!finite) mx = 0;  // NaN or inf in F̂: no scaling (the values pack as they are)
  const double scale = mx > 0 ? std::ldexp(1.0, int(std::floor(std::log2(double(mx)))) - 14) : 1.0;
  const unsigned grid = unsigned(std::min<int64_t>((n + 255) / 256, 65535));
  if (bf16)
    pack_half<__nv_bfloat162><<<grid, 256, 0, s>>>(full.as<float2>(), static_cast<__nv_bfloat162*>(fhat), n,
                                                   float(1.0 / scale));
  else
    pack_half<__half2><<<grid, 256, 0, s>>>(full.as<float2>(), static_cast<__half2*>(fhat), n, float(1.0 / scale));
  STRUX_LAUNCH("toeplitz pack_half");
  STRUX_CUDA(cudaStreamSynchronize(s));  // `full` is freed on return
  return scale;
}

}  // namespace strux::cuda
