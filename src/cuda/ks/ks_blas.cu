// ks product through cuBLAS on strided views of x and y (private to src/cuda/ks): no
// permutation pass over x or y. Only the weight is re-laid out (when d > 1) into a per-thread
// buffer sized at plan construction. float32 runs float32 FMA GEMMs (no TF32); float16 /
// bfloat16 run GemmEx on tensor cores with float32 accumulation, output in the input type.
//
// Batch-last: group (i, j)'s input is the c x batch slab x[(i*c + l)*d + j, n] (row stride
// d*batch, unit column stride) and its output the b x batch slab y[(i*b + k)*d + j, n]; in
// cuBLAS's column-major terms Y^T (batch x b, ld d*batch) = X^T (batch x c, ld d*batch) W'^T.
// The a*d groups go as one strided-batched GEMM over the longer of i / j, looped over the
// shorter. Batch-first needs d == 1: x_i is batch x c (ld a*c), y_i batch x b (ld a*b), so
// Y_i^T (b x batch) = W_i X_i^T, one strided-batched GEMM over i. (Batch-first with d > 1 reads
// x with a column stride d: no BLAS layout; ks_tr.cu transposes rows around the GEMM there.)
//
// The handle is in CUBLAS_DEFAULT_MATH (float32 FMA, no TF32) with reduced-precision reductions
// disallowed (a split-K sum of a half GEMM stays in float32), on the caller's stream, with a
// workspace set by us, so a call allocates nothing. One handle + workspace + weight buffer per
// (host thread, device), created on first use and kept for the life of the process (never
// destroyed: destroying at exit can run after the CUDA runtime is gone).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "cuda/check.hpp"
#include "cuda/ks/ks_blas.hpp"

namespace strux::cuda::ks {
namespace {

constexpr size_t kWorkspace = size_t(32) << 20;  // cuBLAS's recommendation for Hopper

// w'[((i*d + j)*b + k)*c + l] = w[i*si + k*sk + l*sl + j*sj] (T: a 4- or 2-byte bit copy).
template <class T>
__global__ void relayout_w(const T* __restrict__ w, T* __restrict__ wp, int64_t a, int64_t b,
                           int64_t c, int64_t d, int64_t si, int64_t sk, int64_t sl, int64_t sj) {
  const int64_t n = a * b * c * d;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = t;
    const int64_t l = r % c;
    r /= c;
    const int64_t k = r % b;
    r /= b;
    const int64_t j = r % d;
    const int64_t i = r / d;
    wp[t] = w[i * si + k * sk + l * sl + j * sj];
  }
}

bool fits_int(int64_t v) { return v >= 0 && v < (int64_t(1) << 31); }

// Whether w can be used in place: d == 1 and one of its matrix strides is 1 with a legal ld.
bool w_in_place(int64_t b, int64_t c, int64_t d, int64_t sk, int64_t sl) {
  if (d != 1) return false;
  if (sl == 1 && sk >= c && fits_int(sk)) return true;
  if (sk == 1 && sl >= b && fits_int(sl)) return true;
  return false;
}

const char* off(const void* p, int64_t elems, size_t es) {
  return static_cast<const char*>(p) + elems * int64_t(es);
}

}  // namespace

namespace {
BlasRes& res_of_device() {
  thread_local std::unordered_map<int, BlasRes*> per_dev;
  int dev = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  BlasRes*& r = per_dev[dev];
  if (!r) {
    auto* n = new BlasRes;
    STRUX_CUBLAS(cublasCreate(&n->h));
    STRUX_CUBLAS(cublasSetMathMode(
        n->h, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    STRUX_CUBLAS(cublasSetPointerMode(n->h, CUBLAS_POINTER_MODE_HOST));
    STRUX_CUDA(cudaMalloc(&n->ws, kWorkspace));
    n->ws_bytes = kWorkspace;
    STRUX_CUDA(cudaEventCreateWithFlags(&n->ev, cudaEventDisableTiming));
    r = n;
  }
  return *r;
}

bool capturing(cudaStream_t s, bool* ok) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  *ok = cudaStreamIsCapturing(s, &st) == cudaSuccess;
  if (!*ok) (void)cudaGetLastError();  // a stream destroyed since: not an error of this call
  return st != cudaStreamCaptureStatusNone;
}

// The buffers (weights, dw partials, cuBLAS workspace, ks_tr's transposition buffer) are one
// set per (thread, device). Work on one stream runs in order; each call that used them records
// an event on its own stream after its last launch (buffers_done), and a call on another stream
// first waits for that event. Only the calling stream is ever queried or recorded on: the
// previous stream may have been destroyed since (the driver faults on a query of a destroyed
// stream), while its event stays valid. Skipped while the calling stream is being captured into
// a CUDA graph (a capture must not depend on outside work; a graph replays in its own order).
void order_after_last_use(BlasRes& r, cudaStream_t s) {
  if (r.recorded && s != r.last) {
    bool ok = false;
    if (!capturing(s, &ok) && ok) STRUX_CUDA(cudaStreamWaitEvent(s, r.ev, 0));
  }
  r.last = s;
}
}  // namespace

void buffers_done(cudaStream_t s) {
  BlasRes& r = res_of_device();
  bool ok = false;
  if (capturing(s, &ok) || !ok) return;
  STRUX_CUDA(cudaEventRecord(r.ev, s));
  r.recorded = true;
}

BlasRes& blas_res(cudaStream_t s) {
  BlasRes& r = res_of_device();
  order_after_last_use(r, s);
  STRUX_CUBLAS(cublasSetStream(r.h, s));
  STRUX_CUBLAS(cublasSetWorkspace(r.h, r.ws, r.ws_bytes));
  return r;
}

cudaDataType blas_type(DType dt) {
  switch (dt) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: throw TypeError(msg("ks cuBLAS: unsupported dtype ", dtype_name(dt)));
  }
}

