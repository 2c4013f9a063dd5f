// The data-movement kernels of the toeplitz plan: gathers of the input vectors into padded
// rows, scatters of the inverse transforms back out, the pair split/merge of fft 1, the tiled
// transposes and fused R2C post step of fft 2, and the padding of the blocks for F̂. Included by
// execute.cu and fhat.cu only (header-only templates in toeplitz_detail).
//
// ToeplitzPlan: FFTs of the padded vectors along time (three selectable layouts, `fft`), the
// per-frequency product with F̂ (cuBLAS gemv/gemm or own kernels, `algo`), inverse FFTs.
//   fft 0: strided R2C/C2R (stride = columns): frequency-major out with no reorder pass, but
//          cuFFT runs them as a half-length C2C plus slow strided pack/post passes.
//   fft 1: two real columns as one complex column z = a + i·b, a strided C2C (cuFFT's fast
//          vector kernels), split into the two half spectra by one small pass; inverse: merge
//          Y_a + i·Y_b over the full length, C2C, real/imaginary parts are the two outputs.
//   fft 2: contiguous rows (a tiled transpose writes the data entries; the zero padding is
//          written once at plan time), contiguous batched R2C (even nfft: half-length C2C with
//          the R2C post step fused into the transpose to frequency-major), product, tiled
//          transpose back (even nfft: with the C2R pre step fused, then the half-length
//          inverse C2C; odd nfft: contiguous C2R), scatter.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/elem.cuh"

namespace strux::cuda::toeplitz_detail {

constexpr int kThreads = 256;

// Time index of padded row t: t itself, or (nfft - t) mod nfft when reversed (time reversal
// conjugates the real FFT).
__device__ __forceinline__ int64_t row_time(int64_t t, int64_t nfft, bool reverse) {
  return reverse ? (t == 0 ? 0 : nfft - t) : t;
}

// row_time, or -1 when it falls in the zero padding (>= Nt).
__device__ __forceinline__ int64_t src_time(int64_t t, int64_t Nt, int64_t nfft, bool reverse) {
  const int64_t s = row_time(t, nfft, reverse);
  return s < Nt ? s : -1;
}

// Offset of element (time s, column col = n·R + r) of a vector in its layout.
__device__ __forceinline__ int64_t vec_offset(int64_t s, int64_t col, int64_t Nt, int64_t R, bool space_major,
                                              int64_t cols) {
  if (!space_major) return s * cols + col;
  const int64_t n = col / R, r = col - n * R;
  return (n * Nt + s) * R + r;
}

// Slots of the padded buffer P (nfft × ld) vs columns col = n·R + r of a vector (n < nsp).
// fft 0: slot = column (ld = cols). fft 1 (hn = ceil(nsp/2) > 0): complex column q = n'·R + r
// (n' < hn) holds column (n', r) as its real part (slot 2q) and (n' + hn, r) as its imaginary
// part (slot 2q + 1; zero when n' + hn >= nsp). Pairing along the space index within one
// right-hand side keeps a NaN/Inf of one right-hand side out of the others.
__device__ __forceinline__ int64_t slot_col(int64_t p, int64_t R, int64_t nsp, int64_t hn) {
  if (hn == 0) return p;
  const int64_t q = p >> 1, k = p & 1, n1 = q / R, r = q - n1 * R, n = n1 + k * hn;
  return n < nsp ? n * R + r : -1;
}
__device__ __forceinline__ int64_t col_slot(int64_t col, int64_t R, int64_t hn) {
  if (hn == 0) return col;
  const int64_t n = col / R, r = col - n * R, k = n >= hn;
  return 2 * ((n - k * hn) * R + r) + k;
}

// Entry (time s, column col) of a vector in its layout; zero where s or col is -1 (the zero
// padding, an empty slot).
template <class T>
__device__ __forceinline__ T padded_at(const T* __restrict__ x, int64_t s, int64_t col, int64_t Nt, int64_t R,
                                       bool space_major, int64_t cols) {
  return s >= 0 && col >= 0 ? x[vec_offset(s, col, Nt, R, space_major, cols)] : T(0);
}

// P[t, slot] (nfft × ld, time-major) from a vector x in its layout (nsp·R columns), zero past
// Nt and in empty slots. Threads run along the slots (coalesced writes); grid y strides over t.
template <class T>
__global__ void gather_pad(const T* __restrict__ x, int64_t Nt, int64_t nsp, int64_t R, int64_t hn, int64_t ld,
                           bool space_major, bool reverse, int64_t nfft, T* __restrict__ P) {
  const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= ld) return;
  const int64_t col = slot_col(p, R, nsp, hn), cols = nsp * R;
  for (int64_t t = blockIdx.y; t < nfft; t += gridDim.y)
    P[t * ld + p] = padded_at(x, src_time(t, Nt, nfft, reverse), col, Nt, R, space_major, cols);
}

