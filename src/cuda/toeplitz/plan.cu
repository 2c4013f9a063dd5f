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
//          transpose back, contiguous C2R, scatter.
#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "cuda/buffer.hpp"
#include "cuda/elem.cuh"
#include "cuda/toeplitz/multi.hpp"
#include "strux/cuda/toeplitz.hpp"

namespace strux::cuda {

namespace {

constexpr int kThreads = 256;

// Source time index of padded row t: t itself, or (nfft - t) mod nfft when reversed
// (time reversal conjugates the real FFT). -1 when it falls in the zero padding.
__device__ __forceinline__ int64_t src_time(int64_t t, int64_t Nt, int64_t nfft, bool reverse) {
  const int64_t s = reverse ? (t == 0 ? 0 : nfft - t) : t;
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

// P[t, slot] (nfft × ld, time-major) from a vector x in its layout (nsp·R columns), zero past
// Nt and in empty slots. Threads run along the slots (coalesced writes); grid y strides over t.
template <class T>
__global__ void gather_pad(const T* __restrict__ x, int64_t Nt, int64_t nsp, int64_t R, int64_t hn, int64_t ld,
                           bool space_major, bool reverse, int64_t nfft, T* __restrict__ P) {
  const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= ld) return;
  const int64_t col = slot_col(p, R, nsp, hn), cols = nsp * R;
  for (int64_t t = blockIdx.y; t < nfft; t += gridDim.y) {
    const int64_t s = src_time(t, Nt, nfft, reverse);
    P[t * ld + p] = s >= 0 && col >= 0 ? x[vec_offset(s, col, Nt, R, space_major, cols)] : T(0);
  }
}

// out (layout) [t < Nt, col] = Q[src_time(t), slot(col)] (Q row stride ld).
template <class T>
__global__ void scatter_out(const T* __restrict__ Q, int64_t Nt, int64_t nsp, int64_t R, int64_t hn, int64_t ld,
                            bool space_major, bool reverse, int64_t nfft, T* __restrict__ out) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, cols = nsp * R;
  if (col >= cols) return;
  const int64_t p = col_slot(col, R, hn);
  for (int64_t t = blockIdx.y; t < Nt; t += gridDim.y) {
    const int64_t s = reverse ? (t == 0 ? 0 : nfft - t) : t;
    out[vec_offset(t, col, Nt, R, space_major, cols)] = Q[s * ld + p];
  }
}

// Space-major vectors: threads along time (coalesced reads of each (n, r) row when R = 1).
template <class T>
__global__ void gather_pad_sm(const T* __restrict__ x, int64_t Nt, int64_t nsp, int64_t R, int64_t hn, int64_t ld,
                              bool reverse, int64_t nfft, T* __restrict__ P) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= nfft) return;
  const int64_t s = src_time(t, Nt, nfft, reverse), cols = nsp * R;
  for (int64_t p = blockIdx.y; p < ld; p += gridDim.y) {
    const int64_t col = slot_col(p, R, nsp, hn);
    P[t * ld + p] = s >= 0 && col >= 0 ? x[vec_offset(s, col, Nt, R, true, cols)] : T(0);
  }
}

template <class T>
__global__ void scatter_out_sm(const T* __restrict__ Q, int64_t Nt, int64_t nsp, int64_t R, int64_t hn, int64_t ld,
                               bool reverse, int64_t nfft, T* __restrict__ out) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= Nt) return;
  const int64_t s = reverse ? (t == 0 ? 0 : nfft - t) : t, cols = nsp * R;
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
      if (col < cols && t < Nt) tile[k][tx] = Q[col * nfft + (reverse ? (t == 0 ? 0 : nfft - t) : t)];
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

