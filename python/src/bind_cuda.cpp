// strux._ext.cuda: the fftconv and block Toeplitz plans, taking raw device pointers and a stream
// handle (uintptr_t, the caller's current stream), and the plan caches they live in. Outputs are
// preallocated by Python; strux/_cuda_fftconv.py and _cuda_toeplitz.py validate every array once
// (through the array adapter strux/_cuda.py) before a pointer reaches a plan.
#include "arrays.hpp"

#ifdef STRUX_HAVE_CUDA
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include <nanobind/stl/shared_ptr.h>

#include "core/plan_cache.hpp"
#include "cuda/check.hpp"
#include "cuda_binding.hpp"
#include "strux/cuda/fftconv.hpp"
#include "strux/cuda/fftconv_spectral.hpp"
#include "strux/cuda/toeplitz.hpp"

namespace {

using strux::check_arg;
using strux::msg;
using strux::shape_str;
using namespace strux::cuda;

DType parse_dtype(const std::string& s) {
  if (s == "float32") return DType::f32;
  if (s == "float64") return DType::f64;
  if (s == "float16") return DType::f16;
  if (s == "bfloat16") return DType::bf16;
  throw strux::TypeError(msg("argument 'dtype': expected float32, float64, float16 or bfloat16, got ", s));
}

int current_device() {
  int d = 0;
  STRUX_CUDA(cudaGetDevice(&d));
  return d;
}

using strux::py::DeviceGuard;
using strux::py::ptr;
Stream stream_of(uintptr_t s) { return reinterpret_cast<Stream>(s); }

// A plan and the device it was made on (the current one); its calls run on that device. Arrays arrive as raw device pointers (0: an optional
// array not given) that strux/_cuda_fftconv.py and _cuda_toeplitz.py have checked against the
// plan's shapes, dtype and device.
struct FFTConv {
  std::unique_ptr<FFTConvPlan> plan;
  int device;

  FFTConv(int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, DType dtype, bool with_backward, int algo)
      : plan(std::make_unique<FFTConvPlan>(B, H, L, Lk, circular, dtype, with_backward, algo)),
        device(current_device()) {}
  void set_filter(uintptr_t k, uintptr_t s) {
    DeviceGuard g(device);
    plan->set_filter(ptr(k), stream_of(s));
  }
  void forward(uintptr_t u, uintptr_t pre, uintptr_t post, uintptr_t skip, uintptr_t y, uintptr_t s) {
    DeviceGuard g(device);
    plan->forward(ptr(u), ptr(pre), ptr(post), ptr(skip), ptr(y), stream_of(s));
  }
  void backward_(uintptr_t dy, uintptr_t u, uintptr_t pre, uintptr_t post, uintptr_t skip, uintptr_t du,
                 uintptr_t dk, uintptr_t dpre, uintptr_t dpost, uintptr_t dskip, uintptr_t s) {
    DeviceGuard g(device);
    backward_here(dy, u, pre, post, skip, du, dk, dpre, dpost, dskip, s);
  }
  // backward_ on the current device (the caller's guard made it this plan's).
  void backward_here(uintptr_t dy, uintptr_t u, uintptr_t pre, uintptr_t post, uintptr_t skip, uintptr_t du,
                     uintptr_t dk, uintptr_t dpre, uintptr_t dpost, uintptr_t dskip, uintptr_t s) {
    check_arg(!dpre || pre, "dpregate", "given without pregate");
    check_arg(!dpost || post, "dpostgate", "given without postgate");
    check_arg(!dskip || skip, "dskip", "given without skip");
    plan->backward(ptr(dy), ptr(u), ptr(pre), ptr(post), ptr(skip), ptr(du), ptr(dk), ptr(dpre), ptr(dpost),
                   ptr(dskip), stream_of(s));
  }
};

struct Toeplitz {
  std::unique_ptr<ToeplitzPlan> plan;
  int device;

