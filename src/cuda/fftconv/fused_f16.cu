// Fused fftconv kernels for __half (see fused_launch.cuh).
#include "cuda/fftconv/fused_launch.cuh"

namespace strux::cuda::fused {
STRUX_FUSED_INSTANTIATE(__half)
}  // namespace strux::cuda::fused
