// Fused fftconv kernels for __nv_bfloat16 (see fused_launch.cuh).
#include "cuda/fftconv/fused_launch.cuh"

namespace strux::cuda::fused {
STRUX_FUSED_INSTANTIATE(__nv_bfloat16)
}  // namespace strux::cuda::fused
