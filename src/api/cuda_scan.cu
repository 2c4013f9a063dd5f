// The CUDA backends of strux::op::DiagScan, CirculantScan and BlockCirculantScan, over the
// plans of <strux/cuda/scan.hpp>. What those plans do not take, this layer adds: dh_last (folded
// into a copy of dh) and, for the diagonal scan, a backward without the forward's h (recomputed).
#include <memory>

#include "api/cuda_block_scan_f64.hpp"
#include "api/cuda_util.cuh"
#include "strux/cuda/scan.hpp"

namespace strux::api {
namespace {

// Workspace of the diagonal and circulant scans: [plan scratch | recomputed h | dh + dh_last].
struct ScanWs {
  size_t plan = 0, h = 0, fold = 0, total = 0;
  ScanWs(size_t plan_bytes, size_t state_bytes, bool need_h) {
    h = align_up(plan_bytes);
    fold = h + (need_h ? align_up(state_bytes) : 0);
    total = fold + align_up(state_bytes);
  }
};

const void* folded_dh(const op::ScanBackward& a, DType t, int64_t B, int64_t T, int64_t n, char* w, Stream s) {
  if (a.dh_last.empty()) return a.dh.data;
  fold_last(t, a.dh.data, a.dh_last.data, w, B, T, n, s);
  return w;
}

class CudaDiagScan final : public ScanBackend {
 public:
  CudaDiagScan(const op::DiagScanProblem& p, const Options& o)
      : p_(p), plan_(make_plan(p, o)),
        ws_(size_t(plan_.workspace_bytes()), size_t(p.B * p.T * p.n) * dtype_size(p.dtype), true) {}
  size_t workspace_bytes() const override { return ws_.total; }
  std::string describe() const override {
    return msg("diagonal scan (B, T, n) = ", dims({p_.B, p_.T, p_.n}), ", ", dtype_name(p_.dtype), " on ",
               device_name(p_.device),
               ": one pass over the data, the kernel picked per call by DiagScanPlan (one thread per channel "
               "through the sequence when B·n fills the GPU, else time chunks with a decoupled look-back); "
               "backward reads the forward's h when given, else recomputes it; workspace: ", ws_.total,
               " bytes (plan scratch ", ws_.h, ", recomputed h, dh with dh_last folded in)");
  }
  void forward(const op::ScanForward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    char* w = static_cast<char*>(scratch_.get(ws, ws_.total));
    plan_.forward(a.a.data, a.u.data, a.h0.data, a.h.data, w, s.handle);
  }
  void backward(const op::ScanBackward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    char* w = static_cast<char*>(scratch_.get(ws, ws_.total));
    const void* h = a.h.data;
    if (!h) {
      plan_.forward(a.a.data, a.u.data, a.h0.data, w + ws_.h, w, s.handle);
      h = w + ws_.h;
    }
    const void* dh = folded_dh(a, p_.dtype, p_.B, p_.T, p_.n, w + ws_.fold, s);
    plan_.backward(a.a.data, h, a.h0.data, dh, a.da.data, a.du.data, a.dh0.data, w, s.handle);
  }

 private:
  static cuda::DiagScanPlan make_plan(const op::DiagScanProblem& p, const Options& o) {
    solver_index(o, "the CUDA diagonal scan", {""});
    DeviceGuard g(p.device);
    return cuda::DiagScanPlan(p.B, p.T, p.n, to_cuda(p.dtype));
  }
  op::DiagScanProblem p_;
  cuda::DiagScanPlan plan_;
  ScanWs ws_;
  Scratch scratch_;
};

class CudaCirculantScan final : public ScanBackend {
 public:
  CudaCirculantScan(const op::CirculantScanProblem& p, const Options& o) : p_(p) {
    solver_index(o, "the CUDA circulant scan", {""});
    check_dtype<core::RealScalars>(p.dtype, "the CUDA circulant scan");
    DeviceGuard g(p.device);
    plan_ = std::make_unique<cuda::CirculantScanPlan>(p.B, p.T, p.n, to_cuda(p.dtype));
    ws_ = ScanWs(size_t(plan_->workspace_bytes()), size_t(p.B * p.T * p.n) * dtype_size(p.dtype), false);
  }
  size_t workspace_bytes() const override { return ws_.total; }
  std::string describe() const override {
    return msg("circulant scan (B, T, n) = ", dims({p_.B, p_.T, p_.n}), ", ", dtype_name(p_.dtype),
               p_.fourier ? ", a as half spectra" : ", a spatial", " on ", device_name(p_.device),
               ": cuFFT real FFTs of length n, the ", dtype_name(complex_of(p_.dtype)),
               " diagonal scan over the ", p_.n / 2 + 1, " frequencies, inverse FFT; workspace: ", ws_.total,
               " bytes (plan scratch, dh with dh_last folded in)");
  }
  void forward(const op::ScanForward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    void* w = scratch_.get(ws, ws_.total);
    if (p_.fourier)
      plan_->forward_fourier(a.a.data, a.u.data, a.h0.data, a.h.data, w, s.handle);
    else
      plan_->forward(a.a.data, a.u.data, a.h0.data, a.h.data, w, s.handle);
  }
  void backward(const op::ScanBackward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    char* w = static_cast<char*>(scratch_.get(ws, ws_.total));
    const void* dh = folded_dh(a, p_.dtype, p_.B, p_.T, p_.n, w + ws_.fold, s);
    plan_->backward(p_.fourier ? nullptr : a.a.data, p_.fourier ? a.a.data : nullptr, a.u.data, a.h0.data, dh,
                    a.da.data, a.du.data, a.dh0.data, w, s.handle);
  }

