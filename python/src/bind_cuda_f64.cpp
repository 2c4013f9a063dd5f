// nanobind entries for what the tuned CUDA plans do not cover, run by the operator layer
// (<strux/strux.hpp>, src/api/): float64 ks factors and whole chains (strux::op::KSFactor /
// KSChain), float64 block-circulant scans (strux::op::BlockCirculantScan, n = p·k up to
// cuda_block_scan_f64_max_n) and the gradient for the blocks of a block Toeplitz operator
// (api::toeplitz_grad_blocks, float32 and float64). Raw device pointers and sizes in, launches on
// the caller's stream and device; scratch (chain activations, the scan's recomputed states) is
// the caller's, sized by the *_workspace entries.
//
// Contract (private to strux/_cuda_ks.py, _cuda_scan.py, _cuda_toeplitz.py): every pointer is a
// C-contiguous device array of the stated dtype on `device`, of the sizes the other arguments
// imply; 0 stands for "not wanted" where noted. The operators check the views they are given,
// which here are built from those sizes.
#ifdef STRUX_HAVE_CUDA

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "api/cuda_block_scan_f64.hpp"
#include "api/cuda_toeplitz_grad.hpp"
#include "arrays.hpp"
#include "core/plan_cache.hpp"
#include "cuda_binding.hpp"
#include "strux/strux.hpp"

namespace {

using strux::check_arg;
using strux::Device;
using strux::DType;
using strux::KSLayout;
using strux::KSPattern;
using strux::Stream;
using strux::View;
using strux::Workspace;
using strux::py::ptr;
namespace op = strux::op;

// Operators per host thread (an operator runs one call at a time; autograd runs backward on its
// own threads), as the other CUDA bindings keep their plans.
template <class Op>
std::shared_ptr<Op> cached(const strux::core::PlanKey<8>& key, const typename Op::Problem& p) {
  thread_local strux::core::PlanCache<strux::core::PlanKey<8>, Op> cache(64);
  return cache.get(key, [&] { return std::make_shared<Op>(p); });
}

Stream stream(uintptr_t s) { return Stream(ptr(s)); }

// ---- ks ------------------------------------------------------------------------------------------

View act(uintptr_t p, int64_t width, int64_t batch, bool bl, Device dev) {
  if (!p) return {};
  return bl ? View(ptr(p), DType::f64, {width, batch}, dev) : View(ptr(p), DType::f64, {batch, width}, dev);
}

View weights(uintptr_t p, const KSPattern& q, Device dev) {
  return p ? View(ptr(p), DType::f64, {q.a, q.b, q.c, q.d}, dev) : View();
}

std::shared_ptr<op::KSFactor> factor(const KSPattern& q, int64_t batch, bool bl, int device) {
  const op::KSFactorProblem p{q, batch, bl ? KSLayout::BatchLast : KSLayout::BatchFirst, DType::f64,
                              Device::cuda(device)};
  return cached<op::KSFactor>({q.a, q.b, q.c, q.d, batch, int64_t(bl), device, 0}, p);
}

// y = x Kᵀ ("bsf") or K x ("bsl").
void ks_forward(uintptr_t x, uintptr_t w, uintptr_t y, int64_t a, int64_t b, int64_t c, int64_t d, int64_t batch,
                bool bl, int device, uintptr_t s) {
  const KSPattern q{a, b, c, d};
  const Device dev = Device::cuda(device);
  factor(q, batch, bl, device)->forward({act(x, q.cols(), batch, bl, dev), weights(w, q, dev),
                                         act(y, q.rows(), batch, bl, dev)}, {}, stream(s));
}

// dx (0: skipped) and dw (float64, written; 0: skipped).
void ks_backward(uintptr_t dy, uintptr_t x, uintptr_t w, uintptr_t dx, uintptr_t dw, int64_t a, int64_t b, int64_t c,
                 int64_t d, int64_t batch, bool bl, int device, uintptr_t s) {
  const KSPattern q{a, b, c, d};
  const Device dev = Device::cuda(device);
  factor(q, batch, bl, device)
      ->backward({act(dy, q.rows(), batch, bl, dev), act(x, q.cols(), batch, bl, dev), weights(w, q, dev),
                  act(dx, q.cols(), batch, bl, dev), weights(dw, q, dev)},
                 {}, stream(s));
}

std::vector<KSPattern> patterns(const std::vector<int64_t>& flat) {
  check_arg(!flat.empty() && flat.size() % 4 == 0, "patterns", "expected 4 values per pattern, got ", flat.size(),
            " values");
  std::vector<KSPattern> ps;
  for (size_t i = 0; i < flat.size(); i += 4) ps.push_back({flat[i], flat[i + 1], flat[i + 2], flat[i + 3]});
  return ps;
}

bool same(const std::vector<KSPattern>& x, const std::vector<KSPattern>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].a != y[i].a || x[i].b != y[i].b || x[i].c != y[i].c || x[i].d != y[i].d) return false;
  return true;
}

