// float64 Kronecker-sparse products on the GPU, for the operator layer: the tuned KsPlan covers
// float32 and the half types only. Direct kernels (one thread per output element, one block per
// weight for dw), exact in float64 and written for clarity, not speed.
#pragma once

#include <cstdint>

#include "strux/api/types.hpp"
#include "strux/ks.hpp"

namespace strux::api {

// out = in Kᵀ (trans = false; in has N = a·c·d features, out M = a·b·d) or out = in K (trans =
// true: dx = dy K, in M features, out N), per batch item; bl: batch-last layout.
void ks_apply_f64(const KSPattern& q, int64_t batch, bool bl, bool trans, const double* in, const double* w,
                  double* out, Stream s);

// dw[i,k,l,j] = Σ_t dy[t, i·b·d + k·d + j] x[t, i·c·d + l·d + j] (written, not accumulated).
void ks_dw_f64(const KSPattern& q, int64_t batch, bool bl, const double* dy, const double* x, double* dw, Stream s);

}  // namespace strux::api