dim3 tile_grid(int64_t xdim, int64_t ydim) {
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

// cuBLAS entry points per real type.
template <class T>
struct Blas;
template <>
struct Blas<float> {
  using C = cuComplex;
  static void gemv(cublasHandle_t h, cublasOperation_t op, int m, int n, const C* a, const C* A, int lda,
                   long long sA, const C* x, long long sx, const C* b, C* y, long long sy, int batch) {
    STRUX_CUBLAS(cublasCgemvStridedBatched(h, op, m, n, a, A, lda, sA, x, 1, sx, b, y, 1, sy, batch));
  }
  static void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const C* a,
                   const C* A, int lda, long long sA, const C* B, int ldb, long long sB, const C* b, C* Cm, int ldc,
                   long long sC, int batch) {
    STRUX_CUBLAS(cublasCgemmStridedBatched(h, ta, tb, m, n, k, a, A, lda, sA, B, ldb, sB, b, Cm, ldc, sC, batch));
  }
  static void rgemm(cublasHandle_t h, int m, int n, int k, const float* a, const float* A, int lda, long long sA,
                    const float* B, int ldb, long long sB, const float* b, float* Cm, int ldc, long long sC, int batch) {
    STRUX_CUBLAS(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, a, A, lda, sA, B, ldb, sB, b, Cm, ldc,
                                           sC, batch));
  }
};
template <>
struct Blas<double> {
  using C = cuDoubleComplex;
  static void gemv(cublasHandle_t h, cublasOperation_t op, int m, int n, const C* a, const C* A, int lda,
                   long long sA, const C* x, long long sx, const C* b, C* y, long long sy, int batch) {
    STRUX_CUBLAS(cublasZgemvStridedBatched(h, op, m, n, a, A, lda, sA, x, 1, sx, b, y, 1, sy, batch));
  }
  static void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const C* a,
                   const C* A, int lda, long long sA, const C* B, int ldb, long long sB, const C* b, C* Cm, int ldc,
                   long long sC, int batch) {
    STRUX_CUBLAS(cublasZgemmStridedBatched(h, ta, tb, m, n, k, a, A, lda, sA, B, ldb, sB, b, Cm, ldc, sC, batch));
  }
  static void rgemm(cublasHandle_t h, int m, int n, int k, const double* a, const double* A, int lda, long long sA,
                    const double* B, int ldb, long long sB, const double* b, double* Cm, int ldc, long long sC, int batch) {
    STRUX_CUBLAS(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, a, A, lda, sA, B, ldb, sB, b, Cm, ldc,
                                           sC, batch));
  }
};

void check_int(int64_t v, const char* arg) {
  check_arg(v <= INT_MAX, arg, "expected a size below 2^31 (cuBLAS dimension), got ", v);
}

}  // namespace

// The one place that picks the product for algo = -1, per direction. Measured on the H200
// (2026-11-21, Nt=1000, Nd=100, Nm=5000, float32; bench/NOTES-gpu.md version 3), whole calls:
// matvec  R=1: cuBLAS gemv 1.182 ms, own 1.246;  R=16: cuBLAS gemm 7.31, own 7.65;
// rmatvec R=1: cuBLAS gemv 1.306 ms, own 1.244;  R=16: cuBLAS gemm 7.04, own 6.49.
// Version 7 (bench/NOTES-gpu.md), fft 2: matvec R=16 float32 real gemm (algo 3) 3.283 ms vs
// cgemm 4.219 (space-major 3.391 vs 4.342); float64 (Nm=1000) Dgemm 1.013 vs Zgemm 0.912, so
// algo 3 is the float32 matvec default for R > 1 only. Other shapes are unmeasured: the same choice.
int toeplitz_auto_algo(int64_t Nd, int64_t Nm, int64_t R, DType dtype, bool adjoint) {
  (void)Nd, (void)Nm;
  if (adjoint) return 2;
  return R > 1 && dtype == DType::f32 ? 3 : 0;
}

int64_t toeplitz_nfft(int64_t Nt) { return std::max<int64_t>(2, good_fft_size(2 * Nt - 1)); }

template <class T>
static void build_fhat_t(int64_t Nt, int64_t Nd, int64_t Nm, const T* blocks, void* fhat, cudaStream_t s) {
  using C = typename Fft<T>::C;
  const int64_t nfft = toeplitz_nfft(Nt), cols = Nd * Nm;
  // Columns per pass: bounds the padded temporary to about 1 GiB.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(cols, (int64_t(1) << 30) / (nfft * int64_t(sizeof(T)))));
  DeviceBuffer P(size_t(nfft) * chunk * sizeof(T));
  for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
    const int64_t n = std::min(chunk, cols - c0);
    FFTPlan plan;
    plan.make(nfft, n, n, 1, nfft, cols, 1, nfft / 2 + 1, Fft<T>::r2c);
    DeviceBuffer work(std::max<size_t>(plan.work_size(), 256));
    plan.set_work(work.get());
    STRUX_CUFFT(cufftSetStream(plan.get(), s));
    pad_blocks<T><<<grid2(n, nfft, kThreads), kThreads, 0, s>>>(blocks, Nt, cols, c0, n, nfft, P.as<T>());
    STRUX_LAUNCH("toeplitz pad_blocks");
    Fft<T>::forward(plan.get(), P.as<T>(), static_cast<C*>(fhat) + c0);
    // The plan, its work area and P are freed or reused next: finish this pass first.
    STRUX_CUDA(cudaStreamSynchronize(s));
  }
}

