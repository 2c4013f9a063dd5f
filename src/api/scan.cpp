// strux::op::DiagScan, CirculantScan, BlockCirculantScan: argument checks and the CPU backend
// over the CPU scan plans of <strux/scan.hpp>.
#include <complex>

#include "api/common.hpp"
#include "core/checked_size.hpp"
#include "strux/scan.hpp"

namespace strux {
namespace {

using api::ScanBackend;

using api::ptr;

// The plans whose a has the state's element type S (all but the circulant scan's Fourier form)
// share one call form.
template <class S, class Plan>
void plan_forward(Plan& plan, const op::ScanForward& a) {
  plan.forward(ptr<S>(a.a), ptr<S>(a.u), ptr<S>(a.h0), ptr<S>(a.h));
}
template <class S, class Plan>
void plan_backward(Plan& plan, const op::ScanBackward& a) {
  plan.backward(ptr<S>(a.dh), ptr<S>(a.dh_last), ptr<S>(a.a), ptr<S>(a.u), ptr<S>(a.h0), ptr<S>(a.da),
                ptr<S>(a.du), ptr<S>(a.dh0));
}

template <class S>
class CpuDiagScan final : public ScanBackend {
 public:
  CpuDiagScan(const op::DiagScanProblem& p, DiagSolver s)
      : p_(p), plan_(p.B, p.T, p.n, {}, s), split_(s == DiagSolver::TimeSplit) {}
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    return msg("diagonal scan (B, T, n) = ", api::dims({p_.B, p_.T, p_.n}), ", ", dtype_name(p_.dtype),
               " on cpu: one sequential pass per channel, OpenMP over (batch, channel chunks)",
               split_ ? ", time split into segments with carries where the chunks are fewer than the threads" : "",
               "; backward recomputes h; workspace: none");
  }
  void forward(const op::ScanForward& a, void*, Stream) override { plan_forward<S>(plan_, a); }
  void backward(const op::ScanBackward& a, void*, Stream) override { plan_backward<S>(plan_, a); }

 private:
  op::DiagScanProblem p_;
  DiagScan<S> plan_;
  bool split_;
};

template <class R>
class CpuCirculantScan final : public ScanBackend {
  using C = std::complex<R>;

 public:
  explicit CpuCirculantScan(const op::CirculantScanProblem& p) : p_(p), plan_(p.B, p.T, p.n) {}
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    return msg("circulant scan (B, T, n) = ", api::dims({p_.B, p_.T, p_.n}), ", ", dtype_name(p_.dtype),
               p_.fourier ? ", a as half spectra" : ", a spatial",
               " on cpu: real DFTs of length n by ", plan_.dft_name(),
               ", a complex diagonal scan over the ", plan_.nfreq(),
               " frequencies, blocks of time steps kept in cache; workspace: none");
  }
  void forward(const op::ScanForward& a, void*, Stream) override {
    if (p_.fourier)
      plan_.forward_fourier(ptr<C>(a.a), ptr<R>(a.u), ptr<R>(a.h0), ptr<R>(a.h));
    else
      plan_forward<R>(plan_, a);
  }
  void backward(const op::ScanBackward& a, void*, Stream) override {
    if (p_.fourier)
      plan_.backward_fourier(ptr<R>(a.dh), ptr<R>(a.dh_last), ptr<C>(a.a), ptr<R>(a.u), ptr<R>(a.h0),
                             ptr<C>(a.da), ptr<R>(a.du), ptr<R>(a.dh0));
    else
      plan_backward<R>(plan_, a);
  }

 private:
  op::CirculantScanProblem p_;
  CirculantScan<R> plan_;
};

