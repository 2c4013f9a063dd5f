// nanobind entry points of the CUDA ks family: raw device pointers and sizes (ints) in, plans
// from the plan cache, launches on the caller's stream. strux/_cuda_ks.py validates every array
// once (torch tensors and CuPy arrays alike) and passes their addresses: a call converts ints,
// looks a plan up and launches (a small product costs tens of microseconds of GPU time, so the
// host work per call matters).
//
// Contract (private to strux/_cuda_ks.py): every pointer is a C-contiguous device array of the
// stated dtype on `device`, of the sizes the pattern and batch imply; 0 stands for "not wanted"
// where noted.
#ifdef STRUX_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/stl/pair.h>

#include "arrays.hpp"
#include "cuda_binding.hpp"
#include "core/plan_cache.hpp"
#include "cuda/check.hpp"
#include "strux/core.hpp"
#include "strux/cuda/ks.hpp"
#include "cuda/ks/ks_fused.hpp"

namespace {

using strux::check_arg;
using strux::cuda::DType;
using strux::cuda::KsPattern;
using strux::cuda::KsPlan;

// One cache per host thread: a plan reserves the cuBLAS resources (handle, re-laid-out weight and
// dw buffers, transposition workspace) of the thread that builds it (ks_blas.cu keeps them per
// thread and device), and autograd runs backward on its own threads. Key: the pattern, batch,
// options (cuda_binding.hpp), device and batch_last | dtype << 1.
using KsCache = strux::core::PlanCache<strux::core::PlanKey<8>, KsPlan>;

std::shared_ptr<KsPlan> plan(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool bl,
                             int dtype, int device, int64_t opts) {
  opts &= (int64_t(1) << 10) - 1;  // the factor plans' bits (the chain's: chain_fused)
  thread_local KsCache cache(256);
  return cache.get({a, b, c, d, batch, opts, device, int64_t(bl) | (int64_t(dtype) << 1)}, [&] {
    return std::make_shared<KsPlan>(KsPattern{a, b, c, d}, batch, bl, DType(dtype), strux::py::ks_options(opts));
  });
}

using strux::py::DeviceGuard;
using strux::py::ptr;

size_t elem_bytes(int dtype) { return DType(dtype) == DType::f32 ? 4 : 2; }

// Scratch regions are rounded up to 128 elements (>= 256 bytes) so every intermediate starts
// as aligned as a fresh allocation (the kernels' vector paths need 16-byte alignment).
int64_t region(int64_t n) { return (n + 127) / 128 * 128; }

KsPattern pat(const std::vector<int64_t>& flat, size_t q) {
  return {flat[4 * q], flat[4 * q + 1], flat[4 * q + 2], flat[4 * q + 3]};
}

size_t factors(const std::vector<int64_t>& flat, size_t nw) {
  check_arg(flat.size() % 4 == 0 && flat.size() / 4 == nw && nw >= 1, "patterns",
            "expected 4 values per weight array, got ", flat.size(), " values for ", nw, " arrays");
  return nw;
}

std::shared_ptr<KsPlan> plan_q(const std::vector<int64_t>& flat, size_t q, int64_t batch, bool bl,
                               int dtype, int device, int64_t opts) {
  const KsPattern p = pat(flat, q);
  return plan(p.a, p.b, p.c, p.d, batch, bl, dtype, device, opts);
}

// y = x K^T ("bsf") or K x ("bsl") for one factor.
void forward(uintptr_t x, uintptr_t w, uintptr_t y, int64_t a, int64_t b, int64_t c, int64_t d,
             int64_t batch, bool bl, int dtype, int device, int64_t opts, uintptr_t stream) {
  DeviceGuard g(device);
  plan(a, b, c, d, batch, bl, dtype, device, opts)->forward(ptr(x), ptr(w), ptr(y), ptr(stream));
}

// dx (0: skipped) and dw32 (float32, zeroed here first; 0: skipped) of one factor.
void backward(uintptr_t dy, uintptr_t x, uintptr_t w, uintptr_t dx, uintptr_t dw32, int64_t a,
              int64_t b, int64_t c, int64_t d, int64_t batch, bool bl, int dtype, int device,
              int64_t opts, uintptr_t stream) {
  DeviceGuard g(device);
  const auto pl = plan(a, b, c, d, batch, bl, dtype, device, opts);
  auto s = static_cast<cudaStream_t>(ptr(stream));
  if (dw32) STRUX_CUDA(cudaMemsetAsync(ptr(dw32), 0, size_t(a * b * c * d) * sizeof(float), s));
  pl->backward(ptr(dy), ptr(x), ptr(w), ptr(dx), static_cast<float*>(ptr(dw32)), s);
}

// The options code (strux._cuda_options.ks_code): bits 0-9 the factor plans' KsOptions, bits
// 10-11 the chain solver (0 the rule, 1 factor by factor, 2 fused), bits 12-14 the fused block's
// batch rows (0 its rule, 1..4: 8, 16, 32, 64).
constexpr int64_t kFactorBits = (int64_t(1) << 10) - 1;
int chain_solver(int64_t opts) {
  const int v = int((opts >> 10) & 3);
  check_arg(v <= 2, "options", "bad ks chain solver code ", v);
  return v;
}
int fused_tb(int64_t opts) {
  const int v = int((opts >> 12) & 7);
  check_arg(v <= 4, "options", "bad ks fused_tb code ", v);
  return v ? 4 << v : 0;
}

// Whether a chain runs as one fused kernel: forced (a ValueError saying why when it cannot),
// or the solver rule (ks::fused_pair_preferred) where it applies. cfg: the block shape.
bool chain_fused(const std::vector<int64_t>& flat, size_t P, int64_t batch, bool bl, int dtype,
                 int64_t opts, strux::cuda::ks::FusedCfg* cfg, std::string* why) {
  namespace ks = strux::cuda::ks;
  const int solver = chain_solver(opts);
  if (solver == 1) {
    *why = "factor by factor (forced)";
    return false;
  }
  // the rule first: it is cheap, and most chains stop there
  if (solver == 0 && (P != 2 || !ks::fused_pair_preferred(pat(flat, 0), pat(flat, 1), batch, DType(dtype), bl))) {
    *why = "factor by factor (the rule: bench/NOTES-gpu-ks-scan.md#ks-fused)";
    return false;
  }
  *why = P != 2 ? "the fused kernel takes chains of 2 factors, got " + std::to_string(P)
                : ks::fused_pair_why_not(pat(flat, 0), pat(flat, 1), bl, DType(dtype));
  check_arg(solver != 2 || why->empty(), "options", "chain 'fused' was forced but cannot run: ", *why);
  if (!why->empty()) return false;
  *cfg = ks::fused_pair_pick(pat(flat, 0), pat(flat, 1), DType(dtype), batch, fused_tb(opts), bl);
  check_arg(cfg->ok(), "options", "no block shape fits the fused pair");
  return true;
}

// How a chain forward runs and the scratch it needs: fused (cfg, the fused pair's group-major
// weight copies: fused_pair_workspace_bytes), or K_P first with the intermediates ping-ponging
// between two scratch regions of `inter` elements (region(max rows of factors 2..P * batch); one
// region when P == 2). The plan's sizes: _cuda_ks asks for `bytes` (cuda_ks_chain_workspace)
// instead of deriving them.
struct ChainFwd {
  strux::cuda::ks::FusedCfg cfg;  // cfg.ok(): fused
  int64_t inter = 0, bytes = 0;
};
ChainFwd chain_fwd(const std::vector<int64_t>& flat, size_t P, int64_t batch, bool bl, int dtype, int64_t opts) {
  ChainFwd f;
  std::string why;
  if (chain_fused(flat, P, batch, bl, dtype, opts, &f.cfg, &why)) {
    f.bytes = strux::cuda::ks::fused_pair_workspace_bytes(pat(flat, 0), pat(flat, 1), DType(dtype));
    return f;
  }
  for (size_t q = 1; q < P; ++q) {
    const KsPattern p = pat(flat, q);
    f.inter = std::max(f.inter, region(p.a * p.b * p.d * batch));
  }
  f.bytes = f.inter * int64_t(std::min<size_t>(P - 1, 2)) * int64_t(elem_bytes(dtype));
  return f;
}

// Chain backward with the forward intermediates recomputed: scratch holds the inputs of factors
// 1..P-1 (region(cols of factor q * batch) elements each, q = 0..P-2, in that order: act_off)
// and then the ping-pong gradient regions (min(P-1, 2) of gmax = region(max of those cols *
// batch) elements).
struct ChainBwd {
  std::vector<int64_t> act_off;
  int64_t gbase = 0, gmax = 0, bytes = 0;
};
ChainBwd chain_bwd(const std::vector<int64_t>& flat, size_t P, int64_t batch, int dtype) {
  ChainBwd b;
  for (size_t q = 0; q + 1 < P; ++q) {
    const KsPattern p = pat(flat, q);
    const int64_t n = region(p.a * p.c * p.d * batch);
    b.act_off.push_back(b.gbase);
    b.gbase += n;
    b.gmax = std::max(b.gmax, n);
  }
  b.bytes = (b.gbase + b.gmax * int64_t(std::min<size_t>(P - 1, 2))) * int64_t(elem_bytes(dtype));
  return b;
}

size_t chain_factors(const std::vector<int64_t>& flat) {
  check_arg(flat.size() % 4 == 0 && !flat.empty(), "patterns", "expected 4 values per pattern, got ",
            flat.size());
  return flat.size() / 4;
}

// Bytes of device scratch cuda_ks_chain_forward (backward false) or cuda_ks_chain_backward
// (true) needs for these arguments (on `device`: whether the pair fits its shared memory).
int64_t chain_workspace(const std::vector<int64_t>& flat, int64_t batch, bool bl, int dtype, int device,
                        int64_t opts, bool backward) {
  const size_t P = chain_factors(flat);
  DeviceGuard g(device);
  if (backward) {
    chain_solver(opts);
    return chain_bwd(flat, P, batch, dtype).bytes;
  }
  return chain_fwd(flat, P, batch, bl, dtype, opts).bytes;
}

// Chain forward (chain_fwd): scratch of scratch_bytes >= cuda_ks_chain_workspace(..., false).
void chain_forward(uintptr_t x, const std::vector<uintptr_t>& ws, uintptr_t y, uintptr_t scratch,
                   int64_t scratch_bytes, const std::vector<int64_t>& flat, int64_t batch, bool bl,
                   int dtype, int device, int64_t opts, uintptr_t stream) {
  const size_t P = factors(flat, ws.size());
  DeviceGuard g(device);
  const ChainFwd f = chain_fwd(flat, P, batch, bl, dtype, opts);
  check_arg(scratch_bytes >= f.bytes, "scratch", "expected at least ", f.bytes,
            " bytes (cuda_ks_chain_workspace), got ", scratch_bytes);
  if (f.cfg.ok())
    return strux::cuda::ks::fused_pair(ptr(x), ptr(ws[0]), ptr(ws[1]), ptr(y), pat(flat, 0), pat(flat, 1), batch,
                                       bl, DType(dtype), f.cfg, f.bytes ? ptr(scratch) : nullptr,
                                       static_cast<cudaStream_t>(ptr(stream)));
  opts &= kFactorBits;
  const size_t eb = elem_bytes(dtype);
  uintptr_t in = x;
  for (size_t q = P; q-- > 0;) {
    const uintptr_t out = q == 0 ? y : scratch + ((P - 1 - q) % 2) * f.inter * eb;
    plan_q(flat, q, batch, bl, dtype, device, opts)->forward(ptr(in), ptr(ws[q]), ptr(out), ptr(stream));
    in = out;
  }
}

// How a chain forward runs: ("fused", "tb 32, N bytes of shared memory") or ("factors", why).
std::pair<std::string, std::string> chain_path(const std::vector<int64_t>& flat, int64_t batch, bool bl,
                                               int dtype, int64_t opts) {
  const size_t P = chain_factors(flat);
  strux::cuda::ks::FusedCfg cfg;
  std::string why;
  if (chain_fused(flat, P, batch, bl, dtype, opts, &cfg, &why))
    return {"fused", "tb " + std::to_string(cfg.tb) + ", " + std::to_string(cfg.smem) +
                         " bytes of shared memory per block" + (cfg.mon ? ", monarch kernel" : "")};
  return {"factors", why};
}

// Chain backward (chain_bwd) with the forward intermediates recomputed; scratch of scratch_bytes >=
// cuda_ks_chain_workspace(..., true). dx (0: not wanted) is the gradient of x; dws32[q] float32
// (a, b, c, d) (0: not wanted), zeroed here.
void chain_backward(uintptr_t dy, uintptr_t x, const std::vector<uintptr_t>& ws, uintptr_t dx,
                    const std::vector<uintptr_t>& dws32, uintptr_t scratch, int64_t scratch_bytes,
                    const std::vector<int64_t>& flat, int64_t batch, bool bl, int dtype, int device,
                    int64_t opts, uintptr_t stream) {
  const size_t P = factors(flat, ws.size());
  chain_solver(opts);  // a valid code (the backward runs factor by factor whatever it says)
  opts &= kFactorBits;
  check_arg(dws32.size() == P, "dws32", "expected ", P, " pointers, got ", dws32.size());
  const ChainBwd b = chain_bwd(flat, P, batch, dtype);
  check_arg(scratch_bytes >= b.bytes, "scratch", "expected at least ", b.bytes,
            " bytes (cuda_ks_chain_workspace), got ", scratch_bytes);
  const size_t eb = elem_bytes(dtype);
  std::vector<uintptr_t> act(P);  // act[q]: the input of factor q
  act[P - 1] = x;
  for (size_t q = 0; q + 1 < P; ++q) act[q] = scratch + b.act_off[q] * eb;
  DeviceGuard g(device);
  auto s = static_cast<cudaStream_t>(ptr(stream));
  for (size_t q = P - 1; q-- > 0;)
    plan_q(flat, q + 1, batch, bl, dtype, device, opts)->forward(ptr(act[q + 1]), ptr(ws[q + 1]), ptr(act[q]), s);
  uintptr_t gin = dy;
  for (size_t q = 0; q < P; ++q) {
    const auto pl = plan_q(flat, q, batch, bl, dtype, device, opts);
    if (dws32[q]) {
      const KsPattern p = pat(flat, q);
      STRUX_CUDA(cudaMemsetAsync(ptr(dws32[q]), 0, size_t(p.a * p.b * p.c * p.d) * sizeof(float), s));
    }
    // gout (a ping-pong region or dx) aliases neither gin nor act[q]
    const uintptr_t gout = q + 1 == P ? dx : scratch + (b.gbase + int64_t(q % 2) * b.gmax) * eb;
    pl->backward(ptr(gin), ptr(act[q]), ptr(ws[q]), ptr(gout), static_cast<float*>(ptr(dws32[q])),
                s);
    gin = gout;
  }
}

// Which product path a plan picks: "blas" (cuBLAS on strided views), "stream" (batch-last,
// W in shared memory), "tr" (batch-first d > 1: transpositions + cuBLAS), "small" (small
// batches), "dense" (forced only: the dense K and one GEMM) or "kernels", for forward and
// backward_x (tests and bench; options force one). The plan is built for the
// query only: it reserves no more than the call it describes would.
KsPlan query_plan(const std::vector<int64_t>& p, int64_t batch, bool batch_last, int dtype, int64_t options) {
  check_arg(p.size() == 4, "pattern", "expected (a, b, c, d), got ", p.size(), " values");
  return KsPlan({p[0], p[1], p[2], p[3]}, batch, batch_last, DType(dtype),
                strux::py::ks_options(options & ((int64_t(1) << 10) - 1)));
}

std::pair<std::string, std::string> path(const std::vector<int64_t>& p, int64_t batch, bool batch_last, int dtype,
                                         int64_t options) {
  const KsPlan pl = query_plan(p, batch, batch_last, dtype, options);
  return {strux::cuda::ks_path_name(pl.forward_path()), strux::cuda::ks_path_name(pl.backward_x_path())};
}

// backward_w's path: ("blas" or "tr", batch chunk of one GEMM accumulation) or ("kernels", 0).
std::pair<std::string, int64_t> dw_path(const std::vector<int64_t>& p, int64_t batch, bool batch_last, int dtype,
                                        int64_t options) {
  const KsPlan pl = query_plan(p, batch, batch_last, dtype, options);
  return {strux::cuda::ks_path_name(pl.backward_w_path()), pl.backward_w_chunk()};
}

std::string describe(const std::vector<int64_t>& p, int64_t batch, bool batch_last, int dtype, int64_t options) {
  return query_plan(p, batch, batch_last, dtype, options).describe();
}

}  // namespace

