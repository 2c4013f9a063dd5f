// strux::op::BlockToeplitz: block lower-triangular Toeplitz operator F (DESIGN.md "toeplitz",
// <strux/toeplitz.hpp>). forward is the matvec d = F m, backward its vector-Jacobian product:
// the adjoint dm = Fᵀ dd, and the gradient for the blocks when dblocks is given (CPU: FFTs;
// CUDA: a direct kernel, exact but O(Nt² Nd Nm R)).
//
// Blocks from an LTI system or from FFTMatvec files: lti_blocks() / read_fftmatvec() of
// <strux/toeplitz.hpp>, then set_blocks().
// The blocks (Nt, Nd, Nm) are operator data: set_blocks() turns them into F̂ once (plan-time
// work: it allocates and, on CUDA, synchronizes the stream); every call then reads F̂.
// Views: layout TimeMajor m (Nt, Nm[, R]), d (Nt, Nd[, R]); SpaceMajor m (Nm, Nt[, R]),
// d (Nd, Nt[, R]); the trailing R axis is absent when R == 1.
// dtypes: float32, float64 (CPU and CUDA).
// Solvers (options.solver): CPU "" (FFTW + BLAS per frequency); CUDA "" (automatic), "blas"
// (gemv for R = 1, gemm for R > 1), "gemm", "kernels" (own kernels streaming F̂), "real-gemm"
// (matvec with R > 1 as one real gemm per frequency).
#pragma once

#include <cstdint>

#include "strux/api/operator.hpp"
#include "strux/toeplitz.hpp"  // ToeplitzLayout

namespace strux::op {

struct BlockToeplitzProblem {
  int64_t Nt = 1, Nd = 1, Nm = 1, R = 1;
  ToeplitzLayout layout = ToeplitzLayout::TimeMajor;
  DType dtype = DType::f32;
  Device device{};
  // Precision per phase and F̂'s storage (<strux/toeplitz.hpp>; default: all in dtype's precision).
  // CPU: every configuration. CUDA: the dtype's precision, or a bfloat16/float16 F̂ with float32
  // vectors and phases; anything else is a ValueError naming 'precision'.
  ToeplitzPrecision precision{};
};

struct BlockToeplitzForward {
  View m, d;  // d = F m
};

struct BlockToeplitzBackward {
  View dd, dm;      // dm = Fᵀ dd
  View m, dblocks;  // dblocks (Nt, Nd, Nm) = ∂<dd, F m>/∂blocks when given (needs m)
};

class BlockToeplitz
    : public detail::Operator<BlockToeplitzProblem, BlockToeplitzForward, BlockToeplitzBackward> {
 public:
  explicit BlockToeplitz(const Problem& problem, const Options& options = {});
  // blocks (Nt, Nd, Nm), read once; may be called again with new blocks.
  void set_blocks(const View& blocks, Stream s = {});
  void forward(const Forward& args, Workspace ws = {}, Stream s = {});
  void backward(const Backward& args, Workspace ws = {}, Stream s = {});

 private:
  bool blocks_set_ = false;
};

}  // namespace strux::op