template <class R>
class CpuBlockCirculantScan final : public ScanBackend {
 public:
  explicit CpuBlockCirculantScan(const op::BlockCirculantScanProblem& p) : p_(p), plan_(p.B, p.T, p.p, p.k) {}
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    return msg("block-circulant scan (B, T, p, k) = ", api::dims({p_.B, p_.T, p_.p, p_.k}), ", ",
               dtype_name(p_.dtype), " on cpu: ",
               "real DFTs of length k by ", plan_.dft_name(), ", a ", p_.p, " x ", p_.p,
               " complex recurrence per frequency; workspace: none");
  }
  void forward(const op::ScanForward& a, void*, Stream) override { plan_forward<R>(plan_, a); }
  void backward(const op::ScanBackward& a, void*, Stream) override { plan_backward<R>(plan_, a); }

 private:
  op::BlockCirculantScanProblem p_;
  BlockCirculantScan<R> plan_;
};

// The CPU diagonal scan with its solver table (options.solver "", "rows", "time-split").
std::unique_ptr<ScanBackend> make_cpu_diag(const op::DiagScanProblem& p, const Options& o) {
  const int i = api::solver_index(o, "the CPU diagonal scan", {"", "rows", "time-split"});
  const DiagSolver s = i == 2 ? DiagSolver::TimeSplit : i == 1 ? DiagSolver::Rows : DiagSolver::Automatic;
  std::unique_ptr<ScanBackend> b;
  core::dispatch<core::CpuScalars>(p.dtype, "problem.dtype", "the CPU diagonal scan",
                                   [&](auto tag) { b = std::make_unique<CpuDiagScan<typename decltype(tag)::type>>(p, s); });
  return b;
}

// The checks shared by the three scans. a has shape `ashape` and dtype `adt`; every state-shaped
// array (u, h, dh, du) is (B, T, n); h0, dh_last, dh0 are (B, n).
struct Shapes {
  DType dt, adt;
  Device dev;
  int64_t B, T, n;
};

template <class AShape>
void check_args(const op::ScanForward& a, const Shapes& s, const AShape& check_a) {
  check_a(a.a, "a");
  api::check_view(a.u, "u", s.dt, s.dev, {s.B, s.T, s.n});
  api::check_view(a.h, "h", s.dt, s.dev, {s.B, s.T, s.n});
  api::check_optional(a.h0, "h0", s.dt, s.dev, {s.B, s.n});
  api::check_overlaps({{&a.h, "h"}}, {{&a.a, "a"}, {&a.u, "u"}, {&a.h0, "h0"}}, true);
}

template <class AShape>
void check_args(const op::ScanBackward& a, const Shapes& s, const AShape& check_a) {
  api::check_view(a.dh, "dh", s.dt, s.dev, {s.B, s.T, s.n});
  check_a(a.a, "a");
  api::check_view(a.u, "u", s.dt, s.dev, {s.B, s.T, s.n});
  check_a(a.da, "da");
  api::check_view(a.du, "du", s.dt, s.dev, {s.B, s.T, s.n});
  api::check_optional(a.h0, "h0", s.dt, s.dev, {s.B, s.n});
  api::check_optional(a.h, "h", s.dt, s.dev, {s.B, s.T, s.n});
  api::check_optional(a.dh_last, "dh_last", s.dt, s.dev, {s.B, s.n});
  api::check_optional(a.dh0, "dh0", s.dt, s.dev, {s.B, s.n});
  api::check_overlaps({{&a.da, "da"}, {&a.du, "du"}, {&a.dh0, "dh0"}},
                      {{&a.dh, "dh"}, {&a.a, "a"}, {&a.u, "u"}, {&a.h0, "h0"}, {&a.h, "h"}, {&a.dh_last, "dh_last"}},
                      true);
}

// Each scan's shapes, and the check of its a and da.
Shapes shapes(const op::DiagScanProblem& p) { return {p.dtype, p.dtype, p.device, p.B, p.T, p.n}; }
auto a_check(const op::DiagScanProblem&, const Shapes& sh) {
  return [&sh](const View& v, const char* nm) { api::check_view(v, nm, sh.dt, sh.dev, {sh.B, sh.T, sh.n}); };
}