void build_toeplitz_fhat(int64_t Nt, int64_t Nd, int64_t Nm, DType dtype, const void* blocks, void* fhat, Stream s) {
  check_positive(Nt, "Nt");
  check_positive(Nd, "Nd");
  check_positive(Nm, "Nm");
  check_arg(blocks && fhat, "blocks", "expected device pointers, got null");
  if (dtype == DType::f32)
    build_fhat_t<float>(Nt, Nd, Nm, static_cast<const float*>(blocks), fhat, s);
  else if (dtype == DType::f64)
    build_fhat_t<double>(Nt, Nd, Nm, static_cast<const double*>(blocks), fhat, s);
  else
    throw TypeError(msg("argument 'blocks': expected float32 or float64, got ", dtype_name(dtype)));
}

// fft -1 resolves here (one dispatch point). Measured on the H200 (2026-11-21, Nt=1000, Nd=100,
// Nm=5000, float32, default algo; bench/NOTES-gpu.md version 4), whole calls in ms:
//                    fft 0   fft 1   fft 2
//   matvec  R=1      1.201   1.195   1.066
//   rmatvec R=1      1.272   1.237   1.090
//   matvec  R=16     7.241   7.230   4.942
//   rmatvec R=16     6.378   6.038   3.748
//   space-major      1.342 / 1.293 / 9.52 / 7.25 (fft 0) vs 1.065 / 1.099 / 4.86 / 3.95 (fft 2)
// fft 2 of version 5 (data-only gather, fused R2C post step): 1.001 / 1.068 / 4.226 / 3.748,
// space-major 1.006 / 1.075 / 4.319 / 3.957.
// fft 1 loses because cuFFT runs the strided C2C of 2000 points as two slow regular_fft_factor
// passes (0.18 ms at R=1), while the R2C's half-length C2C of 1000 is one vector_fft kernel.
// Other shapes and float64 are unmeasured: the same choice.
int toeplitz_auto_fft(int64_t Nd, int64_t Nm, int64_t R, DType dtype, bool space_major) {
  (void)Nd, (void)Nm, (void)R, (void)dtype, (void)space_major;
  return 2;
}

namespace {

// Complex-to-complex transforms (fft 1), in place.
void exec_c2c(cufftHandle p, float2* z, int dir) {
  STRUX_CUFFT(cufftExecC2C(p, reinterpret_cast<cufftComplex*>(z), reinterpret_cast<cufftComplex*>(z), dir));
}
void exec_c2c(cufftHandle p, double2* z, int dir) {
  STRUX_CUFFT(
      cufftExecZ2Z(p, reinterpret_cast<cufftDoubleComplex*>(z), reinterpret_cast<cufftDoubleComplex*>(z), dir));
}
// Out of place (fft 2's half-length forward transforms).
void exec_c2c(cufftHandle p, const float2* in, float2* out) {
  STRUX_CUFFT(cufftExecC2C(p, reinterpret_cast<cufftComplex*>(const_cast<float2*>(in)),
                           reinterpret_cast<cufftComplex*>(out), CUFFT_FORWARD));
}
void exec_c2c(cufftHandle p, const double2* in, double2* out) {
  STRUX_CUFFT(cufftExecZ2Z(p, reinterpret_cast<cufftDoubleComplex*>(const_cast<double2*>(in)),
                           reinterpret_cast<cufftDoubleComplex*>(out), CUFFT_FORWARD));
}

// Zero a plan buffer once, finished before the constructor returns (no stream of the caller's
// is involved: the constructor may run while another thread captures a graph).
void zero_now(DeviceBuffer& b) {
  cudaStream_t st;
  STRUX_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  STRUX_CUDA(cudaMemsetAsync(b.get(), 0, b.bytes(), st));
  STRUX_CUDA(cudaStreamSynchronize(st));
  STRUX_CUDA(cudaStreamDestroy(st));
}

// W^f = e^{-2πi f/nfft}, f = 0..nfft/2, in the plan's precision (computed in double).
template <class C>
void upload_twiddles(DeviceBuffer& b, int64_t nfft) {
  const int64_t n = nfft / 2 + 1;
  std::vector<C> w(static_cast<size_t>(n));
  const double pi = 3.14159265358979323846;
  for (int64_t f = 0; f < n; ++f) {
    const double a = -2.0 * pi * double(f) / double(nfft);
    w[size_t(f)].x = decltype(C{}.x)(std::cos(a));
    w[size_t(f)].y = decltype(C{}.x)(std::sin(a));
  }
  b.allocate(size_t(n) * sizeof(C));
  STRUX_CUDA(cudaMemcpy(b.get(), w.data(), b.bytes(), cudaMemcpyHostToDevice));
}

}  // namespace