 private:
  op::CirculantScanProblem p_;
  std::unique_ptr<cuda::CirculantScanPlan> plan_;
  ScanWs ws_{0, 0, false};
  Scratch scratch_;
};

// float32: cuda::BlockCirculantScanPlan; float64: the direct kernels of cuda_block_scan_f64.cu,
// whose backward recomputes h into the workspace.
class CudaBlockCirculantScan final : public ScanBackend {
 public:
  CudaBlockCirculantScan(const op::BlockCirculantScanProblem& p, const Options& o) : p_(p) {
    solver_index(o, "the CUDA block-circulant scan", {""});
    check_dtype<core::RealScalars>(p.dtype, "the CUDA block-circulant scan");
    DeviceGuard g(p.device);
    if (p.dtype == DType::f32) {
      plan_ = std::make_unique<cuda::BlockCirculantScanPlan>(p.B, p.T, p.p, p.k);
    } else {
      const int64_t max_n = block_scan_f64_max_n();
      check_arg(p.p * p.k <= max_n, "problem.k", "the float64 CUDA block-circulant scan keeps two states of n = p·k "
                "values in shared memory: n <= ", max_n, " on this device, got n = ", p.p * p.k);
    }
  }
  size_t workspace_bytes() const override {
    return plan_ ? size_t(plan_->backward_workspace_bytes()) : size_t(p_.B * p_.T * p_.p * p_.k) * sizeof(double);
  }
  std::string describe() const override {
    std::string how;
    if (plan_)
      how = msg("cuFFT real FFTs of length k, a ", p_.p, " x ", p_.p, " complex recurrence per frequency ",
                plan_->chunk_length() < p_.T ? msg("in time chunks of ", plan_->chunk_length(), " with a carry pass")
                                             : std::string("through the whole sequence"),
                !plan_->register_kernels() ? "" : p_.p <= 4 ? " (register kernels)" : " (a group of p lanes per chain)");
    else
      how = "float64 direct kernels (one thread block per batch item through time, dense products with the "
            "circulant blocks; backward recomputes h into the workspace)";
    return msg("block-circulant scan (B, T, p, k) = ", dims({p_.B, p_.T, p_.p, p_.k}), ", ", dtype_name(p_.dtype),
               " on ", device_name(p_.device), ": ", how, "; workspace: ", workspace_bytes(), " bytes");
  }
  void forward(const op::ScanForward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    if (plan_)
      plan_->forward(f(a.a), f(a.u), f(a.h0), f(a.h), scratch_.get(ws, workspace_bytes()), s.handle);
    else
      block_scan_f64_forward(p_.B, p_.T, p_.p, p_.k, d(a.a), d(a.u), d(a.h0), d(a.h), s);
  }
  void backward(const op::ScanBackward& a, void* ws, Stream s) override {
    DeviceGuard g(p_.device);
    void* w = scratch_.get(ws, workspace_bytes());
    if (plan_) {
      plan_->backward(f(a.a), f(a.u), f(a.h0), f(a.dh), f(a.dh_last), f(a.da), f(a.du), f(a.dh0), w, s.handle);
      return;
    }
    double* h = static_cast<double*>(w);
    block_scan_f64_forward(p_.B, p_.T, p_.p, p_.k, d(a.a), d(a.u), d(a.h0), h, s);
    block_scan_f64_backward(p_.B, p_.T, p_.p, p_.k, d(a.a), h, d(a.h0), d(a.dh), d(a.dh_last), d(a.da), d(a.du),
                            d(a.dh0), s);
  }

 private:
  static float* f(const View& v) { return static_cast<float*>(v.data); }
  static double* d(const View& v) { return static_cast<double*>(v.data); }
  op::BlockCirculantScanProblem p_;
  std::unique_ptr<cuda::BlockCirculantScanPlan> plan_;  // null for float64
  Scratch scratch_;
};

}  // namespace

std::unique_ptr<ScanBackend> cuda_diag_scan(const op::DiagScanProblem& p, const Options& o) {
  return make_cuda<CudaDiagScan>(p, o);
}

std::unique_ptr<ScanBackend> cuda_circulant_scan(const op::CirculantScanProblem& p, const Options& o) {
  return make_cuda<CudaCirculantScan>(p, o);
}

std::unique_ptr<ScanBackend> cuda_block_circulant_scan(const op::BlockCirculantScanProblem& p, const Options& o) {
  return make_cuda<CudaBlockCirculantScan>(p, o);
}

}  // namespace strux::api
