#include <cuda_runtime.h>

#include "cuda/device.hpp"

namespace strux::cuda {

int device_count() {
  int n = 0;
  // No driver or no device is not an error here: the CPU backend still works.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string device_name(int device) {
  if (device < 0 || device >= device_count()) return "";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    cudaGetLastError();  // our own failed query: leave no error for the next call
    return "";
  }
  return p.name;
}

}  // namespace strux::cuda