struct ToeplitzPlan::Impl {
  int64_t Nt, Nd, Nm, R, nfft, nfreq;
  bool space_major;
  int algo, algo_adj;  // product per direction
  int fft;             // transform layout: 0 strided R2C/C2R, 1 paired C2C, 2 contiguous + transposes
  bool half = false;   // fft 2 with even nfft: forward = half-length C2C + r2c_post_transpose
  DType dtype;
  // fft 0: r2c/c2r per side; fft 1: c2c_m/c2c_d in the r2c slots; fft 2: contiguous r2c/c2r.
  FFTPlan r2c_m, c2r_m, r2c_d, c2r_d;
  // fft 2: P holds the padded input rows, zeroed at plan time (the gathers write data entries
  // only); Prev the same for the time-reversed gather (R = 1 rmatvec with gemv), whose zero
  // region differs; Wt the twiddles of r2c_post_transpose.
  DeviceBuffer P, Prev, X, Y, T1, Wt, work, blas_work;
  cublasHandle_t blas = nullptr;

  ~Impl() {
    if (blas) cublasDestroy(blas);
  }
  template <class T>
  void apply(const void* fhat, const T* in, T* out, bool adjoint, cudaStream_t s);
  template <class T>
  void product(const void* fhat, const void* Xin, void* Xout, bool adjoint, cudaStream_t s);
};