// out (layout) [t < Nt, col] = Q[src_time(t), slot(col)] (Q row stride ld).
template <class T>
__global__ void scatter_out(const T* __restrict__ Q, int64_t Nt, int64_t nsp, int64_t R, int64_t hn, int64_t ld,
                            bool space_major, bool reverse, int64_t nfft, T* __restrict__ out) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, cols = nsp * R;
  if (col >= cols) return;
  const int64_t p = col_slot(col, R, hn);
  for (int64_t t = blockIdx.y; t < Nt; t += gridDim.y)
    out[vec_offset(t, col, Nt, R, space_major, cols)] = Q[row_time(t, nfft, reverse) * ld + p];
}

// Space-major vectors: threads along time (coalesced reads of each (n, r) row when R = 1).
template <class T>
__global__ void gather_pad_sm(const T* __restrict__ x, int64_t Nt, int64_t nsp, int64_t R, int64_t hn, int64_t ld,
                              bool reverse, int64_t nfft, T* __restrict__ P) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= nfft) return;
  const int64_t s = src_time(t, Nt, nfft, reverse), cols = nsp * R;
  for (int64_t p = blockIdx.y; p < ld; p += gridDim.y)
    P[t * ld + p] = padded_at(x, s, slot_col(p, R, nsp, hn), Nt, R, true, cols);
}

template <class T>
__global__ void scatter_out_sm(const T* __restrict__ Q, int64_t Nt, int64_t nsp, int64_t R, int64_t hn, int64_t ld,
                               bool reverse, int64_t nfft, T* __restrict__ out) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= Nt) return;
  const int64_t s = row_time(t, nfft, reverse), cols = nsp * R;
  for (int64_t col = blockIdx.y; col < cols; col += gridDim.y)
    out[vec_offset(t, col, Nt, R, true, cols)] = Q[s * ld + col_slot(col, R, hn)];
}

// ---- fft 1: two real columns per complex column (z = a + i·b), one strided C2C ----------------

// Z (nfft, h = hn·R) = FFT of the pairs → X (nfreq, nsp·R): X_a[f] = (Z[f] + conj Z[n−f]) / 2 for
// column (n', r), X_b[f] = (Z[f] − conj Z[n−f]) / (2i) for column (n' + hn, r) when it exists.
template <class C>
__global__ void split_pairs(const C* __restrict__ Z, int64_t nsp, int64_t R, int64_t hn, int64_t nfft,
                            int64_t nfreq, C* __restrict__ X) {
  const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, h = hn * R, cols = nsp * R;
  if (q >= h) return;
  const int64_t n1 = q / R, cb = q + hn * R;  // column of the imaginary part: (n1 + hn)·R + r
  const bool has_b = n1 + hn < nsp;
  for (int64_t f = blockIdx.y; f < nfreq; f += gridDim.y) {
    const C z = Z[f * h + q], w = Z[(f == 0 ? 0 : nfft - f) * h + q];
    using R_ = decltype(z.x);
    const R_ half = R_(0.5);
    X[f * cols + q] = C{half * (z.x + w.x), half * (z.y - w.y)};
    if (has_b) X[f * cols + cb] = C{half * (z.y + w.y), half * (w.x - z.x)};
  }
}

