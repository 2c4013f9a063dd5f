// Private to the toeplitz CPU backend: cblas overloads on T = float / double (real and complex).
#pragma once

#include "cpu/cblas.hpp"

#include <complex>
#include <cstdint>

namespace strux::cpu::toeplitz {

inline void gemv(CBLAS_TRANSPOSE tr, int64_t m, int64_t n, std::complex<float> alpha,
                 const std::complex<float>* a, int64_t lda, const std::complex<float>* x,
                 std::complex<float>* y, std::complex<float> beta = {}) {
  cblas_cgemv(CblasRowMajor, tr, blas_int(m), blas_int(n), &alpha, a, blas_int(lda), x, 1, &beta, y, 1);
}
inline void gemv(CBLAS_TRANSPOSE tr, int64_t m, int64_t n, std::complex<double> alpha,
                 const std::complex<double>* a, int64_t lda, const std::complex<double>* x,
                 std::complex<double>* y, std::complex<double> beta = {}) {
  cblas_zgemv(CblasRowMajor, tr, blas_int(m), blas_int(n), &alpha, a, blas_int(lda), x, 1, &beta, y, 1);
}

inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
                 std::complex<float> alpha, const std::complex<float>* a, int64_t lda,
                 const std::complex<float>* b, int64_t ldb, std::complex<float>* c, int64_t ldc,
                 std::complex<float> beta = {}) {
  cblas_cgemm(CblasRowMajor, ta, tb, blas_int(m), blas_int(n), blas_int(k), &alpha, a, blas_int(lda), b,
              blas_int(ldb), &beta, c, blas_int(ldc));
}
inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
                 std::complex<double> alpha, const std::complex<double>* a, int64_t lda,
                 const std::complex<double>* b, int64_t ldb, std::complex<double>* c, int64_t ldc,
                 std::complex<double> beta = {}) {
  cblas_zgemm(CblasRowMajor, ta, tb, blas_int(m), blas_int(n), blas_int(k), &alpha, a, blas_int(lda), b,
              blas_int(ldb), &beta, c, blas_int(ldc));
}

// Real row-major C = A B (+ beta C).
inline void gemm_real(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(m), blas_int(n), blas_int(k), 1.0f, a,
              blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}
inline void gemm_real(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                      int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(m), blas_int(n), blas_int(k), 1.0, a,
              blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

}  // namespace strux::cpu::toeplitz
