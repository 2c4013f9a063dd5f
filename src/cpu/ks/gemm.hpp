// Row-major GEMM on float/double for the KS kernels: C = alpha·op(A)·op(B) + beta·C.
// beta == 0 overwrites C without reading it (OpenBLAS's contract), so uninitialised outputs
// are fine and NaN/Inf in old C never leaks in.
#pragma once

#include "cpu/cblas.hpp"

#include <cstdint>

namespace strux::cpu::ks {

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blas_int(m), blas_int(n), blas_int(k), alpha, A, blas_int(lda), B, blas_int(ldb), beta, C,
              blas_int(ldc));
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* A,
                 int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blas_int(m), blas_int(n), blas_int(k), alpha, A, blas_int(lda), B, blas_int(ldb), beta, C,
              blas_int(ldc));
}

}  // namespace strux::cpu::ks
