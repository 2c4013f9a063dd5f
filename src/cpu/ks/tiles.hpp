// KS products on tiles of batch rows held in cache: the small-block kernel and the fused chain.
//
// Why: with b, c <= 8 (radix-2/4 butterflies, small Monarch blocks) a per-group GEMM does a
// handful of FLOPs per call, and a chain of factors makes one pass over memory per factor.
// Here a tile of kTileRows batch rows is transposed once into a column-major tile [width][R]
// (R batch rows contiguous per column), so every factor is, per group (i, j), a few vector
// FMAs over R rows with broadcast weights; all the factors of a chain run on the tile while it
// sits in L1/L2, then the tile is transposed out: one read of x and one write of y in all.
// Batch-size-last activations are already column-major: tiles are copied runs of R.
// Backward recomputes the tile's intermediate activations (kept per thread), then walks the
// factors from K_1 to K_P: dw_p accumulates per part of the tiles (fixed parts, summed in
// order at the end, so dw does not depend on the team that ran it), and g <- g K_p.
#pragma once

#include <cstdint>
#include <vector>

#include "strux/ks.hpp"

namespace strux::cpu::ks {

// Whether the tile kernels are the fast choice for these factors (the solver rule, see
// bench/NOTES-cpu.md "ks tiles"): every block at most 8 x 8 and the tile of the widest
// activation (two of them for the ping-pong) within the per-thread cache budget.
bool tiles_suit(const std::vector<KSPattern>& ps, int64_t elem_size);

// y = x K^T (bsf) / K x (bsl) for K = K_1 ... K_P, ps[0] = K_1 (applied last), w[p] (a, b, c, d).
template <class T>
void tiles_forward(const std::vector<KSPattern>& ps, KSLayout layout, const T* x, const T* const* w, T* y,
                   int64_t batch);

// dx (may be null) and dw[p] (dw or any dw[p] may be null) of the product above.
template <class T>
void tiles_backward(const std::vector<KSPattern>& ps, KSLayout layout, const T* dy, const T* x, const T* const* w,
                    T* dx, T* const* dw, int64_t batch);

}  // namespace strux::cpu::ks
