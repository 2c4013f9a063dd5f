// One set of float32 tensor-core ks kernels (batch-last, 16-byte X copies, BK 32); one file per set so
// that they compile in parallel.
#include "cuda/ks/ks_tc_launch.cuh"

namespace strux::cuda::ks {
template void launch_tc_var<true, true, 1>(const tc::Args&, int, cudaStream_t);
}  // namespace strux::cuda::ks