Shapes shapes(const op::CirculantScanProblem& p) {
  return {p.dtype, p.fourier ? complex_of(p.dtype) : p.dtype, p.device, p.B, p.T, p.n};
}
// a and da: (B, T, n) real, or (B, T, n/2 + 1) complex in the Fourier form.
auto a_check(const op::CirculantScanProblem& p, const Shapes& sh) {
  const int64_t na = p.fourier ? p.n / 2 + 1 : p.n;
  return [&sh, na](const View& v, const char* nm) { api::check_view(v, nm, sh.adt, sh.dev, {sh.B, sh.T, na}); };
}

Shapes shapes(const op::BlockCirculantScanProblem& p) {
  return {p.dtype, p.dtype, p.device, p.B, p.T, p.p * p.k};
}
auto a_check(const op::BlockCirculantScanProblem& p, const Shapes& sh) {
  return [&p, &sh](const View& v, const char* nm) {
    api::check_view(v, nm, sh.adt, sh.dev, {p.B, p.T, p.p, p.p, p.k});
  };
}

// The checks of one forward or backward call of any of the three scans.
template <class P, class Args>
void check_call(const P& p, const Args& a) {
  const Shapes sh = shapes(p);
  check_args(a, sh, a_check(p, sh));
}

}  // namespace

namespace op {

DiagScan::DiagScan(const Problem& p, const Options& o) : Operator(p) {
  check_positive(p.B, "problem.B");
  check_positive(p.T, "problem.T");
  check_positive(p.n, "problem.n");
  checked_count("problem.n", {p.B, p.T, p.n, int64_t(dtype_size(p.dtype))});
  impl_ = STRUX_PICK_BACKEND(
      p.device, (make_cpu_diag(p, o)),
      api::cuda_diag_scan(p, o));
}

void DiagScan::forward(const Forward& a, Workspace ws, Stream s) {
  check_call(problem_, a);
  impl_->forward(a, api::check_workspace(ws, workspace_bytes()), s);
}

void DiagScan::backward(const Backward& a, Workspace ws, Stream s) {
  check_call(problem_, a);
  impl_->backward(a, api::check_workspace(ws, workspace_bytes()), s);
}

CirculantScan::CirculantScan(const Problem& p, const Options& o) : Operator(p) {
  check_positive(p.B, "problem.B");
  check_positive(p.T, "problem.T");
  check_positive(p.n, "problem.n");
  checked_count("problem.n", {p.B, p.T, p.n + 2, int64_t(dtype_size(p.dtype))});  // a_hat: n/2 + 1 complex
  impl_ = STRUX_PICK_BACKEND(
      p.device, (api::make_cpu<ScanBackend, CpuCirculantScan, core::RealScalars>(p, o, "the CPU circulant scan")),
      api::cuda_circulant_scan(p, o));
}

void CirculantScan::forward(const Forward& a, Workspace ws, Stream s) {
  check_call(problem_, a);
  impl_->forward(a, api::check_workspace(ws, workspace_bytes()), s);
}

void CirculantScan::backward(const Backward& a, Workspace ws, Stream s) {
  check_call(problem_, a);
  impl_->backward(a, api::check_workspace(ws, workspace_bytes()), s);
}

BlockCirculantScan::BlockCirculantScan(const Problem& p, const Options& o) : Operator(p) {
  check_positive(p.B, "problem.B");
  check_positive(p.T, "problem.T");
  check_positive(p.p, "problem.p");
  check_positive(p.k, "problem.k");
  checked_count("problem.p", {p.B, p.T, p.p, p.p, p.k, int64_t(dtype_size(p.dtype))});
  impl_ = STRUX_PICK_BACKEND(
      p.device,
      (api::make_cpu<ScanBackend, CpuBlockCirculantScan, core::RealScalars>(p, o, "the CPU block-circulant scan")),
      api::cuda_block_circulant_scan(p, o));
}

void BlockCirculantScan::forward(const Forward& a, Workspace ws, Stream s) {
  check_call(problem_, a);
  impl_->forward(a, api::check_workspace(ws, workspace_bytes()), s);
}

void BlockCirculantScan::backward(const Backward& a, Workspace ws, Stream s) {
  check_call(problem_, a);
  impl_->backward(a, api::check_workspace(ws, workspace_bytes()), s);
}

}  // namespace op
}  // namespace strux
