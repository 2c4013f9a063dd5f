// CUDA device queries. Safe to call on a machine without a GPU (count is 0).
#pragma once
#include <string>

namespace strux::cuda {
int device_count();                 // 0 when no driver or no device
std::string device_name(int device);  // "" when out of range
// Multiprocessors of the current device (cached per device): sizes grids to fill the GPU.
int current_sm_count();
}  // namespace strux::cuda
