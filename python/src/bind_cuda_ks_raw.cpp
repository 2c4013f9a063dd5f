// Lean nanobind entry points for the CUDA ks products: raw device pointers and sizes (ints)
// instead of DLPack views, and KsPlans kept in a cache instead of built per call.
//
// Why: a small product (e.g. (6,64,64,1) at batch 25088, ~50 us of GPU time) paid ~35 us of host
// time per call before its launch: DLPack import of three arrays, a KsPlan per call (getenv,
// cuBLAS resource lookup), a stream object. Here a call converts ints, looks a plan up and
// launches.
//
// Contract (private to strux/_cuda_ks_scan.py, which validates first): every pointer is a
// C-contiguous device array of the stated dtype on `device`, of the sizes the pattern and batch
// imply; 0 stands for "not wanted" where noted. Nothing here can check a raw pointer, so the
// DLPack entries (bind_cuda_ks_scan.cpp) stay the checked path for every other caller.
#ifdef STRUX_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "arrays.hpp"
#include "cuda_options.hpp"
#include "cuda/check.hpp"
#include "strux/core.hpp"
#include "strux/cuda/ks.hpp"

namespace {

using strux::check_arg;
using strux::cuda::DType;
using strux::cuda::KsPattern;
using strux::cuda::KsPlan;

// Everything a KsPlan's construction depends on: its arguments, its options (packed, see
// cuda_options.hpp) and the device whose cuBLAS resources it reserved.
struct Key {
  int64_t a, b, c, d, batch, opts;
  int device, flags;  // flags: batch_last | dtype << 1
  bool operator==(const Key& o) const {
    return a == o.a && b == o.b && c == o.c && d == o.d && batch == o.batch && opts == o.opts &&
           device == o.device && flags == o.flags;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t v : {uint64_t(k.a), uint64_t(k.b), uint64_t(k.c), uint64_t(k.d), uint64_t(k.batch),
                       uint64_t(k.opts), uint64_t(k.device), uint64_t(k.flags)})
      h = (h ^ v) * 1099511628211ull;
    return size_t(h);
  }
};

// One cache per host thread: a plan reserves the cuBLAS resources of the thread that builds it
// (ks_blas.cu keeps them per thread and device), and autograd runs backward on its own threads.
// Bounded: a workload with ever-new batch sizes rebuilds instead of growing without limit.
std::unordered_map<Key, KsPlan, KeyHash>& cache() {
  thread_local std::unordered_map<Key, KsPlan, KeyHash> c;
  return c;
}

const KsPlan& plan(int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch, bool bl, int dtype,
                   int device, int64_t opts) {
  auto& cc = cache();
  const Key k{a, b, c, d, batch, opts, device, int(bl) | (dtype << 1)};
  auto it = cc.find(k);
  if (it != cc.end()) return it->second;
  if (cc.size() >= 4096) cc.clear();
  return cc.try_emplace(k, KsPattern{a, b, c, d}, batch, bl, DType(dtype), strux::py::ks_options(opts))
      .first->second;
}

// Launches go to `device` (the arrays' device), whatever the thread's current device is; the
// previous device is restored on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    int cur = 0;
    STRUX_CUDA(cudaGetDevice(&cur));
    if (cur != device) {
      STRUX_CUDA(cudaSetDevice(device));
      prev_ = cur;
    }
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

void* ptr(uintptr_t p) { return reinterpret_cast<void*>(p); }

size_t elem_bytes(int dtype) { return DType(dtype) == DType::f32 ? 4 : 2; }

// Scratch regions are rounded up to 128 elements (>= 256 bytes) so every intermediate starts
// as aligned as a fresh allocation (the kernels' vector paths need 16-byte alignment). The same
// rule is in _cuda_ks_scan._region.
int64_t region(int64_t n) { return (n + 127) / 128 * 128; }

KsPattern pat(const std::vector<int64_t>& flat, size_t q) {
  return {flat[4 * q], flat[4 * q + 1], flat[4 * q + 2], flat[4 * q + 3]};
}

