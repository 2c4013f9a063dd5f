// strux::op::KSFactor and strux::op::KSChain: Kronecker-sparse products (DESIGN.md "ks",
// <strux/ks.hpp>). Pattern (a, b, c, d): M = a·b·d rows, N = a·c·d columns, w (a, b, c, d).
//
// Views: BatchFirst x (batch, N) -> y = x Kᵀ (batch, M); BatchLast x (N, batch) -> y = K x
// (M, batch). A chain K = K_1 ⋯ K_P (patterns listed K_1 first; K_P is applied first) has
// x (batch, cols(K_P)), y (batch, rows(K_1)) (transposed for BatchLast), w[p] the values of
// patterns[p].
// dtypes: CPU float32, float64; CUDA float16, bfloat16, float32 (float32 accumulation; the tuned
// kernels and cuBLAS paths) and float64 (direct kernels: exact, not tuned for speed).
// Backward: dx = dy K (BatchFirst) and dw; each may be empty to skip it (every dw[p] of a chain
// too, or the whole dw vector). On CUDA with half types dw is accumulated in float32 in the
// workspace, then rounded once.
// Solvers (options.solver): CPU factor "" (automatic), "gemm", "tiles"; CPU chain "" (automatic),
// "fused", "factors", "gemm" (see KSSolver in <strux/ks.hpp>). CUDA factor "" only; CUDA chain ""
// (the rule: the fused Monarch kernel for monarch(1024, 32) halves, batch-first, from 16 rows per
// SM; factor by factor elsewhere), "factors" (one product per factor) or "fused" (two factors: one
// kernel with the intermediate in shared memory; a ValueError says why where it cannot run). describe() names
// the path the CUDA plan picked per
// product (tile kernels, cuBLAS on strided views, streaming kernel, transpositions + cuBLAS,
// the fused pair, or the float64 direct kernels).
#pragma once

#include <cstdint>
#include <vector>

#include "strux/api/operator.hpp"
#include "strux/ks.hpp"  // KSPattern, KSLayout

namespace strux::op {

struct KSFactorProblem {
  KSPattern pattern{};
  int64_t batch = 1;
  KSLayout layout = KSLayout::BatchFirst;
  DType dtype = DType::f32;
  Device device{};
};

struct KSFactorForward {
  View x, w, y;
};

struct KSFactorBackward {
  View dy, x, w, dx, dw;
};

class KSFactor : public detail::Operator<KSFactorProblem, KSFactorForward, KSFactorBackward> {
 public:
  explicit KSFactor(const Problem& problem, const Options& options = {});
  void forward(const Forward& args, Workspace ws = {}, Stream s = {});
  void backward(const Backward& args, Workspace ws = {}, Stream s = {});
};

struct KSChainProblem {
  std::vector<KSPattern> patterns;  // K_1 … K_P; cols(K_p) == rows(K_{p+1})
  int64_t batch = 1;
  KSLayout layout = KSLayout::BatchFirst;
  DType dtype = DType::f32;
  Device device{};
};

struct KSChainForward {
  View x;
  std::vector<View> w;
  View y;
};

struct KSChainBackward {
  View dy, x;
  std::vector<View> w;
  View dx;
  std::vector<View> dw;  // empty: no weight gradients
};

// The chain keeps its intermediate activations (CPU: in the plan; CUDA: in the workspace), so
// one KSChain runs one call at a time.
class KSChain : public detail::Operator<KSChainProblem, KSChainForward, KSChainBackward> {
 public:
  explicit KSChain(const Problem& problem, const Options& options = {});
  void forward(const Forward& args, Workspace ws = {}, Stream s = {});
  void backward(const Backward& args, Workspace ws = {}, Stream s = {});
};

}  // namespace strux::op
