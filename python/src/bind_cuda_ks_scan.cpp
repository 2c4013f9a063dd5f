// nanobind entry points for the CUDA ks and scan kernels. Arrays arrive through DLPack (PyTorch,
// CuPy, ...) as device views; outputs and scratch are allocated by the Python layer
// (strux/_cuda_ks_scan.py) on the caller's device and stream, so this file only checks views
// and hands raw pointers to the plans. Python validates shapes first; the checks here keep C++
// from ever misreading memory.
#ifdef STRUX_HAVE_CUDA

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include <nanobind/stl/pair.h>

#include "arrays.hpp"
#include "cuda_options.hpp"
#include "strux/core.hpp"
#include "strux/cuda/ks.hpp"
#include "strux/cuda/scan.hpp"

namespace {

using Arr = nb::ndarray<>;
using strux::check_arg;
using strux::cuda::DType;

struct View {
  void* p;
  DType dt;
  std::vector<int64_t> shape;
};

DType dtype_of(const Arr& a, const char* name) {
  const auto t = a.dtype();
  using C = nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    if (t.code == uint8_t(C::Float) && t.bits == 32) return DType::f32;
    if (t.code == uint8_t(C::Float) && t.bits == 16) return DType::f16;
    if (t.code == uint8_t(C::Bfloat) && t.bits == 16) return DType::bf16;
    if (t.code == uint8_t(C::Complex) && t.bits == 64) return DType::c64;
    if (t.code == uint8_t(C::Float) && t.bits == 64) return DType::f64;
    if (t.code == uint8_t(C::Complex) && t.bits == 128) return DType::c128;
  }
  throw strux::TypeError(strux::msg("argument '", name,
                                    "': expected float32, float16, bfloat16, float64, complex64 or "
                                    "complex128, got DLPack dtype code ", int(t.code), " bits ", int(t.bits)));
}

View view(const Arr& a, const char* name, size_t ndim) {
  check_arg(a.device_type() == nb::device::cuda::value, name,
            "expected an array in CUDA device memory, got DLPack device type ", a.device_type());
  check_arg(a.ndim() == ndim, name, "expected ", ndim, " dimensions, got ", a.ndim());
  View v{a.data(), dtype_of(a, name), strux::py::shape_of(a)};
  int64_t expect = 1;
  for (size_t i = ndim; i-- > 0;) {
    if (v.shape[i] != 1)
      check_arg(a.stride(i) == expect, name, "expected a C-contiguous array (stride of axis ", i,
                " is ", a.stride(i), " elements, expected ", expect, ")");
    expect *= v.shape[i];
  }
  return v;
}

// Builds the message only on failure: nothing touches iostreams on the hot path.
void check_shape(bool ok, const char* name, const char* what, const std::vector<int64_t>& shape) {
  if (!ok) throw strux::ValueError(strux::msg("argument '", name, "': ", what, ", got shape ", strux::shape_str(shape)));
}

// Scratch: any dtype (bytes), only the device matters.
void* scratch(const Arr& a) {
  check_arg(a.device_type() == nb::device::cuda::value, "workspace",
            "expected an array in CUDA device memory, got DLPack device type ", a.device_type());
  return a.data();
}

void same(const View& a, const View& b, const char* name) {
  check_arg(a.dt == b.dt, name, "expected the dtype of the first array");
}

void* stream_ptr(uintptr_t s) { return reinterpret_cast<void*>(s); }

strux::cuda::KsPattern pattern_of(const std::vector<int64_t>& p) {
  check_arg(p.size() == 4, "pattern", "expected (a, b, c, d), got ", p.size(), " values");
  return {p[0], p[1], p[2], p[3]};
}

// x (batch, a*c*d) or (a*c*d, batch) -> y (batch, a*b*d) or (a*b*d, batch).
void ks_forward(const Arr& x, const Arr& w, const Arr& y, const std::vector<int64_t>& pat,
                bool batch_last, int64_t options, uintptr_t stream) {
  const auto p = pattern_of(pat);
  View xv = view(x, "x", 2), wv = view(w, "w", 4), yv = view(y, "y", 2);
  same(xv, wv, "w");
  same(xv, yv, "y");
  const int64_t N = p.a * p.c * p.d, M = p.a * p.b * p.d;
  const int64_t batch = batch_last ? xv.shape[1] : xv.shape[0];
  check_shape(xv.shape[batch_last ? 0 : 1] == N, "x", "expected a*c*d features", xv.shape);
  check_arg(wv.shape == std::vector<int64_t>{p.a, p.b, p.c, p.d}, "w", "expected the pattern's shape");
  check_shape(yv.shape == (batch_last ? std::vector<int64_t>{M, batch} : std::vector<int64_t>{batch, M}),
              "y", "wrong output shape", yv.shape);
  strux::cuda::KsPlan(p, batch, batch_last, xv.dt, strux::py::ks_options(options)).forward(xv.p, wv.p, yv.p, stream_ptr(stream));
}

