// F̂ of the blocks: the real FFT along time of the zero-padded blocks (plan-time work).
#include <algorithm>

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

}  // namespace strux::cuda
