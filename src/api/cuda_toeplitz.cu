// The CUDA backend of strux::op::BlockToeplitz, over cuda::ToeplitzPlan (which owns its
// workspace); F̂ is kept here, and the gradient for the blocks is cuda_toeplitz_grad.cu's kernel.
#include <memory>

#include "api/cuda_toeplitz_grad.hpp"
#include "api/cuda_util.cuh"
#include "strux/cuda/toeplitz.hpp"

namespace strux::api {
namespace {

class CudaToeplitz final : public ToeplitzBackend {
 public:
  CudaToeplitz(const op::BlockToeplitzProblem& p, const Options& o) : p_(p) {
    // The products of cuda::ToeplitzPlan by number: -1 automatic, 0 blas, 1 gemm, 2 kernels, 3 real-gemm.
    const int solver = solver_index(o, "the CUDA block Toeplitz", {"", "blas", "gemm", "kernels", "real-gemm"});
    check_dtype<core::RealScalars>(p.dtype, "the CUDA block Toeplitz");
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

std::unique_ptr<ToeplitzBackend> cuda_toeplitz(const op::BlockToeplitzProblem& p, const Options& o) {
  return make_cuda<CudaToeplitz>(p, o);
}

}  // namespace strux::api