void bind_cuda_ks(nb::module_& m) {
  m.def("cuda_ks_path", &path, nb::arg("pattern"), nb::arg("batch"), nb::arg("batch_last"), nb::arg("dtype"),
        nb::arg("options") = 0);
  m.def("cuda_ks_dw_path", &dw_path, nb::arg("pattern"), nb::arg("batch"), nb::arg("batch_last"),
        nb::arg("dtype"), nb::arg("options") = 0);
  m.def("cuda_ks_describe", &describe, nb::arg("pattern"), nb::arg("batch"), nb::arg("batch_last"),
        nb::arg("dtype"), nb::arg("options") = 0);
  m.def("cuda_ks_chain_path", &chain_path, nb::arg("patterns"), nb::arg("batch"), nb::arg("batch_last"),
        nb::arg("dtype"), nb::arg("options") = 0);
  m.def("cuda_ks_forward", &forward, nb::arg("x"), nb::arg("w"), nb::arg("y"), nb::arg("a"),
        nb::arg("b"), nb::arg("c"), nb::arg("d"), nb::arg("batch"), nb::arg("batch_last"),
        nb::arg("dtype"), nb::arg("device"), nb::arg("options"), nb::arg("stream"));
  m.def("cuda_ks_backward", &backward, nb::arg("dy"), nb::arg("x"), nb::arg("w"), nb::arg("dx"),
        nb::arg("dw32"), nb::arg("a"), nb::arg("b"), nb::arg("c"), nb::arg("d"), nb::arg("batch"),
        nb::arg("batch_last"), nb::arg("dtype"), nb::arg("device"), nb::arg("options"),
        nb::arg("stream"));
  m.def("cuda_ks_chain_workspace", &chain_workspace, nb::arg("patterns"), nb::arg("batch"),
        nb::arg("batch_last"), nb::arg("dtype"), nb::arg("device"), nb::arg("options"), nb::arg("backward"));
  m.def("cuda_ks_chain_forward", &chain_forward, nb::arg("x"), nb::arg("ws"), nb::arg("y"),
        nb::arg("scratch"), nb::arg("scratch_bytes"), nb::arg("patterns"), nb::arg("batch"),
        nb::arg("batch_last"), nb::arg("dtype"), nb::arg("device"), nb::arg("options"),
        nb::arg("stream"));
  m.def("cuda_ks_chain_backward", &chain_backward, nb::arg("dy"), nb::arg("x"), nb::arg("ws"),
        nb::arg("dx"), nb::arg("dws32"), nb::arg("scratch"), nb::arg("scratch_bytes"),
        nb::arg("patterns"), nb::arg("batch"), nb::arg("batch_last"), nb::arg("dtype"),
        nb::arg("device"), nb::arg("options"), nb::arg("stream"));
}

#endif  // STRUX_HAVE_CUDA
