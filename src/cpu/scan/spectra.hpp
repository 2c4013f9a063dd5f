// Private helpers of the circulant scans: batched real FFTs of rows into padded spectra.
//
// Spectra are stored with a padded row stride `nfs` (a multiple of 64 bytes) in AlignedBuffer
// memory, so every row is as aligned as FFTW's planning buffers and the FFT writes (rfft) or
// reads (irfft) the big buffer directly; only the real side goes through a per-thread scratch,
// because user rows are not aligned. Padding entries are set to zero so that the element-wise
// scans may run over the full padded rows.
#pragma once

#include <complex>
#include <algorithm>
#include <cstdint>

#include "cpu/fft.hpp"
#include "cpu/thread_scratch.hpp"

namespace strux::cpu::scan {

// Padded spectrum row stride for nf complex values: 64-byte rows for FFTW (its new-array
// execute needs the planning buffers' alignment); even only where the transforms are GEMMs,
// which take any stride (less padding for the scans to run over: 10 instead of 16 at k = 16).
template <class T>
inline int64_t padded_stride(int64_t nf, bool gemm = false) {
  const int64_t per = gemm ? 2 : 64 / int64_t(sizeof(std::complex<T>));
  return (nf + per - 1) / per * per;
}

template <class T>
class ShortDft;

// The transforms of one plan: FFTW's, and the GEMM one where the length is short (null else),
// both fixed when the plan is made.
template <class T>
struct Transform {
  const RealFFT<T>& fft;
  const ShortDft<T>* dft;
  int64_t n() const { return fft.n(); }
};

// dst[r] = rfft(row r), rows 0..rows-1; load(r, x) writes the n reals of row r into x.
template <class T, class Load>
void rfft_rows(const RealFFT<T>& fft, int64_t rows, int64_t nfs, std::complex<T>* dst, Load load) {
  const int64_t n = fft.n(), nf = fft.nfreq();
  const int nth = num_threads();
  const ThreadScratch<T> sx(nth, n);  // allocated outside the region (see thread_scratch.hpp)
#pragma omp parallel num_threads(nth)
  {
    const AlignedView<T> x{sx.mine()};
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < rows; ++r) {
      load(r, x.data());
      std::complex<T>* out = dst + r * nfs;
      fft.forward(x.data(), out);
      for (int64_t f = nf; f < nfs; ++f) out[f] = 0;
    }
  }
}

// store(r, x) receives irfft(src[r]) (unnormalised, n reals); src rows are destroyed.
template <class T, class Store>
void irfft_rows(const RealFFT<T>& fft, int64_t rows, int64_t nfs, std::complex<T>* src, Store store) {
  const int64_t n = fft.n();
  const int nth = num_threads();
  const ThreadScratch<T> sx(nth, n);
#pragma omp parallel num_threads(nth)
  {
    const AlignedView<T> x{sx.mine()};
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < rows; ++r) {
      fft.inverse(src + r * nfs, x.data());
      store(r, static_cast<const T*>(x.data()));
    }
  }
}

}  // namespace strux::cpu::scan

namespace strux::cpu::scan {

// Time steps per block of the blocked pipelines (rfft block -> scan block -> irfft block):
// about 1 MiB of spectra per block, so they stay in cache instead of making a round trip to
// memory (and fresh pages) for the whole (B, T) sequence; at least enough FFT rows per block
// to keep every thread busy. `step_bytes` = bytes of spectra one time step of all B items needs;
// `budget`: spectra bytes per block (a pipeline of its own per thread takes less, so that the
// rows streaming in stay beside it in the core's L2).
int64_t time_block_override();  // set_scan_time_block(); 0 = automatic
inline int64_t time_block(int64_t B, int64_t T, int64_t step_bytes, int64_t budget = int64_t(1) << 20) {
  if (time_block_override() > 0) return std::min(time_block_override(), T);
  int64_t tb = budget / std::max<int64_t>(1, step_bytes);
  const int64_t min_rows = 4 * int64_t(num_threads());
  tb = std::max(tb, (min_rows + B - 1) / B);
  tb = std::max<int64_t>(tb, 8);
  return std::min(tb, T);
}

}  // namespace strux::cpu::scan
