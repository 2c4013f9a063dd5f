#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

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

int current_device_attribute(int attr) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> cache;
  int dev = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  {
    std::lock_guard<std::mutex> lock(mu);
    if (const auto it = cache.find({dev, attr}); it != cache.end()) return it->second;
  }
  int v = 0;
  STRUX_CUDA(cudaDeviceGetAttribute(&v, cudaDeviceAttr(attr), dev));
  std::lock_guard<std::mutex> lock(mu);
  cache[{dev, attr}] = v;
  return v;
}

int current_sm_count() { return current_device_attribute(cudaDevAttrMultiProcessorCount); }

}  // namespace strux::cuda
