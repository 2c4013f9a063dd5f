// The toeplitz solver table: the transform length, and the product (algo) and transform layout
// (fft) that -1 resolves to. The one place these choices are made.
#include <algorithm>

#include "cuda/buffer.hpp"
#include "strux/cuda/toeplitz.hpp"

namespace strux::cuda {

int64_t toeplitz_nfft(int64_t Nt) { return std::max<int64_t>(2, good_fft_size(2 * Nt - 1)); }

// The one place that picks the product for algo = -1, per direction: the own kernels for the
// adjoint (one pass over F̂, no conjugate-transpose gemv); for the float32 matvec with one
// right-hand side the own kernels where F̂ is at least as tall as wide (Nd >= Nm) and Nm is even
// (16-byte F̂ loads; with odd Nm cuBLAS's gemv streams F̂ faster), cuBLAS's gemv elsewhere; for
// float32 matvec with R > 1 one real SGEMM per frequency (algo 3; float64's Zgemm beats the Dgemm
// form); cuBLAS for the float64 matvec.
// measured: bench/NOTES-gpu.md#toeplitz-algo-rule (one shape, the first rule) and
// bench/NOTES-toeplitz-precision.md#one-rhs-variants (the Nd >= Nm, even Nm matvec rule; float32).
int toeplitz_auto_algo(int64_t Nd, int64_t Nm, int64_t R, DType dtype, bool adjoint) {
  if (adjoint) return 2;
  if (dtype != DType::f32) return 0;
  if (R > 1) return 3;
  return Nd >= Nm && Nm % 2 == 0 ? 2 : 0;
}

// fft -1 resolves here (one dispatch point): contiguous transforms with tiled transposes (fft 2)
// for every shape. cuFFT runs fft 1's strided C2C of 2·Nt points as slow generic passes, while
// fft 2's half-length C2C is one vectorised kernel. Only one shape was measured (float32); other
// shapes and float64 take the same choice.
// measured: bench/NOTES-gpu.md#toeplitz-fft-rule
int toeplitz_auto_fft(int64_t Nd, int64_t Nm, int64_t R, DType dtype, bool space_major) {
  (void)Nd, (void)Nm, (void)R, (void)dtype, (void)space_major;
  return 2;
}

}  // namespace strux::cuda
