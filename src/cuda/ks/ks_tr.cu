// Batch-first ks products with d > 1 (private to src/cuda/ks): transposition + cuBLAS.
//
// Why: batch-first group (i, j) reads x columns (i*c + l)*d + j and writes y columns
// (i*b + k)*d + j, stride d on both sides, so no BLAS layout expresses it and the fused kernel
// reads/writes partial sectors. Here each row's (i) segment is transposed instead:
//   1. x'[n][i][j][l] = x[n][i][l][j]   (segment (n, i): c x d -> d x c; a workspace buffer)
//   2. one strided-batched GEMM over the a*d groups g = i*d + j: Y'_g (batch x b, ld a*b*d,
//      group stride b) = X'_g (ld a*c*d, group stride c) W'_g^T, written INTO y's memory as
//      y'[n][i][j][k] (each row's segment has the same length a*b*d)
//   3. y[n][i][k][j] = y'[n][i][j][k] in place (segment: d x b -> b x d; a block reads its whole
//      segments into shared memory before writing them back).
// Steps 1 and 3 are row-local, contiguous on both sides (16-byte accesses, full sectors): they
// run at copy bandwidth, so they move the same extra bytes as bmm's permutations in ~0.6x the
// time (measured: bench/NOTES-gpu-ks-scan.md#ks-tr).
// float32 runs SGEMM; float16 / bfloat16 run GemmEx with float32 accumulation (the handle of
// ks_blas.cu: no reduced-precision reductions); the passes move 2-byte elements as bit copies,
// still 16 bytes (8 elements) per global access.
// backward_w: x -> x' as in step 1 and dy -> dy'[n][i][j][k] (segment b x d -> d x b),
// so group g's columns are contiguous in both, i.e. the batch-first d == 1 layout of a*d groups:
// ks::blas_dw sums them in chunks (float32 partial slots) and adds into dw32 at (i, k, l, j).
// dx and dw together (tr_backward): dy' is the dx GEMM's transposed input too, so a backward
// transposes dy once (saves 2|dy| bytes of traffic over backward_x + backward_w).
// Measured and dropped: pipelining batch chunks over a side stream (the passes did not overlap
// the SGEMM, whose blocks fill the SMs; each chunk only added an SGEMM tail). The batch is cut
// into passes only to cap the workspace (kWsBytes).
//
// The buffer is per (host thread, device), created on first use and kept for the process
// (like ks_blas.cu's handle and weight buffer): calls of one thread on different streams at once
// would share it (as they share the cuBLAS weight buffer).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "cuda/check.hpp"
#include "cuda/ks/ks_blas.hpp"
#include "cuda/ks/ks_tr.hpp"

namespace strux::cuda::ks {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSmemDefault = 48 * 1024;  // dynamic smem without the opt-in attribute
constexpr int kBlockBytes = 16384;   // several small segments per block up to this
constexpr int64_t kWsBytes = int64_t(1) << 28;  // workspace cap: 256 MB (then batch passes)
constexpr int64_t kAlign = 256;                 // the dw buffer's second region starts aligned

int64_t cdiv_tr(int64_t x, int64_t y) { return (x + y - 1) / y; }

// The most shared memory one block may opt in to on the current device.
int64_t smem_optin_tr() {
  int dev = 0, v = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return v;
}
bool fits_int_tr(int64_t v) { return v >= 0 && v < (int64_t(1) << 31); }

// n / d for 0 <= n < 2^31 as (umulhi(n, m) + n) >> s (round-up multiplier, Granlund-Montgomery):
// the transposition kernels divide every element index by runtime P and Q.
struct FastDiv {
  uint32_t m, s;
};
FastDiv make_fastdiv(uint32_t d) {
  uint32_t s = 0;
  while ((uint64_t(1) << s) < d) ++s;
  const uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << s) - d)) / d + 1;
  return {uint32_t(m), s};
}
__device__ __forceinline__ int fdiv(int n, FastDiv f) {
  return int((__umulhi(uint32_t(n), f.m) + uint32_t(n)) >> f.s);
}

// The padded row length QS >= Q of a P x Q segment in shared memory. The write phase reads
// (p, q) at p*QS + q with p fastest across a warp (about 32/P values of q per p when P < 32):
// QS = 32/P (mod 32) puts each p's run of q in its own banks; for P >= 32 an odd QS does.
// (Tuned for 4-byte elements; 2-byte ones use the same padding.)
int pick_qs(int P, int Q) {
  if (P >= 32) return Q | 1;
  const int want = (32 + P - 1) / P;
  int qs = Q;
  while (qs % 32 != want % 32) ++qs;
  return qs;
}

// 16 bytes as VEC elements of T (float or a 2-byte bit pattern).
template <class T>
union Vec16 {
  uint4 u;
  T e[16 / sizeof(T)];
};

