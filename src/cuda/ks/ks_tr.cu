// float32 batch-first ks product with d > 1 (private to src/cuda/ks): transposition + cuBLAS.
//
// Why: batch-first group (i, j) reads x columns (i*c + l)*d + j and writes y columns
// (i*b + k)*d + j, stride d on both sides, so no BLAS layout expresses it and the fused kernel
// reads/writes partial sectors. Here each row's (i) segment is transposed instead:
//   1. x'[n][i][j][l] = x[n][i][l][j]   (segment (n, i): c x d -> d x c; a workspace buffer)
//   2. one strided-batched SGEMM over the a*d groups g = i*d + j: Y'_g (batch x b, ld a*b*d,
//      group stride b) = X'_g (ld a*c*d, group stride c) W'_g^T, written INTO y's memory as
//      y'[n][i][j][k] (each row's segment has the same length a*b*d)
//   3. y[n][i][k][j] = y'[n][i][j][k] in place (segment: d x b -> b x d; a block reads its whole
//      segments into shared memory before writing them back).
// Steps 1 and 3 are row-local, contiguous on both sides (16-byte accesses, full sectors): they
// run at copy bandwidth (H200: ~4 TB/s), so they move the same extra bytes as bmm's permutations
// in ~0.6x the time (96 vs 151 us at (1,768,192,2); bench/NOTES-gpu-ks-scan.md, ks v5b).
// Measured and dropped: pipelining batch chunks over a side stream (the passes did not overlap
// the SGEMM, whose blocks fill the SMs; each chunk only added an SGEMM tail). The batch is cut
// into chunks only to cap the x' workspace (kWsFloats).
//
// The x' buffer is per (host thread, device), created on first use and kept for the process
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
constexpr int kMaxSegFloats = 12288;  // one segment (padded) per block at most: 48 KB of smem
constexpr int kBlockFloats = 4096;    // several small segments per block up to this
constexpr int64_t kWsFloats = int64_t(1) << 26;  // x' workspace cap: 256 MB (then batch chunks)

int64_t cdiv_tr(int64_t x, int64_t y) { return (x + y - 1) / y; }
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
int pick_qs(int P, int Q) {
  if (P >= 32) return Q | 1;
  const int want = (32 + P - 1) / P;
  int qs = Q;
  while (qs % 32 != want % 32) ++qs;
  return qs;
}

// out[s][q][p] = in[s][p][q] for nseg segments of P x Q floats, spb segments per block; in may
// equal out (each block reads all of its segments before writing any). V4: 16-byte global loads
// and stores (P*Q % 4 == 0, both pointers 16-byte aligned), four of them in flight per thread.
// ROLE only names the pass in profiles (0: x -> x', 1: y' -> y).
template <bool V4, int ROLE>
__global__ void __launch_bounds__(kThreads) seg_transpose(const float* in, float* out,
                                                          int64_t nseg, int spb, int P, int Q,
                                                          int QS, FastDiv fq, FastDiv fp) {
  extern __shared__ float sm[];
  const int64_t s0 = int64_t(blockIdx.x) * spb;
  const int ns = int(min(int64_t(spb), nseg - s0));
  const int PQ = P * Q, n = ns * PQ;
  const float* src = in + s0 * PQ;
  float* dst = out + s0 * PQ;
  // Read: element e = r*Q + q of row r = s*P + p lands at sm[r*QS + q].
  const auto put = [&](int e, float v) {
    const int r = fdiv(e, fq);
    sm[r * QS + (e - r * Q)] = v;
  };
  // Write: element e = R*P + p of output row R = s*Q + q is (s, p, q) of the input.
  const auto get = [&](int e) {
    const int R = fdiv(e, fp), p = e - R * P;
    const int s = fdiv(R, fq), q = R - s * Q;
    return sm[(s * P + p) * QS + q];
  };
  if constexpr (V4) {
    const int n4 = n >> 2;
    const float4* src4 = reinterpret_cast<const float4*>(src);
    for (int v0 = threadIdx.x; v0 < n4; v0 += 4 * kThreads) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int vi = v0 + u * kThreads;
        if (vi < n4) v[u] = src4[vi];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int vi = v0 + u * kThreads;
        if (vi < n4) {
          put(4 * vi, v[u].x);
          put(4 * vi + 1, v[u].y);
          put(4 * vi + 2, v[u].z);
          put(4 * vi + 3, v[u].w);
        }
      }
    }
    __syncthreads();
    float4* dst4 = reinterpret_cast<float4*>(dst);
    for (int vi = threadIdx.x; vi < n4; vi += kThreads)
      dst4[vi] = make_float4(get(4 * vi), get(4 * vi + 1), get(4 * vi + 2), get(4 * vi + 3));
  } else {
    for (int e0 = threadIdx.x; e0 < n; e0 += 4 * kThreads) {
      float v[4];
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

template <int ROLE>
void launch_seg_transpose(const float* in, float* out, int64_t nseg, int64_t P, int64_t Q,
                          cudaStream_t s) {
  const int qs = pick_qs(int(P), int(Q));
  const int seg = int(P) * qs;
  const int spb = std::max(1, kBlockFloats / seg);
  const size_t smem = size_t(spb) * seg * sizeof(float);
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool v4 = (P * Q) % 4 == 0 && al(in) && al(out);
  const unsigned blocks = unsigned(cdiv_tr(nseg, spb));
  const FastDiv fq = make_fastdiv(uint32_t(Q)), fp = make_fastdiv(uint32_t(P));
  if (v4)
    seg_transpose<true, ROLE><<<blocks, kThreads, smem, s>>>(in, out, nseg, spb, int(P), int(Q),
                                                             qs, fq, fp);
  else
    seg_transpose<false, ROLE><<<blocks, kThreads, smem, s>>>(in, out, nseg, spb, int(P), int(Q),
                                                              qs, fq, fp);
  STRUX_LAUNCH("ks seg_transpose");
}

struct TrRes {
  float* buf = nullptr;
  int64_t cap = 0;
};

TrRes& tr_res() {
  thread_local std::unordered_map<int, TrRes> per_dev;
  int dev = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  return per_dev[dev];
}

}  // namespace

bool tr_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool bl) {
  if (bl || d < 2) return false;
  if (!(fits_int_tr(b) && fits_int_tr(c) && fits_int_tr(d) && fits_int_tr(batch))) return false;
  if (!fits_int_tr(a * b * d) || !fits_int_tr(a * c * d) || !fits_int_tr(a * d)) return false;
  // x segments c x d (padded rows d -> QS) and y segments d x b in one block's shared memory.
  const auto fits = [](int64_t P, int64_t Q) {
    return P * Q <= kMaxSegFloats && P * pick_qs(int(P), int(Q)) <= kMaxSegFloats;
  };
  return fits(c, d) && fits(d, b);
}

