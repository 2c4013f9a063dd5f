// The CUDA backends of strux::op::KSFactor and KSChain, over cuda::KsPlan. The chain runs the
// factors in turn with its activations in the workspace (the CPU KSChainPlan's algorithm).
#include <memory>
#include <vector>

#include "api/cuda_util.cuh"
#include "strux/cuda/ks.hpp"

namespace strux::api {
namespace {

cuda::KsPattern ks_pattern(const KSPattern& q) { return {q.a, q.b, q.c, q.d}; }
bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; }

// float32, float16, bfloat16 (the CUDA ks kernels); float64 is not implemented here.
void check_ks_dtype(DType t) {
  if (t == DType::f64)
    throw TypeError("argument 'problem.dtype': float64 ks is not implemented on the CUDA backend in C++ "
                    "(float32, float16, bfloat16 are; float64 runs on the CPU backend)");
  core::dispatch<CudaReals>(t, "problem.dtype", "the CUDA ks", [](auto) {});
}

std::string paths(const cuda::KsPlan& k) {
  return msg("forward ", cuda::ks_path_name(k.forward_path()), ", backward dx ",
             cuda::ks_path_name(k.backward_x_path()), ", backward dw ", cuda::ks_path_name(k.backward_w_path()));
}

// dw (a, b, c, d) of dtype t from KsPlan::backward_w, which accumulates in float32 into a
// zeroed buffer: the output itself for float32, else `acc` in the workspace, rounded after.
struct DwTarget {
  float* acc;
  void* out;
  int64_t count;
  DType t;
  float* begin(Stream s) const {
    float* p = is_half(t) ? acc : static_cast<float*>(out);
    STRUX_CUDA(cudaMemsetAsync(p, 0, size_t(count) * sizeof(float), stream_of(s)));
    return p;
  }
  void end(Stream s) const {
    if (is_half(t)) round_from_f32(t, acc, out, count, s);
  }
};

class CudaKSFactor final : public KSFactorBackend {
 public:
  CudaKSFactor(const op::KSFactorProblem& p, const Options& o) : p_(p), plan_(make_plan(p, o)) {}
  size_t workspace_bytes() const override {
    return is_half(p_.dtype) ? align_up(size_t(p_.pattern.nnz()) * sizeof(float)) : 0;
  }
  std::string describe() const override {
    const auto& q = p_.pattern;
    return msg("ks factor ", dims({q.a, q.b, q.c, q.d}), ", batch ", p_.batch,
               p_.layout == KSLayout::BatchFirst ? ", batch-first, " : ", batch-last, ", dtype_name(p_.dtype), " on ",
               device_name(p_.device), ": ", paths(plan_), "; workspace: ", workspace_bytes(),
               " bytes (float32 dw accumulator for half types)");
  }
  void forward(const op::KSFactorForward& a, void*, Stream s) override {
    DeviceGuard g(p_.device);
    plan_.forward(a.x.data, a.w.data, a.y.data, s.handle);
  }
  void backward(const op::KSFactorBackward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    const DwTarget dw{static_cast<float*>(scratch_.get(ws, workspace_bytes())), a.dw.data, p_.pattern.nnz(),
                      p_.dtype};
    plan_.backward(a.dy.data, a.x.data, a.w.data, a.dx.data, a.dw.empty() ? nullptr : dw.begin(s), s.handle);
    if (!a.dw.empty()) dw.end(s);
  }

