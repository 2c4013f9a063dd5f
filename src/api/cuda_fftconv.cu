// The CUDA backend of strux::op::FFTConv, over cuda::FFTConvPlan.
#include <memory>

#include "api/cuda_util.cuh"
#include "strux/cuda/fftconv.hpp"

namespace strux::api {
namespace {

const char* inner_kind(const cuda::FFTConvPlan& p) {
  return p.direct() ? "direct kernels" : p.dense() ? "dense kernels" : p.tensor() ? "tensor-core kernels" : p.fourstep() ? "four-step kernels"
         : p.fused() ? "fused kernels" : "cuFFT";
}

class CudaFFTConv final : public FFTConvBackend {
 public:
  CudaFFTConv(const op::FFTConvProblem& p, const Options& o) : p_(p), with_backward_(o.with_backward) {
    // 0: automatic (plan algo 0: the direct kernels where at most 32 taps are used, else the dense
    // kernels for 16-bit rows where dense.hpp's cost model beats the FFT solvers (dense::automatic), else blocks for
    // long causal rows with short filters, else the tensor cores at small half-precision sizes, else
    // the fused kernels where they apply, else the four-step kernels or cuFFT), 1: fused forced
    // (plan algo 4, checked), 2: cuFFT,
    // 3: tensor cores forced for the forward (the plan says when it does not apply), 4: the
    // four-step kernels forced for the forward (plan algo 8; the plan says when they do not apply),
    // 5: the direct kernels (plan algo 9: sums over the taps, at most 64 taps used), 6: blocks
    // (plan algo 10: overlap-save over blocks through an inner circular plan), 7: dense (plan algo
    // 15: Toeplitz blocks of the filter on tensor cores, float16/bfloat16, forward and gradients), 8:
    // dense with the ungated forward on wgmma (plan algo 17, sm_90a).
    const int solver = solver_index(o, "the CUDA fftconv",
                                    {"", "fused", "cufft", "tensor", "fourstep", "direct", "blocks", "dense", "dense_wgmma"});
    check_dtype<CudaReals>(p.dtype, "the CUDA fftconv");
    DeviceGuard g(p.device);
    plan_ = std::make_unique<cuda::FFTConvPlan>(p.B, p.H, p.L, p.Lk, p.mode == ConvMode::Circular,
                                                to_cuda(p.dtype), o.with_backward,
                                                solver == 1   ? 4
                                                : solver == 2 ? 1
                                                : solver == 3 ? 2
                                                : solver == 4 ? 8
                                                : solver == 5 ? 9
                                                : solver == 6 ? 10
                                                : solver == 7 ? 15
                                                : solver == 8 ? 17
                                                              : 0);
    if (solver == 1)
      check_arg(plan_->fused(), "options.solver",
                "\"fused\" does not apply to this problem (float32/float16/bfloat16; causal with "
                "L + min(Lk, L) - 1 <= 32768, circular with L a power of two in [1024, 32768])");
  }
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    return msg("fftconv ", conv_mode_name(p_.mode), " (B, H, L) = ", dims({p_.B, p_.H, p_.L}), ", Lk = ", p_.Lk,
               ", ", dtype_name(p_.dtype), " on ", device_name(p_.device), ": ",
               plan_->direct()  ? "direct kernels (sums over the taps, no transform)"
               : plan_->dense() ? msg("dense kernels (Toeplitz blocks of the filter on tensor cores, no transform",
                                      plan_->dense_wgmma() ? "; ungated calls by wgmma" : "",
                                      plan_->dense_gated() ? "" : "; gated calls by the FFT kernels",
                                      !with_backward_            ? ""
                                      : plan_->dense_backward() ? "; gradients by the same products"
                                                                : "; gradients by the FFT kernels",
                                      ")")
               : plan_->blocks() ? msg("blocks: overlap-save over ", plan_->blocks_per_row(),
                                       " blocks per row through an inner circular plan (",
                                       inner_kind(*plan_->inner()), ")")
               : plan_->tensor()  ? "tensor-core kernels (Monarch FFTs on mma.sync, one row per complex sequence; "
                                  "gradients by the fused kernels or cuFFT)"
               : plan_->fourstep() ? "four-step kernels (column, row-pair and column passes through one fp32 "
                                     "intermediate; gradients by the same passes, or by cuFFT under the automatic "
                                     "rule where B > 1 and the row pairs are too few)"
               : plan_->fused() ? "fused kernels (FFTs in shared memory)"
                                : "cuFFT R2C/C2R with fused pre/post kernels",
               ", nfft = ", plan_->nfft(), ", filter spectrum computed per call",
               plan_->fused() ? " (inside the forward kernel when one CTA serves each h)" : "",
               with_backward_ ? "" : ", forward only", "; workspace: ", plan_->workspace_bytes(),
               " bytes owned by the plan");
  }
  void forward(const op::FFTConvForward& a, void*, Stream s) override {
    DeviceGuard g(p_.device);
    plan_->forward(a.k.data, a.u.data, a.pregate.data, a.postgate.data, a.skip.data, a.y.data, stream_of(s));
  }
  void backward(const op::FFTConvBackward& a, void*, Stream s) override {
    check_arg(with_backward_, "options.with_backward", "backward() on a plan made with with_backward = false");
    DeviceGuard g(p_.device);
    plan_->set_filter(a.k.data, stream_of(s));
    plan_->backward(a.dy.data, a.u.data, a.pregate.data, a.postgate.data, a.skip.data, a.du.data, a.dk.data,
                    a.dpregate.data, a.dpostgate.data, a.dskip.data, stream_of(s));
  }

 private:
  op::FFTConvProblem p_;
  bool with_backward_;
  std::unique_ptr<cuda::FFTConvPlan> plan_;
};

}  // namespace

std::unique_ptr<FFTConvBackend> cuda_fftconv(const op::FFTConvProblem& p, const Options& o) {
  return make_cuda<CudaFFTConv>(p, o);
}

}  // namespace strux::api
