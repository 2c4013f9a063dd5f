// One set of float32 tensor-core ks kernels (batch-first, 16-byte X copies, BK 16); one file per set so
// that they compile in parallel.
#include "cuda/ks/ks_tc_launch.cuh"

namespace strux::cuda::ks {
template void launch_tc_var<false, true, 0>(const tc::Args&, int, cudaStream_t);
}  // namespace strux::cuda::ks
