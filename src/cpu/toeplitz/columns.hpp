// Private to the toeplitz CPU backend: batched real FFTs of many time series ("columns") that
// live strided inside a row-major array, to and from a frequency-major spectrum (nfreq, count).
//
// Why tiles of columns: in time-major arrays a series is strided by the whole row; gathering
// kTile neighbouring columns per time step reads contiguous memory, and writing the spectra of
// kTile columns per frequency writes contiguous memory, so neither side walks one cache line per
// element. The frequency-major spectrum is what the per-frequency GEMV/GEMM needs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/fft.hpp"
#include "strux/toeplitz.hpp"

namespace strux::cpu::toeplitz {

inline constexpr int64_t kTile = 16;

// Where column c (c = s*R + r, s the space index, r the right-hand side) of an array lives.
struct Columns {
  int64_t n_space;  // Nm or Nd
  int64_t R;        // right-hand sides
  int64_t nt;       // time steps
  ToeplitzLayout layout;

  int64_t count() const { return n_space * R; }
  // Offset of (column c, t = 0).
  int64_t base(int64_t c) const {
    return layout == ToeplitzLayout::TimeMajor ? c : (c / R) * nt * R + c % R;
  }
  // Distance between consecutive time steps of one column.
  int64_t tstride() const { return layout == ToeplitzLayout::TimeMajor ? n_space * R : R; }
};

// Padded row lengths keep every per-column segment of a scratch tile aligned like FFTW's
// planning buffers (64 bytes covers SSE/AVX/AVX-512).
template <class E>
inline int64_t aligned_len(int64_t n) {
  const int64_t q = std::max<int64_t>(1, int64_t(64 / sizeof(E)));
  return (n + q - 1) / q * q;
}

// Distance between the kTile rows of a scratch tile: aligned, plus one cache line so that for
// power-of-two n the rows do not all map to the same L1 set (16 streams 4 KiB apart would
// exceed the associativity and miss on every access in the tile gathers and scatters).
template <class E>
inline int64_t tile_stride(int64_t n) {
  return aligned_len<E>(n) + int64_t(64 / sizeof(E));
}

// One thread's buffers for a tile of kTile columns, reused across calls.
template <class T>
struct TileScratch {
  AlignedBuffer<T> fwd;       // zero beyond nt: the circulant padding (only [0, nt) is written)
  AlignedBuffer<T> inv;       // inverse FFT output
  AlignedBuffer<cplx<T>> spec;

