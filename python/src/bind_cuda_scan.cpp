// nanobind entry points of the CUDA scans (diagonal, circulant, block-circulant): raw device
// pointers and sizes in, plans from the plan cache, launches on the caller's stream.
//
// Contract (private to strux/_cuda_scan.py, which validates every array once): every pointer is
// a C-contiguous device array on `device` of the dtype and shape the sizes imply (0: an optional
// array not given); `workspace` holds at least the plan's workspace bytes (`ws_bytes`, checked).
#ifdef STRUX_HAVE_CUDA

#include <memory>
#include <string>
#include <utility>

#include <nanobind/stl/pair.h>

#include "arrays.hpp"
#include "core/plan_cache.hpp"
#include "cuda_binding.hpp"
#include "strux/core.hpp"
#include "strux/cuda/scan.hpp"

namespace {

using strux::check_arg;
using strux::core::PlanCache;
using strux::core::PlanKey;
using strux::cuda::BlockCirculantScanPlan;
using strux::cuda::CirculantScanPlan;
using strux::cuda::DiagScanPlan;
using strux::cuda::DType;
using strux::py::DeviceGuard;
using strux::py::ptr;

const void* cptr(uintptr_t p) { return reinterpret_cast<const void*>(p); }
const float* fptr(uintptr_t p) { return reinterpret_cast<const float*>(p); }
float* mfptr(uintptr_t p) { return reinterpret_cast<float*>(p); }

void check_ws(int64_t ws_bytes, int64_t need) {
  check_arg(ws_bytes >= need, "workspace", "too small: ", ws_bytes, " bytes, need ", need);
}

// Plans are kept by (device, shape, dtype, options): a diagonal plan holds its kernel choice
// (an SM count query), the circulant ones their cuFFT plans.
std::shared_ptr<DiagScanPlan> diag_plan(int device, int64_t B, int64_t T, int64_t n, int dtype, int algo) {
  static PlanCache<PlanKey<6>, DiagScanPlan> cache(64);
  return cache.get({device, B, T, n, dtype, algo}, [&] {
    return std::make_shared<DiagScanPlan>(B, T, n, DType(dtype), strux::py::diag_scan_options(algo));
  });
}

// fused: -1 auto, 0 the cuFFT path, 1 the fused kernels, 2 the single-pass fused kernel
// (CirculantScanOptions).
std::shared_ptr<CirculantScanPlan> circ_plan(int device, int64_t B, int64_t T, int64_t n, int dtype, int fused = -1) {
  static PlanCache<PlanKey<6>, CirculantScanPlan> cache(32);
  check_arg(DType(dtype) == DType::f32 || DType(dtype) == DType::f64, "u", "expected float32 or float64");
  check_arg(fused >= -1 && fused <= 2, "options", "bad circulant_scan path code ", fused);
  return cache.get({device, B, T, n, dtype, fused}, [&] {
    strux::cuda::CirculantScanOptions o;
    if (fused >= 0) o.fused = fused >= 1;
    o.one_pass = fused == 2;
    return std::make_shared<CirculantScanPlan>(B, T, n, DType(dtype), o);
  });
}

std::shared_ptr<BlockCirculantScanPlan> block_plan(int device, int64_t B, int64_t T, int64_t p, int64_t k,
                                                   int registers, int64_t chunk) {
  static PlanCache<PlanKey<7>, BlockCirculantScanPlan> cache(32);
  return cache.get({device, B, T, p, k, registers, chunk}, [&] {
    return std::make_shared<BlockCirculantScanPlan>(B, T, p, k, strux::py::block_scan_options(registers, chunk));
  });
}

// ---- diag_scan --------------------------------------------------------------------------------

// The workspace a diag_scan plan's calls use: the look-back kernel's; the streaming kernels
// (seq1, seqv: the plan's algo, or seq1 for a seqv call's unaligned pointers) take none, so
// their callers allocate nothing.
int64_t diag_ws(const DiagScanPlan& p) {
  return p.algo() == strux::cuda::DiagScanAlgo::lookback ? p.workspace_bytes() : 0;
}

int64_t diag_scan_workspace(int device, int64_t B, int64_t T, int64_t n, int dtype, int algo) {
  DeviceGuard g(device);
  return diag_ws(*diag_plan(device, B, T, n, dtype, algo));
}

void diag_scan_forward(uintptr_t a, uintptr_t b, uintptr_t h0, uintptr_t h, uintptr_t ws, int64_t ws_bytes,
                       int64_t B, int64_t T, int64_t n, int dtype, double scale, int algo, int device,
                       uintptr_t stream) {
  DeviceGuard g(device);
  const auto pl = diag_plan(device, B, T, n, dtype, algo);
  check_ws(ws_bytes, diag_ws(*pl));
  pl->forward(cptr(a), cptr(b), cptr(h0), ptr(h), ptr(ws), ptr(stream), scale);
}

void diag_scan_backward(uintptr_t a, uintptr_t h, uintptr_t h0, uintptr_t dh, uintptr_t da, uintptr_t db,
                        uintptr_t dh0, uintptr_t ws, int64_t ws_bytes, int64_t B, int64_t T, int64_t n, int dtype,
                        int algo, int device, uintptr_t stream) {
  DeviceGuard g(device);
  const auto pl = diag_plan(device, B, T, n, dtype, algo);
  check_ws(ws_bytes, diag_ws(*pl));
  pl->backward(cptr(a), cptr(h), cptr(h0), cptr(dh), ptr(da), ptr(db), ptr(dh0), ptr(ws), ptr(stream));
}

std::string diag_scan_describe(int device, int64_t B, int64_t T, int64_t n, int dtype, int algo) {
  DeviceGuard g(device);
  return diag_plan(device, B, T, n, dtype, algo)->describe();
}

// ---- circulant_scan (float32 / float64; spectra complex64 / complex128) ------------------------

int64_t circulant_scan_workspace(int device, int64_t B, int64_t T, int64_t n, int dtype, int fused) {
  DeviceGuard g(device);
  return circ_plan(device, B, T, n, dtype, fused)->workspace_bytes();
}

// fourier: a is the half spectrum a_hat (B, T, n/2+1) of the complex type, else real (B, T, n).
void circulant_scan_forward(uintptr_t a, bool fourier, uintptr_t u, uintptr_t h0, uintptr_t h, uintptr_t ws,
                            int64_t ws_bytes, int64_t B, int64_t T, int64_t n, int dtype, int device,
                            uintptr_t stream, int fused) {
  DeviceGuard g(device);
  const auto pl = circ_plan(device, B, T, n, dtype, fused);
  check_ws(ws_bytes, pl->workspace_bytes());
  if (fourier)
    pl->forward_fourier(cptr(a), cptr(u), cptr(h0), ptr(h), ptr(ws), ptr(stream));
  else
    pl->forward(cptr(a), cptr(u), cptr(h0), ptr(h), ptr(ws), ptr(stream));
}

void circulant_scan_backward(uintptr_t a, bool fourier, uintptr_t u, uintptr_t h0, uintptr_t dh, uintptr_t da,
                             uintptr_t du, uintptr_t dh0, uintptr_t ws, int64_t ws_bytes, int64_t B, int64_t T,
                             int64_t n, int dtype, int device, uintptr_t stream) {
  DeviceGuard g(device);
  const auto pl = circ_plan(device, B, T, n, dtype);
  check_ws(ws_bytes, pl->workspace_bytes());
  pl->backward(fourier ? nullptr : cptr(a), fourier ? cptr(a) : nullptr, cptr(u), cptr(h0), cptr(dh), ptr(da),
               ptr(du), ptr(dh0), ptr(ws), ptr(stream));
}

std::string circulant_scan_describe(int device, int64_t B, int64_t T, int64_t n, int dtype, int fused) {
  DeviceGuard g(device);
  return circ_plan(device, B, T, n, dtype, fused)->describe();
}

// ---- block_circulant_scan (float32) ------------------------------------------------------------

int64_t block_circulant_scan_workspace(int device, int64_t B, int64_t T, int64_t p, int64_t k, int registers,
                                       int64_t chunk) {
  DeviceGuard g(device);
  return block_plan(device, B, T, p, k, registers, chunk)->workspace_bytes();
}

int64_t block_circulant_scan_backward_workspace(int device, int64_t B, int64_t T, int64_t p, int64_t k,
                                                int registers, int64_t chunk) {
  DeviceGuard g(device);
  return block_plan(device, B, T, p, k, registers, chunk)->backward_workspace_bytes();
}

void block_circulant_scan_forward(uintptr_t a, uintptr_t u, uintptr_t h0, uintptr_t h, uintptr_t ws,
                                  int64_t ws_bytes, int64_t B, int64_t T, int64_t p, int64_t k, int registers,
                                  int64_t chunk, int device, uintptr_t stream) {
  DeviceGuard g(device);
  const auto pl = block_plan(device, B, T, p, k, registers, chunk);
  check_ws(ws_bytes, pl->workspace_bytes());
  pl->forward(fptr(a), fptr(u), fptr(h0), mfptr(h), ptr(ws), ptr(stream));
}

void block_circulant_scan_backward(uintptr_t a, uintptr_t u, uintptr_t h0, uintptr_t dh, uintptr_t dh_last,
                                   uintptr_t da, uintptr_t du, uintptr_t dh0, uintptr_t ws, int64_t ws_bytes,
                                   int64_t B, int64_t T, int64_t p, int64_t k, int registers, int64_t chunk,
                                   int device, uintptr_t stream) {
  DeviceGuard g(device);
  const auto pl = block_plan(device, B, T, p, k, registers, chunk);
  check_ws(ws_bytes, pl->backward_workspace_bytes());
  pl->backward(fptr(a), fptr(u), fptr(h0), fptr(dh), fptr(dh_last), mfptr(da), mfptr(du), mfptr(dh0), ptr(ws),
               ptr(stream));
}

// (register kernels?, time steps per chunk) of the plan for this shape: tests and benchmarks.
std::pair<bool, int64_t> block_circulant_scan_path(int device, int64_t B, int64_t T, int64_t p, int64_t k,
                                                   int registers, int64_t chunk) {
  DeviceGuard g(device);
  const auto pl = block_plan(device, B, T, p, k, registers, chunk);
  return {pl->register_kernels(), pl->chunk_length()};
}

std::string block_circulant_scan_describe(int device, int64_t B, int64_t T, int64_t p, int64_t k, int registers,
                                          int64_t chunk) {
  DeviceGuard g(device);
  return block_plan(device, B, T, p, k, registers, chunk)->describe();
}

}  // namespace

