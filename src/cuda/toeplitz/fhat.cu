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

// Columns per pass: bounds the padded temporary to about 1 GiB.
template <class T>
int64_t fhat_chunk(int64_t nfft, int64_t cols) {
  return std::max<int64_t>(1, std::min<int64_t>(cols, (int64_t(1) << 30) / (nfft * int64_t(sizeof(T)))));
}

// F̂ of the n columns c0 … c0 + n − 1 of the blocks (the flattened Nd · Nm = cols), as nfreq rows of n
// complex values at out, rows ostride apart; P holds nfft · n values. Synchronous on s (the plan and
// its work area are freed on return).
template <class T>
void fhat_columns(int64_t Nt, int64_t cols, const T* blocks, int64_t c0, int64_t n, T* P,
                  typename Fft<T>::C* out, int64_t ostride, cudaStream_t s) {
  const int64_t nfft = toeplitz_nfft(Nt);
  FFTPlan plan;
  plan.make(nfft, n, n, 1, nfft, ostride, 1, nfft / 2 + 1, Fft<T>::r2c);
  DeviceBuffer work(std::max<size_t>(plan.work_size(), 256));
  plan.set_work(work.get());
  STRUX_CUFFT(cufftSetStream(plan.get(), s));
  pad_blocks<T><<<grid2(n, nfft, kThreads), kThreads, 0, s>>>(blocks, Nt, cols, c0, n, nfft, P);
  STRUX_LAUNCH("toeplitz pad_blocks");
  Fft<T>::forward(plan.get(), P, out);
  STRUX_CUDA(cudaStreamSynchronize(s));
}

template <class T>
static void build_fhat_t(int64_t Nt, int64_t Nd, int64_t Nm, const T* blocks, void* fhat, cudaStream_t s) {
  using C = typename Fft<T>::C;
  const int64_t nfft = toeplitz_nfft(Nt), cols = Nd * Nm, chunk = fhat_chunk<T>(nfft, cols);
  DeviceBuffer P(size_t(nfft) * chunk * sizeof(T));
  for (int64_t c0 = 0; c0 < cols; c0 += chunk)
    fhat_columns<T>(Nt, cols, blocks, c0, std::min(chunk, cols - c0), P.as<T>(), static_cast<C*>(fhat) + c0, cols, s);
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

// 16-bit pairs of F̂ / scale: in (rows, n) compact → out rows ostride apart, grid-stride.
template <class H>
__global__ void pack_half(const float2* __restrict__ in, H* __restrict__ out, int64_t rows, int64_t n,
                          int64_t ostride, float inv) {
  const int64_t total = rows * n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const float2 v = in[i];
    const int64_t o = (i / n) * ostride + i % n;
    if constexpr (std::is_same_v<H, __nv_bfloat162>)
      out[o] = __float22bfloat162_rn(make_float2(v.x * inv, v.y * inv));
    else
      out[o] = __float22half2_rn(make_float2(v.x * inv, v.y * inv));
  }
}

}  // namespace

// Two passes over column chunks, so that only a chunk of the complex64 F̂ exists at a time (peak: the
// 16-bit F̂ plus about 2 GiB, where holding the whole complex64 F̂ took 3× the 16-bit bytes): the
// first finds the largest |re| or |im| (cuBLAS's isamax per chunk; a chunk is under 2^28 complex
// values, so its int length holds), the second transforms each chunk again and packs it.
double build_toeplitz_fhat_half(int64_t Nt, int64_t Nd, int64_t Nm, const void* blocks, void* fhat, bool bf16,
                                Stream s) {
  check_positive(Nt, "Nt");
  check_positive(Nd, "Nd");
  check_positive(Nm, "Nm");
  check_arg(blocks && fhat, "blocks", "expected device pointers, got null");
  const float* B = static_cast<const float*>(blocks);
  const int64_t nfft = toeplitz_nfft(Nt), nfreq = nfft / 2 + 1, cols = Nd * Nm;
  const int64_t chunk = fhat_chunk<float>(nfft, cols);
  DeviceBuffer P(size_t(nfft) * chunk * sizeof(float)), F(size_t(nfreq) * chunk * sizeof(float2));
  struct Handle {
    cublasHandle_t h = nullptr;
    ~Handle() { cublasDestroy(h); }
  } blas;
  STRUX_CUBLAS(cublasCreate(&blas.h));
  STRUX_CUBLAS(cublasSetStream(blas.h, s));
  float mx = 0;
  bool finite = true;
  for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
    const int64_t n = std::min(chunk, cols - c0);
    fhat_columns<float>(Nt, cols, B, c0, n, P.as<float>(), F.as<float2>(), n, s);
    int idx = 0;
    STRUX_CUBLAS(cublasIsamax(blas.h, int(2 * nfreq * n), F.as<float>(), 1, &idx));
    if (idx < 1) continue;
    float v = 0;
    STRUX_CUDA(cudaMemcpyAsync(&v, F.as<float>() + (idx - 1), sizeof(float), cudaMemcpyDeviceToHost, s));
    STRUX_CUDA(cudaStreamSynchronize(s));
    finite = finite && std::isfinite(v);
    mx = std::max(mx, std::fabs(v));
  }
  if (!finite) mx = 0;  // NaN or inf in F̂: no scaling (the values pack as they are)
  const double scale = mx > 0 ? std::ldexp(1.0, int(std::floor(std::log2(double(mx)))) - 14) : 1.0;
  const float inv = float(1.0 / scale);
  for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
    const int64_t n = std::min(chunk, cols - c0);
    fhat_columns<float>(Nt, cols, B, c0, n, P.as<float>(), F.as<float2>(), n, s);
    const unsigned grid = unsigned(std::min<int64_t>((nfreq * n + 255) / 256, 65535));
    if (bf16)
      pack_half<__nv_bfloat162><<<grid, 256, 0, s>>>(F.as<float2>(), static_cast<__nv_bfloat162*>(fhat) + c0, nfreq,
                                                     n, cols, inv);
    else
      pack_half<__half2><<<grid, 256, 0, s>>>(F.as<float2>(), static_cast<__half2*>(fhat) + c0, nfreq, n, cols, inv);
    STRUX_LAUNCH("toeplitz pack_half");
    STRUX_CUDA(cudaStreamSynchronize(s));  // F is the next chunk's
  }
  return scale;
}

}  // namespace strux::cuda
