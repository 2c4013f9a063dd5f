// ks kernels instantiated for __nv_bfloat16 (one file per element type: they compile in parallel).
#include "cuda/ks/ks_launch.cuh"

namespace strux::cuda::ks {
template void launch_prod<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int64_t, int64_t, int64_t, int64_t,
                              int64_t, int64_t, int64_t, int64_t, int64_t, bool, int, cudaStream_t);
template void launch_gradw<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, float*, int64_t, int64_t, int64_t, int64_t,
                               int64_t, bool, cudaStream_t);
}  // namespace strux::cuda::ks