// The chain's key holds two hashes of its patterns (any number of factors); a cached chain whose
// patterns differ (a collision) is not used: the call gets a chain of its own.
std::shared_ptr<op::KSChain> chain(const std::vector<int64_t>& flat, int64_t batch, bool bl, int device) {
  const op::KSChainProblem p{patterns(flat), batch, bl ? KSLayout::BatchLast : KSLayout::BatchFirst, DType::f64,
                             Device::cuda(device)};
  uint64_t h1 = 1469598103934665603ull, h2 = 0x9e3779b97f4a7c15ull;
  for (int64_t v : flat) {
    h1 = (h1 ^ uint64_t(v)) * 1099511628211ull;
    h2 = (h2 ^ uint64_t(v)) * 0xff51afd7ed558ccdull + 0x632be59bd9b4e019ull;
  }
  auto c = cached<op::KSChain>(
      {int64_t(flat.size()), batch, int64_t(bl), device, int64_t(h1), int64_t(h2), 0, 0}, p);
  return same(c->problem().patterns, p.patterns) ? c : std::make_shared<op::KSChain>(p);
}

std::vector<View> weight_views(const std::vector<uintptr_t>& ws, const std::vector<KSPattern>& ps, Device dev,
                               const char* name) {
  check_arg(ws.size() == ps.size(), name, "expected ", ps.size(), " pointers (one per pattern), got ", ws.size());
  std::vector<View> v;
  for (size_t i = 0; i < ws.size(); ++i) v.push_back(weights(ws[i], ps[i], dev));
  return v;
}

int64_t chain_workspace(const std::vector<int64_t>& flat, int64_t batch, bool bl, int device) {
  return int64_t(chain(flat, batch, bl, device)->workspace_bytes());
}

// Chain forward, K_P first; the activations in `work` (chain_workspace bytes).
void chain_forward(uintptr_t x, const std::vector<uintptr_t>& ws, uintptr_t y, uintptr_t work, int64_t work_bytes,
                   const std::vector<int64_t>& flat, int64_t batch, bool bl, int device, uintptr_t s) {
  const auto c = chain(flat, batch, bl, device);
  const auto& ps = c->problem().patterns;
  const Device dev = Device::cuda(device);
  c->forward({act(x, ps.back().cols(), batch, bl, dev), weight_views(ws, ps, dev, "ws"),
              act(y, ps.front().rows(), batch, bl, dev)},
             Workspace{ptr(work), size_t(work_bytes)}, stream(s));
}