void ks_backward(const Arr& dy, const Arr& x, const Arr& w, std::optional<Arr> dx,
                 std::optional<Arr> dw32, const std::vector<int64_t>& pat, bool batch_last,
                 int64_t options, uintptr_t stream) {
  const auto p = pattern_of(pat);
  View dyv = view(dy, "dy", 2), xv = view(x, "x", 2), wv = view(w, "w", 4);
  same(dyv, xv, "x");
  same(dyv, wv, "w");
  const int64_t N = p.a * p.c * p.d, M = p.a * p.b * p.d;
  const int64_t batch = batch_last ? xv.shape[1] : xv.shape[0];
  check_shape(xv.shape == (batch_last ? std::vector<int64_t>{N, batch} : std::vector<int64_t>{batch, N}),
              "x", "wrong shape", xv.shape);
  check_shape(dyv.shape == (batch_last ? std::vector<int64_t>{M, batch} : std::vector<int64_t>{batch, M}),
              "dy", "wrong shape", dyv.shape);
  check_arg(wv.shape == std::vector<int64_t>{p.a, p.b, p.c, p.d}, "w", "expected the pattern's shape");
  strux::cuda::KsPlan plan(p, batch, batch_last, xv.dt, strux::py::ks_options(options));
  void* dxp = nullptr;
  float* dwp = nullptr;
  if (dx) {
    View dxv = view(*dx, "dx", 2);
    same(dyv, dxv, "dx");
    check_arg(dxv.shape == xv.shape, "dx", "expected the shape of x");
    dxp = dxv.p;
  }
  if (dw32) {
    View dwv = view(*dw32, "dw32", 4);
    check_arg(dwv.dt == DType::f32, "dw32", "expected float32");
    check_arg(dwv.shape == wv.shape, "dw32", "expected the shape of w");
    dwp = static_cast<float*>(dwv.p);
  }
  plan.backward(dyv.p, xv.p, wv.p, dxp, dwp, stream_ptr(stream));
}

strux::cuda::KsPlan ks_plan(const std::vector<int64_t>& pat, int64_t batch, bool batch_last, int dtype,
                            int64_t options) {
  return strux::cuda::KsPlan(pattern_of(pat), batch, batch_last, DType(dtype), strux::py::ks_options(options));
}

// Which product path a plan picks: "blas" (cuBLAS on strided views), "stream" (batch-last,
// W in shared memory), "tr" (batch-first d > 1: transpositions + cuBLAS) or "kernels", for
// forward and backward_x (tests and bench; options force one).
std::pair<std::string, std::string> ks_path(const std::vector<int64_t>& pat, int64_t batch,
                                            bool batch_last, int dtype, int64_t options) {
  const auto plan = ks_plan(pat, batch, batch_last, dtype, options);
  return {strux::cuda::ks_path_name(plan.forward_path()),
          strux::cuda::ks_path_name(plan.backward_x_path())};
}

// backward_w's path: ("blas" or "tr", batch chunk of one GEMM accumulation) or ("kernels", 0).
std::pair<std::string, int64_t> ks_dw_path(const std::vector<int64_t>& pat, int64_t batch,
                                           bool batch_last, int dtype, int64_t options) {
  const auto plan = ks_plan(pat, batch, batch_last, dtype, options);
  return {strux::cuda::ks_path_name(plan.backward_w_path()), plan.backward_w_chunk()};
}

std::string ks_describe(const std::vector<int64_t>& pat, int64_t batch, bool batch_last, int dtype,
                        int64_t options) {
  return ks_plan(pat, batch, batch_last, dtype, options).describe();
}

std::tuple<int64_t, int64_t, int64_t> btn(const View& v) { return {v.shape[0], v.shape[1], v.shape[2]}; }

