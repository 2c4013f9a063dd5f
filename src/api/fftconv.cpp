// strux::op::FFTConv: argument checks (once, here) and the CPU backend over FFTConvPlan<T>.
#include <algorithm>
#include <initializer_list>
#include <vector>

#include "api/common.hpp"
#include "core/checked_size.hpp"
#include "strux/fftconv.hpp"

namespace strux {
namespace {

using api::FFTConvBackend;

// The CPU solver table (options.solver; "" = the rule of <strux/fftconv.hpp> ConvSolver).
const std::initializer_list<const char*> kSolvers = {"", "fft", "direct", "blocks"};

template <class T>
class CpuFFTConv final : public FFTConvBackend {
 public:
  CpuFFTConv(const op::FFTConvProblem& p, ConvSolver solver) : p_(p), solver_(solver) {
    const int64_t taps = p.mode == ConvMode::Causal ? std::min(p.Lk, p.L) : p.Lk;
    if (solver == ConvSolver::Direct)
      check_arg(taps <= kDirectMaxTaps, "options.solver", "\"direct\" takes at most ", kDirectMaxTaps,
                " taps used (causal min(Lk, L), circular Lk), got ", taps);
    // The solver and FFT length rules live in FFTConvPlan: ask a one-channel plan. It reads
    // only the taps used (a causal filter may be far longer than the row).
    std::vector<T> k1(size_t(taps), T(0));
    FFTConvPlan<T> probe(1, 1, p.L, k1.data(), p.Lk, p.mode, solver);
    nfft_ = probe.nfft();
    solver_ = probe.solver();
  }
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    return msg("fftconv ", conv_mode_name(p_.mode), " (B, H, L) = ", api::dims({p_.B, p_.H, p_.L}),
               ", Lk = ", p_.Lk, ", ", dtype_name(p_.dtype), " on cpu: ",
               solver_ == ConvSolver::Direct
                   ? std::string("direct sums over the taps (short filter), OpenMP over rows")
               : solver_ == ConvSolver::Blocks
                   ? msg("blocks: overlap-save FFTW real FFTs of block length N = ", nfft_,
                         " (short filter), filter spectrum computed per call, OpenMP over rows")
                   : msg("FFTW real FFTs of length nfft = ", nfft_,
                         ", filter spectrum computed per call, OpenMP over rows"),
               "; workspace: none (per-thread buffers inside the call)");
  }
  void forward(const op::FFTConvForward& a, void*, Stream) override {
    plan(a.k).forward(ptr(a.u), ptr(a.pregate), ptr(a.postgate), ptr(a.skip), ptr(a.y));
  }
  void backward(const op::FFTConvBackward& a, void*, Stream) override {
    plan(a.k).backward(ptr(a.dy), ptr(a.u), ptr(a.pregate), ptr(a.postgate), ptr(a.skip), ptr(a.du),
                       ptr(a.dk), ptr(a.dpregate), ptr(a.dpostgate), ptr(a.dskip));
  }

 private:
  static T* ptr(const View& v) { return static_cast<T*>(v.data); }
  FFTConvPlan<T> plan(const View& k) const {
    return FFTConvPlan<T>(p_.B, p_.H, p_.L, ptr(k), p_.Lk, p_.mode, solver_);
  }
  op::FFTConvProblem p_;
  ConvSolver solver_;
  int64_t nfft_ = 0;
};

std::unique_ptr<FFTConvBackend> make_cpu_fftconv(const op::FFTConvProblem& p, const Options& o) {
  const int i = api::solver_index(o, "the CPU fftconv", kSolvers);
  const ConvSolver solver = i == 1   ? ConvSolver::FFT
                            : i == 2 ? ConvSolver::Direct
                            : i == 3 ? ConvSolver::Blocks
                                     : ConvSolver::Automatic;
  std::unique_ptr<FFTConvBackend> b;
  core::dispatch<core::RealScalars>(p.dtype, "problem.dtype", "the CPU fftconv",
                                    [&](auto tag) { b = std::make_unique<CpuFFTConv<typename decltype(tag)::type>>(p, solver); });
  return b;
}

}  // namespace

