// A failed CUDA runtime call is reported once, as the exception of the strux call that made it,
// and leaves nothing in the host thread's last-error slot: left there, the next library to read
// the slot after its own launches reports it as its own failure (cuFFT's exec returned
// CUFFT_EXEC_FAILED in an unrelated later call; bench/NOTES-gpu.md#stale-cuda-error).
// CUDA builds only; skipped without a GPU.
#ifdef STRUX_HAVE_CUDA
#include <cuda_runtime.h>
#include <cufft.h>
#include <gtest/gtest.h>

#include "cuda/buffer.hpp"
#include "cuda/check.hpp"
#include "cuda/device.hpp"

namespace {

void expect_cufft_runs() {
  cufftHandle h{};
  ASSERT_EQ(cufftPlan1d(&h, 64, CUFFT_C2C, 1), CUFFT_SUCCESS);
  strux::cuda::DeviceBuffer z(64 * sizeof(cufftComplex));
  STRUX_CUDA(cudaMemset(z.get(), 0, z.bytes()));
  EXPECT_EQ(cufftExecC2C(h, z.as<cufftComplex>(), z.as<cufftComplex>(), CUFFT_FORWARD), CUFFT_SUCCESS);
  STRUX_CUDA(cudaDeviceSynchronize());
  cufftDestroy(h);
}

}  // namespace

TEST(CudaErrors, FailedCheckedCallLeavesNoStaleError) {
  if (strux::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  EXPECT_THROW(STRUX_CUDA(cudaSetDevice(1 << 20)), strux::BackendError);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  expect_cufft_runs();
}

TEST(CudaErrors, FailedAllocationLeavesNoStaleError) {
  if (strux::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  strux::cuda::DeviceBuffer b;
  EXPECT_THROW(b.allocate(size_t(1) << 62), strux::MemoryError);  // out of device memory
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  expect_cufft_runs();
}

TEST(CudaErrors, DeviceNameOfABadDeviceLeavesNoStaleError) {
  if (strux::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(strux::cuda::device_name(1 << 20), "");
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

#endif  // STRUX_HAVE_CUDA
