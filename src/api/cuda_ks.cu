// The CUDA backends of strux::op::KSFactor and KSChain. One factor runs cuda::KsPlan (float32
// and half types) or the float64 kernels of cuda_ks_f64.cu. The chain runs the factors in turn
// with its activations in the workspace (the CPU KSChainPlan's algorithm), or, for two factors,
// one kernel with the intermediate on chip (solver "fused", src/cuda/ks/ks_fused.cuh; "factors"
// forces the factor-by-factor forward; the backward is factor by factor either way).
#include <memory>
#include <optional>
#include <vector>

#include "api/cuda_ks_f64.hpp"
#include "api/cuda_util.cuh"
#include "cuda/ks/ks_fused.hpp"
#include "strux/cuda/ks.hpp"

namespace strux::api {
namespace {

bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; }

// Bytes of the float32 dw accumulator a factor of `nnz` weights needs (half types only).
size_t acc_bytes(DType t, int64_t nnz) { return is_half(t) ? align_up(size_t(nnz) * sizeof(float)) : 0; }

// One KS factor on the GPU, for one batch size and layout.
class Factor {
 public:
  Factor(const KSPattern& q, int64_t batch, KSLayout layout, DType t)
      : q_(q), batch_(batch), bl_(layout == KSLayout::BatchLast), t_(t) {
    check_dtype<CudaReals>(t, "the CUDA ks");
    if (t != DType::f64) plan_.emplace(cuda::KsPattern{q.a, q.b, q.c, q.d}, batch, bl_, to_cuda(t));
  }
  std::string describe() const {
    const std::string p = dims({q_.a, q_.b, q_.c, q_.d});
    if (!plan_) return p + ": float64 direct kernels (one thread per output, one block per weight for dw)";
    return msg(p, ": forward ", cuda::ks_path_name(plan_->forward_path()), ", backward dx ",
               cuda::ks_path_name(plan_->backward_x_path()), ", backward dw ",
               cuda::ks_path_name(plan_->backward_w_path()));
  }
  void forward(const void* x, const void* w, void* y, Stream s) const {
    if (plan_)
      plan_->forward(x, w, y, s.handle);
    else
      ks_apply_f64(q_, batch_, bl_, false, d(x), d(w), static_cast<double*>(y), s);
  }
  // dx (may be null) and dw (may be null) in the factor's dtype; acc: acc_bytes() of scratch.
  void backward(const void* dy, const void* x, const void* w, void* dx, void* dw, float* acc, Stream s) const {
    if (!plan_) {
      if (dx) ks_apply_f64(q_, batch_, bl_, true, d(dy), d(w), static_cast<double*>(dx), s);
      if (dw) ks_dw_f64(q_, batch_, bl_, d(dy), d(x), static_cast<double*>(dw), s);
      return;
    }
    // KsPlan::backward_w adds into a zeroed float32 buffer: dw itself for float32, else acc.
    float* dw32 = dw ? (is_half(t_) ? acc : static_cast<float*>(dw)) : nullptr;
    if (dw32) STRUX_CUDA(cudaMemsetAsync(dw32, 0, size_t(q_.nnz()) * sizeof(float), stream_of(s)));
    plan_->backward(dy, x, w, dx, dw32, s.handle);
    if (dw && is_half(t_)) round_from_f32(t_, acc, dw, q_.nnz(), s);
  }

