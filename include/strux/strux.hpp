// <strux/strux.hpp>: strux's operators behind one plan contract, the same for every family and
// for the CPU and CUDA backends.
//
//   #include <strux/strux.hpp>
//   strux::op::FFTConv conv({B, H, L, Lk});                 // problem (+ strux::Options)
//   conv.forward({strux::View(u, {B, H, L}), strux::View(k, {H, Lk}), strux::View(y, {B, H, L})});
//
// The contract:
// - An operator (strux::op::FFTConv, BlockToeplitz, KSFactor, KSChain, DiagScan, CirculantScan,
//   BlockCirculantScan) is a plan built from a problem description (shapes, dtype, layout or
//   mode, device; the struct Operator::Problem) and strux::Options. The constructor checks the
//   problem (ValueError / TypeError naming the field), picks the backend from problem.device (CPU
//   or CUDA: a build without CUDA throws ValueError for a CUDA device) and, inside the backend,
//   the solver; options.solver forces one by name.
// - describe() says in words what was chosen (like FFTW's print); workspace_bytes() is the
//   scratch a call may take from the caller.
// - forward(args, ws, stream) and backward(args, ws, stream): args is the family's struct of
//   Views (inputs, outputs, then optional ones; an empty View is absent). backward is the
//   vector-Jacobian product of forward (for BlockToeplitz: the adjoint matvec). Every View is
//   checked once against the problem (dtype, device, shape, C-contiguity) before any work:
//   strux::TypeError / strux::ValueError name the argument, the expectation and what came.
// - Workspace: pass at least workspace_bytes() bytes of device memory, or nothing: the operator
//   then allocates its own once, at the first call that needs it, and keeps it.
// - Stream: CUDA work is queued on the given stream (default: the legacy default stream) and
//   calls do not synchronize; on the CPU calls are synchronous and the stream is ignored.
// - An operator owns scratch (its workspace, CUDA plans' buffers, a chain's activations): run
//   one call at a time per operator object. Operators are movable, not copyable.
// - Half types (float16, bfloat16) are CUDA-only and compute in float32; float64 computes in
//   float64. The family headers list each backend's dtypes and solvers.
//
// The per-backend plans underneath stay public for those who want them: <strux/fftconv.hpp>,
// <strux/toeplitz.hpp>, <strux/ks.hpp>, <strux/scan.hpp> (CPU) and <strux/cuda/*.hpp>.
#pragma once

#include "strux/core.hpp"
#include "strux/api/types.hpp"
#include "strux/api/fftconv.hpp"
#include "strux/api/toeplitz.hpp"
#include "strux/api/ks.hpp"
#include "strux/api/scan.hpp"
