// Direct fftconv kernels for __nv_bfloat16 (see direct_launch.cuh).
#include "cuda/fftconv/direct_launch.cuh"

namespace strux::cuda::direct {
STRUX_DIRECT_INSTANTIATE(__nv_bfloat16)
}  // namespace strux::cuda::direct