 private:
  static const double* d(const void* p) { return static_cast<const double*>(p); }
  KSPattern q_;
  int64_t batch_;
  bool bl_;
  DType t_;
  std::optional<cuda::KsPlan> plan_;
};

class CudaKSFactor final : public KSFactorBackend {
 public:
  CudaKSFactor(const op::KSFactorProblem& p, const Options& o) : p_(p), f_(make(p, o)) {}
  size_t workspace_bytes() const override { return acc_bytes(p_.dtype, p_.pattern.nnz()); }
  std::string describe() const override {
    return msg("ks factor, batch ", p_.batch, p_.layout == KSLayout::BatchFirst ? ", batch-first, " : ", batch-last, ",
               dtype_name(p_.dtype), " on ", device_name(p_.device), ": ", f_.describe(), "; workspace: ",
               workspace_bytes(), " bytes (float32 dw accumulator for half types)");
  }
  void forward(const op::KSFactorForward& a, void*, Stream s) override {
    DeviceGuard g(p_.device);
    f_.forward(a.x.data, a.w.data, a.y.data, s);
  }
  void backward(const op::KSFactorBackward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    float* acc = a.dw.empty() ? nullptr : static_cast<float*>(scratch_.get(ws, workspace_bytes()));
    f_.backward(a.dy.data, a.x.data, a.w.data, a.dx.data, a.dw.data, acc, s);
  }

 private:
  static Factor make(const op::KSFactorProblem& p, const Options& o) {
    solver_index(o, "the CUDA ks factor", {""});
    DeviceGuard g(p.device);
    return Factor(p.pattern, p.batch, p.layout, p.dtype);
  }
  op::KSFactorProblem p_;
  Factor f_;
  Scratch scratch_;
};

// Workspace: the inputs of factors 0 … P-2 (outputs of 1 … P-1), two ping-pong buffers for
// the cotangents between factors, and the float32 dw accumulator (half types).
class CudaKSChain final : public KSChainBackend {
 public:
  CudaKSChain(const op::KSChainProblem& p, const Options& o) : p_(p) {
    const int solver = solver_index(o, "the CUDA ks chain", {"", "factors", "fused"});
    DeviceGuard g(p.device);
    pick_fused(solver);
    const size_t es = dtype_size(p.dtype), P = p.patterns.size();
    int64_t widest = 0, nnz = 0;
    for (const KSPattern& q : p.patterns) {
      factors_.emplace_back(q, p.batch, p.layout, p.dtype);
      widest = std::max({widest, q.rows(), q.cols()});
      nnz = std::max(nnz, q.nnz());
    }
    for (size_t i = 0; i + 1 < P; ++i) {
      act_off_.push_back(bytes_);
      bytes_ += align_up(size_t(p.patterns[i].cols() * p.batch) * es);
    }
    for (size_t& off : grad_off_) {
      off = bytes_;
      bytes_ += P > 1 ? align_up(size_t(widest * p.batch) * es) : 0;
    }
    acc_off_ = bytes_;
    bytes_ += acc_bytes(p.dtype, nnz);
    if (fused_.ok()) {  // the fused pair's group-major weight copies
      wt_off_ = bytes_;
      bytes_ += size_t(cuda::ks::fused_pair_workspace_bytes(kp(0), kp(1), to_cuda(p.dtype)));
    }
  }
  size_t workspace_bytes() const override { return bytes_; }
  std::string describe() const override {
    std::string s = msg("ks chain of ", factors_.size(), " factors, batch ", p_.batch,
                        p_.layout == KSLayout::BatchFirst ? ", batch-first, " : ", batch-last, ",
                        dtype_name(p_.dtype), " on ", device_name(p_.device),
                        fused_.ok() ? msg(": forward fused (one kernel, the intermediate in shared memory, ", fused_.tb,
                                          fused_.mon ? " batch rows per tile, persistent Monarch kernel" : " batch rows per block",
                                          "); backward: the factor products in turn")
                                    : msg(": the factor products in turn (the last factor first)",
                                          why_.empty() ? "" : msg(" (not fused: ", why_, ")")));
    for (size_t i = 0; i < factors_.size(); ++i) s += msg("; factor ", i, " ", factors_[i].describe());
    return msg(s, "; workspace: ", bytes_, " bytes (activations, cotangents, float32 dw accumulator for half types)");
  }
  void forward(const op::KSChainForward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    if (fused_.ok())
      return cuda::ks::fused_pair(a.x.data, a.w[0].data, a.w[1].data, a.y.data, kp(0), kp(1), p_.batch,
                                  p_.layout == KSLayout::BatchLast, to_cuda(p_.dtype), fused_, base(ws) + wt_off_,
                                  stream_of(s));
    run_forward(a.x.data, a.w, a.y.data, base(ws), s);
  }
  void backward(const op::KSChainBackward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    char* w0 = base(ws);
    const size_t P = factors_.size();
    run_forward(a.x.data, a.w, nullptr, w0, s);  // the activations, not y
    const void* g_in = a.dy.data;
    for (size_t i = 0; i < P; ++i) {
      void* g_out = i + 1 == P ? a.dx.data : w0 + grad_off_[i % 2];
      void* dw = a.dw.empty() ? nullptr : a.dw[i].data;
      if (!g_out && !dw) continue;
      factors_[i].backward(g_in, input_of(i, a.x.data, w0), a.w[i].data, g_out, dw,
                           reinterpret_cast<float*>(w0 + acc_off_), s);
      g_in = g_out;
    }
  }

