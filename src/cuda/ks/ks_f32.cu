// ks kernels instantiated for float (one file per element type: they compile in parallel).
#include "cuda/ks/ks_launch.cuh"

namespace strux::cuda::ks {
template void launch_prod<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                              int64_t, int64_t, int64_t, int64_t, int64_t, bool, int, cudaStream_t);
template void launch_gradw<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                               int64_t, bool, cudaStream_t);
}  // namespace strux::cuda::ks