size_t factors(const std::vector<int64_t>& flat, size_t nw) {
  check_arg(flat.size() % 4 == 0 && flat.size() / 4 == nw && nw >= 1, "patterns",
            "expected 4 values per weight array, got ", flat.size(), " values for ", nw, " arrays");
  return nw;
}

const KsPlan& plan_q(const std::vector<int64_t>& flat, size_t q, int64_t batch, bool bl, int dtype,
                     int device, int64_t opts) {
  const KsPattern p = pat(flat, q);
  return plan(p.a, p.b, p.c, p.d, batch, bl, dtype, device, opts);
}

// y = x K^T ("bsf") or K x ("bsl") for one factor.
void forward(uintptr_t x, uintptr_t w, uintptr_t y, int64_t a, int64_t b, int64_t c, int64_t d,
             int64_t batch, bool bl, int dtype, int device, int64_t opts, uintptr_t stream) {
  DeviceGuard g(device);
  plan(a, b, c, d, batch, bl, dtype, device, opts).forward(ptr(x), ptr(w), ptr(y), ptr(stream));
}

// dx (0: skipped) and dw32 (float32, zeroed here first; 0: skipped) of one factor.
void backward(uintptr_t dy, uintptr_t x, uintptr_t w, uintptr_t dx, uintptr_t dw32, int64_t a,
              int64_t b, int64_t c, int64_t d, int64_t batch, bool bl, int dtype, int device,
              int64_t opts, uintptr_t stream) {
  DeviceGuard g(device);
  const KsPlan& pl = plan(a, b, c, d, batch, bl, dtype, device, opts);
  auto s = static_cast<cudaStream_t>(ptr(stream));
  if (dw32) STRUX_CUDA(cudaMemsetAsync(ptr(dw32), 0, size_t(a * b * c * d) * sizeof(float), s));
  pl.backward(ptr(dy), ptr(x), ptr(w), ptr(dx), static_cast<float*>(ptr(dw32)), s);
}

// Chain forward: K_P first; intermediates ping-pong between two scratch regions of
// region(max rows of factors 2..P * batch) elements each (one region when P == 2).
void chain_forward(uintptr_t x, const std::vector<uintptr_t>& ws, uintptr_t y, uintptr_t scratch,
                   int64_t scratch_elems, const std::vector<int64_t>& flat, int64_t batch, bool bl,
                   int dtype, int device, int64_t opts, uintptr_t stream) {
  const size_t P = factors(flat, ws.size());
  int64_t inter = 0;
  for (size_t q = 1; q < P; ++q) {
    const KsPattern p = pat(flat, q);
    inter = std::max(inter, region(p.a * p.b * p.d * batch));
  }
  check_arg(scratch_elems >= inter * int64_t(std::min<size_t>(P - 1, 2)), "scratch", "too small: ",
            scratch_elems, " elements");
  DeviceGuard g(device);
  const size_t eb = elem_bytes(dtype);
  uintptr_t in = x;
  for (size_t q = P; q-- > 0;) {
    const uintptr_t out = q == 0 ? y : scratch + ((P - 1 - q) % 2) * inter * eb;
    plan_q(flat, q, batch, bl, dtype, device, opts).forward(ptr(in), ptr(ws[q]), ptr(out), ptr(stream));
    in = out;
  }
}