int64_t diag_scan_workspace(int64_t B, int64_t T, int64_t n, int dtype) {
  return strux::cuda::DiagScanPlan(B, T, n, DType(dtype), {strux::cuda::DiagScanAlgo::lookback}).workspace_bytes();
}

std::string diag_scan_describe(int64_t B, int64_t T, int64_t n, int dtype, int algo) {
  return strux::cuda::DiagScanPlan(B, T, n, DType(dtype), strux::py::diag_scan_options(algo)).describe();
}

void check_h0(const std::optional<Arr>& h0, const View& ref, const char* name) {
  if (!h0) return;
  View v = view(*h0, name, 2);
  same(ref, v, name);
  check_arg(v.shape == std::vector<int64_t>{ref.shape[0], ref.shape[2]}, name, "expected (B, n)");
}

void diag_scan_forward(const Arr& a, const Arr& b, std::optional<Arr> h0, const Arr& h,
                       const Arr& ws, double scale, int algo, uintptr_t stream) {
  View av = view(a, "a", 3), bv = view(b, "b", 3), hv = view(h, "h", 3);
  same(av, bv, "b");
  same(av, hv, "h");
  check_arg(bv.shape == av.shape && hv.shape == av.shape, "b", "expected the shape of a");
  check_h0(h0, av, "h0");
  auto [B, T, n] = btn(av);
  strux::cuda::DiagScanPlan plan(B, T, n, av.dt, strux::py::diag_scan_options(algo));
  check_arg(int64_t(ws.nbytes()) >= plan.workspace_bytes(), "workspace", "too small");
  plan.forward(av.p, bv.p, h0 ? h0->data() : nullptr, hv.p, scratch(ws), stream_ptr(stream), scale);
}

void diag_scan_backward(const Arr& a, const Arr& h, std::optional<Arr> h0, const Arr& dh,
                        const Arr& da, const Arr& db, std::optional<Arr> dh0, const Arr& ws,
                        int algo, uintptr_t stream) {
  View av = view(a, "a", 3), hv = view(h, "h", 3), dhv = view(dh, "dh", 3), dav = view(da, "da", 3),
       dbv = view(db, "db", 3);
  for (auto* v : {&hv, &dhv, &dav, &dbv}) {
    same(av, *v, "dh");
    check_arg(v->shape == av.shape, "dh", "expected the shape of a");
  }
  check_h0(h0, av, "h0");
  check_h0(dh0, av, "dh0");
  auto [B, T, n] = btn(av);
  strux::cuda::DiagScanPlan plan(B, T, n, av.dt, strux::py::diag_scan_options(algo));
  check_arg(int64_t(ws.nbytes()) >= plan.workspace_bytes(), "workspace", "too small");
  plan.backward(av.p, hv.p, h0 ? h0->data() : nullptr, dhv.p, dav.p, dbv.p,
                dh0 ? dh0->data() : nullptr, scratch(ws), stream_ptr(stream));
}

// cuFFT plans are costly to make: one CirculantScanPlan per (device, B, T, n, dtype), kept.
std::shared_ptr<strux::cuda::CirculantScanPlan> circ_plan(int device, int64_t B, int64_t T, int64_t n,
                                                          DType dt) {
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, int64_t, int64_t, int>, std::shared_ptr<strux::cuda::CirculantScanPlan>>
      cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(device, B, T, n, int(dt));
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto p = std::make_shared<strux::cuda::CirculantScanPlan>(B, T, n, dt);
  cache[key] = p;
  return p;
}

int64_t circulant_scan_workspace(int device, int64_t B, int64_t T, int64_t n, int dtype) {
  return circ_plan(device, B, T, n, DType(dtype))->workspace_bytes();
}

// The real dtype of the circulant scans (float32 or float64) and its complex partner.
DType circ_real(const View& v, const char* name) {
  check_arg(v.dt == DType::f32 || v.dt == DType::f64, name, "expected float32 or float64, got ",
            strux::cuda::dtype_name(v.dt));
  return v.dt;
}
DType complex_of(DType real) { return real == DType::f64 ? DType::c128 : DType::c64; }