ToeplitzPlan::ToeplitzPlan(int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, bool space_major, DType dtype, int algo,
                           int fft)
    : impl_(new Impl) {
  check_positive(Nt, "Nt");
  check_positive(Nd, "Nd");
  check_positive(Nm, "Nm");
  check_positive(R, "R");
  if (dtype != DType::f32 && dtype != DType::f64)
    throw TypeError(msg("argument 'dtype': expected float32 or float64, got ", dtype_name(dtype)));
  check_arg(algo >= -1 && algo <= 3, "algo",
            "expected -1 (automatic), 0 (cuBLAS gemv/gemm), 1 (cuBLAS gemm), 2 (own kernels) or 3 (real gemm), got ",
            algo);
  check_arg(fft >= -1 && fft <= 2, "fft",
            "expected -1 (automatic), 0 (strided R2C/C2R), 1 (paired C2C) or 2 (contiguous), got ", fft);
  check_int(Nd * Nm, "Nd*Nm");
  check_int(std::max(Nd, Nm) * R, "R");
  Impl& p = *impl_;
  p.Nt = Nt, p.Nd = Nd, p.Nm = Nm, p.R = R, p.space_major = space_major, p.dtype = dtype;
  p.algo = algo < 0 ? toeplitz_auto_algo(Nd, Nm, R, dtype, false) : algo;
  p.algo_adj = algo < 0 ? toeplitz_auto_algo(Nd, Nm, R, dtype, true) : algo;
  p.fft = fft < 0 ? toeplitz_auto_fft(Nd, Nm, R, dtype, space_major) : fft;
  // algo 3 (one real gemm per frequency) is a matvec product for R > 1 with fft 2; elsewhere, and
  // where its real dimensions would pass 2^31, it is algo 0.
  if (p.algo == 3 && (R == 1 || p.fft != 2 || 4 * std::max(Nd, Nm) * R > INT_MAX)) p.algo = 0;
  if (p.algo_adj == 3) p.algo_adj = 0;
  p.nfft = toeplitz_nfft(Nt);
  p.nfreq = p.nfft / 2 + 1;
  check_int(p.nfreq, "Nt");
  const bool dbl = dtype == DType::f64;
  const size_t tr = dbl ? 8 : 4;
  const cufftType r2c = dbl ? CUFFT_D2Z : CUFFT_R2C, c2r = dbl ? CUFFT_Z2D : CUFFT_C2R;
  const cufftType c2c = dbl ? CUFFT_Z2Z : CUFFT_C2C;
  const int64_t cm = Nm * R, cd = Nd * R, nfft = p.nfft, nfreq = p.nfreq;
  const int64_t hm = (Nm + 1) / 2 * R, hd = (Nd + 1) / 2 * R;  // complex columns of fft 1
  std::vector<FFTPlan*> made;
  if (p.fft == 0) {
    // Transform along time with stride = columns, one transform per column: frequency-major out.
    p.r2c_m.make(nfft, cm, cm, 1, nfft, cm, 1, nfreq, r2c);
    p.c2r_m.make(nfft, cm, cm, 1, nfreq, cm, 1, nfft, c2r);
    p.r2c_d.make(nfft, cd, cd, 1, nfft, cd, 1, nfreq, r2c);
    p.c2r_d.make(nfft, cd, cd, 1, nfreq, cd, 1, nfft, c2r);
    made = {&p.r2c_m, &p.c2r_m, &p.r2c_d, &p.c2r_d};
    p.P.allocate(size_t(nfft) * std::max(cm, cd) * tr);
  } else if (p.fft == 1) {
    // Strided C2C over h complex columns (pairs of real ones), in place, both directions.
    p.r2c_m.make(nfft, hm, hm, 1, nfft, hm, 1, nfft, c2c);
    p.r2c_d.make(nfft, hd, hd, 1, nfft, hd, 1, nfft, c2c);
    made = {&p.r2c_m, &p.r2c_d};
    p.P.allocate(size_t(nfft) * 2 * std::max(hm, hd) * tr);
  } else {
    // Contiguous rows: column c's nfft samples at P[c·nfft], spectra at T1[c·nfreq]. Even nfft:
    // the forward transform is the length-nfft/2 C2C of the rows read as complex (cuFFT's R2C
    // runs that same C2C plus a post pass over all spectra; the post step is fused into the
    // transpose instead). The inverse C2R writes into the product's output buffer, not P.
    p.half = nfft % 2 == 0;
    if (p.half) {
      const int64_t M = nfft / 2;
      p.r2c_m.make(M, cm, 1, M, M, 1, M, M, c2c);
      p.r2c_d.make(M, cd, 1, M, M, 1, M, M, c2c);
      if (dbl)
        upload_twiddles<double2>(p.Wt, nfft);
      else
        upload_twiddles<float2>(p.Wt, nfft);
    } else {
      p.r2c_m.make(nfft, cm, 1, nfft, nfft, 1, nfreq, nfreq, r2c);
      p.r2c_d.make(nfft, cd, 1, nfft, nfft, 1, nfreq, nfreq, r2c);
    }
    p.c2r_m.make(nfft, cm, 1, nfreq, nfreq, 1, nfft, nfft, c2r);
    p.c2r_d.make(nfft, cd, 1, nfreq, nfreq, 1, nfft, nfft, c2r);
    made = {&p.r2c_m, &p.c2r_m, &p.r2c_d, &p.c2r_d};
    p.P.allocate(size_t(nfft) * std::max(cm, cd) * tr);
    zero_now(p.P);
    if (R == 1 && p.algo_adj == 0) {
      p.Prev.allocate(size_t(nfft) * cd * tr);
      zero_now(p.Prev);
    }
    p.T1.allocate(size_t(nfreq) * std::max(cm, cd) * 2 * tr);
  }
  size_t ws = 256;
  for (FFTPlan* f : made) ws = std::max(ws, f->work_size());
  p.work.allocate(ws);
  for (FFTPlan* f : made) f->set_work(p.work.get());
  p.X.allocate(size_t(nfreq) * cm * (p.algo == 3 ? 4 : 2) * tr);  // algo 3: real operand 2Nm × 2R
  p.Y.allocate(size_t(nfreq) * cd * 2 * tr);
  STRUX_CUBLAS(cublasCreate(&p.blas));
  // Own cuBLAS workspace, so no allocation happens inside a call (or a graph capture).
  p.blas_work.allocate(size_t(32) << 20);
}

