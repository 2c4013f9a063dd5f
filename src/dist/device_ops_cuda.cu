// device_ops.hpp on CUDA devices (called from device_ops.cpp).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/check.hpp"

namespace strux::dist::cuda_ops {
namespace {

class Guard {  // the operator's device for the call, the caller's restored after
 public:
  explicit Guard(int d) {
    STRUX_CUDA(cudaGetDevice(&prev_));
    if (prev_ != d) STRUX_CUDA(cudaSetDevice(d));
  }
  ~Guard() { cudaSetDevice(prev_); }

 private:
  int prev_ = 0;
};

cudaStream_t st(void* s) { return static_cast<cudaStream_t>(s); }

template <class T>
__global__ void add_kernel(T* __restrict__ dst, const T* __restrict__ src, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] += src[i];
}

template <class To, class From>
__global__ void cast_kernel(To* __restrict__ dst, const From* __restrict__ src, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = To(src[i]);
}

unsigned grid_for(size_t n, int threads) { return unsigned(n / threads + 1 < 65536 ? n / threads + 1 : 65536); }

}  // namespace

void* alloc(size_t bytes, int device) {
  Guard g(device);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cuda::clear_own_error(e);
    throw MemoryError(msg("out of device memory allocating ", bytes, " bytes for a distributed operator's buffer"));
  }
  STRUX_CUDA(e);
  return p;
}

void free(void* p, int device) {
  Guard g(device);
  cuda::clear_own_error(cudaFree(p));
}

void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows, int device,
               void* stream) {
  if (!rows || !width) return;
  Guard g(device);
  STRUX_CUDA(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, st(stream)));
}

void zero(void* dst, size_t bytes, int device, void* stream) {
  if (!bytes) return;
  Guard g(device);
  STRUX_CUDA(cudaMemsetAsync(dst, 0, bytes, st(stream)));
}

void add_into(void* dst, const void* src, size_t n, bool f64, int device, void* stream) {
  if (!n) return;
  Guard g(device);
  const int threads = 256;
  const unsigned blocks = unsigned(n / threads + 1 < 65536 ? n / threads + 1 : 65536);
  if (f64)
    add_kernel<<<blocks, threads, 0, st(stream)>>>(static_cast<double*>(dst), static_cast<const double*>(src), n);
  else
    add_kernel<<<blocks, threads, 0, st(stream)>>>(static_cast<float*>(dst), static_cast<const float*>(src), n);
  STRUX_CUDA(cudaGetLastError());
}

void cast(void* dst, bool dst_f64, const void* src, size_t n, int device, void* stream) {
  if (!n) return;
  Guard g(device);
  if (dst_f64)
    cast_kernel<<<grid_for(n, 256), 256, 0, st(stream)>>>(static_cast<double*>(dst), static_cast<const float*>(src), n);
  else
    cast_kernel<<<grid_for(n, 256), 256, 0, st(stream)>>>(static_cast<float*>(dst), static_cast<const double*>(src), n);
  STRUX_CUDA(cudaGetLastError());
}

void synchronize(int device, void* stream) {
  Guard g(device);
  STRUX_CUDA(cudaStreamSynchronize(st(stream)));
}

void* stream_create(int device) {
  Guard g(device);
  cudaStream_t s = nullptr;
  STRUX_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void stream_destroy(void* s, int device) {
  Guard g(device);
  cuda::clear_own_error(cudaStreamDestroy(st(s)));
}

void* event_create(int device) {
  Guard g(device);
  cudaEvent_t e = nullptr;
  STRUX_CUDA(cudaEventCreate(&e));
  return e;
}

void event_destroy(void* e, int device) {
  Guard g(device);
  cuda::clear_own_error(cudaEventDestroy(static_cast<cudaEvent_t>(e)));
}

void event_record(void* e, int device, void* stream) {
  Guard g(device);
  STRUX_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(e), st(stream)));
}

void event_wait(void* e, int device, void* stream) {
  Guard g(device);
  STRUX_CUDA(cudaStreamWaitEvent(st(stream), static_cast<cudaEvent_t>(e), 0));
}

double event_seconds(void* start, void* end, int device) {
  Guard g(device);
  STRUX_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(end)));
  float ms = 0;
  STRUX_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms * 1e-3;
}

}  // namespace strux::dist::cuda_ops
