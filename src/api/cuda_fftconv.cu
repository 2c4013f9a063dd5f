// The CUDA backends of strux::op::FFTConv and BlockToeplitz, over cuda::FFTConvPlan and
// cuda::ToeplitzPlan.
#include <memory>

#include "api/cuda_toeplitz_grad.hpp"
#include "api/cuda_util.cuh"
#include "strux/cuda/fftconv.hpp"
#include "strux/cuda/toeplitz.hpp"

namespace strux::api {
namespace {

class CudaFFTConv final : public FFTConvBackend {
 public:
  CudaFFTConv(const op::FFTConvProblem& p, const Options& o) : p_(p), with_backward_(o.with_backward) {
    // 0: automatic (the fused kernels where they apply, else cuFFT), 1: fused forced, 2: cuFFT.
    const int solver = solver_index(o, "the CUDA fftconv", {"", "fused", "cufft"});
    core::dispatch<CudaReals>(p.dtype, "problem.dtype", "the CUDA fftconv", [](auto) {});
    DeviceGuard g(p.device);
    plan_ = std::make_unique<cuda::FFTConvPlan>(p.B, p.H, p.L, p.Lk, p.mode == ConvMode::Circular,
                                                to_cuda(p.dtype), o.with_backward, solver == 2 ? 1 : 0);
    if (solver == 1)
      check_arg(plan_->fused(), "options.solver",
                "\"fused\" does not apply to this problem (float32/float16/bfloat16; causal with "
                "L + min(Lk, L) - 1 <= 32768, circular with L a power of two in [1024, 32768])");
  }
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    return msg("fftconv ", conv_mode_name(p_.mode), " (B, H, L) = ", dims({p_.B, p_.H, p_.L}), ", Lk = ", p_.Lk,
               ", ", dtype_name(p_.dtype), " on ", device_name(p_.device), ": ",
               plan_->fused() ? "fused kernels (FFTs in shared memory)" : "cuFFT R2C/C2R with fused pre/post kernels",
               ", nfft = ", plan_->nfft(), ", filter spectrum computed per call",
               with_backward_ ? "" : ", forward only", "; workspace: ", plan_->workspace_bytes(),
               " bytes owned by the plan");
  }
  void forward(const op::FFTConvForward& a, void*, Stream s) override {
    DeviceGuard g(p_.device);
    plan_->set_filter(a.k.data, stream_of(s));
    plan_->forward(a.u.data, a.pregate.data, a.postgate.data, a.skip.data, a.y.data, stream_of(s));
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

class CudaToeplitz final : public ToeplitzBackend {
 public:
  CudaToeplitz(const op::BlockToeplitzProblem& p, const Options& o) : p_(p) {
    // The products of cuda::ToeplitzPlan by number: -1 automatic, 0 blas, 1 gemm, 2 kernels, 3 real-gemm.
    const int solver = solver_index(o, "the CUDA block Toeplitz", {"", "blas", "gemm", "kernels", "real-gemm"});
    core::dispatch<core::RealScalars>(p.dtype, "problem.dtype", "the CUDA block Toeplitz", [](auto) {});
    DeviceGuard g(p.device);
    plan_ = std::make_unique<cuda::ToeplitzPlan>(p.Nt, p.Nd, p.Nm, p.R, p.layout == ToeplitzLayout::SpaceMajor,
                                                 to_cuda(p.dtype), solver - 1);
  }
  size_t workspace_bytes() const override { return 0; }
  std::string describe() const override {
    static const char* algos[] = {"cuBLAS gemv/gemm", "cuBLAS gemm", "own kernels streaming F̂",
                                  "one real gemm per frequency"};
    auto algo = [](int a) { return a >= 0 && a < 4 ? algos[a] : "?"; };
    return msg("block Toeplitz (Nt, Nd, Nm) = ", dims({p_.Nt, p_.Nd, p_.Nm}), ", R = ", p_.R, ", ",
               toeplitz_layout_name(p_.layout), ", ", dtype_name(p_.dtype), " on ", device_name(p_.device),
               ": cuFFT of length nfft = ", plan_->nfft(), " (transform layout ", plan_->fft(), "), F̂ (",
               plan_->nfreq(), " frequencies) ", fhat_.bytes() ? "set" : "not set yet", "; matvec: ",
               algo(plan_->algo(false)), ", adjoint: ", algo(plan_->algo(true)), "; workspace: ",
               plan_->workspace_bytes() + fhat_.bytes(), " bytes owned by the plan (F̂ included); the gradient "
               "for the blocks by a direct kernel (O(Nt² Nd Nm R))");
  }
  void set_blocks(const View& blocks, Stream s) override {
    DeviceGuard g(p_.device);
    const size_t bytes = size_t(plan_->nfreq() * p_.Nd * p_.Nm) * 2 * dtype_size(p_.dtype);
    if (fhat_.bytes() != bytes) fhat_.allocate(bytes);
    cuda::build_toeplitz_fhat(p_.Nt, p_.Nd, p_.Nm, to_cuda(p_.dtype), blocks.data, fhat_.get(), stream_of(s));
  }
  void forward(const op::BlockToeplitzForward& a, void*, Stream s) override {
    DeviceGuard g(p_.device);
    plan_->matvec(fhat_.get(), a.m.data, a.d.data, stream_of(s));
  }
  void backward(const op::BlockToeplitzBackward& a, void*, Stream s) override {
    DeviceGuard g(p_.device);
    plan_->rmatvec(fhat_.get(), a.dd.data, a.dm.data, stream_of(s));
    if (!a.dblocks.empty())
      toeplitz_grad_blocks(p_.dtype, p_.Nt, p_.Nd, p_.Nm, p_.R, p_.layout == ToeplitzLayout::SpaceMajor, a.m.data,
                           a.dd.data, a.dblocks.data, s);
  }

 private:
  op::BlockToeplitzProblem p_;
  std::unique_ptr<cuda::ToeplitzPlan> plan_;
  cuda::DeviceBuffer fhat_;
};

}  // namespace

std::unique_ptr<FFTConvBackend> cuda_fftconv(const op::FFTConvProblem& p, const Options& o) {
  check_cuda_device(p.device);
  return std::make_unique<CudaFFTConv>(p, o);
}

std::unique_ptr<ToeplitzBackend> cuda_toeplitz(const op::BlockToeplitzProblem& p, const Options& o) {
  check_cuda_device(p.device);
  return std::make_unique<CudaToeplitz>(p, o);
}

}  // namespace strux::api
