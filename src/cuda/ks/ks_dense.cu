// The dense ks path (KsPath::dense; private to src/cuda/ks): expand W into the dense K, then one
// cuBLAS GEMM (the GEMM dense F.linear runs).
//
// Why: for tiny a*d (1-8) the ks product is a*d GEMMs of b x c blocks on strided columns, and
// every ks path pays for the strides (the tr path two transposition passes over x and y, the
// fused kernels partial sectors); the dense K costs a*d times the FLOPs but one tensor-core GEMM
// on contiguous x and y. On the H100, bf16 batch-first rows with a*d <= 6 ran ~2x slower than
// dense F.linear (bench/NOTES-gpu-ks-scan.md "ks-path-rule", whole-list sample). Forced only
// until a GPU run decides a rule ("ks-dense").
//
// K is stored row-major M x N (M = a*b*d, N = a*c*d), i.e. cuBLAS's column-major N x M matrix
// K^T with ld N: batch-first forward is then F.linear's own GEMM (op(A) = T), dx the same matrix
// untransposed. One kernel writes every entry of K (no separate zero pass): by DESIGN.md,
//   K[i*b*d + k*d + j, i*c*d + l*d + j] = w[i, k, l, j], every other entry 0,
// i.e. for row r = (i*b + k)*d + j and u = col - i*c*d:
//   K[r, col] = w_flat[(i*b + k)*c*d + u]  if 0 <= u < c*d and u % d == j  (u = l*d + j), else 0,
// since w_flat[((i*b + k)*c + l)*d + j] = w_flat[(i*b + k)*c*d + l*d + j].
//
// Precision: float32 runs float32 FMA GEMMs (the ks_blas.cu handle: CUBLAS_DEFAULT_MATH, no TF32,
// CUBLAS_COMPUTE_32F); float16 / bfloat16 run GemmEx on tensor cores with float32 accumulation and
// no reduced-precision reductions, output rounded to the input type. The zeros of K are exact, so
// every output is the ks sum plus exact zeros; but a NaN or infinity in x (dy) reaches every output
// of its batch entry (0 * inf = NaN), not only its group's (the ks paths' behaviour).
//
// Workspace: K lives in the weight buffer of ks_blas.cu (per thread and device, grown by
// blas_reserve at plan construction, ordered across streams by blas_res / buffers_done); it is
// rebuilt on every call, because w is an argument of the call (2*M*N*es bytes of traffic: small
// next to x and y wherever the path is meant to run).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/check.hpp"
#include "cuda/ks/ks_blas.hpp"
#include "cuda/ks/ks_dense.hpp"

namespace strux::cuda::ks {
namespace {

constexpr int kThreads = 256;

// K (M x N, row-major) from w (a, b, c, d): one block per row r (grid-stride), its threads along
// the row's N columns (coalesced stores). T: float, or uint16_t carrying a half type's bits (the
// all-zero pattern is +0 in float16 and bfloat16). Every index < M*N <= 2^28: ints.
template <class T>
__global__ void __launch_bounds__(kThreads) expand_k(const T* __restrict__ w, T* __restrict__ k_out,
                                                     int a, int b, int c, int d) {
  const int M = a * b * d, N = a * c * d, cd = c * d;
  for (int r = blockIdx.x; r < M; r += gridDim.x) {
    const int j = r % d, k = (r / d) % b, i = r / (b * d);  // r = (i*b + k)*d + j
    const T* wr = w + (i * b + k) * cd;                      // wr[l*d + j] = w[i, k, l, j]
    T* row = k_out + r * N;                                  // (int: r*N < M*N <= 2^28)
    const int base = i * cd;                                 // the row's block: columns i*c*d + u
    for (int col = threadIdx.x; col < N; col += blockDim.x) {
      const int u = col - base;
      row[col] = (u >= 0 && u < cd && u % d == j) ? wr[u] : T(0);
    }
  }
}

bool fits_int(int64_t v) { return v >= 0 && v < (int64_t(1) << 31); }

}  // namespace

bool dense_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch) {
  if (!(a >= 1 && b >= 1 && c >= 1 && d >= 1 && fits_int(batch))) return false;
  // M*N = (a*b*d)*(a*c*d) without int64 overflow: every product below multiplies two values
  // already checked to be <= 2^28
  const int64_t lim = kDenseMaxElems;
  if (a > lim || d > lim || a * d > lim || b > lim || c > lim) return false;
  const int64_t M = a * d * b, N = a * d * c;
  return M <= lim && N <= lim && M * N <= lim;
}

