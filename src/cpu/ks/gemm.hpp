// Row-major GEMM on float/double for the KS kernels: C = alpha·op(A)·op(B) + beta·C.
// beta == 0 overwrites C without reading it (OpenBLAS's contract), so uninitialised outputs
// are fine and NaN/Inf in old C never leaks in.
#pragma once

#include <cblas.h>

#include <cstdint>

namespace strux::cpu::ks {

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blasint(m), blasint(n), blasint(k), alpha, A, blasint(lda), B, blasint(ldb), beta, C,
              blasint(ldc));
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* A,
                 int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blasint(m), blasint(n), blasint(k), alpha, A, blasint(lda), B, blasint(ldb), beta, C,
              blasint(ldc));
}

}  // namespace strux::cpu::ks