// Y (nfreq, nsp·R), the half spectra of real columns → W (nfft, h): W[f] = Y_a[f] + i·Y_b[f] over
// the full length (Hermitian extension Y[n−f] = conj Y[f]); the imaginary parts at f = 0 and
// f = n/2 are dropped, as a C2R transform ignores them. Its inverse C2C is a + i·b.
template <class C>
__global__ void merge_pairs(const C* __restrict__ Y, int64_t nsp, int64_t R, int64_t hn, int64_t nfft,
                            int64_t nfreq, C* __restrict__ W) {
  const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, h = hn * R, cols = nsp * R;
  if (q >= h) return;
  const int64_t n1 = q / R, cb = q + hn * R;
  const bool has_b = n1 + hn < nsp;
  for (int64_t f = blockIdx.y; f < nfft; f += gridDim.y) {
    const bool mirror = f >= nfreq;
    const int64_t g = mirror ? nfft - f : f;
    C a = Y[g * cols + q];
    C b = has_b ? Y[g * cols + cb] : C{0, 0};
    if (mirror) a.y = -a.y, b.y = -b.y;
    if (f == 0 || 2 * f == nfft) a.y = 0, b.y = 0;
    W[f * h + q] = C{a.x - b.y, a.y + b.x};
  }
}

// ---- fft 2: contiguous transforms (one row of nfft per column) and tiled transposes ---------

constexpr int kTile = 32, kTRows = 8;  // 32 × 32 tiles, 32 × 8 threads

// P (cols, nfft) row-major from a vector in its layout: only the Nt data entries of each row,
// at t = s (or its time-reversed position (nfft - s) mod nfft); the zero padding of P is written
// once at plan time and never touched again (half of P at nfft ≈ 2·Nt: the old full-row gather
// spent half its writes on zeros). 64 × 64 tiles, 256 threads, 16 loads in flight per thread:
// reads coalesced along col (time-major) or along time (space-major), writes along time, 16-byte
// stores when the row is aligned for them (not reversed, nfft a multiple of the vector width).
constexpr int kGT = 64, kGThreads = 256;
template <class T, bool SM>
__global__ void __launch_bounds__(kGThreads, sizeof(T) == 4 ? 3 : 2) gather_data(const T* __restrict__ x, int64_t Nt, int64_t cols,
                                                         int64_t R, bool reverse, int64_t nfft,
                                                         T* __restrict__ P) {
  __shared__ T tile[kGT][kGT + 1];  // [s][col]
  constexpr int kPer = kGT * kGT / kGThreads;
  constexpr int V = 16 / int(sizeof(T));  // elements per 16-byte store
  constexpr int kQ = kGT / V;             // vectors per tile row
  const int tid = threadIdx.x;
  const int64_t s0 = int64_t(blockIdx.x) * kGT;
  const bool vec = !reverse && nfft % V == 0;
  for (int64_t c0 = int64_t(blockIdx.y) * kGT; c0 < cols; c0 += int64_t(gridDim.y) * kGT) {
    T v[kPer];
    if constexpr (SM) {
      // thread's time fixed; columns (n, r) in 32-bit arithmetic (cols < 2^31, checked at plan time)
      const int64_t s = s0 + tid % kGT;
      const int Ri = int(R);
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int col = int(c0) + (k * kGThreads + tid) / kGT, n = col / Ri, r = col - n * Ri;
        v[k] = s < Nt && col < cols ? x[(int64_t(n) * Nt + s) * Ri + r] : T(0);
      }
    } else {  // thread's column fixed, rows 4 apart: one pointer stepped by 4·cols
      constexpr int kStep = kGThreads / kGT;
      const int64_t col = c0 + tid % kGT, sb = s0 + tid / kGT;
      const T* xp = x + sb * cols + col;
      const bool okc = col < cols;
#pragma unroll
      for (int k = 0; k < kPer; ++k) v[k] = okc && sb + k * kStep < Nt ? xp[k * kStep * cols] : T(0);
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int e = k * kGThreads + tid;
      const int sl = SM ? e % kGT : e / kGT, cl = SM ? e / kGT : e % kGT;
      tile[sl][cl] = v[k];
    }
    __syncthreads();
    if (vec) {
      for (int e = tid; e < kQ * kGT; e += kGThreads) {
        const int q = e % kQ, cl = e / kQ;
        const int64_t s = s0 + q * V, col = c0 + cl;
        if (col >= cols || s >= Nt) continue;
        T* dst = P + col * nfft + s;
        if (s + V <= Nt) {
          if constexpr (V == 4) {
            *reinterpret_cast<float4*>(dst) =
                make_float4(tile[q * V][cl], tile[q * V + 1][cl], tile[q * V + 2][cl], tile[q * V + 3][cl]);
          } else {
            *reinterpret_cast<double2*>(dst) = make_double2(tile[q * V][cl], tile[q * V + 1][cl]);
          }
        } else {
          for (int j = 0; j < V && s + j < Nt; ++j) dst[j] = tile[q * V + j][cl];
        }
      }
    } else {
      for (int e = tid; e < kGT * kGT; e += kGThreads) {
        const int sl = e % kGT, cl = e / kGT;
        const int64_t s = s0 + sl, col = c0 + cl;
        if (s < Nt && col < cols) P[col * nfft + (reverse && s > 0 ? nfft - s : s)] = tile[sl][cl];
      }
    }
    __syncthreads();
  }
}