namespace op {

FFTConv::FFTConv(const Problem& p, const Options& o) : Operator(p) {
  check_positive(p.B, "problem.B");
  check_positive(p.H, "problem.H");
  check_positive(p.L, "problem.L");
  check_positive(p.Lk, "problem.Lk");
  if (p.mode == ConvMode::Circular)
    check_arg(p.Lk <= p.L, "problem.Lk", "circular mode needs Lk <= L = ", p.L, ", got ", p.Lk);
  // Every view must be addressable: element counts and byte counts fit int64 (checked before
  // the backend allocates anything).
  const int64_t elem = int64_t(dtype_size(p.dtype));
  checked_count("problem.B", {p.B, p.H, p.L, elem});
  checked_count("problem.Lk", {p.H, p.Lk, elem});
  impl_ = STRUX_PICK_BACKEND(p.device, make_cpu_fftconv(p, o), api::cuda_fftconv(p, o));
}

void FFTConv::forward(const Forward& a, Workspace ws, Stream s) {
  const auto& p = problem_;
  const DType t = p.dtype;
  api::check_view(a.u, "u", t, p.device, {p.B, p.H, p.L});
  api::check_view(a.k, "k", t, p.device, {p.H, p.Lk});
  api::check_view(a.y, "y", t, p.device, {p.B, p.H, p.L});
  api::check_optional(a.pregate, "pregate", t, p.device, {p.B, p.H, p.L});
  api::check_optional(a.postgate, "postgate", t, p.device, {p.B, p.H, p.L});
  api::check_optional(a.skip, "skip", t, p.device, {p.H});
  api::check_overlaps({{&a.y, "y"}},
                      {{&a.u, "u"}, {&a.k, "k"}, {&a.pregate, "pregate"}, {&a.postgate, "postgate"}, {&a.skip, "skip"}},
                      false);
  impl_->forward(a, api::check_workspace(ws, workspace_bytes()), s);
}

void FFTConv::backward(const Backward& a, Workspace ws, Stream s) {
  const auto& p = problem_;
  const DType t = p.dtype;
  api::check_view(a.dy, "dy", t, p.device, {p.B, p.H, p.L});
  api::check_view(a.u, "u", t, p.device, {p.B, p.H, p.L});
  api::check_view(a.k, "k", t, p.device, {p.H, p.Lk});
  api::check_view(a.du, "du", t, p.device, {p.B, p.H, p.L});
  api::check_view(a.dk, "dk", t, p.device, {p.H, p.Lk});
  const bool pre = api::check_optional(a.pregate, "pregate", t, p.device, {p.B, p.H, p.L});
  const bool post = api::check_optional(a.postgate, "postgate", t, p.device, {p.B, p.H, p.L});
  const bool skip = api::check_optional(a.skip, "skip", t, p.device, {p.H});
  if (api::check_optional(a.dpregate, "dpregate", t, p.device, {p.B, p.H, p.L}))
    check_arg(pre, "dpregate", "given without pregate");
  if (api::check_optional(a.dpostgate, "dpostgate", t, p.device, {p.B, p.H, p.L}))
    check_arg(post, "dpostgate", "given without postgate");
  if (api::check_optional(a.dskip, "dskip", t, p.device, {p.H}))
    check_arg(skip, "dskip", "given without skip");
  api::check_overlaps({{&a.du, "du"}, {&a.dk, "dk"}, {&a.dpregate, "dpregate"}, {&a.dpostgate, "dpostgate"},
                       {&a.dskip, "dskip"}},
                      {{&a.dy, "dy"}, {&a.u, "u"}, {&a.k, "k"}, {&a.pregate, "pregate"}, {&a.postgate, "postgate"},
                       {&a.skip, "skip"}},
                      false);
  impl_->backward(a, api::check_workspace(ws, workspace_bytes()), s);
}

}  // namespace op
}  // namespace strux