// out[s][q][p] = in[s][p][q] for nseg segments of P x Q elements, spb segments per block; in may
// equal out (each block reads all of its segments before writing any). VEC: 16-byte global loads
// and stores (P*Q a multiple of 16 bytes, both pointers 16-byte aligned), four of them in flight
// per thread. T: float or uint16_t (half types as bit copies). ROLE only names the pass in
// profiles (0: x -> x', 1: y' -> y, 2: dy -> dy').
template <class T, bool VEC, int ROLE>
__global__ void __launch_bounds__(kThreads) seg_transpose(const T* in, T* out, int64_t nseg,
                                                          int spb, int P, int Q, int QS,
                                                          FastDiv fq, FastDiv fp) {
  extern __shared__ __align__(16) unsigned char smraw[];
  T* sm = reinterpret_cast<T*>(smraw);
  const int64_t s0 = int64_t(blockIdx.x) * spb;
  const int ns = int(min(int64_t(spb), nseg - s0));
  const int PQ = P * Q, n = ns * PQ;
  const T* src = in + s0 * PQ;
  T* dst = out + s0 * PQ;
  // Read: element e = r*Q + q of row r = s*P + p lands at sm[r*QS + q].
  const auto put = [&](int e, T v) {
    const int r = fdiv(e, fq);
    sm[r * QS + (e - r * Q)] = v;
  };
  // Write: element e = R*P + p of output row R = s*Q + q is (s, p, q) of the input.
  const auto get = [&](int e) {
    const int R = fdiv(e, fp), p = e - R * P;
    const int s = fdiv(R, fq), q = R - s * Q;
    return sm[(s * P + p) * QS + q];
  };
  if constexpr (VEC) {
    constexpr int V = 16 / sizeof(T);
    const int nv = n / V;
    const uint4* src4 = reinterpret_cast<const uint4*>(src);
    for (int v0 = threadIdx.x; v0 < nv; v0 += 4 * kThreads) {
      Vec16<T> v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int vi = v0 + u * kThreads;
        if (vi < nv) v[u].u = src4[vi];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int vi = v0 + u * kThreads;
        if (vi < nv) {
#pragma unroll
          for (int k = 0; k < V; ++k) put(V * vi + k, v[u].e[k]);
        }
      }
    }
    __syncthreads();
    uint4* dst4 = reinterpret_cast<uint4*>(dst);
    for (int vi = threadIdx.x; vi < nv; vi += kThreads) {
      Vec16<T> o;
#pragma unroll
      for (int k = 0; k < V; ++k) o.e[k] = get(V * vi + k);
      dst4[vi] = o.u;
    }
  } else {
    for (int e0 = threadIdx.x; e0 < n; e0 += 4 * kThreads) {
      T v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int e = e0 + u * kThreads;
        if (e < n) v[u] = src[e];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int e = e0 + u * kThreads;
        if (e < n) put(e, v[u]);
      }
    }
    __syncthreads();
#pragma unroll 4
    for (int e = threadIdx.x; e < n; e += kThreads) dst[e] = get(e);
  }
}

template <class T, int ROLE>
void launch_seg_transpose_t(const void* in_, void* out_, int64_t nseg, int64_t P, int64_t Q,
                            cudaStream_t s) {
  const T* in = static_cast<const T*>(in_);
  T* out = static_cast<T*>(out_);
  const int qs = pick_qs(int(P), int(Q));
  const int seg = int(P) * qs;
  const int spb = std::max<int>(1, kBlockBytes / int(seg * sizeof(T)));
  const size_t smem = size_t(spb) * seg * sizeof(T);
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = (P * Q * int64_t(sizeof(T))) % 16 == 0 && al(in) && al(out);
  const unsigned blocks = unsigned(cdiv_tr(nseg, spb));
  const FastDiv fq = make_fastdiv(uint32_t(Q)), fp = make_fastdiv(uint32_t(P));
  // A segment over 48 KB runs one per block, on opt-in shared memory.
  if (int64_t(smem) > kSmemDefault) {
    const int v = int(smem);
    if (vec)
      STRUX_CUDA(cudaFuncSetAttribute(seg_transpose<T, true, ROLE>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, v));
    else
      STRUX_CUDA(cudaFuncSetAttribute(seg_transpose<T, false, ROLE>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, v));
  }
  if (vec)
    seg_transpose<T, true, ROLE><<<blocks, kThreads, smem, s>>>(in, out, nseg, spb, int(P),
                                                                int(Q), qs, fq, fp);
  else
    seg_transpose<T, false, ROLE><<<blocks, kThreads, smem, s>>>(in, out, nseg, spb, int(P),
                                                                 int(Q), qs, fq, fp);
  STRUX_LAUNCH("ks seg_transpose");
}