// Chain backward (the activations recomputed into `work`): dx (0: skipped), dws[q] float64 (0:
// skipped), written.
void chain_backward(uintptr_t dy, uintptr_t x, const std::vector<uintptr_t>& ws, uintptr_t dx,
                    const std::vector<uintptr_t>& dws, uintptr_t work, int64_t work_bytes,
                    const std::vector<int64_t>& flat, int64_t batch, bool bl, int device, uintptr_t s) {
  const auto c = chain(flat, batch, bl, device);
  const auto& ps = c->problem().patterns;
  const Device dev = Device::cuda(device);
  c->backward({act(dy, ps.front().rows(), batch, bl, dev), act(x, ps.back().cols(), batch, bl, dev),
               weight_views(ws, ps, dev, "ws"), act(dx, ps.back().cols(), batch, bl, dev),
               weight_views(dws, ps, dev, "dws")},
              Workspace{ptr(work), size_t(work_bytes)}, stream(s));
}

// ---- block-circulant scan ----------------------------------------------------------------------

int64_t block_scan_max_n(int device) {
  strux::py::DeviceGuard g(device);
  return strux::api::block_scan_f64_max_n();
}

std::shared_ptr<op::BlockCirculantScan> block_scan(int64_t B, int64_t T, int64_t p, int64_t k, int device) {
  return cached<op::BlockCirculantScan>({B, T, p, k, device, 0, 0, 0},
                                        {B, T, p, k, DType::f64, Device::cuda(device)});
}

int64_t block_scan_workspace(int64_t B, int64_t T, int64_t p, int64_t k, int device) {
  return int64_t(block_scan(B, T, p, k, device)->workspace_bytes());
}

// Views of one scan problem's arrays (null for a 0 pointer).
class ScanViews {
 public:
  ScanViews(int64_t B, int64_t T, int64_t p, int64_t k, int device)
      : dev_(Device::cuda(device)), B_(B), T_(T), p_(p), k_(k) {}
  View coeffs(uintptr_t x) const { return x ? View(ptr(x), DType::f64, {B_, T_, p_, p_, k_}, dev_) : View(); }
  View seq(uintptr_t x) const { return x ? View(ptr(x), DType::f64, {B_, T_, p_ * k_}, dev_) : View(); }
  View one(uintptr_t x) const { return x ? View(ptr(x), DType::f64, {B_, p_ * k_}, dev_) : View(); }

 private:
  Device dev_;
  int64_t B_, T_, p_, k_;
};

// h (B, T, n) from a, u and h0 (0: zeros).
void block_scan_forward(uintptr_t a, uintptr_t u, uintptr_t h0, uintptr_t h, int64_t B, int64_t T, int64_t p,
                        int64_t k, int device, uintptr_t s) {
  const ScanViews v(B, T, p, k, device);
  op::ScanForward f;
  f.a = v.coeffs(a);
  f.u = v.seq(u);
  f.h = v.seq(h);
  f.h0 = v.one(h0);
  block_scan(B, T, p, k, device)->forward(f, {}, stream(s));
}

// da, du and dh0 (0: skipped; h0 0: zeros) given dh and dh_last (0: none); h is recomputed in
// `work` (block_scan_workspace bytes).
void block_scan_backward(uintptr_t a, uintptr_t u, uintptr_t h0, uintptr_t dh, uintptr_t dh_last, uintptr_t da,
                         uintptr_t du, uintptr_t dh0, uintptr_t work, int64_t work_bytes, int64_t B, int64_t T,
                         int64_t p, int64_t k, int device, uintptr_t s) {
  const ScanViews v(B, T, p, k, device);
  op::ScanBackward g;
  g.dh = v.seq(dh);
  g.a = v.coeffs(a);
  g.u = v.seq(u);
  g.da = v.coeffs(da);
  g.du = v.seq(du);
  g.h0 = v.one(h0);
  g.dh_last = v.one(dh_last);
  g.dh0 = v.one(dh0);
  block_scan(B, T, p, k, device)->backward(g, Workspace{ptr(work), size_t(work_bytes)}, stream(s));
}

// ---- toeplitz blocks gradient ------------------------------------------------------------------

