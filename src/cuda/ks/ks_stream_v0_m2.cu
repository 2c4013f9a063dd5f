// The streaming ks kernels with 4-byte copies (any batch, any alignment) and 2 m16 tile(s) per warp
// item; one file per set so that they compile in parallel.
#include "cuda/ks/ks_stream.cuh"

namespace strux::cuda::ks {
template void launch_stream<128, 3, false, 2>(const stream::Args&, cudaStream_t);
template void launch_stream<128, 2, false, 2>(const stream::Args&, cudaStream_t);
template void launch_stream<64, 4, false, 2>(const stream::Args&, cudaStream_t);
template void launch_stream<64, 3, false, 2>(const stream::Args&, cudaStream_t);
template void launch_stream<64, 2, false, 2>(const stream::Args&, cudaStream_t);
template void launch_stream<32, 4, false, 2>(const stream::Args&, cudaStream_t);
template void launch_stream<32, 3, false, 2>(const stream::Args&, cudaStream_t);
template void launch_stream<32, 2, false, 2>(const stream::Args&, cudaStream_t);
}  // namespace strux::cuda::ks
