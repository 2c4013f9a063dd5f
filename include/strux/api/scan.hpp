// strux::op::DiagScan, CirculantScan, BlockCirculantScan: linear recurrences
// h_t = A_t h_{t-1} + u_t over (B, T, n) channels-last arrays (DESIGN.md "scan", <strux/scan.hpp>).
// h_{-1} = h0 (B, n), zeros when h0 is empty.
//
// Backward (PyTorch's convention; conj = identity for real dtypes): given dh = dL/dconj(h) and
// an optional dh_last (B, n) added to dh_{T-1},
//   g_{T-1} = dh_{T-1} + dh_last,  g_t = dh_t + A_{t+1}^H g_{t+1},
//   du_t = g_t,  da = the gradient for a (diagonal: g_t conj(h_{t-1})),  dh0 = A_0^H g_0.
// dh0 is written when given. DiagScan's backward may also take h, the forward's output: CUDA
// then skips recomputing it (the CPU always recomputes).
//
// dtypes:
//   DiagScan            CPU float32, float64, complex64, complex128; CUDA those and float16,
//                       bfloat16 (float32 arithmetic).
//   CirculantScan       float32, float64 (CPU and CUDA). Fourier form (problem.fourier): a is
//                       given by its half spectra rfft(a_t), (B, T, n/2 + 1) complex64/128, and
//                       da likewise (dL/dRe + i dL/dIm).
//   BlockCirculantScan  float32, float64 (CPU and CUDA; float64 on CUDA runs direct kernels, exact
//                       but O(n²) per step, n = p·k limited by shared memory).
// Solvers (options.solver): CPU diagonal scan "" (automatic), "rows", "time-split" (DiagSolver in
// <strux/scan.hpp>); otherwise "" only.
// Not in this API yet (DESIGN.md lists them): time-last layouts, reverse scans and an `a` broadcast over batch
// or time; pass full (B, T, n) arrays.
#pragma once

#include <cstdint>

#include "strux/api/operator.hpp"

namespace strux::op {

struct ScanForward {
  View a, u, h;  // DiagScan: u is b
  View h0;
};

struct ScanBackward {
  View dh, a, u, da, du;
  View h0, h, dh_last;
  View dh0;
};

struct DiagScanProblem {
  int64_t B = 1, T = 1, n = 1;
  DType dtype = DType::f32;
  Device device{};
};

// a, u, h, da, du (B, T, n).
class DiagScan : public detail::Operator<DiagScanProblem, ScanForward, ScanBackward> {
 public:
  explicit DiagScan(const Problem& problem, const Options& options = {});
  void forward(const Forward& args, Workspace ws = {}, Stream s = {});
  void backward(const Backward& args, Workspace ws = {}, Stream s = {});
};

struct CirculantScanProblem {
  int64_t B = 1, T = 1, n = 1;
  bool fourier = false;  // a given as half spectra (B, T, n/2 + 1), complex
  DType dtype = DType::f32;  // the real dtype of u and h
  Device device{};
};

// circ(a)[i, j] = a[(i - j) mod n]. a, da (B, T, n) real or (B, T, n/2 + 1) complex (fourier);
// u, h, du (B, T, n). backward ignores the argument h.
class CirculantScan : public detail::Operator<CirculantScanProblem, ScanForward, ScanBackward> {
 public:
  explicit CirculantScan(const Problem& problem, const Options& options = {});
  void forward(const Forward& args, Workspace ws = {}, Stream s = {});
  void backward(const Backward& args, Workspace ws = {}, Stream s = {});
};

struct BlockCirculantScanProblem {
  int64_t B = 1, T = 1, p = 1, k = 1;  // n = p·k
  DType dtype = DType::f32;
  Device device{};
};

// A_t: the p × p grid of k × k circulant blocks circ(a_t[i, j]); state index i·k + r.
// a, da (B, T, p, p, k); u, h, du (B, T, p·k). backward ignores the argument h.
class BlockCirculantScan
    : public detail::Operator<BlockCirculantScanProblem, ScanForward, ScanBackward> {
 public:
  explicit BlockCirculantScan(const Problem& problem, const Options& options = {});
  void forward(const Forward& args, Workspace ws = {}, Stream s = {});
  void backward(const Backward& args, Workspace ws = {}, Stream s = {});
};

}  // namespace strux::op
