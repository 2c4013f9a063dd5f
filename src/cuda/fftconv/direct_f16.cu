// Direct fftconv kernels for __half (see direct_launch.cuh).
#include "cuda/fftconv/direct_launch.cuh"

namespace strux::cuda::direct {
STRUX_DIRECT_INSTANTIATE(__half)
}  // namespace strux::cuda::direct