// The pass by element size (half types are moved as 2-byte bit patterns).
template <int ROLE>
void launch_seg_transpose(const void* in, void* out, int64_t es, int64_t nseg, int64_t P,
                          int64_t Q, cudaStream_t s) {
  if (es == 4)
    launch_seg_transpose_t<float, ROLE>(in, out, nseg, P, Q, s);
  else
    launch_seg_transpose_t<uint16_t, ROLE>(in, out, nseg, P, Q, s);
}

struct TrRes {
  char* buf = nullptr;
  int64_t cap = 0;  // bytes
};

TrRes& tr_res() {
  thread_local std::unordered_map<int, TrRes> per_dev;
  int dev = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  return per_dev[dev];
}

int64_t round_up(int64_t v, int64_t m) { return cdiv_tr(v, m) * m; }

// Bytes of one padded P x Q segment of es-byte elements in shared memory.
int64_t seg_bytes(int64_t P, int64_t Q, int64_t es) {
  if (P >= (int64_t(1) << 24) || Q >= (int64_t(1) << 24)) return INT64_MAX;
  return P * pick_qs(int(P), int(Q)) * es;
}

bool sizes_ok(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool bl) {
  if (bl || d < 2) return false;
  if (!(fits_int_tr(b) && fits_int_tr(c) && fits_int_tr(d) && fits_int_tr(batch))) return false;
  return fits_int_tr(a * b * d) && fits_int_tr(a * c * d) && fits_int_tr(a * d);
}

}  // namespace

int64_t tr_seg_bytes(int64_t b, int64_t c, int64_t d, int64_t es, bool dw) {
  // product: x segments c x d and y' segments d x b; dw: x segments c x d and dy segments b x d.
  return std::max(seg_bytes(c, d, es), dw ? seg_bytes(b, d, es) : seg_bytes(d, b, es));
}

bool tr_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool bl, int64_t es,
                bool dw) {
  return sizes_ok(a, b, c, d, batch, bl) && tr_seg_bytes(b, c, d, es, dw) <= smem_optin_tr();
}

int64_t tr_reserve(int64_t row_bytes, int64_t batch) {
  TrRes& r = tr_res();
  // Passes of equal size (no short last GEMM).
  const int64_t cap_rows = std::max<int64_t>(1, kWsBytes / row_bytes);
  const int64_t rows = cdiv_tr(batch, cdiv_tr(batch, cap_rows));
  const int64_t need = rows * row_bytes + kAlign;
  if (need > r.cap) {
    if (r.buf) STRUX_CUDA(cudaFree(r.buf));  // (synchronises: no call still reads it)
    r.buf = nullptr;
    r.cap = 0;
    STRUX_CUDA(cudaMalloc(&r.buf, size_t(need)));
    r.cap = need;
  }
  return rows;
}

