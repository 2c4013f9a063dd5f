// Kronecker-sparse products on NVIDIA GPUs (DESIGN.md "ks").
//
// Pattern (a, b, c, d): K[i*b*d + k*d + j, i*c*d + l*d + j] = w[i, k, l, j].
// One fused output-stationary kernel per factor (Algorithm 2 of Gonon et al.): a thread block
// owns an output tile of one (i, j) group, reads that group's strided input columns straight
// from device memory into shared memory and writes its strided output columns in place; no
// permutation passes. Some plans run cuBLAS instead: on strided views (batch-last, or d == 1),
// or (batch-first, d > 1) between in-row transpositions of x and y (every dtype, and backward_w
// there on transposed copies of x and dy); the choice is made once per plan, by the solver table
// of src/cuda/ks/ks_plan.cu, or forced through KsOptions. All pointers are device pointers to
// C-contiguous memory; work goes on `stream` (a cudaStream_t, 0 = legacy default).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "strux/cuda/common.hpp"  // DType

namespace strux::cuda {


struct KsPattern {
  int64_t a, b, c, d;
};

// How a product (forward or backward_x) runs: the ks tile kernels (tensor-core 3xTF32 / FFMA),
// cuBLAS on strided views of x and y, the batch-last float32 streaming kernel (W held in shared
// memory), for batch-first d > 1 in-row transpositions around cuBLAS (tr), or at small batches
// (up to 4096, meant for 1-256) the small-batch kernels, which read each weight once per tile of
// batch rows held in registers (small), or, forced only, W expanded into the dense K
// (a*b*d x a*c*d, at most 2^28 elements) and one cuBLAS GEMM (dense; every layout and dtype;
// a NaN or infinity in x then reaches every output of its batch entry). backward_w runs the
// kernels, cuBLAS on strided views (blas) or cuBLAS on transposed copies (tr), never dense.
enum class KsPath { kernels, blas, stream, tr, small, dense };
const char* ks_path_name(KsPath p);  // "kernels", "blas", "stream", "tr", "small", "dense"

// Explicit choices for a plan (tests, benchmarks); the defaults let the solver table decide.
struct KsOptions {
  // Forces a path on every operation it applies to (stream, small, dense: forward and
  // backward_x only); the others keep the table's choice. A forced path that applies to none of
  // the plan's operations is a ValueError.
  std::optional<KsPath> path;
  int stream_tn = 0;     // the streaming kernel's batch tile: 0 (its rule), 32, 64 or 128
  int stream_mt = 0;     // its m16 tiles per warp item: 0 (its rule), 1 or 2
  bool dw_ptrs = true;   // backward_w's looped GEMMs as one pointer-array call (else a host loop)
  int tc_variant = -1;   // the float32 tensor-core kernel variant: -1 (its table), 0 or 1
};

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

  KsPlan(KsPattern p, int64_t batch, bool batch_last, DType dtype, const KsOptions& opt = {});

  // y = x K^T (batch-first: x (batch, a*c*d) -> y (batch, a*b*d)) or y = K x (batch-last).
  void forward(const void* x, const void* w, void* y, void* stream) const;
  // dx = dy K: the KS product of pattern (a, c, b, d) with w's middle axes swapped.
  void backward_x(const void* dy, const void* w, void* dx, void* stream) const;
  // dw[i,k,l,j] += sum over batch of dy[., i*b*d + k*d + j] * x[., i*c*d + l*d + j].
  // dw32 is float32 (a, b, c, d) and must hold zeros (or a sum to add to) on entry.
  void backward_w(const void* x, const void* dy, float* dw32, void* stream) const;
  // backward_x (dx != nullptr) and backward_w (dw32 != nullptr) in one call: where both run the
  // transposition path, dy is transposed once for both; else the two calls.
  void backward(const void* dy, const void* x, const void* w, void* dx, float* dw32,
                void* stream) const;

  KsPattern pattern() const { return p_; }
  // What the plan chose, in words: "forward tr, backward_x tr, backward_w tr (chunk 512)".
  std::string describe() const;
  KsPath forward_path() const { return fwd_.path; }
  KsPath backward_x_path() const { return bx_.path; }
  // Whether forward / backward_x / backward_w run cuBLAS on strided views.
  bool forward_uses_blas() const { return fwd_.path == KsPath::blas; }
  bool backward_x_uses_blas() const { return bx_.path == KsPath::blas; }
  bool backward_w_uses_blas() const { return dw_path_ == KsPath::blas; }
  KsPath backward_w_path() const { return dw_path_; }  // kernels, blas or tr
  // backward_w on cuBLAS (blas or tr): the batch rows summed by one GEMM accumulation (0: the
  // kernels).
  int64_t backward_w_chunk() const { return dw_chunk_; }
  // Whether forward / backward_x run the batch-first d > 1 transposition + cuBLAS path.
  bool forward_uses_tr() const { return fwd_.path == KsPath::tr; }
  bool backward_x_uses_tr() const { return bx_.path == KsPath::tr; }

 private:
  KsPattern p_;
  int64_t batch_;
  bool batch_last_;
  DType dtype_;
  // The product path of forward / backward_x (the solver table in src/cuda/ks/ks_plan.cu).
  Choice fwd_, bx_;
  // backward_w: the ks kernel, cuBLAS on strided views or on transposed copies (tr), with batch
  // chunks of dw_chunk_ rows (0: the kernel).
  KsPath dw_path_ = KsPath::kernels;
  int64_t dw_chunk_ = 0;
  bool dw_ptrs_ = true;  // its looped GEMMs as one pointer-array call (ks_blas_dw.cu)
  int tc_variant_ = -1;  // KsOptions::tc_variant
  // path tr (batch-first d > 1 through in-row transpositions + cuBLAS, ks_tr.cu): batch rows per
  // pass (the workspace cap), for the products and for backward_w.
  int64_t tr_rows_ = 1, dw_rows_ = 1;
};

}  // namespace strux::cuda
