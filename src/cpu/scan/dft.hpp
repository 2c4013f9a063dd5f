// Real DFTs of short rows for the circulant scans' spectra: a radix-2 FFT across rows for
// powers of two (radix2.cpp), else a matrix product with the DFT matrix.
//
// Why not FFTW: the block-circulant scan transforms p*p + 2p rows of length k per step; with k
// of a few dozen a per-row FFTW call costs more in its call overhead and the copy into aligned
// scratch than in arithmetic (bench/NOTES-cpu.md "circulant scans, DFT by GEMM"). A GEMM over a
// whole block of contiguous rows (rows x k times the k x 2 kf DFT matrix) runs at the BLAS rate
// with no copies, for any k; for k = 2^j the FFT across rows (L rows in the lanes of a vector)
// needs ~20x fewer FLOPs (bench/NOTES-cpu.md "block-circulant p <= 4, 2026-11-27"). The rows of
// a (B, T, m, k) array for one batch item and a block of time steps are contiguous, so they go
// straight from and to the user's arrays.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

#include "cpu/fft.hpp"

namespace strux::cpu::scan {

// Largest length transformed here instead of by FFTW (set_scan_dft_gemm_max; 0: never).
int64_t dft_gemm_max();

// Longest radix-2 length (the per-block lane buffers are sized by it).
inline constexpr int64_t kRadix2MaxK = 64;

// Tables of the radix-2 real FFT of length k = 2m, 16 <= k <= kRadix2MaxK (radix2.cpp).
template <class T>
struct Radix2Tables {
  int64_t k = 0, m = 0;
  std::vector<T> cr, ci;     // m/2: e^{-2 pi i j / m}
  std::vector<T> pr, pi;     // m+1: e^{-2 pi i f / k}
};

// rows rows of length k (contiguous) -> spectra rows of stride nfs (padding set to 0).
void radix2_forward(const Radix2Tables<float>& w, const float* src, int64_t rows, std::complex<float>* dst,
                    int64_t nfs);
void radix2_forward(const Radix2Tables<double>& w, const double* src, int64_t rows, std::complex<double>* dst,
                    int64_t nfs);
// rows spectra rows (stride nfs) -> scale * irfft (unnormalised), rows of length k (contiguous).
void radix2_inverse(const Radix2Tables<float>& w, const std::complex<float>* src, int64_t nfs, int64_t rows,
                    float* dst, float scale);
void radix2_inverse(const Radix2Tables<double>& w, const std::complex<double>* src, int64_t nfs, int64_t rows,
                    double* dst, double scale);

template <class T>
class ShortDft {
 public:
  // The plan for length k (cached per k and kernels, never freed); null when k > dft_gemm_max().
  static const ShortDft* get(int64_t k);
  ShortDft(int64_t k, bool radix2_fwd, bool radix2_inv);  // radix-2: k = 2^j, 16 <= k <= kRadix2MaxK
  int64_t k() const { return k_; }
  bool radix2_fwd() const { return radix2_fwd_; }
  bool radix2_inv() const { return radix2_inv_; }
  const char* describe() const;

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
  bool radix2_fwd_, radix2_inv_;
  Radix2Tables<T> tw_;     // radix-2 only
  AlignedBuffer<T> F_;     // GEMM: k x 2 nf, [j, 2f] = cos(2 pi j f / k), [j, 2f + 1] = -sin(...)
  AlignedBuffer<T> Finv_;  // GEMM: 2 nf x k, [2f, j] = c_f cos(2 pi f j / k), [2f + 1, j] = -c_f sin(...)
};

}  // namespace strux::cpu::scan
