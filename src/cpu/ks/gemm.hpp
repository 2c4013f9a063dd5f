// Row-major GEMM on float/double for the KS kernels: C = alpha·op(A)·op(B) + beta·C.
// beta == 0 overwrites C without reading it (OpenBLAS's contract), so uninitialised outputs
// are fine and NaN/Inf in old C never leaks in.
#pragma once

#include "cpu/cblas.hpp"

#include <algorithm>
#include <cstdint>

namespace strux::cpu::ks {

inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blas_int(m), blas_int(n), blas_int(k), alpha, A, blas_int(lda), B, blas_int(ldb), beta, C,
              blas_int(ldc));
}

inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* A,
                      int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blas_int(m), blas_int(n), blas_int(k), alpha, A, blas_int(lda), B, blas_int(ldb), beta, C,
              blas_int(ldc));
}

// Sums longer than this are cut into blocks, each summed from zero by BLAS and added into C.
// Why: for one output row OpenBLAS takes its GEMV kernel, whose few running sums lose accuracy
// linearly in k (float32, pattern (1, 1, 2^23, 2): 1.9e-6 relative in one call, 4e-7 in blocks
// of 4096; bench/NOTES-hostile.md). A block is long enough that the extra passes over C cost
// nothing next to its k FMAs per entry.
constexpr int64_t kSumBlock = 4096;

template <class T>
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* A, int64_t lda,
                 const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t k0 = 0; k0 < k || k0 == 0; k0 += kSumBlock) {
    const int64_t kk = std::min(kSumBlock, k - k0);
    blas_gemm(ta, tb, m, n, kk, alpha, ta ? A + k0 * lda : A + k0, lda, tb ? B + k0 : B + k0 * ldb, ldb,
              k0 == 0 ? beta : T(1), C, ldc);
  }
}

}  // namespace strux::cpu::ks
