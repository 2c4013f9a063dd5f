// Small out-of-place transposes for the batch-size-first gather/scatter:
//   dst[q·ldd + r] = src[r·lds + q]   for r < R, q < C.
// The build targets x86-64-v2, so the bulk moves in SSE register blocks (4×4 float, 2×2
// double); the scalar loop that GCC makes of the plain version is 3–5× slower for d = 4..16
// and was the largest cost of the whole product.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace strux::cpu::ks {

template <class T>
inline void transpose_scalar(const T* src, int64_t lds, T* dst, int64_t ldd, int64_t r0, int64_t r1,
                             int64_t q0, int64_t q1) {
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t r = r0; r < r1; ++r) dst[q * ldd + r] = src[r * lds + q];
}

inline void transpose(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t R, int64_t C) {
  const int64_t R4 = R & ~int64_t(3), C4 = C & ~int64_t(3);
  for (int64_t r = 0; r < R4; r += 4)
    for (int64_t q = 0; q < C4; q += 4) {
      const float* s = src + r * lds + q;
      __m128 a0 = _mm_loadu_ps(s), a1 = _mm_loadu_ps(s + lds), a2 = _mm_loadu_ps(s + 2 * lds),
             a3 = _mm_loadu_ps(s + 3 * lds);
      _MM_TRANSPOSE4_PS(a0, a1, a2, a3);
      float* t = dst + q * ldd + r;
      _mm_storeu_ps(t, a0);
      _mm_storeu_ps(t + ldd, a1);
      _mm_storeu_ps(t + 2 * ldd, a2);
      _mm_storeu_ps(t + 3 * ldd, a3);
    }
  transpose_scalar(src, lds, dst, ldd, 0, R, C4, C);   // right edge, all rows
  transpose_scalar(src, lds, dst, ldd, R4, R, 0, C4);  // bottom edge
}

inline void transpose(const double* src, int64_t lds, double* dst, int64_t ldd, int64_t R, int64_t C) {
  const int64_t R2 = R & ~int64_t(1), C2 = C & ~int64_t(1);
  for (int64_t r = 0; r < R2; r += 2)
    for (int64_t q = 0; q < C2; q += 2) {
      const double* s = src + r * lds + q;
      const __m128d a0 = _mm_loadu_pd(s), a1 = _mm_loadu_pd(s + lds);
      double* t = dst + q * ldd + r;
      _mm_storeu_pd(t, _mm_unpacklo_pd(a0, a1));
      _mm_storeu_pd(t + ldd, _mm_unpackhi_pd(a0, a1));
    }
  transpose_scalar(src, lds, dst, ldd, 0, R, C2, C);
  transpose_scalar(src, lds, dst, ldd, R2, R, 0, C2);
}

}  // namespace strux::cpu::ks