void bind_cuda_scan(nb::module_& m) {
  using nb::arg;
  m.def("cuda_diag_scan_workspace", &diag_scan_workspace, arg("device"), arg("B"), arg("T"), arg("n"),
        arg("dtype"), arg("algo"));
  m.def("cuda_diag_scan_forward", &diag_scan_forward, arg("a"), arg("b"), arg("h0"), arg("h"), arg("workspace"),
        arg("ws_bytes"), arg("B"), arg("T"), arg("n"), arg("dtype"), arg("scale"), arg("algo"), arg("device"),
        arg("stream"));
  m.def("cuda_diag_scan_backward", &diag_scan_backward, arg("a"), arg("h"), arg("h0"), arg("dh"), arg("da"),
        arg("db"), arg("dh0"), arg("workspace"), arg("ws_bytes"), arg("B"), arg("T"), arg("n"), arg("dtype"),
        arg("algo"), arg("device"), arg("stream"));
  m.def("cuda_diag_scan_describe", &diag_scan_describe, arg("device"), arg("B"), arg("T"), arg("n"), arg("dtype"),
        arg("algo") = -1);
  m.def("cuda_circulant_scan_workspace", &circulant_scan_workspace, arg("device"), arg("B"), arg("T"), arg("n"),
        arg("dtype"), arg("fused") = -1);
  m.def("cuda_circulant_scan_forward", &circulant_scan_forward, arg("a"), arg("fourier"), arg("u"), arg("h0"),
        arg("h"), arg("workspace"), arg("ws_bytes"), arg("B"), arg("T"), arg("n"), arg("dtype"), arg("device"),
        arg("stream"), arg("fused") = -1);
  m.def("cuda_circulant_scan_backward", &circulant_scan_backward, arg("a"), arg("fourier"), arg("u"), arg("h0"),
        arg("dh"), arg("da"), arg("du"), arg("dh0"), arg("workspace"), arg("ws_bytes"), arg("B"), arg("T"),
        arg("n"), arg("dtype"), arg("device"), arg("stream"));
  m.def("cuda_circulant_scan_describe", &circulant_scan_describe, arg("device"), arg("B"), arg("T"), arg("n"),
        arg("dtype"), arg("fused") = -1);
  m.def("cuda_block_circulant_scan_workspace", &block_circulant_scan_workspace, arg("device"), arg("B"), arg("T"),
        arg("p"), arg("k"), arg("registers"), arg("chunk"));
  m.def("cuda_block_circulant_scan_backward_workspace", &block_circulant_scan_backward_workspace, arg("device"),
        arg("B"), arg("T"), arg("p"), arg("k"), arg("registers"), arg("chunk"));
  m.def("cuda_block_circulant_scan_forward", &block_circulant_scan_forward, arg("a"), arg("u"), arg("h0"),
        arg("h"), arg("workspace"), arg("ws_bytes"), arg("B"), arg("T"), arg("p"), arg("k"), arg("registers"),
        arg("chunk"), arg("device"), arg("stream"));
  m.def("cuda_block_circulant_scan_backward", &block_circulant_scan_backward, arg("a"), arg("u"), arg("h0"),
        arg("dh"), arg("dh_last"), arg("da"), arg("du"), arg("dh0"), arg("workspace"), arg("ws_bytes"), arg("B"),
        arg("T"), arg("p"), arg("k"), arg("registers"), arg("chunk"), arg("device"), arg("stream"));
  m.def("cuda_block_circulant_scan_path", &block_circulant_scan_path, arg("device"), arg("B"), arg("T"), arg("p"),
        arg("k"), arg("registers") = -1, arg("chunk") = 0);
  m.def("cuda_block_circulant_scan_describe", &block_circulant_scan_describe, arg("device"), arg("B"), arg("T"),
        arg("p"), arg("k"), arg("registers") = -1, arg("chunk") = 0);
}

#endif  // STRUX_HAVE_CUDA
