// CUDA device queries. Safe to call on a machine without a GPU (count is 0).
#pragma once
#include <string>

namespace strux::cuda {
int device_count();                 // 0 when no driver or no device
std::string device_name(int device);  // "" when out of range
// Of the current device, read once per device: multiprocessors (sizes grids to fill the GPU) and
// the opt-in shared memory per block.
int current_sm_count();
int current_smem_optin();
}  // namespace strux::cuda
