#include <cuda_runtime.h>

#include <atomic>

#include "cuda/check.hpp"
#include "cuda/device.hpp"

namespace strux::cuda {

int device_count() {
  int n = 0;
  // No driver or no device is not an error here: the CPU backend still works.
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    clear_own_error(e);
    return 0;
  }
  return n;
}

std::string device_name(int device) {
  if (device < 0 || device >= device_count()) return "";
  cudaDeviceProp p{};
  if (const cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) {
    clear_own_error(e);
    return "";
  }
  return p.name;
}

namespace {
// An attribute of the current device, read once per device (Slot: one cache per attribute used);
// lock-free after the first read, as launch paths ask for it on every call.
template <int Slot>
int cached_attribute(cudaDeviceAttr attr) {
  static std::atomic<int> cache[64] = {};
  int dev = 0, v = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  if (dev < 64 && (v = cache[dev].load(std::memory_order_relaxed)) > 0) return v;
  STRUX_CUDA(cudaDeviceGetAttribute(&v, attr, dev));
  if (dev < 64) cache[dev].store(v, std::memory_order_relaxed);
  return v;
}
}  // namespace

int current_sm_count() { return cached_attribute<0>(cudaDevAttrMultiProcessorCount); }
int current_smem_optin() { return cached_attribute<1>(cudaDevAttrMaxSharedMemoryPerBlockOptin); }

}  // namespace strux::cuda
