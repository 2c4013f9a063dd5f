// Kronecker-sparse products on NVIDIA GPUs (DESIGN.md "ks").
//
// Pattern (a, b, c, d): K[i*b*d + k*d + j, i*c*d + l*d + j] = w[i, k, l, j].
// One fused output-stationary kernel per factor (Algorithm 2 of Gonon et al.): a thread block
// owns an output tile of one (i, j) group, reads that group's strided input columns straight
// from device memory into shared memory and writes its strided output columns in place; no
// permutation passes. All pointers are device pointers to C-contiguous memory; work goes on
// `stream` (a cudaStream_t, 0 = legacy default).
#pragma once

#include <cstdint>

#include "strux/cuda/common.hpp"  // DType

namespace strux::cuda {


struct KsPattern {
  int64_t a, b, c, d;
};

// How a float32 product (forward or backward_x) runs: the ks tile kernels (tensor-core 3xTF32 /
// FFMA), cuBLAS SGEMM on strided views of x and y, or the batch-last streaming kernel (W held in
// shared memory). Other dtypes always take the kernels.
enum class KsPath { kernels, blas, stream };
const char* ks_path_name(KsPath p);  // "kernels", "blas", "stream"

// A plan for one factor and one batch size / layout. Checks the arguments (ValueError naming
// them) and picks the kernel shape once; execute methods launch only.
class KsPlan {
 public:
  // A product path; tn, stages, mt: the streaming kernel's batch tile, ring depth and m16 tiles
  // per warp item.
  struct Choice {
    KsPath path = KsPath::kernels;
    int tn = 0, stages = 0, mt = 0;
  };

  KsPlan(KsPattern p, int64_t batch, bool batch_last, DType dtype);

  // y = x K^T (batch-first: x (batch, a*c*d) -> y (batch, a*b*d)) or y = K x (batch-last).
  void forward(const void* x, const void* w, void* y, void* stream) const;
  // dx = dy K: the KS product of pattern (a, c, b, d) with w's middle axes swapped.
  void backward_x(const void* dy, const void* w, void* dx, void* stream) const;
  // dw[i,k,l,j] += sum over batch of dy[., i*b*d + k*d + j] * x[., i*c*d + l*d + j].
  // dw32 is float32 (a, b, c, d) and must hold zeros (or a sum to add to) on entry.
  void backward_w(const void* x, const void* dy, float* dw32, void* stream) const;

  KsPattern pattern() const { return p_; }
  KsPath forward_path() const { return fwd_.path; }
  KsPath backward_x_path() const { return bx_.path; }
  // Whether forward / backward_x run cuBLAS on strided views (float32 only).
  bool forward_uses_blas() const { return fwd_.path == KsPath::blas; }
  bool backward_x_uses_blas() const { return bx_.path == KsPath::blas; }

 private:
  KsPattern p_;
  int64_t batch_;
  bool batch_last_;
  DType dtype_;
  // The product path of forward / backward_x (src/cuda/ks/ks_plan.cu, pick_path: the rule and
  // its measurements).
  Choice fwd_, bx_;
};

}  // namespace strux::cuda
