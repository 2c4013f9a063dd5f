// float64 block-circulant scans on the GPU, for the operator layer: the tuned
// BlockCirculantScanPlan (cuFFT + complex recurrences) is float32 only. Direct kernels: one
// thread block per batch item walks the sequence in time, the state in shared memory, each step
// a dense pass over the p x p grid of circulant blocks (O(n²) per step: exact in float64 and
// written for clarity, not speed).
#pragma once

#include <cstdint>

#include "strux/api/types.hpp"

namespace strux::api {

// Largest n = p·k the kernels take on the current device (two states in shared memory).
int64_t block_scan_f64_max_n();

// h_t = A_t h_{t-1} + u_t; a (B, T, p, p, k), u, h (B, T, p·k), h0 (B, p·k) or null.
void block_scan_f64_forward(int64_t B, int64_t T, int64_t p, int64_t k, const double* a, const double* u,
                            const double* h0, double* h, Stream s);

// Given h from the forward: g_{T-1} = dh_{T-1} + dh_last, g_t = dh_t + A_{t+1}ᵀ g_{t+1};
// du = g; da_t[i, j, m] = Σ_r g_t[i·k + r] h_{t-1}[j·k + (r - m) mod k]; dh0 = A_0ᵀ g_0.
// dh_last, h0, dh0 may be null.
void block_scan_f64_backward(int64_t B, int64_t T, int64_t p, int64_t k, const double* a, const double* h,
                             const double* h0, const double* dh, const double* dh_last, double* da, double* du,
                             double* dh0, Stream s);

}  // namespace strux::api