 private:
  static cuda::KsPlan make_plan(const op::KSFactorProblem& p, const Options& o) {
    solver_index(o, "the CUDA ks factor", {""});
    check_ks_dtype(p.dtype);
    DeviceGuard g(p.device);
    return cuda::KsPlan(ks_pattern(p.pattern), p.batch, p.layout == KSLayout::BatchLast, to_cuda(p.dtype));
  }
  op::KSFactorProblem p_;
  cuda::KsPlan plan_;
  Scratch scratch_;
};

// Workspace: the inputs of factors 0 … P-2 (outputs of 1 … P-1), two ping-pong buffers for
// the cotangents between factors, and the float32 dw accumulator (half types).
class CudaKSChain final : public KSChainBackend {
 public:
  CudaKSChain(const op::KSChainProblem& p, const Options& o) : p_(p) {
    solver_index(o, "the CUDA ks chain", {""});
    check_ks_dtype(p.dtype);
    DeviceGuard g(p.device);
    const size_t es = dtype_size(p.dtype);
    const size_t P = p.patterns.size();
    int64_t widest = 0, nnz = 0;
    for (size_t i = 0; i < P; ++i) {
      plans_.emplace_back(ks_pattern(p.patterns[i]), p.batch, p.layout == KSLayout::BatchLast, to_cuda(p.dtype));
      widest = std::max({widest, p.patterns[i].rows(), p.patterns[i].cols()});
      nnz = std::max(nnz, p.patterns[i].nnz());
    }
    for (size_t i = 0; i + 1 < P; ++i) {
      act_off_.push_back(bytes_);
      bytes_ += align_up(size_t(p.patterns[i].cols() * p.batch) * es);
    }
    for (size_t& g2 : grad_off_) {
      g2 = bytes_;
      bytes_ += P > 1 ? align_up(size_t(widest * p.batch) * es) : 0;
    }
    acc_off_ = bytes_;
    if (is_half(p.dtype)) bytes_ += align_up(size_t(nnz) * sizeof(float));
  }
  size_t workspace_bytes() const override { return bytes_; }
  std::string describe() const override {
    std::string s = msg("ks chain of ", p_.patterns.size(), " factors, batch ", p_.batch,
                        p_.layout == KSLayout::BatchFirst ? ", batch-first, " : ", batch-last, ",
                        dtype_name(p_.dtype), " on ", device_name(p_.device),
                        ": the factor products in turn (the last factor first)");
    for (size_t i = 0; i < plans_.size(); ++i) {
      const auto& q = p_.patterns[i];
      s += msg("; factor ", i, " ", dims({q.a, q.b, q.c, q.d}), ": ", paths(plans_[i]));
    }
    return msg(s, "; workspace: ", bytes_, " bytes (activations, cotangents, float32 dw accumulator for half types)");
  }
  void forward(const op::KSChainForward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    run_forward(a.x.data, a.w, a.y.data, base(ws), s);
  }
  void backward(const op::KSChainBackward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    char* w0 = base(ws);
    const size_t P = plans_.size();
    run_forward(a.x.data, a.w, nullptr, w0, s);  // the activations, not y
    const void* g_in = a.dy.data;
    for (size_t i = 0; i < P; ++i) {
      const bool last = i + 1 == P;
      void* g_out = last ? a.dx.data : w0 + grad_off_[i % 2];
      const View* dwv = a.dw.empty() ? nullptr : &a.dw[i];
      const bool want_dw = dwv && !dwv->empty();
      const DwTarget dw{reinterpret_cast<float*>(w0 + acc_off_), want_dw ? dwv->data : nullptr,
                        p_.patterns[i].nnz(), p_.dtype};
      if (!g_out && !want_dw) continue;
      plans_[i].backward(g_in, input_of(i, a.x.data, w0), a.w[i].data, g_out, want_dw ? dw.begin(s) : nullptr,
                         s.handle);
      if (want_dw) dw.end(s);
      g_in = g_out;
    }
  }

 private:
  char* base(void* ws) { return static_cast<char*>(scratch_.get(ws, bytes_)); }
  const void* input_of(size_t i, const void* x, char* w0) const {
    return i + 1 == plans_.size() ? x : static_cast<const void*>(w0 + act_off_[i]);
  }
  // Factor P-1 reads x; factor i writes the input of factor i-1, factor 0 writes y (skipped when null).
  void run_forward(const void* x, const std::vector<View>& w, void* y, char* w0, Stream s) {
    for (size_t i = plans_.size(); i-- > 0;) {
      void* out = i == 0 ? y : static_cast<void*>(w0 + act_off_[i - 1]);
      if (out) plans_[i].forward(input_of(i, x, w0), w[i].data, out, s.handle);
    }
  }

  op::KSChainProblem p_;
  std::vector<cuda::KsPlan> plans_;
  std::vector<size_t> act_off_;
  size_t grad_off_[2] = {0, 0}, acc_off_ = 0, bytes_ = 0;
  Scratch scratch_;
};

}  // namespace

std::unique_ptr<KSFactorBackend> cuda_ks_factor(const op::KSFactorProblem& p, const Options& o) {
  check_cuda_device(p.device);
  return std::make_unique<CudaKSFactor>(p, o);
}

std::unique_ptr<KSChainBackend> cuda_ks_chain(const op::KSChainProblem& p, const Options& o) {
  check_cuda_device(p.device);
  return std::make_unique<CudaKSChain>(p, o);
}

}  // namespace strux::api
