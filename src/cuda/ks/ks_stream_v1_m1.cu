// The streaming ks kernels with 16-byte copies and stores (batch % 4 == 0, x and y 16-byte aligned)
// and 1 m16 tile(s) per warp item; one file per set so that they compile in parallel.
#include "cuda/ks/ks_stream.cuh"

namespace strux::cuda::ks {
template void launch_stream<128, 3, true, 1>(const stream::Args&, cudaStream_t);
template void launch_stream<128, 2, true, 1>(const stream::Args&, cudaStream_t);
template void launch_stream<64, 4, true, 1>(const stream::Args&, cudaStream_t);
template void launch_stream<64, 3, true, 1>(const stream::Args&, cudaStream_t);
template void launch_stream<64, 2, true, 1>(const stream::Args&, cudaStream_t);
template void launch_stream<32, 4, true, 1>(const stream::Args&, cudaStream_t);
template void launch_stream<32, 3, true, 1>(const stream::Args&, cudaStream_t);
template void launch_stream<32, 2, true, 1>(const stream::Args&, cudaStream_t);
}  // namespace strux::cuda::ks
