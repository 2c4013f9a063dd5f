// strux::op::KSFactor and KSChain: argument checks and the CPU backend over KSPlan<T> and
// KSChainPlan<T>.
#include <algorithm>
#include <vector>

#include "api/common.hpp"
#include "core/checked_size.hpp"
#include "strux/ks.hpp"

namespace strux {
namespace {

using api::KSChainBackend;
using api::KSFactorBackend;

std::string pattern_str(const KSPattern& p) { return api::dims({p.a, p.b, p.c, p.d}); }
const char* layout_str(KSLayout l) { return l == KSLayout::BatchFirst ? "batch-first" : "batch-last"; }

using api::ptr;

// The CPU solver tables (options.solver; "" = the rule of <strux/ks.hpp> KSSolver).
const std::initializer_list<const char*> kFactorSolvers = {"", "gemm", "tiles"};
const std::initializer_list<const char*> kChainSolvers = {"", "fused", "factors", "gemm", "pairs"};
KSSolver factor_solver(int i) { return i == 1 ? KSSolver::Gemm : i == 2 ? KSSolver::Tiles : KSSolver::Automatic; }
KSSolver chain_solver(int i) {
  return i == 1   ? KSSolver::Fused
         : i == 2 ? KSSolver::Factors
         : i == 3 ? KSSolver::Gemm
         : i == 4 ? KSSolver::Pairs
                  : KSSolver::Automatic;
}

// The CPU backend Impl<T>(p, solver) of problem p (make_cpu with a solver table).
template <class Base, template <class> class Impl, class P>
std::unique_ptr<Base> make_cpu_ks(const P& p, KSSolver solver) {
  std::unique_ptr<Base> b;
  core::dispatch<core::RealScalars>(p.dtype, "problem.dtype", "the CPU ks",
                                    [&](auto tag) { b = std::make_unique<Impl<typename decltype(tag)::type>>(p, solver); });
  return b;
}

const char* factor_path(bool tiles) {
  return tiles ? "the small-block tile kernel (tiles of batch rows transposed into cache, vector FMAs per "
                 "(i, j) group)"
               : "one BLAS GEMM per (i, j) group, OpenMP over groups and batch chunks";
}

template <class T>
class CpuKSFactor final : public KSFactorBackend {
 public:
  CpuKSFactor(const op::KSFactorProblem& p, KSSolver s) : p_(p), plan_(p.pattern, p.layout, s) {}
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    return msg("ks factor ", pattern_str(p_.pattern), ", batch ", p_.batch, ", ", layout_str(p_.layout), ", ",
               dtype_name(p_.dtype), " on cpu: ", factor_path(plan_.tiles()),
               !plan_.tiles() && p_.layout == KSLayout::BatchFirst && p_.pattern.d > 1
                   ? " (gathered into per-thread tiles)"
                   : "",
               "; workspace: none (per-thread tiles inside the call)");
  }
  void forward(const op::KSFactorForward& a, void*, Stream) override {
    plan_.forward(ptr<T>(a.x), ptr<T>(a.w), ptr<T>(a.y), p_.batch);
  }
  void backward(const op::KSFactorBackward& a, void*, Stream) override {
    plan_.backward(ptr<T>(a.dy), ptr<T>(a.x), ptr<T>(a.w), ptr<T>(a.dx), ptr<T>(a.dw), p_.batch);
  }

