// Direct fftconv kernels for double (see direct_launch.cuh).
#include "cuda/fftconv/direct_launch.cuh"

namespace strux::cuda::direct {
STRUX_DIRECT_INSTANTIATE(double)
}  // namespace strux::cuda::direct
