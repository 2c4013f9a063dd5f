// Tensor-core fftconv kernels for __half (see tensor_launch.cuh).
#include "cuda/fftconv/tensor_launch.cuh"

namespace strux::cuda::tensor {
STRUX_TENSOR_INSTANTIATE(__half)
}  // namespace strux::cuda::tensor