// out (layout) [t < Nt, col] = Q[col, src_time(t)], Q (cols, nfft) row-major.
template <class T, bool SM>
__global__ void __launch_bounds__(kTile* kTRows) scatter_rows(const T* __restrict__ Q, int64_t Nt, int64_t cols,
                                                              int64_t R, bool reverse, int64_t nfft,
                                                              T* __restrict__ out) {
  __shared__ T tile[kTile][kTile + 1];  // [col][t]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t t0 = int64_t(blockIdx.x) * kTile;
  for (int64_t c0 = int64_t(blockIdx.y) * kTile; c0 < cols; c0 += int64_t(gridDim.y) * kTile) {
    for (int k = ty; k < kTile; k += kTRows) {
      const int64_t col = c0 + k, t = t0 + tx;
      if (col < cols && t < Nt) tile[k][tx] = Q[col * nfft + row_time(t, nfft, reverse)];
    }
    __syncthreads();
    for (int k = ty; k < kTile; k += kTRows) {
      const int tl = SM ? tx : k, cl = SM ? k : tx;
      const int64_t t = t0 + tl, col = c0 + cl;
      if (t < Nt && col < cols) out[vec_offset(t, col, Nt, R, SM, cols)] = tile[cl][tl];
    }
    __syncthreads();
  }
}

// algo 3 (matvec, R > 1, one real gemm per frequency): the spectra enter as the real operand
// X[f] (2Nm × 2R, row-major) with rows 2n = [Re m̂ₙ (R values) | Im m̂ₙ] and 2n + 1 = [−Im m̂ₙ | Re m̂ₙ],
// so that F̂[f] read as a real Nd × 2Nm matrix times X[f] is [Re d̂ | Im d̂] (Nd × 2R, row-major).
// put_x stores the spectrum of column c = n·R + r at frequency f (cols = Nm·R); EX = false is the
// plain complex (nfreq, cols) layout. get_y reads column c = n·R + r of that [Re | Im] output.
template <bool EX, class C>
__device__ __forceinline__ void put_x(C* X, int64_t f, int64_t c, int64_t cols, int64_t R, C v) {
  if constexpr (!EX) {
    X[f * cols + c] = v;
  } else {
    const int64_t n = c / R, r = c - n * R;
    auto* row = reinterpret_cast<decltype(v.x)*>(X) + f * 4 * cols + n * 4 * R + r;
    row[0] = v.x, row[R] = v.y, row[2 * R] = -v.y, row[3 * R] = v.x;
  }
}
template <bool EX, class C>
__device__ __forceinline__ C get_y(const C* Y, int64_t f, int64_t c, int64_t cols, int64_t R) {
  if constexpr (!EX) {
    return Y[f * cols + c];
  } else {
    const int64_t n = c / R, r = c - n * R;
    const auto* row = reinterpret_cast<const decltype(C{}.x)*>(Y) + f * 2 * cols + n * 2 * R + r;
    return C{row[0], row[R]};
  }
}

