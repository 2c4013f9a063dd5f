// A chain of two KS factors in one kernel (ks_fused.cuh): y = x (K_1 K_2)^T (batch-first) or
// K_1 K_2 x (batch-last), the intermediate in shared memory (private to src/cuda/ks and the ks
// chain backends).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "strux/cuda/ks.hpp"  // KsPattern, DType

namespace strux::cuda::ks {

// Batch rows per block (8, 16, 32 or 64; the Monarch kernel: per tile, 16 or 32) and dynamic
// shared-memory bytes; tb == 0: not fused.
// mon: the persistent Monarch kernel (ks_fused_mon.cuh) instead of pair_kernel (ks_fused.cuh).
struct FusedCfg {
  int tb = 0;
  int64_t smem = 0;
  bool mon = false;
  bool ok() const { return tb > 0; }
};

// Why the pair p1 (applied second), p2 (applied first) cannot run as one kernel for this
// layout / dtype on the current device, in words; "" when it can.
std::string fused_pair_why_not(KsPattern p1, KsPattern p2, bool batch_last, DType t);
// The block shape for an applicable pair: tb_force 0 takes the Monarch kernel where it applies
// (batch-first halves, K_2 = (S, S, S, 1), K_1 = (1, S, S, S), S = 16 or 32, its weights fitting
// in one block), else lets the rule pick pair_kernel's rows (the largest tb <= 32 with two
// blocks per SM, else one, and at most the tb that still gives every SM a block of this batch);
// tb_force 8, 16, 32 or 64 forces pair_kernel with that many rows; ValueError naming `fused_tb`
// when a forced tb does not fit.
FusedCfg fused_pair_pick(KsPattern p1, KsPattern p2, DType t, int64_t batch, int tb_force, bool batch_last);
// Whether a chain plan with no forced choice runs an applicable pair fused (the solver rule).
bool fused_pair_preferred(KsPattern p1, KsPattern p2, int64_t batch, DType t, bool batch_last);
// Bytes of device scratch fused_pair needs: group-major copies of the factors with d > 1 (a
// warp then reads a group's weights as contiguous rows); 0 when both have d == 1.
int64_t fused_pair_workspace_bytes(KsPattern p1, KsPattern p2, DType t);
// y (batch, a1*b1*d1) = x (batch, a2*c2*d2) (K_1 K_2)^T, or the transposes for batch-last;
// w1, w2 the factors' values; wbuf: fused_pair_workspace_bytes() of scratch (256-byte aligned;
// null when that is 0); launches only.
void fused_pair(const void* x, const void* w1, const void* w2, void* y, KsPattern p1, KsPattern p2,
                int64_t batch, bool batch_last, DType t, FusedCfg cfg, void* wbuf, cudaStream_t s);

}  // namespace strux::cuda::ks
