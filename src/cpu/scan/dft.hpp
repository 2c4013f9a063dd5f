// Real DFTs of short rows as matrix products, for the circulant scans' spectra.
//
// Why: the block-circulant scan transforms p*p + 2p rows of length k per step; with k of a few
// dozen a per-row FFTW call costs more in its call overhead and the copy into aligned scratch
// than in arithmetic, while one GEMM over a whole block of contiguous rows (rows x k times the
// k x 2 kf DFT matrix) runs at the BLAS rate with no copies (bench/NOTES-cpu.md "circulant
// scans, DFT by GEMM"). The rows of a (B, T, m, k) array for one batch item and a block of
// time steps are contiguous, so they go straight from and to the user's arrays.
#pragma once

#include <complex>
#include <cstdint>

#include "cpu/fft.hpp"

namespace strux::cpu::scan {

// Largest length transformed by GEMM (set_scan_dft_gemm_max; 0: never).
int64_t dft_gemm_max();

template <class T>
class GemmDft {
 public:
  // The plan for length k (cached per k, never freed); null when k > dft_gemm_max().
  static const GemmDft* get(int64_t k);
  explicit GemmDft(int64_t k);
  int64_t k() const { return k_; }

  // groups x rows of length k, group g's rows at src + g * src_stride (contiguous), into
  // spectra rows of stride nfs (entries nf..nfs set to 0), group g's at dst + g * dst_rows * nfs.
  void forward(const T* src, int64_t src_stride, int64_t groups, int64_t rows, std::complex<T>* dst,
               int64_t nfs) const;
  // The inverse, scaled: dst rows (length k) = scale * irfft(src rows) (FFTW's unnormalised
  // inverse times scale; the imaginary parts at frequency 0 and k/2 are ignored).
  void inverse(const std::complex<T>* src, int64_t nfs, int64_t groups, int64_t rows, T* dst, int64_t dst_stride,
               T scale) const;

 private:
  int64_t k_, nf_;
  AlignedBuffer<T> F_;     // k x 2 nf: [j, 2f] = cos(2 pi j f / k), [j, 2f + 1] = -sin(...)
  AlignedBuffer<T> Finv_;  // 2 nf x k: [2f, j] = c_f cos(2 pi f j / k), [2f + 1, j] = -c_f sin(...)
};

}  // namespace strux::cpu::scan
