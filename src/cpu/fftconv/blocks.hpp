// The "blocks" solver of the CPU fftconv plan (fftconv.cpp): a filter much shorter than the row
// runs block-wise with FFTs of a size N of a few times the taps used (m), instead of one
// transform of the whole padded row. Each block yields S = N - m + 1 outputs, so a row of L
// costs ceil(L / S) transforms of N points: about (L / S)·N·log N instead of nfft·log nfft, and
// every transform stays in cache.
//
// Forward (overlap-save): with x = the row v = u ⊙ pregate preceded by m - 1 samples of history
// (zeros in causal mode, the row's last m - 1 samples in circular mode) and followed by zeros,
// block j transforms the frame x[jS, jS + N), multiplies by the filter spectrum at size N and
// keeps outputs m - 1 .. N - 1 of the inverse: y[jS + q], q < S, free of wrap-around.
//
// Backward: the frames are cut by the index of v instead (v block j = v[jS, jS + S), zero-padded
// to N), which makes one transform of dz serve both gradients:
//   dv[jS + q] = Σ_s k[s] dz[jS + q + s]      = irfft(conj(K) · DZ_j)[q],  q < S,
//   dk[s]     += Σ_{q<S} v[jS + q] dz[jS + q + s] = irfft(DZ_j · conj(V_j))[s],  s < m,
// with DZ_j = rfft(dz[jS, jS + N)) (dz followed by zeros, or by its first m - 1 samples in circular
// mode). Neither wraps: q + s <= N - 1. dk's spectrum is summed over blocks and batch rows and
// transformed back once per h. The forward's z, needed for dpostgate only, is the overlap-add
// of irfft(K · V_j) over the blocks (folded mod L in circular mode).
#pragma once

#include <complex>
#include <cstdint>

#include "cpu/fft.hpp"

namespace strux::cpu {

// Block FFT size for m taps used and rows of L: of the smooth sizes of at least 4m, 8m and 16m
// (and kBlocksMinFFT), each cut to the one transform of the whole padded row good_fft_size(L + m - 1)
// (then the row is one block), the one of least modelled cost ceil(L / S)·N·(log2 N + 2).
// Why a model and not a fixed factor: with few blocks per row the padding of the last block
// dominates (L = 65536, m = 4096: 3 blocks of 32768 lose to 6 of 16384), with many it does not
// (bench/NOTES-cpu.md "fftconv-blocks").
inline constexpr int64_t kBlocksMinFFT = 256;
int64_t blocks_fft_size(int64_t L, int64_t m);

// y for rows = B·H rows of L; fft: the transform of size N. K: (H, cs) half spectra at size N of
// the m taps, scaled by 1/N.
template <class T>
void blocks_forward(const RealFFT<T>& fft, int64_t rows, int64_t H, int64_t L, int64_t m, bool circular,
                    const std::complex<T>* K, int64_t cs, const T* u, const T* pre, const T* post, const T* skip,
                    T* y);

// The vector-Jacobian product for dy (B, H, L): du, dk (H, Lk; taps s >= m get 0) and, where
// given, dpre, dpost, dskip. dk and dskip are summed over the batch in tasks (h, chunk of b) cut
// as rows_backward cuts them, then chunk by chunk, so they do not depend on the team.
template <class T>
void blocks_backward(const RealFFT<T>& fft, int64_t B, int64_t H, int64_t L, int64_t m, int64_t Lk, bool circular,
                     const std::complex<T>* K, int64_t cs, const T* dy, const T* u, const T* pre, const T* post,
                     const T* skip, T* du, T* dk, T* dpre, T* dpost, T* dskip);

}  // namespace strux::cpu