  Toeplitz(int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, const std::string& layout, const std::string& dtype,
           int algo, int fft, int storage = 0)
      : device(current_device()) {
    check_arg(layout == "time-major" || layout == "space-major", "layout",
              "expected 'time-major' or 'space-major', got '", layout, "'");
    plan = std::make_unique<ToeplitzPlan>(Nt, Nd, Nm, R, layout == "space-major", parse_dtype(dtype), algo, fft,
                                          storage);
  }
  void matvec(uintptr_t fhat, uintptr_t m, uintptr_t d, uintptr_t s, double scale) {
    DeviceGuard g(device);
    plan->matvec(ptr(fhat), ptr(m), ptr(d), stream_of(s), scale);
  }
  void rmatvec(uintptr_t fhat, uintptr_t d, uintptr_t m, uintptr_t s, double scale) {
    DeviceGuard g(device);
    plan->rmatvec(ptr(fhat), ptr(d), ptr(m), stream_of(s), scale);
  }
};

// The plan caches of the two families, keyed by problem, options and device (plans are made on
// `device`, which the caller's guard has made current). An fftconv plan with backward serves
// forward calls too. fftconv calls pass the problem as ints (dtype: a DType code, checked here),
// so a lookup builds no strings: one fixed-size key; `hold` keeps the plan alive for the call.
FFTConv& fftconv_cached(int device, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, int dtype,
                        bool backward, int algo, std::shared_ptr<FFTConv>& hold) {
  static strux::core::PlanCache<strux::core::PlanKey<9>, FFTConv> cache(16);
  check_arg(dtype >= 0 && dtype <= 3, "dtype", "expected a code of float32, float64, float16 or bfloat16, got ",
            dtype);
  const int64_t dev = device, circ = circular;
  if (!backward) hold = cache.find({dev, B, H, L, Lk, circ, dtype, algo, 1});
  if (!hold)
    hold = cache.get({dev, B, H, L, Lk, circ, dtype, algo, backward},
                     [&] { return std::make_shared<FFTConv>(B, H, L, Lk, circular, DType(dtype), backward, algo); });
  return *hold;
}

bool parse_mode(const std::string& mode) {
  check_arg(mode == "causal" || mode == "circular", "mode", "expected 'causal' or 'circular', got '", mode, "'");
  return mode == "circular";
}

std::shared_ptr<FFTConv> fftconv_plan(int device, int64_t B, int64_t H, int64_t L, int64_t Lk, const std::string& mode,
                                      const std::string& dtype, bool backward, int algo) {
  DeviceGuard g(device);
  std::shared_ptr<FFTConv> hold;
  fftconv_cached(device, B, H, L, Lk, parse_mode(mode), int(parse_dtype(dtype)), backward, algo, hold);
  return hold;
}

// One call per fftconv (strux/_cuda_fftconv.py's path): the cached plan, the filter spectrum of
// k, the forward -- one binding crossing, no plan object handed to Python.
void fftconv_forward(uintptr_t u, uintptr_t k, uintptr_t pre, uintptr_t post, uintptr_t skip, uintptr_t y,
                     int device, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, int dtype, int algo,
                     uintptr_t s) {
  DeviceGuard g(device);
  std::shared_ptr<FFTConv> hold;
  FFTConvPlan& p = *fftconv_cached(device, B, H, L, Lk, circular, dtype, false, algo, hold).plan;
  p.forward(ptr(k), ptr(u), ptr(pre), ptr(post), ptr(skip), ptr(y), stream_of(s));
}

// As fftconv_forward, for the gradients (a backward-capable plan).
void fftconv_backward(uintptr_t dy, uintptr_t u, uintptr_t k, uintptr_t pre, uintptr_t post, uintptr_t skip,
                      uintptr_t du, uintptr_t dk, uintptr_t dpre, uintptr_t dpost, uintptr_t dskip, int device,
                      int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, int dtype, int algo, uintptr_t s) {
  DeviceGuard g(device);
  std::shared_ptr<FFTConv> hold;
  FFTConv& p = fftconv_cached(device, B, H, L, Lk, circular, dtype, true, algo, hold);
  p.plan->set_filter(ptr(k), stream_of(s));
  p.backward_here(dy, u, pre, post, skip, du, dk, dpre, dpost, dskip, s);
}

// fftconv_spectral: the cached SpectralConvPlan of (device, B, H, L, m, mode, dtype of u); as for
// fftconv, a plan with backward serves forward calls too. k_hat is read per call (nothing cached).
std::shared_ptr<SpectralConvPlan> spectral_cached(int device, int64_t B, int64_t H, int64_t L, int64_t m,
                                                  bool circular, int dtype, bool backward) {
  static strux::core::PlanCache<strux::core::PlanKey<8>, SpectralConvPlan> cache(16);
  check_arg(dtype >= 0 && dtype <= 3, "dtype", "expected a code of float32, float64, float16 or bfloat16, got ",
            dtype);
  const int64_t dev = device, circ = circular;
  std::shared_ptr<SpectralConvPlan> hold;
  if (!backward) hold = cache.find({dev, B, H, L, m, circ, dtype, 1});
  if (!hold)
    hold = cache.get({dev, B, H, L, m, circ, dtype, backward}, [&] {
      return std::make_shared<SpectralConvPlan>(B, H, L, m, circular, DType(dtype), backward);
    });
  return hold;
}

void fftconv_spectral_forward(uintptr_t u, uintptr_t k_hat, uintptr_t pre, uintptr_t post, uintptr_t skip,
                              uintptr_t y, int device, int64_t B, int64_t H, int64_t L, int64_t m, bool circular,
                              int dtype, uintptr_t s) {
  DeviceGuard g(device);
  auto p = spectral_cached(device, B, H, L, m, circular, dtype, false);
  p->forward(ptr(u), ptr(k_hat), ptr(pre), ptr(post), ptr(skip), ptr(y), stream_of(s));
}

void fftconv_spectral_backward(uintptr_t dy, uintptr_t u, uintptr_t k_hat, uintptr_t pre, uintptr_t post,
                               uintptr_t skip, uintptr_t du, uintptr_t dk_hat, uintptr_t dpre, uintptr_t dpost,
                               uintptr_t dskip, int device, int64_t B, int64_t H, int64_t L, int64_t m,
                               bool circular, int dtype, uintptr_t s) {
  check_arg(!dpre || pre, "dpregate", "given without pregate");
  check_arg(!dpost || post, "dpostgate", "given without postgate");
  check_arg(!dskip || skip, "dskip", "given without skip");
  DeviceGuard g(device);
  auto p = spectral_cached(device, B, H, L, m, circular, dtype, true);
  p->backward(ptr(dy), ptr(u), ptr(k_hat), ptr(pre), ptr(post), ptr(skip), ptr(du), ptr(dk_hat), ptr(dpre),
              ptr(dpost), ptr(dskip), stream_of(s));
}

std::shared_ptr<Toeplitz> toeplitz_plan(int device, int64_t Nt, int64_t Nd, int64_t Nm, int64_t R,
                                        const std::string& layout, const std::string& dtype, int algo, int fft,
                                        int storage) {
  static strux::core::PlanCache<strux::core::PlanKey<10>, Toeplitz> cache(32);
  DeviceGuard g(device);
  const int64_t dev = device, sm = layout == "space-major", dt = int64_t(parse_dtype(dtype));
  return cache.get({dev, Nt, Nd, Nm, R, sm, dt, algo, fft, storage},
                   [&] { return std::make_shared<Toeplitz>(Nt, Nd, Nm, R, layout, dtype, algo, fft, storage); });
}

}  // namespace