namespace {
// Steps 2 and 3 for one pass of nr rows: y (nr x a*b*d, written in place) from the transposed
// input xt (nr x a*c*d, rows x'[n][i][j][l]) and the group-major weights wp.
void gemm_and_fix_y(const char* xt, const void* wp, char* yt, DType dt, int64_t a, int64_t b,
                    int64_t c, int64_t d, int64_t nr, cublasHandle_t h, cudaStream_t s) {
  const int64_t es = int64_t(elem_bytes(dt));
  const int64_t N = a * c * d, M = a * b * d;
  const float one = 1.f, zero = 0.f;
  // Column-major: C = Y'_g^T (b x nr, ld a*b*d), op(A) = W'_g (b x c, stored l-fastest: ld c,
  // transposed), B = X'_g^T (c x nr, ld a*c*d); g = i*d + j at strides b*c, c, b.
  if (dt == DType::f32)
    STRUX_CUBLAS(cublasSgemmStridedBatched(
        h, CUBLAS_OP_T, CUBLAS_OP_N, int(b), int(nr), int(c), &one, static_cast<const float*>(wp),
        int(c), b * c, reinterpret_cast<const float*>(xt), int(N), c, &zero,
        reinterpret_cast<float*>(yt), int(M), b, int(a * d)));
  else
    STRUX_CUBLAS(cublasGemmStridedBatchedEx(
        h, CUBLAS_OP_T, CUBLAS_OP_N, int(b), int(nr), int(c), &one, wp, blas_type(dt), int(c),
        b * c, xt, blas_type(dt), int(N), c, &zero, yt, blas_type(dt), int(M), b, int(a * d),
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  // 3. y'[n][i][j][k] -> y[n][i][k][j], in place
  launch_seg_transpose<1>(yt, yt, es, nr * a, d, b, s);
}
}  // namespace

void tr_prod(const void* x, const void* w, void* y, DType dt, int64_t a, int64_t b, int64_t c,
             int64_t d, int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj,
             int64_t rows, cudaStream_t s) {
  TrRes& r = tr_res();
  const int64_t es = int64_t(elem_bytes(dt));
  const int64_t N = a * c * d, M = a * b * d;
  check_arg(rows >= 1 && r.cap >= std::min(rows, batch) * N * es, "plan",
            "ks transposition buffer not reserved");
  cublasHandle_t h = blas_res(s).h;  // bound to s, with its workspace
  const void* wp = blas_group_weights(w, dt, a, b, c, d, si, sk, sl, sj, s);  // [i*d + j][k][l]
  const char* xb = static_cast<const char*>(x);
  char* yb = static_cast<char*>(y);
  for (int64_t n0 = 0; n0 < batch; n0 += rows) {
    const int64_t nr = std::min(rows, batch - n0);
    // 1. x[n][i][l][j] -> x'[n][i][j][l]
    launch_seg_transpose<0>(xb + n0 * N * es, r.buf, es, nr * a, c, d, s);
    gemm_and_fix_y(r.buf, wp, yb + n0 * M * es, dt, a, b, c, d, nr, h, s);
  }
}

namespace {
// The two halves of the dw buffer for passes of `rows` rows: x' at 0, dy' at the returned offset.
int64_t dw_split(int64_t rows, int64_t batch, int64_t N, int64_t M, int64_t es) {
  const int64_t nr0 = std::min(rows, batch);
  const int64_t yoff = round_up(nr0 * N * es, kAlign);
  check_arg(rows >= 1 && tr_res().cap >= yoff + nr0 * M * es, "plan",
            "ks transposition buffer not reserved");
  return yoff;
}
}  // namespace

void tr_dw(const void* x, const void* dy, float* dw32, DType dt, int64_t a, int64_t b, int64_t c,
           int64_t d, int64_t batch, int64_t chunk, int64_t rows, bool ptr_arrays,
           cudaStream_t s) {
  const int64_t es = int64_t(elem_bytes(dt));
  const int64_t N = a * c * d, M = a * b * d;
  const int64_t yoff = dw_split(rows, batch, N, M, es);
  blas_res(s);  // orders this stream after the buffers' last use (before the first launch)
  const char* xb = static_cast<const char*>(x);
  const char* yb = static_cast<const char*>(dy);
  char* xt = tr_res().buf;
  char* yt = xt + yoff;
  for (int64_t n0 = 0; n0 < batch; n0 += rows) {
    const int64_t nr = std::min(rows, batch - n0);
    // x[n][i][l][j] -> x'[n][i][j][l], dy[n][i][k][j] -> dy'[n][i][j][k]
    launch_seg_transpose<0>(xb + n0 * N * es, xt, es, nr * a, c, d, s);
    launch_seg_transpose<2>(yb + n0 * M * es, yt, es, nr * a, b, d, s);
    // group g = i*d + j: columns g*c.. of x' (ld N), g*b.. of dy' (ld M); adds into dw32
    blas_dw(xt, yt, dw32, dt, a, b, c, d, nr, std::min(chunk, nr), false, ptr_arrays, s);
  }
}

void tr_backward(const void* dy, const void* x, const void* w, void* dx, float* dw32, DType dt,
                 int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, int64_t chunk,
                 int64_t rows, bool ptr_arrays, cudaStream_t s) {
  const int64_t es = int64_t(elem_bytes(dt));
  const int64_t N = a * c * d, M = a * b * d;
  const int64_t yoff = dw_split(rows, batch, N, M, es);
  cublasHandle_t h = blas_res(s).h;
  // dx = dy K is the (a, c, b, d) product with w's middle strides swapped: [i*d + j][l][k]
  const void* wp = blas_group_weights(w, dt, a, c, b, d, b * c * d, d, c * d, 1, s);
  const char* xb = static_cast<const char*>(x);
  const char* yb = static_cast<const char*>(dy);
  char* dxb = static_cast<char*>(dx);
  char* xt = tr_res().buf;
  char* yt = xt + yoff;
  for (int64_t n0 = 0; n0 < batch; n0 += rows) {
    const int64_t nr = std::min(rows, batch - n0);
    // dy' once, for both products: the dx GEMM's input and dw's right operand
    launch_seg_transpose<2>(yb + n0 * M * es, yt, es, nr * a, b, d, s);
    gemm_and_fix_y(yt, wp, dxb + n0 * N * es, dt, a, c, b, d, nr, h, s);
    launch_seg_transpose<0>(xb + n0 * N * es, xt, es, nr * a, c, d, s);
    blas_dw(xt, yt, dw32, dt, a, b, c, d, nr, std::min(chunk, nr), false, ptr_arrays, s);
  }
}

}  // namespace strux::cuda::ks