ToeplitzPlan::~ToeplitzPlan() = default;
int64_t ToeplitzPlan::nfft() const { return impl_->nfft; }
int64_t ToeplitzPlan::nfreq() const { return impl_->nfreq; }
int ToeplitzPlan::algo(bool adjoint) const { return adjoint ? impl_->algo_adj : impl_->algo; }
int ToeplitzPlan::fft() const { return impl_->fft; }
size_t ToeplitzPlan::workspace_bytes() const {
  const Impl& p = *impl_;
  return p.P.bytes() + p.Prev.bytes() + p.X.bytes() + p.Y.bytes() + p.T1.bytes() + p.Wt.bytes() + p.work.bytes() +
         p.blas_work.bytes();
}

// Xout (nfreq, cout) = alpha · F̂[f] Xin[f] (or F̂[f]^H), frequency-major, per the direction's algo.
template <class T>
void ToeplitzPlan::Impl::product(const void* fhat, const void* Xin_, void* Xout_, bool adjoint, cudaStream_t s) {
  using B = Blas<T>;
  using C = typename B::C;
  const C* Xin = static_cast<const C*>(Xin_);
  C* Xout = static_cast<C*>(Xout_);
  const int64_t cm = Nm * R, cd = Nd * R;
  const int algo = adjoint ? algo_adj : this->algo;
  const bool gemv = R == 1 && algo == 0;
  if (algo == 3) {  // [Re D̂ | Im D̂] (Nd × 2R) = F̂ as real (Nd × 2Nm) · X (2Nm × 2R), column-major transposed
    STRUX_CUBLAS(cublasSetStream(blas, s));
    STRUX_CUBLAS(cublasSetWorkspace(blas, blas_work.get(), blas_work.bytes()));
    const T ra = T(1) / T(nfft), rb = T(0);
    B::rgemm(blas, int(2 * R), int(Nd), int(2 * Nm), &ra, reinterpret_cast<const T*>(Xin), int(2 * R), 4 * cm,
             static_cast<const T*>(fhat), int(2 * Nm), 2LL * Nd * Nm, &rb, reinterpret_cast<T*>(Xout), int(2 * R),
             2 * cd, int(nfreq));
    return;
  }
  if (algo == 2) {
    toeplitz_detail::apply_fhat_multi<T>(fhat, Xin, Xout, nfreq, Nd, Nm, R, adjoint, T(1) / T(nfft), s);
    return;
  }
  STRUX_CUBLAS(cublasSetStream(blas, s));
  STRUX_CUBLAS(cublasSetWorkspace(blas, blas_work.get(), blas_work.bytes()));
  const C alpha{T(1) / T(nfft), 0}, beta{0, 0};
  const C* A = static_cast<const C*>(fhat);
  const long long sA = (long long)(Nd * Nm);
  const int nb = int(nfreq);
  // Column-major view of F̂[f] (row-major Nd × Nm) is A' = F̂[f]ᵀ (Nm × Nd, lda = Nm).
  if (gemv) {
    if (!adjoint)  // d̂ = A'ᵀ m̂
      B::gemv(blas, CUBLAS_OP_T, int(Nm), int(Nd), &alpha, A, int(Nm), sA, Xin, Nm, &beta, Xout, Nd, nb);
    else  // conj(m̂) = A' conj(d̂)
      B::gemv(blas, CUBLAS_OP_N, int(Nm), int(Nd), &alpha, A, int(Nm), sA, Xin, Nd, &beta, Xout, Nm, nb);
  } else {
    if (!adjoint)  // D̂ᵀ (R × Nd) = M̂ᵀ (R × Nm) · A'
      B::gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, int(R), int(Nd), int(Nm), &alpha, Xin, int(R), cm, A, int(Nm), sA,
              &beta, Xout, int(R), cd, nb);
    else  // M̂ᵀ (R × Nm) = D̂ᵀ (R × Nd) · conj(F̂) = D̂ᵀ · A'^H
      B::gemm(blas, CUBLAS_OP_N, CUBLAS_OP_C, int(R), int(Nm), int(Nd), &alpha, Xin, int(R), cd, A, int(Nm), sA,
              &beta, Xout, int(R), cm, nb);
  }
}