int64_t tr_reserve(int64_t a, int64_t cin, int64_t d, int64_t batch) {
  TrRes& r = tr_res();
  const int64_t row = a * cin * d;
  // Passes of equal size (no short last SGEMM).
  const int64_t cap_rows = std::max<int64_t>(1, kWsFloats / row);
  const int64_t rows = cdiv_tr(batch, cdiv_tr(batch, cap_rows));
  const int64_t need = rows * row;
  if (need > r.cap) {
    if (r.buf) STRUX_CUDA(cudaFree(r.buf));  // (synchronises: no call still reads it)
    r.buf = nullptr;
    r.cap = 0;
    STRUX_CUDA(cudaMalloc(&r.buf, size_t(need) * sizeof(float)));
    r.cap = need;
  }
  return rows;
}

void tr_prod(const float* x, const float* w, float* y, int64_t a, int64_t b, int64_t c, int64_t d,
             int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj, int64_t rows,
             cudaStream_t s) {
  TrRes& r = tr_res();
  const int64_t N = a * c * d, M = a * b * d;
  check_arg(rows >= 1 && r.cap >= std::min(rows, batch) * N, "plan",
            "ks transposition buffer not reserved");
  cublasHandle_t h = blas_res(s).h;  // bound to s, with its workspace
  const float* wp = blas_group_weights(w, a, b, c, d, si, sk, sl, sj, s);  // [i*d + j][k][l]
  const float one = 1.f, zero = 0.f;
  for (int64_t n0 = 0; n0 < batch; n0 += rows) {
    const int64_t nr = std::min(rows, batch - n0);
    float* yt = y + n0 * M;
    // 1. x[n][i][l][j] -> x'[n][i][j][l]
    launch_seg_transpose<0>(x + n0 * N, r.buf, nr * a, c, d, s);
    // 2. Column-major: C = Y'_g^T (b x nr, ld a*b*d), op(A) = W'_g (b x c, stored l-fastest:
    // ld c, transposed), B = X'_g^T (c x nr, ld a*c*d); g = i*d + j at strides b*c, c, b.
    STRUX_CUBLAS(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, int(b), int(nr), int(c),
                                           &one, wp, int(c), b * c, r.buf, int(N), c, &zero, yt,
                                           int(M), b, int(a * d)));
    // 3. y'[n][i][j][k] -> y[n][i][k][j], in place
    launch_seg_transpose<1>(yt, yt, nr * a, d, b, s);
  }
}

}  // namespace strux::cuda::ks