size_t elem_bytes(DType dt) { return dt == DType::f32 ? 4 : 2; }

bool blas_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool bl) {
  if (!bl && d != 1) return false;
  const int64_t ld = bl ? d * batch : a * std::max(b, c);
  return fits_int(batch) && fits_int(b) && fits_int(c) && fits_int(ld) && fits_int(a * d);
}

void blas_reserve(int64_t w_bytes, int64_t dw_floats) {
  BlasRes& r = res_of_device();
  // (cudaFree synchronises the device: no queued call still reads the old buffer)
  if (w_bytes > r.wcap) {
    if (r.wbuf) STRUX_CUDA(cudaFree(r.wbuf));
    r.wbuf = nullptr;
    r.wcap = 0;
    STRUX_CUDA(cudaMalloc(&r.wbuf, size_t(w_bytes)));
    r.wcap = w_bytes;
  }
  if (dw_floats > r.dwcap) {
    if (r.dwbuf) STRUX_CUDA(cudaFree(r.dwbuf));
    r.dwbuf = nullptr;
    r.dwcap = 0;
    STRUX_CUDA(cudaMalloc(&r.dwbuf, size_t(dw_floats) * sizeof(float)));
    r.dwcap = dw_floats;
  }
}

void blas_prod(const void* x, const void* w, void* y, DType dt, int64_t a, int64_t b, int64_t c,
               int64_t d, int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj, bool bl,
               cudaStream_t s) {
  BlasRes& r = blas_res(s);
  const cudaDataType ty = blas_type(dt);
  const size_t es = elem_bytes(dt);
  // The weight operand: strides (wi, wj, wk, wl) with wk == 1 or wl == 1.
  const void* wp = w;
  int64_t wi = si, wj = sj, wk = sk, wl = sl;
  if (!w_in_place(b, c, d, sk, sl)) {
    wp = blas_group_weights(w, dt, a, b, c, d, si, sk, sl, sj, s);  // [i*d + j][k][l]
    wi = d * b * c, wj = b * c, wk = c, wl = 1;
  }
  const float one = 1.f, zero = 0.f;
  if (bl) {
    // Column-major: C = Y^T (batch x b, ld d*batch), A = X^T (batch x c, ld d*batch),
    // op(B) = W'^T (c x b): element (l, k) at l*wl + k*wk.
    const cublasOperation_t tb = wl == 1 ? CUBLAS_OP_N : CUBLAS_OP_T;
    const int ldb = int(wl == 1 ? wk : wl);
    const int ld = int(d * batch);
    const bool over_j = d >= a;  // the batched index: the longer of j and i
    const int64_t count = over_j ? d : a, loops = over_j ? a : d;
    const long long sx = over_j ? batch : c * d * batch, sy = over_j ? batch : b * d * batch,
                    sw = over_j ? wj : wi;
    for (int64_t o = 0; o < loops; ++o) {
      const int64_t i = over_j ? o : 0, j = over_j ? 0 : o;
      STRUX_CUBLAS(cublasGemmStridedBatchedEx(
          r.h, CUBLAS_OP_N, tb, int(batch), int(b), int(c), &one, off(x, (i * c * d + j) * batch, es),
          ty, ld, sx, off(wp, i * wi + j * wj, es), ty, ldb, sw, &zero,
          const_cast<char*>(off(y, (i * b * d + j) * batch, es)), ty, ld, sy, int(count),
          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  } else {
    // d == 1. Column-major: C = Y_i^T (b x batch, ld a*b), op(A) = W_i (b x c): element (k, l)
    // at k*wk + l*wl, B = X_i^T (c x batch, ld a*c).
    const cublasOperation_t ta = wl == 1 ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int lda = int(wl == 1 ? wk : wl);
    STRUX_CUBLAS(cublasGemmStridedBatchedEx(r.h, ta, CUBLAS_OP_N, int(b), int(batch), int(c), &one,
                                            wp, ty, lda, wi, x, ty, int(a * c), c, &zero, y, ty,
                                            int(a * b), b, int(a), CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
  }
}

const void* blas_group_weights(const void* w, DType dt, int64_t a, int64_t b, int64_t c,
                               int64_t d, int64_t si, int64_t sk, int64_t sl, int64_t sj,
                               cudaStream_t s) {
  BlasRes& r = blas_res(s);
  const int64_t n = a * b * c * d;
  check_arg(r.wcap >= n * int64_t(elem_bytes(dt)), "plan", "ks cuBLAS weight buffer not reserved");
  const int blocks = int(std::min<int64_t>((n + 255) / 256, 4096));
  if (elem_bytes(dt) == 4)
    relayout_w<<<blocks, 256, 0, s>>>(static_cast<const float*>(w), static_cast<float*>(r.wbuf),
                                      a, b, c, d, si, sk, sl, sj);
  else
    relayout_w<<<blocks, 256, 0, s>>>(static_cast<const uint16_t*>(w),
                                      static_cast<uint16_t*>(r.wbuf), a, b, c, d, si, sk, sl, sj);
  STRUX_LAUNCH("ks relayout_w");
  return r.wbuf;
}

}  // namespace strux::cuda::ks