  // Sizes for transforms of length n; allocates (and zeroes the padding) on first use only.
  void ensure(int64_t n) {
    const int64_t rs = kTile * tile_stride<T>(n), cs = kTile * tile_stride<cplx<T>>(n / 2 + 1);
    if (fwd.size() == rs && spec.size() == cs) return;
    fwd = AlignedBuffer<T>(rs);
    inv = AlignedBuffer<T>(rs);
    spec = AlignedBuffer<cplx<T>>(cs);
    std::fill(fwd.data(), fwd.data() + rs, T(0));
  }
};

// Thread index and serial BLAS inside a region: cpu/threads.hpp.
using cpu::serial_blas_in_region;
using cpu::thread_index;

// out[f * count + c] = scale * rfft(x column c zero-padded to fft.n())[f].
// x may be of another type than the transform (In); every value is rounded through Via first
// (the mixed-precision path's input rounding), then to T.
// Work-shares tiles with an orphaned `omp for` (dynamic: on a shared machine a thread that
// loses its core keeps at most one tile from the others): call it inside a parallel region
// (every thread of the team must call it) or outside one (then it runs serially). Ends with a
// barrier.
template <class T, class In = T, class Via = In>
void forward_columns(const RealFFT<T>& fft, const In* x, const Columns& cols, cplx<T>* out, T scale,
                     TileScratch<T>& s) {
  constexpr bool copy = std::is_same_v<T, In> && std::is_same_v<In, Via>;
  const int64_t nt = cols.nt, n = fft.n(), nf = fft.nfreq(), count = cols.count();
  const int64_t ts = cols.tstride(), rs = tile_stride<T>(n), cs = tile_stride<cplx<T>>(nf);
  const int64_t ntiles = (count + kTile - 1) / kTile;
  s.ensure(n);
  T* rbuf = s.fwd.data();
  cplx<T>* cbuf = s.spec.data();
#pragma omp for schedule(dynamic)
  for (int64_t tile = 0; tile < ntiles; ++tile) {
    const int64_t c0 = tile * kTile, g_n = std::min(kTile, count - c0);
    if (ts == 1 && copy) {
      for (int64_t g = 0; g < g_n; ++g)
        std::memcpy(rbuf + g * rs, x + cols.base(c0 + g), sizeof(T) * size_t(nt));
    } else if (ts == 1) {
      for (int64_t g = 0; g < g_n; ++g) {
        const In* xs = x + cols.base(c0 + g);
        for (int64_t t = 0; t < nt; ++t) rbuf[g * rs + t] = T(Via(xs[t]));
      }
    } else {
      int64_t b[kTile];
      for (int64_t g = 0; g < g_n; ++g) b[g] = cols.base(c0 + g);
      for (int64_t t = 0; t < nt; ++t)
        for (int64_t g = 0; g < g_n; ++g) rbuf[g * rs + t] = T(Via(x[b[g] + t * ts]));
    }
    // Out-of-place r2c leaves its input (and so the zero padding) intact.
    for (int64_t g = 0; g < g_n; ++g) fft.forward(rbuf + g * rs, cbuf + g * cs);
    for (int64_t f = 0; f < nf; ++f) {
      cplx<T>* o = out + f * count + c0;
      if (scale == T(1))
        for (int64_t g = 0; g < g_n; ++g) o[g] = cbuf[g * cs + f];
      else
        for (int64_t g = 0; g < g_n; ++g) o[g] = cbuf[g * cs + f] * scale;
    }
  }
}

// x column c = irfft(in[:, c])[0:nt] (unnormalised: the 1/nfft lives in the spectrum).
// `in` is (nfreq, count) and only read. Work-sharing as forward_columns. x may be of another
// type (Out); every value is rounded through Via first (the mixed path's output rounding).
template <class T, class Out = T, class Via = Out>
void inverse_columns(const RealFFT<T>& fft, const cplx<T>* in, const Columns& cols, Out* x,
                     TileScratch<T>& s) {
  constexpr bool copy = std::is_same_v<T, Out> && std::is_same_v<Out, Via>;
  const int64_t nt = cols.nt, n = fft.n(), nf = fft.nfreq(), count = cols.count();
  const int64_t ts = cols.tstride(), rs = tile_stride<T>(n), cs = tile_stride<cplx<T>>(nf);
  const int64_t ntiles = (count + kTile - 1) / kTile;
  s.ensure(n);
  T* rbuf = s.inv.data();
  cplx<T>* cbuf = s.spec.data();
#pragma omp for schedule(dynamic)
  for (int64_t tile = 0; tile < ntiles; ++tile) {
    const int64_t c0 = tile * kTile, g_n = std::min(kTile, count - c0);
    for (int64_t f = 0; f < nf; ++f) {
      const cplx<T>* src = in + f * count + c0;
      for (int64_t g = 0; g < g_n; ++g) cbuf[g * cs + f] = src[g];
    }
    // c2r overwrites its input: cbuf is scratch.
    for (int64_t g = 0; g < g_n; ++g) fft.inverse(cbuf + g * cs, rbuf + g * rs);
    if (ts == 1 && copy) {
      for (int64_t g = 0; g < g_n; ++g)
        std::memcpy(x + cols.base(c0 + g), rbuf + g * rs, sizeof(T) * size_t(nt));
    } else if (ts == 1) {
      for (int64_t g = 0; g < g_n; ++g) {
        Out* xs = x + cols.base(c0 + g);
        for (int64_t t = 0; t < nt; ++t) xs[t] = Out(Via(rbuf[g * rs + t]));
      }
    } else {
      int64_t b[kTile];
      for (int64_t g = 0; g < g_n; ++g) b[g] = cols.base(c0 + g);
      for (int64_t t = 0; t < nt; ++t)
        for (int64_t g = 0; g < g_n; ++g) x[b[g] + t * ts] = Out(Via(rbuf[g * rs + t]));
    }
  }
}

}  // namespace strux::cpu::toeplitz
