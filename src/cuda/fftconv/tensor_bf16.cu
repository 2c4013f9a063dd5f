// Tensor-core fftconv kernels for __nv_bfloat16 (see tensor_launch.cuh).
#include "cuda/fftconv/tensor_launch.cuh"

namespace strux::cuda::tensor {
STRUX_TENSOR_INSTANTIATE(__nv_bfloat16)
}  // namespace strux::cuda::tensor