 private:
  char* base(void* ws) { return static_cast<char*>(scratch_.get(ws, bytes_)); }
  const void* input_of(size_t i, const void* x, char* w0) const {
    return i + 1 == factors_.size() ? x : static_cast<const void*>(w0 + act_off_[i]);
  }
  // Factor P-1 reads x; factor i writes the input of factor i-1, factor 0 writes y (skipped when null).
  void run_forward(const void* x, const std::vector<View>& w, void* y, char* w0, Stream s) const {
    for (size_t i = factors_.size(); i-- > 0;) {
      void* out = i == 0 ? y : static_cast<void*>(w0 + act_off_[i - 1]);
      if (out) factors_[i].forward(input_of(i, x, w0), w[i].data, out, s);
    }
  }

  cuda::KsPattern kp(size_t i) const {
    const KSPattern& q = p_.patterns[i];
    return {q.a, q.b, q.c, q.d};
  }
  // solver: 0 the rule (ks::fused_pair_preferred), 1 "factors", 2 "fused" (ValueError when it
  // cannot run, saying why).
  void pick_fused(int solver) {
    if (solver == 1) return;
    const size_t P = p_.patterns.size();
    if (p_.dtype == DType::f64) why_ = "float64 runs the direct kernels";
    else if (P != 2) why_ = msg("the fused kernel takes chains of 2 factors, got ", P);
    else why_ = cuda::ks::fused_pair_why_not(kp(0), kp(1), p_.layout == KSLayout::BatchLast, to_cuda(p_.dtype));
    if (solver == 2 && !why_.empty())
      throw ValueError(msg("argument 'options.solver': \"fused\" cannot run this chain: ", why_));
    if (!why_.empty() || (solver == 0 && !cuda::ks::fused_pair_preferred(kp(0), kp(1), p_.batch, to_cuda(p_.dtype),
                                                                         p_.layout == KSLayout::BatchLast)))
      return;
    fused_ = cuda::ks::fused_pair_pick(kp(0), kp(1), to_cuda(p_.dtype), p_.batch, 0,
                                       p_.layout == KSLayout::BatchLast);
  }

  op::KSChainProblem p_;
  cuda::ks::FusedCfg fused_;
  std::string why_;
  std::vector<Factor> factors_;
  std::vector<size_t> act_off_;
  size_t grad_off_[2] = {0, 0}, acc_off_ = 0, wt_off_ = 0, bytes_ = 0;
  Scratch scratch_;
};

}  // namespace

std::unique_ptr<KSFactorBackend> cuda_ks_factor(const op::KSFactorProblem& p, const Options& o) {
  return make_cuda<CudaKSFactor>(p, o);
}

std::unique_ptr<KSChainBackend> cuda_ks_chain(const op::KSChainProblem& p, const Options& o) {
  return make_cuda<CudaKSChain>(p, o);
}

}  // namespace strux::api