// out (ncol, nrow) = in (nrow, ncol)ᵀ, complex, tiled through shared memory. XO: out is algo 3's
// real operand (put_x, columns of R); YI: in is algo 3's [Re | Im] output (get_y).
template <class C, bool XO = false, bool YI = false>
__global__ void __launch_bounds__(kTile* kTRows) transpose_c(const C* __restrict__ in, int64_t nrow, int64_t ncol,
                                                             C* __restrict__ out, int64_t R = 1) {
  __shared__ C tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c0 = int64_t(blockIdx.x) * kTile;
  for (int64_t r0 = int64_t(blockIdx.y) * kTile; r0 < nrow; r0 += int64_t(gridDim.y) * kTile) {
    for (int k = ty; k < kTile; k += kTRows) {
      const int64_t r = r0 + k, c = c0 + tx;
      if (r < nrow && c < ncol) tile[k][tx] = get_y<YI>(in, r, c, ncol, R);
    }
    __syncthreads();
    for (int k = ty; k < kTile; k += kTRows) {
      const int64_t c = c0 + k, r = r0 + tx;
      if (c < ncol && r < nrow) put_x<XO>(out, c, r, nrow, R, tile[tx][k]);
    }
    __syncthreads();
  }
}

// The R2C of real rows of even length 2M without cuFFT's R2C post-processing pass, fused with
// the transpose to frequency-major. Z (cols, M) is the length-M C2C of each row read as complex,
// z[k] = x[2k] + i·x[2k+1]; with A = Z[f], B = Z[(M - f) mod M], U = (A + conj B)/2,
// V = (A - conj B)/2 and W = e^{-2πi/2M} (table Wt, M + 1 entries):
//   X[f] = U - i·W^f·V,   X[M - f] = conj U + i·W^{M-f}·conj V.
// A block takes frequencies f ≤ M/2 of one tile and their mirrors M - f, so Z is read once.
// X (M + 1, cols) frequency-major (XO: algo 3's real operand, put_x).
template <class C, bool XO = false>
__global__ void __launch_bounds__(kTile* kTRows) r2c_post_transpose(const C* __restrict__ Z, int64_t cols, int64_t M,
                                                                    const C* __restrict__ Wt, C* __restrict__ X,
                                                                    int64_t R = 1) {
  __shared__ C ta[kTile][kTile + 1], tb[kTile][kTile + 1];  // [col][f]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t f0 = int64_t(blockIdx.x) * kTile, half = M / 2;
  using R_ = decltype(C{}.x);
  const R_ h = R_(0.5);
  for (int64_t c0 = int64_t(blockIdx.y) * kTile; c0 < cols; c0 += int64_t(gridDim.y) * kTile) {
    for (int k = ty; k < kTile; k += kTRows) {
      const int64_t c = c0 + k, f = f0 + tx;
      if (c < cols && f <= half) {
        ta[k][tx] = Z[c * M + f];
        tb[k][tx] = Z[c * M + (f == 0 ? 0 : M - f)];
      }
    }
    __syncthreads();
    for (int k = ty; k < kTile; k += kTRows) {
      const int64_t f = f0 + k, c = c0 + tx;
      if (f <= half && c < cols) {
        const C a = ta[tx][k], b = tb[tx][k];
        const R_ ux = h * (a.x + b.x), uy = h * (a.y - b.y), vx = h * (a.x - b.x), vy = h * (a.y + b.y);
        const C w = Wt[f];
        const R_ p = w.x * vx - w.y * vy, q = w.x * vy + w.y * vx;  // W^f·V
        put_x<XO>(X, f, c, cols, R, C{ux + q, uy - p});
        const int64_t g = M - f;
        if (g != f) {
          const C w2 = Wt[g];
          const R_ p2 = w2.x * vx + w2.y * vy, q2 = w2.y * vx - w2.x * vy;  // W^g·conj V
          put_x<XO>(X, g, c, cols, R, C{ux - q2, p2 - uy});
        }
      }
    }
    __syncthreads();
  }
}

