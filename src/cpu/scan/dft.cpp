// GemmDft: the DFT matrices and the blocked GEMMs of dft.hpp.
#include "cpu/scan/dft.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "cpu/ks/gemm.hpp"
#include "cpu/threads.hpp"
#include "strux/core.hpp"
#include "strux/scan.hpp"

namespace strux {
namespace cpu::scan {

namespace {
// Up to this length a GEMM of the DFT matrix beats FFTW's per-row calls (measured at k = 16 ..
// 128, bench/NOTES-cpu.md); beyond, its k^2 work loses to the FFT's k log k.
int64_t g_dft_gemm_max = 64;
// Rows per GEMM call: enough for the BLAS kernel's blocking, several tasks per thread, and
// rows x cols x k under 2^19, where OpenBLAS still takes its small-matrix kernel (no packing of
// the rows): at k = 64, 256 rows (1.08M) cost 137 ns a row, 128 rows 92 (bench/NOTES-cpu.md
// "block-circulant p <= 4, 2026-11-27").
int64_t row_chunk(int64_t k, int64_t nf) {
  return std::clamp<int64_t>((int64_t(1) << 19) / (k * 2 * nf) / 16 * 16, 32, 256);
}
}  // namespace

int64_t dft_gemm_max() { return g_dft_gemm_max; }

template <class T>
const GemmDft<T>* GemmDft<T>::get(int64_t k) {
  if (k > g_dft_gemm_max) return nullptr;
  static std::mutex mu;
  static std::map<int64_t, std::unique_ptr<GemmDft>> cache;
  const std::lock_guard<std::mutex> lock(mu);
  auto& p = cache[k];
  if (!p) p = std::make_unique<GemmDft>(k);
  return p.get();
}

template <class T>
GemmDft<T>::GemmDft(int64_t k) : k_(k), nf_(k / 2 + 1), F_(k * 2 * (k / 2 + 1)), Finv_(2 * (k / 2 + 1) * k) {
  const double two_pi = 2.0 * std::acos(-1.0);
  for (int64_t f = 0; f < nf_; ++f) {
    const double c = (f == 0 || 2 * f == k) ? 1.0 : 2.0;  // the Hermitian half counts twice
    for (int64_t j = 0; j < k; ++j) {
      const double th = two_pi * double((f * j) % k) / double(k);
      F_[j * 2 * nf_ + 2 * f] = T(std::cos(th));
      F_[j * 2 * nf_ + 2 * f + 1] = T(-std::sin(th));
      Finv_[2 * f * k + j] = T(c * std::cos(th));
      Finv_[(2 * f + 1) * k + j] = T(-c * std::sin(th));
    }
  }
}

template <class T>
void GemmDft<T>::forward(const T* src, int64_t src_stride, int64_t groups, int64_t rows, std::complex<T>* dst,
                         int64_t nfs) const {
  const int64_t k = k_, nf = nf_, chunk = row_chunk(k_, nf_), nch = (rows + chunk - 1) / chunk;
#pragma omp parallel num_threads(num_threads())
  {
    serial_blas_in_region();
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < groups * nch; ++it) {
      const int64_t g = it / nch, r0 = (it % nch) * chunk, n = std::min(chunk, rows - r0);
      std::complex<T>* out = dst + (g * rows + r0) * nfs;
      ks::blas_gemm(false, false, n, 2 * nf, k, T(1), src + g * src_stride + r0 * k, k, F_.data(), 2 * nf, T(0),
                    reinterpret_cast<T*>(out), 2 * nfs);
      // Exact zeros like FFTW's r2c: the imaginary parts at 0 and k/2, and the padding.
      for (int64_t r = 0; r < n; ++r) {
        std::complex<T>* row = out + r * nfs;
        row[0].imag(0);
        if (k % 2 == 0) row[nf - 1].imag(0);
        for (int64_t f = nf; f < nfs; ++f) row[f] = 0;
      }
    }
  }
}

template <class T>
void GemmDft<T>::inverse(const std::complex<T>* src, int64_t nfs, int64_t groups, int64_t rows, T* dst,
                         int64_t dst_stride, T scale) const {
  const int64_t k = k_, nf = nf_, chunk = row_chunk(k_, nf_), nch = (rows + chunk - 1) / chunk;
#pragma omp parallel num_threads(num_threads())
  {
    serial_blas_in_region();
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < groups * nch; ++it) {
      const int64_t g = it / nch, r0 = (it % nch) * chunk, n = std::min(chunk, rows - r0);
      ks::blas_gemm(false, false, n, k, 2 * nf, scale, reinterpret_cast<const T*>(src + (g * rows + r0) * nfs),
                    2 * nfs, Finv_.data(), k, T(0), dst + g * dst_stride + r0 * k, k);
    }
  }
}

template class GemmDft<float>;
template class GemmDft<double>;

}  // namespace cpu::scan

void set_scan_dft_gemm_max(int64_t k) {
  check_arg(k >= 0, "k", "expected >= 0 (0 = never), got ", k);
  cpu::scan::g_dft_gemm_max = k;
}

}  // namespace strux
