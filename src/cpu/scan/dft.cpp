// ShortDft: the kernel choice, the DFT matrices and the blocked GEMMs of dft.hpp (the radix-2
// kernels are in radix2.cpp).
#include "cpu/scan/dft.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

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
bool g_dft_radix2 = true;  // powers of two by the radix-2 FFT (set_scan_dft_radix2)
// Rows per GEMM call: enough for the BLAS kernel's blocking, several tasks per thread, and
// rows x cols x k under 2^19, where OpenBLAS still takes its small-matrix kernel (no packing of
// the rows): at k = 64, 256 rows (1.08M) cost 137 ns a row, 128 rows 92 (bench/NOTES-cpu.md
// "block-circulant p <= 4, 2026-11-27").
int64_t row_chunk(int64_t k, int64_t nf) {
  return std::clamp<int64_t>((int64_t(1) << 19) / (k * 2 * nf) / 16 * 16, 32, 256);
}
// Rows per task of the radix-2 kernel: a few lane blocks, many tasks per thread.
constexpr int64_t kRadix2Rows = 64;

bool pow2(int64_t k) { return k >= 2 && (k & (k - 1)) == 0; }
}  // namespace

int64_t dft_gemm_max() { return g_dft_gemm_max; }

// The kernel table, per direction: the radix-2 FFT where it applies and wins, else the GEMM.
// CPU time per row, 1 thread, rows in L2, k = 16 / 32 / 64: forward GEMM 11.7 / 24 / 78 ns,
// radix-2 11.2 / 17.2 / 34 (k = 2^j >= 16: whole vectors in the transposes); inverse GEMM 6.0 /
// 20 / 74, radix-2 13.4 / 24 / 37: radix-2 at k = 64 only. Rows streamed from memory narrow
// the forward's gap (bench/NOTES-cpu.md "block-circulant p <= 4, 2026-11-27").
template <class T>
const ShortDft<T>* ShortDft<T>::get(int64_t k) {
  if (k > g_dft_gemm_max) return nullptr;
  const bool r2 = g_dft_radix2 && pow2(k) && k <= kRadix2MaxK;
  const bool fwd = r2 && k >= 16, inv = r2 && k >= 64;
  static std::mutex mu;
  static std::map<std::tuple<int64_t, bool, bool>, std::unique_ptr<ShortDft>> cache;
  const std::lock_guard<std::mutex> lock(mu);
  auto& p = cache[{k, fwd, inv}];
  if (!p) p = std::make_unique<ShortDft>(k, fwd, inv);
  return p.get();
}

template <class T>
const char* ShortDft<T>::describe() const {
  if (radix2_fwd_) return radix2_inv_ ? "radix-2 FFTs across rows" : "radix-2 FFTs across rows (inverses: GEMMs)";
  return "GEMMs with the DFT matrix";
}

template <class T>
ShortDft<T>::ShortDft(int64_t k, bool radix2_fwd, bool radix2_inv)
    : k_(k), nf_(k / 2 + 1), radix2_fwd_(radix2_fwd), radix2_inv_(radix2_inv) {
  const double two_pi = 2.0 * std::acos(-1.0);
  if (radix2_fwd || radix2_inv) {
    const int64_t m = k / 2;
    tw_.k = k;
    tw_.m = m;
    for (int64_t j = 0; j < m / 2; ++j) {
      tw_.cr.push_back(T(std::cos(two_pi * double(j) / double(m))));
      tw_.ci.push_back(T(-std::sin(two_pi * double(j) / double(m))));
    }
    for (int64_t f = 0; f <= m; ++f) {  // W^m = -1 exactly: X_{k/2} comes out real, as from FFTW
      const double th = two_pi * double(f % k) / double(k);
      tw_.pr.push_back(f == m ? T(-1) : T(std::cos(th)));
      tw_.pi.push_back(f == m ? T(0) : T(-std::sin(th)));
    }
  }
  if (radix2_fwd && radix2_inv) return;
  F_ = AlignedBuffer<T>(k * 2 * nf_);  // (both matrices where either is used: a few KiB)
  Finv_ = AlignedBuffer<T>(2 * nf_ * k);
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
void ShortDft<T>::forward(const T* src, int64_t src_stride, int64_t groups, int64_t rows, std::complex<T>* dst,
                          int64_t nfs) const {
  if (radix2_fwd_) {
    const int64_t nch = (rows + kRadix2Rows - 1) / kRadix2Rows;
#pragma omp parallel for schedule(dynamic) num_threads(num_threads())
    for (int64_t it = 0; it < groups * nch; ++it) {
      const int64_t g = it / nch, r0 = (it % nch) * kRadix2Rows, n = std::min(kRadix2Rows, rows - r0);
      radix2_forward(tw_, src + g * src_stride + r0 * k_, n, dst + (g * rows + r0) * nfs, nfs);
    }
    return;
  }
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
void ShortDft<T>::inverse(const std::complex<T>* src, int64_t nfs, int64_t groups, int64_t rows, T* dst,
                          int64_t dst_stride, T scale) const {
  if (radix2_inv_) {
    const int64_t nch = (rows + kRadix2Rows - 1) / kRadix2Rows;
#pragma omp parallel for schedule(dynamic) num_threads(num_threads())
    for (int64_t it = 0; it < groups * nch; ++it) {
      const int64_t g = it / nch, r0 = (it % nch) * kRadix2Rows, n = std::min(kRadix2Rows, rows - r0);
      radix2_inverse(tw_, src + (g * rows + r0) * nfs, nfs, n, dst + g * dst_stride + r0 * k_, scale);
    }
    return;
  }
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

template class ShortDft<float>;
template class ShortDft<double>;

}  // namespace cpu::scan

void set_scan_dft_gemm_max(int64_t k) {
  check_arg(k >= 0, "k", "expected >= 0 (0 = never), got ", k);
  cpu::scan::g_dft_gemm_max = k;
}

void set_scan_dft_radix2(bool on) { cpu::scan::g_dft_radix2 = on; }

}  // namespace strux