void circulant_scan_forward(const Arr& a, const Arr& u, std::optional<Arr> h0, const Arr& h,
                            const Arr& ws, uintptr_t stream) {
  View av = view(a, "a", 3), uv = view(u, "u", 3), hv = view(h, "h", 3);
  const DType dt = circ_real(av, "a");
  same(av, uv, "u");
  same(av, hv, "h");
  check_arg(uv.shape == av.shape && hv.shape == av.shape, "u", "expected the shape of a");
  check_h0(h0, av, "h0");
  auto [B, T, n] = btn(av);
  auto plan = circ_plan(a.device_id(), B, T, n, dt);
  check_arg(int64_t(ws.nbytes()) >= plan->workspace_bytes(), "workspace", "too small");
  plan->forward(av.p, uv.p, h0 ? h0->data() : nullptr, hv.p, scratch(ws), stream_ptr(stream));
}

// a_hat (B, T, n/2+1) complex64 for fourier=True, else a (B, T, n) float32.
void circulant_scan_forward_fourier(const Arr& a_hat, const Arr& u, std::optional<Arr> h0, const Arr& h,
                                    const Arr& ws, uintptr_t stream) {
  View av = view(a_hat, "a", 3), uv = view(u, "u", 3), hv = view(h, "h", 3);
  const DType dt = circ_real(uv, "u");
  check_arg(av.dt == complex_of(dt), "a", "expected ", strux::cuda::dtype_name(complex_of(dt)),
            " (the complex type of u)");
  same(uv, hv, "h");
  auto [B, T, n] = btn(uv);
  check_arg(av.shape == std::vector<int64_t>{B, T, n / 2 + 1}, "a", "expected (B, T, n//2 + 1)");
  check_arg(hv.shape == uv.shape, "h", "expected the shape of u");
  check_h0(h0, uv, "h0");
  auto plan = circ_plan(u.device_id(), B, T, n, dt);
  check_arg(int64_t(ws.nbytes()) >= plan->workspace_bytes(), "workspace", "too small");
  plan->forward_fourier(av.p, uv.p, h0 ? h0->data() : nullptr, hv.p, scratch(ws), stream_ptr(stream));
}

void circulant_scan_backward(const Arr& a, bool fourier, const Arr& u, std::optional<Arr> h0, const Arr& dh,
                             const Arr& da, const Arr& du, std::optional<Arr> dh0, const Arr& ws, uintptr_t stream) {
  View av = view(a, "a", 3), uv = view(u, "u", 3), dhv = view(dh, "dh", 3), dav = view(da, "da", 3),
       duv = view(du, "du", 3);
  const DType dt = circ_real(uv, "u");
  auto [B, T, n] = btn(uv);
  const DType adt = fourier ? complex_of(dt) : dt;
  const auto ashape = std::vector<int64_t>{B, T, fourier ? n / 2 + 1 : n};
  check_arg(av.dt == adt && av.shape == ashape, "a", "expected the dtype and shape of a");
  check_arg(dav.dt == adt && dav.shape == ashape, "da", "expected the dtype and shape of a");
  for (auto* v : {&dhv, &duv}) {
    same(uv, *v, "dh");
    check_arg(v->shape == uv.shape, "dh", "expected the shape of u");
  }
  check_h0(h0, uv, "h0");
  check_h0(dh0, uv, "dh0");
  auto plan = circ_plan(u.device_id(), B, T, n, dt);
  check_arg(int64_t(ws.nbytes()) >= plan->workspace_bytes(), "workspace", "too small");
  plan->backward(fourier ? nullptr : av.p, fourier ? av.p : nullptr, uv.p, h0 ? h0->data() : nullptr, dhv.p,
                 dav.p, duv.p, dh0 ? dh0->data() : nullptr, scratch(ws), stream_ptr(stream));
}

// One BlockCirculantScanPlan per (device, B, T, p, k, options): the plan picks its kernels when
// built, so a forced choice must not reuse another choice's plan.
std::shared_ptr<strux::cuda::BlockCirculantScanPlan> block_plan(int device, int64_t B, int64_t T, int64_t p,
                                                                int64_t k, int registers, int64_t chunk) {
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t, int, int64_t>,
                  std::shared_ptr<strux::cuda::BlockCirculantScanPlan>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(device, B, T, p, k, registers, chunk);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto pl = std::make_shared<strux::cuda::BlockCirculantScanPlan>(B, T, p, k,
                                                                  strux::py::block_scan_options(registers, chunk));
  cache[key] = pl;
  return pl;
}

int64_t block_circulant_scan_workspace(int device, int64_t B, int64_t T, int64_t p, int64_t k, int registers,
                                       int64_t chunk) {
  return block_plan(device, B, T, p, k, registers, chunk)->workspace_bytes();
}

