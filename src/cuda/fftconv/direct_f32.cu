// Direct fftconv kernels for float (see direct_launch.cuh).
#include "cuda/fftconv/direct_launch.cuh"

namespace strux::cuda::direct {
STRUX_DIRECT_INSTANTIATE(float)
}  // namespace strux::cuda::direct
