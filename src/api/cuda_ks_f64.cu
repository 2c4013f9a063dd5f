// float64 Kronecker-sparse products on the GPU (see cuda_ks_f64.hpp).
#include <algorithm>

#include "api/cuda_ks_f64.hpp"
#include "api/cuda_util.cuh"

namespace strux::api {
namespace {

constexpr int kThreads = 256;

// Output row r = (i, p, j) of a·P·d rows sums over q < Q: forward P = b, Q = c, weight w[i, p, q, j];
// trans P = c, Q = b, weight w[i, q, p, j]. Input feature (i, q, j) = i·Q·d + q·d + j.
__global__ void ks_apply_kernel(const double* in, const double* w, double* out, int64_t a, int64_t b, int64_t c,
                                int64_t d, int64_t batch, bool bl, bool trans) {
  const int64_t P = trans ? c : b, Q = trans ? b : c;
  const int64_t rows = a * P * d, feats = a * Q * d, total = rows * batch;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    // Consecutive threads write consecutive outputs in either layout.
    const int64_t r = bl ? e / batch : e % rows, t = bl ? e % batch : e / rows;
    const int64_t i = r / (P * d), p = (r / d) % P, j = r % d;
    double s = 0;
    for (int64_t q = 0; q < Q; ++q) {
      const int64_t wi = trans ? ((i * b + q) * c + p) * d + j : ((i * b + p) * c + q) * d + j;
      const int64_t f = (i * Q + q) * d + j;
      s += w[wi] * in[bl ? f * batch + t : t * feats + f];
    }
    out[e] = s;
  }
}

// One block per weight (i, k, l, j): the batch sum of dy[., (i, k, j)] · x[., (i, l, j)].
__global__ void ks_dw_kernel(const double* dy, const double* x, double* dw, int64_t a, int64_t b, int64_t c,
                             int64_t d, int64_t batch, bool bl) {
  __shared__ double part[kThreads];
  const int64_t M = a * b * d, N = a * c * d, nnz = a * b * c * d;
  for (int64_t e = blockIdx.x; e < nnz; e += gridDim.x) {
    const int64_t j = e % d, l = (e / d) % c, k = (e / (c * d)) % b, i = e / (b * c * d);
    const int64_t r = (i * b + k) * d + j, f = (i * c + l) * d + j;
    double s = 0;
    for (int64_t t = threadIdx.x; t < batch; t += blockDim.x)
      s += dy[bl ? r * batch + t : t * M + r] * x[bl ? f * batch + t : t * N + f];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int h = kThreads / 2; h > 0; h /= 2) {
      if (int(threadIdx.x) < h) part[threadIdx.x] += part[threadIdx.x + h];
      __syncthreads();
    }
    if (threadIdx.x == 0) dw[e] = part[0];
    __syncthreads();  // part[] is reused by the next weight
  }
}

}  // namespace

void ks_apply_f64(const KSPattern& q, int64_t batch, bool bl, bool trans, const double* in, const double* w,
                  double* out, Stream s) {
  const int64_t total = (trans ? q.cols() : q.rows()) * batch;
  const unsigned grid = unsigned(std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(1) << 20));
  ks_apply_kernel<<<grid, kThreads, 0, stream_of(s)>>>(in, w, out, q.a, q.b, q.c, q.d, batch, bl, trans);
  STRUX_LAUNCH("ks_apply_f64");
}

void ks_dw_f64(const KSPattern& q, int64_t batch, bool bl, const double* dy, const double* x, double* dw, Stream s) {
  const unsigned grid = unsigned(std::min<int64_t>(q.nnz(), int64_t(1) << 20));
  ks_dw_kernel<<<grid, kThreads, 0, stream_of(s)>>>(dy, x, dw, q.a, q.b, q.c, q.d, batch, bl);
  STRUX_LAUNCH("ks_dw_f64");
}

}  // namespace strux::api
