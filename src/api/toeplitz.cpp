// strux::op::BlockToeplitz: argument checks and the CPU backend over BlockToeplitzPlan<T>.
#include <optional>

#include <algorithm>

#include "api/common.hpp"
#include "core/checked_size.hpp"
#include "strux/toeplitz.hpp"

namespace strux {
namespace {

using api::ToeplitzBackend;

template <class T>
class CpuToeplitz final : public ToeplitzBackend {
 public:
  explicit CpuToeplitz(const op::BlockToeplitzProblem& p) : p_(p) {}
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    return msg("block Toeplitz (Nt, Nd, Nm) = ", api::dims({p_.Nt, p_.Nd, p_.Nm}), ", R = ", p_.R, ", ",
               toeplitz_layout_name(p_.layout), ", ", dtype_name(p_.dtype),
               " on cpu: F̂ per frequency from FFTW real FFTs",
               plan_ ? msg(" of length nfft = ", plan_->nfft(), " (", plan_->nfreq(), " frequencies)")
                     : std::string(" (blocks not set yet)"),
               ", BLAS ", p_.R == 1 ? "gemv" : "gemm",
               " per frequency, adjoint through the same F̂ (conjugate transpose); precision: ",
               describe_toeplitz_precision(p_.precision, p_.dtype == DType::f64),
               "; workspace: none (the plan's scratch)");
  }
  void set_blocks(const View& blocks, Stream) override {
    plan_.emplace(ptr(blocks), p_.Nt, p_.Nd, p_.Nm, p_.precision);
  }
  void forward(const op::BlockToeplitzForward& a, void*, Stream) override {
    plan_->matvec(ptr(a.m), ptr(a.d), p_.R, p_.layout);
  }
  void backward(const op::BlockToeplitzBackward& a, void*, Stream) override {
    plan_->rmatvec(ptr(a.dd), ptr(a.dm), p_.R, p_.layout);
    if (!a.dblocks.empty()) plan_->grad_blocks(ptr(a.m), ptr(a.dd), ptr(a.dblocks), p_.R, p_.layout);
  }

 private:
  static T* ptr(const View& v) { return static_cast<T*>(v.data); }
  op::BlockToeplitzProblem p_;
  std::optional<BlockToeplitzPlan<T>> plan_;
};

}  // namespace

namespace op {

BlockToeplitz::BlockToeplitz(const Problem& p, const Options& o) : Operator(p) {
  check_positive(p.Nt, "problem.Nt");
  check_positive(p.Nd, "problem.Nd");
  check_positive(p.Nm, "problem.Nm");
  check_positive(p.R, "problem.R");
  // The blocks (Nt, Nd, Nm) and the vectors (Nt, Nd or Nm, R) must be addressable.
  const int64_t elem = int64_t(dtype_size(p.dtype));
  checked_count("problem.Nd", {p.Nt, p.Nd, p.Nm, elem});
  checked_count("problem.R", {p.Nt, std::max(p.Nd, p.Nm), p.R, elem});
  impl_ = STRUX_PICK_BACKEND(
      p.device, (api::make_cpu<ToeplitzBackend, CpuToeplitz, core::RealScalars>(p, o, "the CPU block Toeplitz")),
      api::cuda_toeplitz(p, o));
}

void BlockToeplitz::set_blocks(const View& blocks, Stream s) {
  const auto& p = problem_;
  api::check_view(blocks, "blocks", p.dtype, p.device, {p.Nt, p.Nd, p.Nm});
  static_cast<api::ToeplitzBackend&>(*impl_).set_blocks(blocks, s);
  blocks_set_ = true;
}

namespace {
// The shape of a vector of `n` entries per step in the problem's layout: (Nt, n[, R]) or (n, Nt[, R]).
void check_vector(const View& v, const char* name, const BlockToeplitzProblem& p, int64_t n, bool optional) {
  if (optional && v.empty()) return;
  const bool tm = p.layout == ToeplitzLayout::TimeMajor;
  const int64_t a = tm ? p.Nt : n, b = tm ? n : p.Nt;
  if (p.R == 1)
    api::check_view(v, name, p.dtype, p.device, {a, b});
  else
    api::check_view(v, name, p.dtype, p.device, {a, b, p.R});
}
}  // namespace

void BlockToeplitz::forward(const Forward& a, Workspace ws, Stream s) {
  check_arg(blocks_set_, "blocks", "not set: call set_blocks() before forward()");
  check_vector(a.m, "m", problem_, problem_.Nm, false);
  check_vector(a.d, "d", problem_, problem_.Nd, false);
  api::check_overlaps({{&a.d, "d"}}, {{&a.m, "m"}}, true);
  impl_->forward(a, api::check_workspace(ws, workspace_bytes()), s);
}

void BlockToeplitz::backward(const Backward& a, Workspace ws, Stream s) {
  const auto& p = problem_;
  check_arg(blocks_set_, "blocks", "not set: call set_blocks() before backward()");
  check_vector(a.dd, "dd", p, p.Nd, false);
  check_vector(a.dm, "dm", p, p.Nm, false);
  check_vector(a.m, "m", p, p.Nm, true);
  if (api::check_optional(a.dblocks, "dblocks", p.dtype, p.device, {p.Nt, p.Nd, p.Nm}))
    check_arg(!a.m.empty(), "m", "required with dblocks (the gradient for the blocks needs m)");
  // dm on m in place is fine, but not with dblocks: its gradient reads m after dm is written
  api::check_overlaps({{&a.dm, "dm"}, {&a.dblocks, "dblocks"}}, {{&a.dd, "dd"}, {&a.m, "m"}}, a.dblocks.empty());
  impl_->backward(a, api::check_workspace(ws, workspace_bytes()), s);
}

}  // namespace op
}  // namespace strux
