// float64 block-circulant scans on the GPU (see cuda_block_scan_f64.hpp).
#include <algorithm>

#include "api/cuda_block_scan_f64.hpp"
#include "api/cuda_util.cuh"

namespace strux::api {
namespace {

// State index s = i·k + r; A[i·k + r, j·k + q] = a[i, j, (r - q) mod k].
struct Dims {
  int64_t T, p, k, n;
};

__device__ __forceinline__ int64_t wrap(int64_t x, int64_t k) { return (x % k + k) % k; }

// (A x)[s] for the step's a (p, p, k), or (Aᵀ x)[s] when Transposed. With s = o·k + c and
// x summed over m·k + l: A reads a[o, m, (c - l) mod k], Aᵀ reads a[m, o, (l - c) mod k].
template <bool Transposed>
__device__ double times(const double* at, const double* x, int64_t s, const Dims& d) {
  const int64_t o = s / d.k, c = s % d.k;
  double acc = 0;
  for (int64_t m = 0; m < d.p; ++m)
    for (int64_t l = 0; l < d.k; ++l) {
      const int64_t blk = Transposed ? m * d.p + o : o * d.p + m;
      acc += at[blk * d.k + (Transposed ? wrap(l - c, d.k) : wrap(c - l, d.k))] * x[m * d.k + l];
    }
  return acc;
}

// One block per batch item; shared: the state before and after a step.
__global__ void forward_kernel(Dims d, const double* a, const double* u, const double* h0, double* h) {
  extern __shared__ double sh[];
  double *cur = sh, *nxt = sh + d.n;
  const int64_t b = blockIdx.x, A = d.p * d.p * d.k;
  for (int64_t s = threadIdx.x; s < d.n; s += blockDim.x) cur[s] = h0 ? h0[b * d.n + s] : 0.0;
  __syncthreads();
  for (int64_t t = 0; t < d.T; ++t) {
    const int64_t row = (b * d.T + t) * d.n;
    for (int64_t s = threadIdx.x; s < d.n; s += blockDim.x)
      h[row + s] = nxt[s] = times<false>(a + (b * d.T + t) * A, cur, s, d) + u[row + s];
    __syncthreads();  // nxt complete; cur no longer read, so it takes the next step
    double* tmp = cur;
    cur = nxt;
    nxt = tmp;
  }
}

__global__ void backward_kernel(Dims d, const double* a, const double* h, const double* h0, const double* dh,
                                const double* dh_last, double* da, double* du, double* dh0) {
  extern __shared__ double sh[];
  double *g = sh, *g_next = sh + d.n;  // g_t and g_{t+1}
  const int64_t b = blockIdx.x, A = d.p * d.p * d.k;
  for (int64_t t = d.T - 1; t >= 0; --t) {
    const int64_t row = (b * d.T + t) * d.n;
    for (int64_t s = threadIdx.x; s < d.n; s += blockDim.x) {
      double v = dh[row + s];
      if (t == d.T - 1) {
        if (dh_last) v += dh_last[b * d.n + s];
      } else {
        v += times<true>(a + (b * d.T + t + 1) * A, g_next, s, d);
      }
      g[s] = du[row + s] = v;
    }
    __syncthreads();  // g complete
    // da_t[i, j, m] = Σ_r g_t[i·k + r] h_{t-1}[j·k + (r - m) mod k], h_{-1} = h0 or 0.
    const double* hp = t > 0 ? h + row - d.n : (h0 ? h0 + b * d.n : nullptr);
    for (int64_t e = threadIdx.x; e < A; e += blockDim.x) {
      const int64_t i = e / (d.p * d.k), j = (e / d.k) % d.p, m = e % d.k;
      double acc = 0;
      if (hp)
        for (int64_t r = 0; r < d.k; ++r) acc += g[i * d.k + r] * hp[j * d.k + wrap(r - m, d.k)];
      da[(b * d.T + t) * A + e] = acc;
    }
    // The next step (t - 1) reads g as g_next and writes the other buffer, which no thread reads
    // any more after the barrier above.
    double* tmp = g;
    g = g_next;
    g_next = tmp;
  }
  // After the loop g_next holds g_0.
  if (dh0) {
    __syncthreads();
    for (int64_t s = threadIdx.x; s < d.n; s += blockDim.x)
      dh0[b * d.n + s] = times<true>(a + b * d.T * A, g_next, s, d);
  }
}

unsigned threads_for(int64_t n) { return unsigned(std::min<int64_t>(256, (n + 31) / 32 * 32)); }

template <class K>
void prepare(K kernel, size_t smem) {
  if (smem > 48 * 1024) STRUX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
}

}  // namespace

int64_t block_scan_f64_max_n() {
  int dev = 0, bytes = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return int64_t(bytes) / int64_t(2 * sizeof(double));
}

void block_scan_f64_forward(int64_t B, int64_t T, int64_t p, int64_t k, const double* a, const double* u,
                            const double* h0, double* h, Stream s) {
  const Dims d{T, p, k, p * k};
  const size_t smem = size_t(2 * d.n) * sizeof(double);
  prepare(forward_kernel, smem);
  forward_kernel<<<unsigned(B), threads_for(d.n), smem, stream_of(s)>>>(d, a, u, h0, h);
  STRUX_LAUNCH("block_scan_f64 forward");
}

void block_scan_f64_backward(int64_t B, int64_t T, int64_t p, int64_t k, const double* a, const double* h,
                             const double* h0, const double* dh, const double* dh_last, double* da, double* du,
                             double* dh0, Stream s) {
  const Dims d{T, p, k, p * k};
  const size_t smem = size_t(2 * d.n) * sizeof(double);
  prepare(backward_kernel, smem);
  backward_kernel<<<unsigned(B), threads_for(d.n), smem, stream_of(s)>>>(d, a, h, h0, dh, dh_last, da, du, dh0);
  STRUX_LAUNCH("block_scan_f64 backward");
}

}  // namespace strux::api
