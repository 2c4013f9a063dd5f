// ks products and weight gradients through cuBLAS on strided views (ks_blas.cu, ks_blas_dw.cu;
// private to src/cuda/ks). float32, float16 and bfloat16: halves run GemmEx on tensor cores
// with float32 accumulation.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "strux/cuda/common.hpp"  // DType

namespace strux::cuda::ks {

// One cuBLAS handle, workspace and the plans' buffers per (host thread, device), created on
// first use and kept for the life of the process (ks_blas.cu).
struct BlasRes {
  cublasHandle_t h = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  void* wbuf = nullptr;  // re-laid-out weights (forward / backward_x)
  int64_t wcap = 0;      // bytes
  float* dwbuf = nullptr;  // dw partial sums (backward_w)
  int64_t dwcap = 0;       // floats
  // Cross-stream order of the shared buffers (see blas_res): the stream of the last call.
  cudaStream_t last = nullptr;
  bool recorded = false;  // ev marks the end of the last call's use (buffers_done)
  cudaEvent_t ev = nullptr;
};
// The calling thread's resources for the current device, the handle bound to stream s. Every
// call that touches these buffers (or the transposition buffer of ks_tr.cu) takes them through
// here BEFORE enqueueing work: a call on another stream than the previous call first makes s
// wait for the work already queued on that stream, so shared buffers are never rewritten under
// a reader (two streams used from one thread stay correct; one stream costs nothing).
BlasRes& blas_res(cudaStream_t s);
// After the last launch of a call that took the buffers through blas_res(s): records the end of
// that use on s, which the next call on another stream waits for.
void buffers_done(cudaStream_t s);
cudaDataType blas_type(DType dt);
size_t elem_bytes(DType dt);

// Whether the strided-view cuBLAS product applies: batch-last any d, batch-first d == 1, all
// sizes within cuBLAS's int arguments.
bool blas_applies(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool batch_last);
// Makes the calling thread's cuBLAS resources for the current device and grows its buffers to
// at least w_bytes (weights) and dw_floats (dw partial sums); allocates, so it is called at plan
// construction only.
void blas_reserve(int64_t w_bytes, int64_t dw_floats);
// y = x K'^T or K' x for pattern (a, b, c, d), weight strides (si, sk, sl, sj); launches only.
void blas_prod(const void* x, const void* w, void* y, DType dt, int64_t a, int64_t b, int64_t c,
               int64_t d, int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj,
               bool batch_last, cudaStream_t s);

// backward_w on cuBLAS (ks_blas_dw.cu). The batch sum is cut into chunks of `chunk` rows (the
// last may be shorter); each chunk's per-group product goes to its own slot of partial sums,
// and one small kernel adds the slots into dw32 in its (a, b, c, d) layout.
// The chunk length for a plan: bounds the float32 rounding error of one accumulation (~u sqrt
// (chunk)) and the partial-sum buffer (chunks * a*b*c*d floats, 64 MiB at most).
int64_t blas_dw_chunk(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, DType dt);
// Floats of buffer (partial sums and GEMM pointers) that blas_dw needs for this chunk (0: it
// writes dw32 directly).
int64_t blas_dw_floats(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, int64_t chunk);
// dw32[i,k,l,j] += sum_n dy[., row(i,k,j)] x[., col(i,l,j)]; launches only. Batch-first with
// d > 1 (only from ks_tr.cu's tr_dw): x and dy are the in-row transposed x'[n][i][j][l] and
// dy'[n][i][j][k], i.e. the batch-first d == 1 layout of a*d groups g = i*d + j. ptr_arrays: the
// GEMMs that one strided-batched call cannot cover go as one pointer-array call (else a host
// loop of strided-batched calls).
void blas_dw(const void* x, const void* dy, float* dw32, DType dt, int64_t a, int64_t b,
             int64_t c, int64_t d, int64_t batch, int64_t chunk, bool batch_last, bool ptr_arrays,
             cudaStream_t s);

// For the batch-first d > 1 path (ks_tr.cu; its handle: blas_res): w re-laid out as
// group-major a*d matrices w'[((i*d + j)*b + k)*c + l] = w[i*si + k*sk + l*sl + j*sj] (in w's
// type dt) in the weight buffer blas_reserve sized (launches one small kernel on s; returns the
// buffer).
const void* blas_group_weights(const void* w, DType dt, int64_t a, int64_t b, int64_t c,
                               int64_t d, int64_t si, int64_t sk, int64_t sl, int64_t sj,
                               cudaStream_t s);

}  // namespace strux::cuda::ks