template <class T>
void ToeplitzPlan::Impl::apply(const void* fhat, const T* in, T* out, bool adjoint, cudaStream_t s) {
  using F = Fft<T>;
  using C = typename F::C;
  const int64_t cm = Nm * R, cd = Nd * R;
  // Input/output column counts and transforms for this direction.
  const int64_t cin = adjoint ? cd : cm, cout = adjoint ? cm : cd;
  const int algo = adjoint ? algo_adj : this->algo;
  // conj via time reversal (gemv has no "conj, no transpose"): folded into gather and scatter.
  const bool reverse = adjoint && R == 1 && algo == 0;
  C* Xin = (adjoint ? Y : X).as<C>();
  C* Xout = (adjoint ? X : Y).as<C>();
  T* Pr = P.as<T>();

  if (fft == 2) {
    // gather (transpose) → contiguous R2C (even nfft: half-length C2C) → transpose to
    // frequency-major (even nfft: fused with the R2C post step) → product → transpose back →
    // contiguous C2R into the product's output buffer (free by then) → scatter (transpose).
    FFTPlan& fin = adjoint ? r2c_d : r2c_m;
    FFTPlan& fout = adjoint ? c2r_m : c2r_d;
    C* Tc = T1.as<C>();
    T* Pin = reverse ? Prev.as<T>() : Pr;
    const dim3 tb(kTile, kTRows);
    const dim3 gg(unsigned((Nt + kGT - 1) / kGT), unsigned(std::min<int64_t>((cin + kGT - 1) / kGT, 65535)));
    if (space_major)
      gather_data<T, true><<<gg, kGThreads, 0, s>>>(in, Nt, cin, R, reverse, nfft, Pin);
    else
      gather_data<T, false><<<gg, kGThreads, 0, s>>>(in, Nt, cin, R, reverse, nfft, Pin);
    STRUX_LAUNCH("toeplitz gather_data");
    STRUX_CUFFT(cufftSetStream(fin.get(), s));
    STRUX_CUFFT(cufftSetStream(fout.get(), s));
    if (half) {
      const int64_t M = nfft / 2;
      exec_c2c(fin.get(), reinterpret_cast<const C*>(Pin), Tc);
      if (algo == 3)
        r2c_post_transpose<C, true><<<tile_grid(M / 2 + 1, cin), tb, 0, s>>>(Tc, cin, M, Wt.as<C>(), Xin, R);
      else
        r2c_post_transpose<C><<<tile_grid(M / 2 + 1, cin), tb, 0, s>>>(Tc, cin, M, Wt.as<C>(), Xin);
      STRUX_LAUNCH("toeplitz r2c_post_transpose");
    } else {
      F::forward(fin.get(), Pin, Tc);
      if (algo == 3)
        transpose_c<C, true><<<tile_grid(nfreq, cin), tb, 0, s>>>(Tc, cin, nfreq, Xin, R);
      else
        transpose_c<C><<<tile_grid(nfreq, cin), tb, 0, s>>>(Tc, cin, nfreq, Xin);
      STRUX_LAUNCH("toeplitz transpose_c");
    }
    product<T>(fhat, Xin, Xout, adjoint, s);
    if (algo == 3)
      transpose_c<C, false, true><<<tile_grid(cout, nfreq), tb, 0, s>>>(Xout, nfreq, cout, Tc, R);
    else
      transpose_c<C><<<tile_grid(cout, nfreq), tb, 0, s>>>(Xout, nfreq, cout, Tc);
    STRUX_LAUNCH("toeplitz transpose_c");
    T* Q = reinterpret_cast<T*>(Xout);  // nfreq·cout complex >= nfft·cout real
    F::inverse(fout.get(), Tc, Q);
    if (space_major)
      scatter_rows<T, true><<<tile_grid(Nt, cout), tb, 0, s>>>(Q, Nt, cout, R, reverse, nfft, out);
    else
      scatter_rows<T, false><<<tile_grid(Nt, cout), tb, 0, s>>>(Q, Nt, cout, R, reverse, nfft, out);
    STRUX_LAUNCH("toeplitz scatter_rows");
    return;
  }

  // fft 0: P (nfft, cin) real, strided R2C. fft 1: P (nfft, 2h) real = (nfft, h) complex pairs,
  // h = ceil(nsp/2)·R, strided C2C in place, then split.
  const int64_t nin = adjoint ? Nd : Nm, nout = adjoint ? Nm : Nd;
  const int64_t hnin = fft == 1 ? (nin + 1) / 2 : 0, hnout = fft == 1 ? (nout + 1) / 2 : 0;
  const int64_t ldin = fft == 1 ? 2 * hnin * R : cin, ldout = fft == 1 ? 2 * hnout * R : cout;
  if (space_major) {
    gather_pad_sm<T><<<grid2(nfft, ldin, kThreads), kThreads, 0, s>>>(in, Nt, nin, R, hnin, ldin, reverse, nfft, Pr);
  } else {
    gather_pad<T><<<grid2(ldin, nfft, kThreads), kThreads, 0, s>>>(in, Nt, nin, R, hnin, ldin, false, reverse, nfft,
                                                                   Pr);
  }
  STRUX_LAUNCH("toeplitz gather_pad");
  if (fft == 0) {
    FFTPlan& fin = adjoint ? r2c_d : r2c_m;
    FFTPlan& fout = adjoint ? c2r_m : c2r_d;
    STRUX_CUFFT(cufftSetStream(fin.get(), s));
    STRUX_CUFFT(cufftSetStream(fout.get(), s));
    F::forward(fin.get(), Pr, Xin);
    product<T>(fhat, Xin, Xout, adjoint, s);
    F::inverse(fout.get(), Xout, Pr);
  } else {
    FFTPlan& fin = adjoint ? r2c_d : r2c_m;
    FFTPlan& fout = adjoint ? r2c_m : r2c_d;
    C* Z = P.as<C>();
    STRUX_CUFFT(cufftSetStream(fin.get(), s));
    STRUX_CUFFT(cufftSetStream(fout.get(), s));
    exec_c2c(fin.get(), Z, CUFFT_FORWARD);
    split_pairs<C><<<grid2(hnin * R, nfreq, kThreads), kThreads, 0, s>>>(Z, nin, R, hnin, nfft, nfreq, Xin);
    STRUX_LAUNCH("toeplitz split_pairs");
    product<T>(fhat, Xin, Xout, adjoint, s);
    merge_pairs<C><<<grid2(hnout * R, nfft, kThreads), kThreads, 0, s>>>(Xout, nout, R, hnout, nfft, nfreq, Z);
    STRUX_LAUNCH("toeplitz merge_pairs");
    exec_c2c(fout.get(), Z, CUFFT_INVERSE);
  }
  if (space_major) {
    scatter_out_sm<T><<<grid2(Nt, cout, kThreads), kThreads, 0, s>>>(Pr, Nt, nout, R, hnout, ldout, reverse, nfft,
                                                                      out);
  } else {
    scatter_out<T><<<grid2(cout, Nt, kThreads), kThreads, 0, s>>>(Pr, Nt, nout, R, hnout, ldout, false, reverse,
                                                                     nfft, out);
  }
  STRUX_LAUNCH("toeplitz scatter_out");
}

void ToeplitzPlan::matvec(const void* fhat, const void* m, void* d, Stream s) {
  check_arg(fhat && m && d, "m", "expected device pointers, got null");
  if (impl_->dtype == DType::f32)
    impl_->apply<float>(fhat, static_cast<const float*>(m), static_cast<float*>(d), false, s);
  else
    impl_->apply<double>(fhat, static_cast<const double*>(m), static_cast<double*>(d), false, s);
}

void ToeplitzPlan::rmatvec(const void* fhat, const void* d, void* m, Stream s) {
  check_arg(fhat && m && d, "d", "expected device pointers, got null");
  if (impl_->dtype == DType::f32)
    impl_->apply<float>(fhat, static_cast<const float*>(d), static_cast<float*>(m), true, s);
  else
    impl_->apply<double>(fhat, static_cast<const double*>(d), static_cast<double*>(m), true, s);
}

}  // namespace strux::cuda