 private:
  op::KSFactorProblem p_;
  KSPlan<T> plan_;
};

template <class T>
class CpuKSChain final : public KSChainBackend {
 public:
  CpuKSChain(const op::KSChainProblem& p, KSSolver s)
      : p_(p), plan_(p.patterns, p.layout, p.batch, s), w_(p.patterns.size()), dw_(p.patterns.size()) {}
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    std::string s = msg("ks chain of ", p_.patterns.size(), " factors");
    for (const auto& q : p_.patterns) s += " " + pattern_str(q);
    s = msg(s, ", batch ", p_.batch, ", ", layout_str(p_.layout), ", ", dtype_name(p_.dtype), " on cpu: ");
    if (plan_.pairs() && p_.layout == KSLayout::BatchFirst)
      return msg(s, "radix-2 pairs: blocks of batch rows kept in L1 through every factor, pairs of positions as "
                    "vector lanes (one read of x, one write of y); workspace: none");
    if (plan_.pairs())
      return msg(s, "radix-2 pairs: tiles of batch columns through every factor, two factors per pass in "
                    "registers (one read of x, one write of y); backward: the fused tile kernel; workspace: none");
    if (plan_.fused())
      return msg(s, "fused: every factor on per-thread tiles of batch rows kept in cache (one read of x, one "
                    "write of y; consecutive radix-2 stages merged in the forward pass); workspace: none");
    s += "the CPU factor products in turn (the last factor first):";
    for (size_t i = 0; i < plan_.size(); ++i) s += msg(" factor ", i, " ", plan_.factor(i).tiles() ? "tiles" : "gemm", ";");
    return msg(s, " workspace: none (the plan keeps the intermediate activations)");
  }
  void forward(const op::KSChainForward& a, void*, Stream) override {
    for (size_t p = 0; p < w_.size(); ++p) w_[p] = ptr<T>(a.w[p]);
    plan_.forward(ptr<T>(a.x), w_.data(), ptr<T>(a.y), p_.batch);
  }
  void backward(const op::KSChainBackward& a, void*, Stream) override {
    for (size_t p = 0; p < w_.size(); ++p) {
      w_[p] = ptr<T>(a.w[p]);
      dw_[p] = a.dw.empty() ? nullptr : ptr<T>(a.dw[p]);
    }
    plan_.backward(ptr<T>(a.dy), ptr<T>(a.x), w_.data(), ptr<T>(a.dx), a.dw.empty() ? nullptr : dw_.data(),
                   p_.batch);
  }

 private:
  op::KSChainProblem p_;
  KSChainPlan<T> plan_;
  std::vector<const T*> w_;  // the call's pointer tables, kept to allocate nothing per call
  std::vector<T*> dw_;
};

// x (batch, n) for batch-first, (n, batch) for batch-last.
void check_act(const View& v, const char* name, DType t, const Device& dev, KSLayout l, int64_t n,
               int64_t batch, bool optional) {
  if (optional && v.empty()) return;
  if (l == KSLayout::BatchFirst)
    api::check_view(v, name, t, dev, {batch, n});
  else
    api::check_view(v, name, t, dev, {n, batch});
}

void check_w(const View& v, const char* name, DType t, const Device& dev, const KSPattern& q, bool optional) {
  if (optional && v.empty()) return;
  api::check_view(v, name, t, dev, {q.a, q.b, q.c, q.d});
}

}  // namespace

