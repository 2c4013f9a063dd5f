// Radix-2 chains on batch rows in L1: every factor (a, 2, 2, d).
//
// Why: a radix-2 factor maps each pair of positions (p, p ^ d) of a row onto itself,
//   y[p] = wd[p] x[p] + wo[p] x[p ^ d],   wd[p] = w[i, k, k, j], wo[p] = w[i, k, 1 - k, j]
// (p = i·2d + k·d + j, d a power of two). Along a row of x (batch, N) the positions are
// contiguous, so with 64-byte vectors of V lanes a factor with d >= V pairs whole vectors and
// one with d < V pairs lanes inside each vector (one lane permute): no transpose of the batch
// (the tile kernel's cost), and a block of a few rows (<= 16 KiB) stays in L1 through every
// factor, each vector of weights loaded once per block of rows. One read of x, one write of y.
// Forward passes take several factors at once where they can: the lane factors d = 1, 2, 4, 8
// of a butterfly in one pass (each vector through all four in registers), and two vector
// factors per pass (a quad of vectors closed under both).
// Backward per block: the factors' inputs recomputed (kept per thread), then per factor, from
// K_1 to K_P, dwd[p] += g[p] a[p] and dwo[p] += g[p] a[p ^ d] lane-wise (positions are lanes:
// no horizontal sums), and g <- g K_p, i.e. g'[p] = wd[p] g[p] + wo[p ^ d] g[p ^ d].
// Batch-size-last (x (N, batch)): a row is a position, so a factor pairs whole rows, vectors
// along the batch on tiles of a few batch columns copied into scratch (pairs_bsl.cpp says why),
// y written with streaming stores in whole cache lines (where a row of y is not whole lines,
// each row realigned through the tile, a carry between a thread's consecutive tiles); its
// backward is the tile kernel's (tiles.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "strux/ks.hpp"

namespace strux::cpu::ks {

// Whether the pair kernels run this chain: every factor b = c = 2 with d a power of two, and
// (batch-size-first) the width N a whole number of 64-byte vectors of T.
bool pairs_suit(const std::vector<KSPattern>& ps, KSLayout layout, int64_t elem_size);

// y = x K^T (bsf, x (batch, N)) / K x (bsl, x (N, batch)) for K = K_1 ... K_P (ps[0] = K_1,
// applied last), w[p] (a, 2, 2, d).
template <class T>
void pairs_forward(const std::vector<KSPattern>& ps, KSLayout layout, const T* x, const T* const* w, T* y,
                   int64_t batch);

// Batch-size-first only: dx = dy K (may be null) and dw[p] (dw or any dw[p] may be null) of
// the product above.
template <class T>
void pairs_backward(const std::vector<KSPattern>& ps, const T* dy, const T* x, const T* const* w, T* dx,
                    T* const* dw, int64_t batch);

}  // namespace strux::cpu::ks
