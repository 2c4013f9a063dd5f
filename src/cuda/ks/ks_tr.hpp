// Batch-first ks products with d > 1 through one in-row transposition of x, a cuBLAS GEMM and
// one in-place in-row transposition of y, and backward_w through in-row transpositions of x and
// dy + the chunked cuBLAS dw (ks_tr.cu; private to src/cuda/ks). float32 (SGEMM), float16 and
// bfloat16 (GemmEx, float32 accumulation).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "strux/cuda/common.hpp"  // DType

namespace strux::cuda::ks {

// Whether the path applies: batch-first, d > 1, every row segment of one pass fits one block's
// opt-in shared memory (227 KB on H100/H200), all sizes within cuBLAS's int arguments. Product
// (dw false): x segments c x d in, y' segments d x b out; backward_w (dw true): x segments c x d
// and dy segments b x d. es: element bytes.
bool tr_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool batch_last,
                int64_t es, bool dw);
// Bytes of the largest (padded) row segment of those: up to 48 KB several segments share a block;
// above, one segment per block on opt-in shared memory.
int64_t tr_seg_bytes(int64_t b, int64_t c, int64_t d, int64_t es, bool dw);
// Makes the calling thread's transposition buffer for the current device hold `rows` rows of
// row_bytes each (plus alignment) and returns rows: the batch in equal passes, each under a
// 256 MB buffer (row_bytes: a*cin*d elements for a product, a*(b + c)*d for backward_w).
// Allocates; called at plan construction, with ks::blas_reserve.
int64_t tr_reserve(int64_t row_bytes, int64_t batch);
// y (batch, a*b*d) = x (batch, a*c*d) K'^T for pattern (a, b, c, d) with weight strides
// (si, sk, sl, sj), `rows` batch rows per pass (tr_reserve's answer); launches only.
void tr_prod(const void* x, const void* w, void* y, DType dt, int64_t a, int64_t b, int64_t c,
             int64_t d, int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj,
             int64_t rows, cudaStream_t s);
// dw32[i,k,l,j] += sum_n dy[n, (i*b + k)*d + j] x[n, (i*c + l)*d + j] (batch-first, d > 1):
// per pass of `rows` rows, x and dy transposed in-row into the buffer, then ks::blas_dw on the
// group-contiguous copies (chunks of `chunk` rows, float32 partial sums); launches only.
void tr_dw(const void* x, const void* dy, float* dw32, DType dt, int64_t a, int64_t b, int64_t c,
           int64_t d, int64_t batch, int64_t chunk, int64_t rows, bool ptr_arrays, cudaStream_t s);

// dx and dw together (both on this path): per pass, dy is transposed once and serves the dx
// GEMM (pattern (a, c, b, d), w's middle axes swapped) and the dw sums; x is transposed for dw.
// Buffer and rows as tr_dw; launches only.
void tr_backward(const void* dy, const void* x, const void* w, void* dx, float* dw32, DType dt,
                 int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, int64_t chunk,
                 int64_t rows, bool ptr_arrays, cudaStream_t s);

}  // namespace strux::cuda::ks