int64_t dense_bytes(int64_t a, int64_t b, int64_t c, int64_t d, int64_t es) {
  return (a * b * d) * (a * c * d) * es;
}

void dense_prod(const void* x, const void* w, void* y, DType dt, int64_t a, int64_t b, int64_t c,
                int64_t d, int64_t batch, bool bl, bool adjoint, cudaStream_t s) {
  check_arg(dense_applies(a, b, c, d, batch), "plan", "ks dense path: sizes out of range");
  BlasRes& r = blas_res(s);  // the handle on s, after the buffers' last use on another stream
  const int64_t es = int64_t(elem_bytes(dt));
  const int64_t M = a * b * d, N = a * c * d;
  check_arg(r.wcap >= M * N * es, "plan", "ks dense weight buffer not reserved");
  // 1. K in the weight buffer, row-major M x N (column-major: K^T, ld N)
  const int threads = int(std::min<int64_t>(kThreads, (N + 31) / 32 * 32));
  const int blocks = int(std::min<int64_t>(M, 65536));
  if (es == 4)
    expand_k<<<blocks, threads, 0, s>>>(static_cast<const float*>(w), static_cast<float*>(r.wbuf),
                                        int(a), int(b), int(c), int(d));
  else
    expand_k<<<blocks, threads, 0, s>>>(static_cast<const uint16_t*>(w),
                                        static_cast<uint16_t*>(r.wbuf), int(a), int(b), int(c),
                                        int(d));
  STRUX_LAUNCH("ks expand_k");
  // 2. One GEMM, column-major terms (row-major A (p x q) = column-major A^T (q x p)); Kc is the
  // buffer as column-major N x M (= K^T, ld N), so op T gives K:
  //   batch-first forward: y^T (M x batch, ld M) = K (T of Kc) x^T (N x batch, ld N)
  //   batch-first dx:     dx^T (N x batch, ld N) = K^T (Kc)    dy^T (M x batch, ld M)
  //   batch-last forward: y^T (batch x M, ld batch) = x^T (batch x N, ld batch) K^T (Kc)
  //   batch-last dx:     dx^T (batch x N, ld batch) = dy^T (batch x M, ld batch) K (T of Kc)
  const int iM = int(M), iN = int(N), ib = int(batch);
  const int in = adjoint ? iM : iN, out = adjoint ? iN : iM;  // x's and y's row lengths
  const cublasOperation_t kop = adjoint ? CUBLAS_OP_N : CUBLAS_OP_T;  // K^T or K (batch-first)
  const cudaDataType ty = blas_type(dt);
  const float one = 1.f, zero = 0.f;  // beta 0: y is not read (it may hold anything)
  if (!bl)
    STRUX_CUBLAS(cublasGemmEx(r.h, kop, CUBLAS_OP_N, out, ib, in, &one, r.wbuf, ty, iN, x, ty, in,
                              &zero, y, ty, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  else  // x^T K^T (forward) or dy^T K (dx): the K operand's op is the opposite of batch-first's
    STRUX_CUBLAS(cublasGemmEx(r.h, CUBLAS_OP_N, adjoint ? CUBLAS_OP_T : CUBLAS_OP_N, ib, out, in,
                              &one, x, ty, ib, r.wbuf, ty, iN, &zero, y, ty, ib,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace strux::cuda::ks
