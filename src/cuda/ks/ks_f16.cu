// ks kernels instantiated for __half (one file per element type: they compile in parallel).
#include "cuda/ks/ks_launch.cuh"

namespace strux::cuda::ks {
template void launch_prod<__half>(const __half*, const __half*, __half*, int64_t, int64_t, int64_t, int64_t,
                              int64_t, int64_t, int64_t, int64_t, int64_t, bool, int, cudaStream_t);
template void launch_gradw<__half>(const __half*, const __half*, float*, int64_t, int64_t, int64_t, int64_t,
                               int64_t, bool, cudaStream_t);
}  // namespace strux::cuda::ks