// The inverse of r2c_post_transpose: cuFFT's C2R of even length 2M without its pre-processing
// pass (a read and a write of all spectra), fused with the transpose back to column rows. X
// (M + 1, cols) frequency-major half spectra (YI: algo 3's [Re | Im] output, get_y), imaginary
// parts at f = 0 and M dropped as C2R does; with A = X[f], B = X[M - f]:
//   Z[f] = (A + conj B) + i·conj(W^f)·(A - conj B),   f < M,
// and the inverse C2C(M) of Z (cols, M) is nfft · (x[2j] + i·x[2j+1]): the C2R's output bytes.
// A block takes frequencies f ≤ M/2 of one tile and their mirrors M - f, so X is read once.
template <class C, bool YI = false>
__global__ void __launch_bounds__(kTile* kTRows) c2r_pre_transpose(const C* __restrict__ X, int64_t cols, int64_t M,
                                                                   const C* __restrict__ Wt, C* __restrict__ Z,
                                                                   int64_t R = 1) {
  __shared__ C ta[kTile][kTile + 1], tb[kTile][kTile + 1];  // [f][col]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t f0 = int64_t(blockIdx.x) * kTile, half = M / 2;
  using R_ = decltype(C{}.x);
  for (int64_t c0 = int64_t(blockIdx.y) * kTile; c0 < cols; c0 += int64_t(gridDim.y) * kTile) {
    for (int k = ty; k < kTile; k += kTRows) {
      const int64_t f = f0 + k, c = c0 + tx;
      if (f <= half && c < cols) {
        C a = get_y<YI>(X, f, c, cols, R), b = get_y<YI>(X, M - f, c, cols, R);
        if (f == 0) a.y = 0, b.y = 0;
        ta[k][tx] = a, tb[k][tx] = b;
      }
    }
    __syncthreads();
    for (int k = ty; k < kTile; k += kTRows) {
      const int64_t c = c0 + k, f = f0 + tx;
      if (f <= half && c < cols) {
        const C a = ta[tx][k], b = tb[tx][k];
        const R_ sx = a.x + b.x, sy = a.y - b.y, dx = a.x - b.x, dy = a.y + b.y;  // A ± conj B
        const C w = Wt[f];
        const R_ ex = w.x * dx + w.y * dy, ey = w.x * dy - w.y * dx;  // conj(W^f)·(A − conj B)
        Z[c * M + f] = C{sx - ey, sy + ex};
        const int64_t g = M - f;
        if (g != f && g < M) {  // the mirror: A, B swap (sum conjugated, difference's real part negated)
          const C w2 = Wt[g];
          const R_ ex2 = w2.y * dy - w2.x * dx, ey2 = w2.x * dy + w2.y * dx;
          Z[c * M + g] = C{sx - ey2, ex2 - sy};
        }
      }
    }
    __syncthreads();
  }
}

inline dim3 tile_grid(int64_t xdim, int64_t ydim) {
  return dim3(unsigned((xdim + kTile - 1) / kTile), unsigned(std::min<int64_t>((ydim + kTile - 1) / kTile, 65535)));
}

// P[t, j] = blocks[t, c0 + j] for t < Nt, 0 below nfft.
template <class T>
__global__ void pad_blocks(const T* __restrict__ blocks, int64_t Nt, int64_t cols, int64_t c0, int64_t chunk,
                           int64_t nfft, T* __restrict__ P) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= chunk) return;
  for (int64_t t = blockIdx.y; t < nfft; t += gridDim.y) P[t * chunk + j] = t < Nt ? blocks[t * cols + c0 + j] : T(0);
}

}  // namespace strux::cuda::toeplitz_detail