void bind_cuda(nb::module_& m) {
  using nb::arg;
  nb::module_ c = m.def_submodule("cuda", "CUDA plans (use strux._cuda_fftconv / _cuda_toeplitz, not this module)");
  nb::class_<FFTConv>(c, "FFTConvPlan")
      .def(
          "__init__",
          [](FFTConv* self, int64_t B, int64_t H, int64_t L, int64_t Lk, const std::string& mode,
             const std::string& dtype, bool with_backward, int algo) {
            new (self) FFTConv(B, H, L, Lk, parse_mode(mode), parse_dtype(dtype), with_backward, algo);
          },
          arg("B"), arg("H"), arg("L"), arg("Lk"), arg("mode"), arg("dtype"), arg("with_backward"), arg("algo") = 0)
      .def("set_filter", &FFTConv::set_filter, arg("k"), arg("stream"))
      .def("forward", &FFTConv::forward, arg("u"), arg("pregate"), arg("postgate"), arg("skip"), arg("y"),
           arg("stream"))
      .def("backward", &FFTConv::backward_, arg("dy"), arg("u"), arg("pregate"), arg("postgate"), arg("skip"),
           arg("du"), arg("dk"), arg("dpregate"), arg("dpostgate"), arg("dskip"), arg("stream"))
      .def_prop_ro("nfft", [](const FFTConv& p) { return p.plan->nfft(); })
      .def_prop_ro("fused", [](const FFTConv& p) { return p.plan->fused(); })
      .def_prop_ro("tensor", [](const FFTConv& p) { return p.plan->tensor(); })
      .def_prop_ro("fourstep", [](const FFTConv& p) { return p.plan->fourstep(); })
      .def_prop_ro("direct", [](const FFTConv& p) { return p.plan->direct(); })
      .def_prop_ro("dense", [](const FFTConv& p) { return p.plan->dense(); })
      .def_prop_ro("dense_gated", [](const FFTConv& p) { return p.plan->dense_gated(); })
      .def_prop_ro("dense_wgmma", [](const FFTConv& p) { return p.plan->dense_wgmma(); })
      .def_prop_ro("dense_backward", [](const FFTConv& p) { return p.plan->dense_backward(); })
      .def_prop_ro("blocks", [](const FFTConv& p) { return p.plan->blocks(); })
      .def_prop_ro("blocks_per_row", [](const FFTConv& p) { return p.plan->blocks_per_row(); })
      .def_prop_ro("inner_fused", [](const FFTConv& p) { return p.plan->inner() && p.plan->inner()->fused(); })
      .def_prop_ro("workspace_bytes", [](const FFTConv& p) { return p.plan->workspace_bytes(); });
  nb::class_<Toeplitz>(c, "ToeplitzPlan")
      .def(nb::init<int64_t, int64_t, int64_t, int64_t, const std::string&, const std::string&, int, int, int>(),
           arg("Nt"), arg("Nd"), arg("Nm"), arg("R"), arg("layout"), arg("dtype"), arg("algo") = -1, arg("fft") = -1,
           arg("storage") = 0)
      .def("matvec", &Toeplitz::matvec, arg("fhat"), arg("m"), arg("d"), arg("stream"), arg("scale") = 1.0)
      .def("rmatvec", &Toeplitz::rmatvec, arg("fhat"), arg("d"), arg("m"), arg("stream"), arg("scale") = 1.0)
      .def_prop_ro("nfft", [](const Toeplitz& p) { return p.plan->nfft(); })
      .def_prop_ro("nfreq", [](const Toeplitz& p) { return p.plan->nfreq(); })
      .def_prop_ro("algo", [](const Toeplitz& p) { return p.plan->algo(false); })
      .def_prop_ro("rmatvec_algo", [](const Toeplitz& p) { return p.plan->algo(true); })
      .def_prop_ro("fft", [](const Toeplitz& p) { return p.plan->fft(); })
      .def_prop_ro("workspace_bytes", [](const Toeplitz& p) { return p.plan->workspace_bytes(); });
  c.def("fftconv_plan", &fftconv_plan, arg("device"), arg("B"), arg("H"), arg("L"), arg("Lk"), arg("mode"), arg("dtype"),
        arg("backward"), arg("algo") = 0);
  c.def("fftconv_forward", &fftconv_forward, arg("u"), arg("k"), arg("pregate"), arg("postgate"), arg("skip"),
        arg("y"), arg("device"), arg("B"), arg("H"), arg("L"), arg("Lk"), arg("circular"), arg("dtype"), arg("algo"),
        arg("stream"));
  c.def("fftconv_backward", &fftconv_backward, arg("dy"), arg("u"), arg("k"), arg("pregate"), arg("postgate"),
        arg("skip"), arg("du"), arg("dk"), arg("dpregate"), arg("dpostgate"), arg("dskip"), arg("device"), arg("B"),
        arg("H"), arg("L"), arg("Lk"), arg("circular"), arg("dtype"), arg("algo"), arg("stream"));
  c.def("fftconv_spectral_forward", &fftconv_spectral_forward, arg("u"), arg("k_hat"), arg("pregate"),
        arg("postgate"), arg("skip"), arg("y"), arg("device"), arg("B"), arg("H"), arg("L"), arg("m"), arg("circular"),
        arg("dtype"), arg("stream"));
  c.def("fftconv_spectral_backward", &fftconv_spectral_backward, arg("dy"), arg("u"), arg("k_hat"), arg("pregate"),
        arg("postgate"), arg("skip"), arg("du"), arg("dk_hat"), arg("dpregate"), arg("dpostgate"), arg("dskip"),
        arg("device"), arg("B"), arg("H"), arg("L"), arg("m"), arg("circular"), arg("dtype"), arg("stream"));
  c.def("toeplitz_plan", &toeplitz_plan, arg("device"), arg("Nt"), arg("Nd"), arg("Nm"), arg("R"), arg("layout"), arg("dtype"),
        arg("algo") = -1, arg("fft") = -1, arg("storage") = 0);
  c.def("toeplitz_nfft", &toeplitz_nfft, arg("Nt"));
  c.def(
      "toeplitz_mixed_apply",
      [](Toeplitz& in, Toeplitz& prod, Toeplitz& out, uintptr_t fhat, uintptr_t x, uintptr_t y, bool adjoint,
         uintptr_t s, double scale) {
        check_arg(in.device == prod.device && out.device == prod.device, "in", "expected plans of one device");
        DeviceGuard g(prod.device);
        toeplitz_mixed_apply(*in.plan, *prod.plan, *out.plan, ptr(fhat), ptr(x), ptr(y), adjoint, stream_of(s), scale);
      },
      arg("in"), arg("prod"), arg("out"), arg("fhat"), arg("x"), arg("y"), arg("adjoint"), arg("stream"),
      arg("scale") = 1.0);
  c.def(
      "build_toeplitz_fhat_half",
      [](uintptr_t blocks, uintptr_t fhat, int64_t Nt, int64_t Nd, int64_t Nm, bool bf16, int device, uintptr_t s) {
        DeviceGuard g(device);
        return build_toeplitz_fhat_half(Nt, Nd, Nm, ptr(blocks), ptr(fhat), bf16, stream_of(s));
      },
      arg("blocks"), arg("fhat"), arg("Nt"), arg("Nd"), arg("Nm"), arg("bf16"), arg("device"), arg("stream"));
  c.def(
      "build_toeplitz_fhat",
      [](uintptr_t blocks, uintptr_t fhat, int64_t Nt, int64_t Nd, int64_t Nm, const std::string& dtype, int device,
         uintptr_t s) {
        DeviceGuard g(device);
        build_toeplitz_fhat(Nt, Nd, Nm, parse_dtype(dtype), ptr(blocks), ptr(fhat), stream_of(s));
      },
      arg("blocks"), arg("fhat"), arg("Nt"), arg("Nd"), arg("Nm"), arg("dtype"), arg("device"), arg("stream"));
  m.def("cuda_clear_plan_cache", &strux::core::clear_plan_caches);
}

#else
void bind_cuda(nb::module_&) {}
#endif
