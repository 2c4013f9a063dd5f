#include <cuda_runtime.h>

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

}  // namespace strux::cuda
