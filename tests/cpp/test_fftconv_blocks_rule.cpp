// The GPU blocks fftconv solver's host-side rules (src/cuda/fftconv/blocks.hpp): its block FFT
// size and the automatic choice. Pure functions: CUDA builds run them without a GPU, so CI checks
// the rule that tests/python/test_fftconv_blocks_gpu.py checks through real plans on a GPU.
#ifdef STRUX_HAVE_CUDA
#include <gtest/gtest.h>

#include "cuda/fftconv/blocks.hpp"

namespace blocks = strux::cuda::blocks;
using strux::cuda::DType;

TEST(FFTConvBlocksRule, FFTSize) {
  // Ratio 4: the power of two >= max(1024, 4m): S = N - m + 1 >= 3N/4 + 1.
  EXPECT_EQ(blocks::fft_size(1, 4), 1024);
  EXPECT_EQ(blocks::fft_size(256, 4), 1024);
  EXPECT_EQ(blocks::fft_size(257, 4), 2048);
  EXPECT_EQ(blocks::fft_size(4096, 4), 16384);
  EXPECT_EQ(blocks::fft_size(8193, 4), 65536);
  EXPECT_EQ(blocks::fft_size(blocks::kMaxTaps, 4), int64_t(1) << 25);
  // The solver's own size: >= max(1024, 8m, min(16m, 4096)) up to 32768, else >= 4m.
  EXPECT_EQ(blocks::fft_size(1), 1024);
  EXPECT_EQ(blocks::fft_size(64), 1024);
  EXPECT_EQ(blocks::fft_size(65), 2048);
  EXPECT_EQ(blocks::fft_size(256), 4096);
  EXPECT_EQ(blocks::fft_size(257), 4096);
  EXPECT_EQ(blocks::fft_size(1024), 8192);
  EXPECT_EQ(blocks::fft_size(4096), 32768);
  EXPECT_EQ(blocks::fft_size(4097), 32768);  // 8m > 32768: ratio 4
  EXPECT_EQ(blocks::fft_size(8193), 65536);
  EXPECT_EQ(blocks::fft_size(blocks::kMaxTaps), int64_t(1) << 25);
  // Algo 10 takes the solver's size; the probes 11, 12, 13 force N >= 8m, 16m, 4m.
  EXPECT_EQ(blocks::ratio_of(blocks::kAlgo), blocks::kAutoSize);
  EXPECT_EQ(blocks::ratio_of(11), 8);
  EXPECT_EQ(blocks::ratio_of(12), 16);
  EXPECT_EQ(blocks::ratio_of(13), 4);
  EXPECT_TRUE(blocks::is_algo(13));
  EXPECT_FALSE(blocks::is_algo(9));
  EXPECT_FALSE(blocks::is_algo(14));
  EXPECT_EQ(blocks::fft_size(128, 8), 1024);
  EXPECT_EQ(blocks::fft_size(257, 8), 4096);
  EXPECT_EQ(blocks::fft_size(257, 16), 8192);
  EXPECT_EQ(blocks::fft_size(blocks::kMaxN / 16, 16), blocks::kMaxN);
}

TEST(FFTConvBlocksRule, Automatic) {
  const int64_t M = int64_t(1) << 20;
  EXPECT_TRUE(blocks::automatic(false, DType::f32, M, 100));
  EXPECT_TRUE(blocks::automatic(false, DType::f16, M, 100));
  EXPECT_TRUE(blocks::automatic(false, DType::bf16, M, 33));
  EXPECT_FALSE(blocks::automatic(false, DType::f32, M, 32));          // the direct kernels' taps
  EXPECT_TRUE(blocks::automatic(false, DType::f32, 65537, 1000));     // N = 4096, 8N <= 66536
  EXPECT_TRUE(blocks::automatic(false, DType::f32, 200000, 4096));    // N = 16384, 8N <= 204095
  EXPECT_FALSE(blocks::automatic(false, DType::f16, 100000, 4096));   // 8N > L + m - 1
  EXPECT_FALSE(blocks::automatic(false, DType::f32, 30000, 100));     // the fused kernels' rows
  EXPECT_TRUE(blocks::automatic(true, DType::f32, M, 100));           // circular too
  EXPECT_TRUE(blocks::automatic(true, DType::f16, 100000, 64));
  EXPECT_FALSE(blocks::automatic(true, DType::f32, 30000, 100));      // the fused kernels' rows
  EXPECT_FALSE(blocks::automatic(false, DType::f64, M, 100));
  EXPECT_FALSE(blocks::automatic(false, DType::f32, M, 3 * M));       // m = L: one block would be the row
}
#endif  // STRUX_HAVE_CUDA
