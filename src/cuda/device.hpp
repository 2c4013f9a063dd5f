// CUDA device queries. Safe to call on a machine without a GPU (count is 0).
#pragma once
#include <string>

namespace strux::cuda {
int device_count();                 // 0 when no driver or no device
std::string device_name(int device);  // "" when out of range
// An attribute (a cudaDeviceAttr value) of the current device, read once per device and attribute.
int current_device_attribute(int attr);
// Multiprocessors of the current device: sizes grids to fill the GPU.
int current_sm_count();
}  // namespace strux::cuda
