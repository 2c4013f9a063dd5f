// Fused fftconv kernels for float (see fused_launch.cuh).
#include "cuda/fftconv/fused_launch.cuh"

namespace strux::cuda::fused {
STRUX_FUSED_INSTANTIATE(float)
}  // namespace strux::cuda::fused