// dblocks[t] = Σ_r Σ_{i >= t} dd[i, :, r] m[i - t, :, r]ᵀ (Nt, Nd, Nm), written; m and dd in the
// operator's layout with R right-hand sides; dtype "float32" or "float64".
void toeplitz_grad_blocks(uintptr_t m, uintptr_t dd, uintptr_t dblocks, int64_t Nt, int64_t Nd, int64_t Nm,
                          int64_t R, bool space_major, const std::string& dtype, int device, uintptr_t s) {
  check_arg(dtype == "float32" || dtype == "float64", "dtype", "expected 'float32' or 'float64', got '", dtype,
            "'");
  strux::py::DeviceGuard g(device);
  strux::api::toeplitz_grad_blocks(dtype == "float64" ? DType::f64 : DType::f32, Nt, Nd, Nm, R, space_major, ptr(m),
                                   ptr(dd), ptr(dblocks), stream(s));
}

}  // namespace

void bind_cuda_f64(nb::module_& m) {
  m.def("cuda_ks_f64_forward", &ks_forward, nb::arg("x"), nb::arg("w"), nb::arg("y"), nb::arg("a"), nb::arg("b"),
        nb::arg("c"), nb::arg("d"), nb::arg("batch"), nb::arg("batch_last"), nb::arg("device"), nb::arg("stream"));
  m.def("cuda_ks_f64_backward", &ks_backward, nb::arg("dy"), nb::arg("x"), nb::arg("w"), nb::arg("dx"),
        nb::arg("dw"), nb::arg("a"), nb::arg("b"), nb::arg("c"), nb::arg("d"), nb::arg("batch"),
        nb::arg("batch_last"), nb::arg("device"), nb::arg("stream"));
  m.def("cuda_ks_f64_chain_workspace", &chain_workspace, nb::arg("patterns"), nb::arg("batch"),
        nb::arg("batch_last"), nb::arg("device"));
  m.def("cuda_ks_f64_chain_forward", &chain_forward, nb::arg("x"), nb::arg("ws"), nb::arg("y"), nb::arg("work"),
        nb::arg("work_bytes"), nb::arg("patterns"), nb::arg("batch"), nb::arg("batch_last"), nb::arg("device"),
        nb::arg("stream"));
  m.def("cuda_ks_f64_chain_backward", &chain_backward, nb::arg("dy"), nb::arg("x"), nb::arg("ws"), nb::arg("dx"),
        nb::arg("dws"), nb::arg("work"), nb::arg("work_bytes"), nb::arg("patterns"), nb::arg("batch"),
        nb::arg("batch_last"), nb::arg("device"), nb::arg("stream"));
  m.def("cuda_block_scan_f64_max_n", &block_scan_max_n, nb::arg("device"));
  m.def("cuda_block_scan_f64_workspace", &block_scan_workspace, nb::arg("B"), nb::arg("T"), nb::arg("p"),
        nb::arg("k"), nb::arg("device"));
  m.def("cuda_block_scan_f64_forward", &block_scan_forward, nb::arg("a"), nb::arg("u"), nb::arg("h0"), nb::arg("h"),
        nb::arg("B"), nb::arg("T"), nb::arg("p"), nb::arg("k"), nb::arg("device"), nb::arg("stream"));
  m.def("cuda_block_scan_f64_backward", &block_scan_backward, nb::arg("a"), nb::arg("u"), nb::arg("h0"),
        nb::arg("dh"), nb::arg("dh_last"), nb::arg("da"), nb::arg("du"), nb::arg("dh0"), nb::arg("work"),
        nb::arg("work_bytes"), nb::arg("B"), nb::arg("T"), nb::arg("p"), nb::arg("k"), nb::arg("device"),
        nb::arg("stream"));
  m.def("cuda_toeplitz_grad_blocks", &toeplitz_grad_blocks, nb::arg("m"), nb::arg("dd"), nb::arg("dblocks"),
        nb::arg("Nt"), nb::arg("Nd"), nb::arg("Nm"), nb::arg("R"), nb::arg("space_major"), nb::arg("dtype"),
        nb::arg("device"), nb::arg("stream"));
}

#endif  // STRUX_HAVE_CUDA