void block_circulant_scan_forward(const Arr& a, const Arr& u, std::optional<Arr> h0, const Arr& h, const Arr& ws,
                                  int registers, int64_t chunk, uintptr_t stream) {
  View av = view(a, "a", 5), uv = view(u, "u", 3), hv = view(h, "h", 3);
  check_arg(av.dt == DType::f32, "a", "expected float32");
  same(av, uv, "u");
  same(av, hv, "h");
  auto [B, T, n] = btn(uv);
  const int64_t p = av.shape[2], k = av.shape[4];
  check_arg(av.shape == std::vector<int64_t>{B, T, p, p, k} && p * k == n, "a", "expected (B, T, p, p, k), n = p k");
  check_arg(hv.shape == uv.shape, "h", "expected the shape of u");
  check_h0(h0, uv, "h0");
  auto plan = block_plan(u.device_id(), B, T, p, k, registers, chunk);
  check_arg(int64_t(ws.nbytes()) >= plan->workspace_bytes(), "workspace", "too small");
  plan->forward(static_cast<const float*>(av.p), static_cast<const float*>(uv.p),
                h0 ? static_cast<const float*>(h0->data()) : nullptr, static_cast<float*>(hv.p), scratch(ws),
                stream_ptr(stream));
}


int64_t block_circulant_scan_backward_workspace(int device, int64_t B, int64_t T, int64_t p, int64_t k,
                                                int registers, int64_t chunk) {
  return block_plan(device, B, T, p, k, registers, chunk)->backward_workspace_bytes();
}

// (register kernels?, chunk length) of the plan for this shape: tests and benchmarks.
std::pair<bool, int64_t> block_circulant_scan_path(int device, int64_t B, int64_t T, int64_t p, int64_t k,
                                                   int registers, int64_t chunk) {
  auto pl = block_plan(device, B, T, p, k, registers, chunk);
  return {pl->register_kernels(), pl->chunk_length()};
}

std::string block_circulant_scan_describe(int device, int64_t B, int64_t T, int64_t p, int64_t k, int registers,
                                          int64_t chunk) {
  return block_plan(device, B, T, p, k, registers, chunk)->describe();
}

void block_circulant_scan_backward(const Arr& a, const Arr& u, std::optional<Arr> h0, const Arr& dh,
                                   std::optional<Arr> dh_last, const Arr& da, const Arr& du, std::optional<Arr> dh0,
                                   const Arr& ws, int registers, int64_t chunk, uintptr_t stream) {
  View av = view(a, "a", 5), uv = view(u, "u", 3), dhv = view(dh, "dh", 3), dav = view(da, "da", 5),
       duv = view(du, "du", 3);
  check_arg(av.dt == DType::f32, "a", "expected float32");
  for (auto* v : {&uv, &dhv, &duv}) same(av, *v, "u");
  same(av, dav, "da");
  auto [B, T, n] = btn(uv);
  const int64_t p = av.shape[2], k = av.shape[4];
  check_arg(av.shape == std::vector<int64_t>{B, T, p, p, k} && p * k == n, "a", "expected (B, T, p, p, k), n = p k");
  check_arg(dav.shape == av.shape, "da", "expected the shape of a");
  check_arg(dhv.shape == uv.shape, "dh", "expected the shape of u");
  check_arg(duv.shape == uv.shape, "du", "expected the shape of u");
  check_h0(h0, uv, "h0");
  check_h0(dh_last, uv, "dh_last");
  check_h0(dh0, uv, "dh0");
  auto plan = block_plan(u.device_id(), B, T, p, k, registers, chunk);
  check_arg(int64_t(ws.nbytes()) >= plan->backward_workspace_bytes(), "workspace", "too small");
  auto f = [](const std::optional<Arr>& x) { return x ? static_cast<float*>(x->data()) : nullptr; };
  plan->backward(static_cast<const float*>(av.p), static_cast<const float*>(uv.p), f(h0),
                 static_cast<const float*>(dhv.p), f(dh_last), static_cast<float*>(dav.p),
                 static_cast<float*>(duv.p), f(dh0), scratch(ws), stream_ptr(stream));
}

}  // namespace