// Chain backward with the forward intermediates recomputed: scratch holds the inputs of factors
// 1..P-1 (region(cols of factor q * batch) each, q = 0..P-2, in that order) and then the
// ping-pong gradient regions (min(P-1, 2) of region(max of those cols * batch)). dx (0: not
// wanted) is the gradient of x; dws32[q] float32 (a, b, c, d) (0: not wanted), zeroed here.
void chain_backward(uintptr_t dy, uintptr_t x, const std::vector<uintptr_t>& ws, uintptr_t dx,
                    const std::vector<uintptr_t>& dws32, uintptr_t scratch, int64_t scratch_elems,
                    const std::vector<int64_t>& flat, int64_t batch, bool bl, int dtype, int device,
                    int64_t opts, uintptr_t stream) {
  const size_t P = factors(flat, ws.size());
  check_arg(dws32.size() == P, "dws32", "expected ", P, " pointers, got ", dws32.size());
  const size_t eb = elem_bytes(dtype);
  std::vector<uintptr_t> act(P);  // act[q]: the input of factor q
  act[P - 1] = x;
  int64_t off = 0, gmax = 0;
  for (size_t q = 0; q + 1 < P; ++q) {
    const KsPattern p = pat(flat, q);
    const int64_t n = region(p.a * p.c * p.d * batch);
    act[q] = scratch + off * eb;
    off += n;
    gmax = std::max(gmax, n);
  }
  const int64_t need = off + gmax * int64_t(std::min<size_t>(P - 1, 2));
  check_arg(scratch_elems >= need, "scratch", "too small: ", scratch_elems, " elements, need ", need);
  DeviceGuard g(device);
  auto s = static_cast<cudaStream_t>(ptr(stream));
  for (size_t q = P - 1; q-- > 0;)
    plan_q(flat, q + 1, batch, bl, dtype, device, opts).forward(ptr(act[q + 1]), ptr(ws[q + 1]), ptr(act[q]), s);
  uintptr_t gin = dy;
  for (size_t q = 0; q < P; ++q) {
    const KsPlan& pl = plan_q(flat, q, batch, bl, dtype, device, opts);
    if (dws32[q]) {
      const KsPattern p = pat(flat, q);
      STRUX_CUDA(cudaMemsetAsync(ptr(dws32[q]), 0, size_t(p.a * p.b * p.c * p.d) * sizeof(float), s));
    }
    // gout (a ping-pong region or dx) aliases neither gin nor act[q]
    const uintptr_t gout = q + 1 == P ? dx : scratch + (off + int64_t(q % 2) * gmax) * eb;
    pl.backward(ptr(gin), ptr(act[q]), ptr(ws[q]), ptr(gout), static_cast<float*>(ptr(dws32[q])),
                s);
    gin = gout;
  }
}

}  // namespace

void bind_cuda_ks_raw(nb::module_& m) {
  m.def("cuda_ks_forward_raw", &forward, nb::arg("x"), nb::arg("w"), nb::arg("y"), nb::arg("a"),
        nb::arg("b"), nb::arg("c"), nb::arg("d"), nb::arg("batch"), nb::arg("batch_last"),
        nb::arg("dtype"), nb::arg("device"), nb::arg("options"), nb::arg("stream"));
  m.def("cuda_ks_backward_raw", &backward, nb::arg("dy"), nb::arg("x"), nb::arg("w"), nb::arg("dx"),
        nb::arg("dw32"), nb::arg("a"), nb::arg("b"), nb::arg("c"), nb::arg("d"), nb::arg("batch"),
        nb::arg("batch_last"), nb::arg("dtype"), nb::arg("device"), nb::arg("options"),
        nb::arg("stream"));
  m.def("cuda_ks_chain_forward_raw", &chain_forward, nb::arg("x"), nb::arg("ws"), nb::arg("y"),
        nb::arg("scratch"), nb::arg("scratch_elems"), nb::arg("patterns"), nb::arg("batch"),
        nb::arg("batch_last"), nb::arg("dtype"), nb::arg("device"), nb::arg("options"),
        nb::arg("stream"));
  m.def("cuda_ks_chain_backward_raw", &chain_backward, nb::arg("dy"), nb::arg("x"), nb::arg("ws"),
        nb::arg("dx"), nb::arg("dws32"), nb::arg("scratch"), nb::arg("scratch_elems"),
        nb::arg("patterns"), nb::arg("batch"), nb::arg("batch_last"), nb::arg("dtype"),
        nb::arg("device"), nb::arg("options"), nb::arg("stream"));
}

#endif  // STRUX_HAVE_CUDA