namespace op {

KSFactor::KSFactor(const Problem& p, const Options& o) : Operator(p) {
  ks_check_pattern(p.pattern, "problem.pattern");
  check_positive(p.batch, "problem.batch");
  // x (batch, N) and y (batch, M) must be addressable.
  checked_count("problem.batch", {p.batch, std::max(p.pattern.rows(), p.pattern.cols()),
                                  int64_t(dtype_size(p.dtype))});
  impl_ = STRUX_PICK_BACKEND(
      p.device,
      (make_cpu_ks<KSFactorBackend, CpuKSFactor>(p, factor_solver(api::solver_index(o, "the CPU ks factor",
                                                                                     kFactorSolvers)))),
      api::cuda_ks_factor(p, o));
}

void KSFactor::forward(const Forward& a, Workspace ws, Stream s) {
  const auto& p = problem_;
  check_act(a.x, "x", p.dtype, p.device, p.layout, p.pattern.cols(), p.batch, false);
  check_w(a.w, "w", p.dtype, p.device, p.pattern, false);
  check_act(a.y, "y", p.dtype, p.device, p.layout, p.pattern.rows(), p.batch, false);
  api::check_overlaps({{&a.y, "y"}}, {{&a.x, "x"}, {&a.w, "w"}}, false);
  impl_->forward(a, api::check_workspace(ws, workspace_bytes()), s);
}

void KSFactor::backward(const Backward& a, Workspace ws, Stream s) {
  const auto& p = problem_;
  check_act(a.dy, "dy", p.dtype, p.device, p.layout, p.pattern.rows(), p.batch, false);
  check_act(a.x, "x", p.dtype, p.device, p.layout, p.pattern.cols(), p.batch, false);
  check_w(a.w, "w", p.dtype, p.device, p.pattern, false);
  check_act(a.dx, "dx", p.dtype, p.device, p.layout, p.pattern.cols(), p.batch, true);
  check_w(a.dw, "dw", p.dtype, p.device, p.pattern, true);
  api::check_overlaps({{&a.dx, "dx"}, {&a.dw, "dw"}}, {{&a.dy, "dy"}, {&a.x, "x"}, {&a.w, "w"}}, false);
  impl_->backward(a, api::check_workspace(ws, workspace_bytes()), s);
}

KSChain::KSChain(const Problem& p, const Options& o) : Operator(p) {
  check_arg(!p.patterns.empty(), "problem.patterns", "expected at least one pattern");
  for (size_t i = 0; i < p.patterns.size(); ++i) {
    ks_check_pattern(p.patterns[i], "problem.patterns");
    if (i + 1 < p.patterns.size())
      check_arg(p.patterns[i].cols() == p.patterns[i + 1].rows(), "problem.patterns", "factor ", i,
                " has ", p.patterns[i].cols(), " columns but factor ", i + 1, " has ",
                p.patterns[i + 1].rows(), " rows (K = K_1 K_2 ... needs cols(K_p) == rows(K_{p+1}))");
  }
  check_positive(p.batch, "problem.batch");
  // x, y and every intermediate activation (batch, width) must be addressable.
  for (const KSPattern& q : p.patterns)
    checked_count("problem.batch", {p.batch, std::max(q.rows(), q.cols()), int64_t(dtype_size(p.dtype))});
  impl_ = STRUX_PICK_BACKEND(
      p.device, (make_cpu_ks<KSChainBackend, CpuKSChain>(
                    p, chain_solver(api::solver_index(o, "the CPU ks chain", kChainSolvers)))),
      api::cuda_ks_chain(p, o));
}

namespace {
// `named` followed by views[i] named "name[i]".
std::vector<api::Named> with_list(std::vector<api::Named> named, const std::vector<View>& views, const char* name) {
  for (size_t i = 0; i < views.size(); ++i) named.push_back({&views[i], msg(name, "[", i, "]")});
  return named;
}

void check_ws(const std::vector<View>& w, const char* name, const KSChainProblem& p, bool optional) {
  if (optional && w.empty()) return;
  check_arg(w.size() == p.patterns.size(), name, "expected ", p.patterns.size(), " views (one per pattern), got ",
            w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const KSPattern& q = p.patterns[i];
    if ((optional && w[i].empty()) || api::matches(w[i], p.dtype, p.device, {q.a, q.b, q.c, q.d})) continue;
    check_w(w[i], msg(name, "[", i, "]").c_str(), p.dtype, p.device, q, optional);
  }
}
}  // namespace

void KSChain::forward(const Forward& a, Workspace ws, Stream s) {
  const auto& p = problem_;
  check_act(a.x, "x", p.dtype, p.device, p.layout, p.patterns.back().cols(), p.batch, false);
  check_ws(a.w, "w", p, false);
  check_act(a.y, "y", p.dtype, p.device, p.layout, p.patterns.front().rows(), p.batch, false);
  api::check_overlaps({{&a.y, "y"}}, with_list({{&a.x, "x"}}, a.w, "w"), false);
  impl_->forward(a, api::check_workspace(ws, workspace_bytes()), s);
}

void KSChain::backward(const Backward& a, Workspace ws, Stream s) {
  const auto& p = problem_;
  check_act(a.dy, "dy", p.dtype, p.device, p.layout, p.patterns.front().rows(), p.batch, false);
  check_act(a.x, "x", p.dtype, p.device, p.layout, p.patterns.back().cols(), p.batch, false);
  check_ws(a.w, "w", p, false);
  check_act(a.dx, "dx", p.dtype, p.device, p.layout, p.patterns.back().cols(), p.batch, true);
  check_ws(a.dw, "dw", p, true);
  api::check_overlaps(with_list({{&a.dx, "dx"}}, a.dw, "dw"), with_list({{&a.dy, "dy"}, {&a.x, "x"}}, a.w, "w"),
                      false);
  impl_->backward(a, api::check_workspace(ws, workspace_bytes()), s);
}

}  // namespace op
}  // namespace strux