void bind_cuda_ks_scan(nb::module_& m) {
  m.def("cuda_ks_forward", &ks_forward, nb::arg("x"), nb::arg("w"), nb::arg("y"), nb::arg("pattern"),
        nb::arg("batch_last"), nb::arg("options"), nb::arg("stream"));
  m.def("cuda_ks_backward", &ks_backward, nb::arg("dy"), nb::arg("x"), nb::arg("w"),
        nb::arg("dx").none(), nb::arg("dw32").none(), nb::arg("pattern"), nb::arg("batch_last"),
        nb::arg("options"), nb::arg("stream"));
  m.def("cuda_ks_path", &ks_path, nb::arg("pattern"), nb::arg("batch"), nb::arg("batch_last"),
        nb::arg("dtype"), nb::arg("options") = 0);
  m.def("cuda_ks_dw_path", &ks_dw_path, nb::arg("pattern"), nb::arg("batch"), nb::arg("batch_last"),
        nb::arg("dtype"), nb::arg("options") = 0);
  m.def("cuda_ks_describe", &ks_describe, nb::arg("pattern"), nb::arg("batch"), nb::arg("batch_last"),
        nb::arg("dtype"), nb::arg("options") = 0);
  m.def("cuda_diag_scan_describe", &diag_scan_describe, nb::arg("B"), nb::arg("T"), nb::arg("n"),
        nb::arg("dtype"), nb::arg("algo") = -1);
  m.def("cuda_block_circulant_scan_describe", &block_circulant_scan_describe, nb::arg("device"), nb::arg("B"),
        nb::arg("T"), nb::arg("p"), nb::arg("k"), nb::arg("registers") = -1, nb::arg("chunk") = 0);
  m.def("cuda_diag_scan_workspace", &diag_scan_workspace);
  m.def("cuda_diag_scan_forward", &diag_scan_forward, nb::arg("a"), nb::arg("b"),
        nb::arg("h0").none(), nb::arg("h"), nb::arg("workspace"), nb::arg("scale"), nb::arg("algo"),
        nb::arg("stream"));
  m.def("cuda_diag_scan_backward", &diag_scan_backward, nb::arg("a"), nb::arg("h"),
        nb::arg("h0").none(), nb::arg("dh"), nb::arg("da"), nb::arg("db"), nb::arg("dh0").none(),
        nb::arg("workspace"), nb::arg("algo"), nb::arg("stream"));
  m.def("cuda_circulant_scan_workspace", &circulant_scan_workspace);
  m.def("cuda_circulant_scan_forward", &circulant_scan_forward, nb::arg("a"), nb::arg("u"),
        nb::arg("h0").none(), nb::arg("h"), nb::arg("workspace"), nb::arg("stream"));
  m.def("cuda_circulant_scan_forward_fourier", &circulant_scan_forward_fourier, nb::arg("a_hat"), nb::arg("u"),
        nb::arg("h0").none(), nb::arg("h"), nb::arg("workspace"), nb::arg("stream"));
  m.def("cuda_circulant_scan_backward", &circulant_scan_backward, nb::arg("a"), nb::arg("fourier"), nb::arg("u"),
        nb::arg("h0").none(), nb::arg("dh"), nb::arg("da"), nb::arg("du"), nb::arg("dh0").none(),
        nb::arg("workspace"), nb::arg("stream"));
  m.def("cuda_block_circulant_scan_workspace", &block_circulant_scan_workspace);
  m.def("cuda_block_circulant_scan_forward", &block_circulant_scan_forward, nb::arg("a"), nb::arg("u"),
        nb::arg("h0").none(), nb::arg("h"), nb::arg("workspace"), nb::arg("registers"), nb::arg("chunk"),
        nb::arg("stream"));
  m.def("cuda_block_circulant_scan_backward_workspace", &block_circulant_scan_backward_workspace);
  m.def("cuda_block_circulant_scan_path", &block_circulant_scan_path);
  m.def("cuda_block_scan_stale_errors", &strux::cuda::block_scan_stale_errors);
  m.def("cuda_block_circulant_scan_backward", &block_circulant_scan_backward, nb::arg("a"), nb::arg("u"),
        nb::arg("h0").none(), nb::arg("dh"), nb::arg("dh_last").none(), nb::arg("da"), nb::arg("du"),
        nb::arg("dh0").none(), nb::arg("workspace"), nb::arg("registers"), nb::arg("chunk"), nb::arg("stream"));
}

#endif  // STRUX_HAVE_CUDA
