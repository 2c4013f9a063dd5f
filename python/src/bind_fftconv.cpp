// Bindings of the fftconv family: free functions (float and double overloads) and a plan
// class per dtype that keeps the filter spectrum between calls.
// Shapes are re-checked here (the Python layer has checked them with friendlier messages)
// so that C++ never reads past an array; the GIL is released while the kernels run.
#include <optional>
#include <string>

#include "arrays.hpp"
#include "cpu/fft.hpp"
#include "cpu/threads.hpp"
#include "strux/core.hpp"
#include "strux/fftconv.hpp"

namespace {

using strux::check_arg;
using strux::FFTConvPlan;
using strux::shape_str;
using strux::py::In;
using strux::py::new_array;
using strux::py::Out;
using strux::py::shape_of;

template <class T>
using Opt = std::optional<In<T>>;

template <class T>
const T* ptr(const Opt<T>& a) {
  return a ? a->data() : nullptr;
}

// u (B, H, L), gates like u, skip (H,), dy like u; returns (B, H, L).
template <class Plan, class T>
std::vector<int64_t> check_inputs(const Plan& plan, const In<T>& u, const Opt<T>& pre,
                                  const Opt<T>& post, const Opt<T>& skip) {
  auto su = shape_of(u);
  check_arg(su.size() == 3, "u", "expected 3 dimensions (B, H, L), got shape ", shape_str(su));
  check_arg(su[0] >= 1, "u", "expected every size >= 1, got shape ", shape_str(su));
  check_arg(su[1] == plan.channels() && su[2] == plan.length(), "u", "expected shape (*, ", plan.channels(), ", ",
            plan.length(), ") to match the filter, got ", shape_str(su));
  if (pre) check_arg(shape_of(*pre) == su, "pregate", "expected shape ", shape_str(su), ", got ", shape_str(shape_of(*pre)));
  if (post)
    check_arg(shape_of(*post) == su, "postgate", "expected shape ", shape_str(su), ", got ", shape_str(shape_of(*post)));
  if (skip)
    check_arg(shape_of(*skip) == std::vector<int64_t>{su[1]}, "skip", "expected shape (", su[1], ",), got ",
              shape_str(shape_of(*skip)));
  return su;
}

// Plan wrapper: FFTConvPlan needs B; the Python object takes any B per call (with_batch
// shares the spectrum, so this costs nothing).
template <class T>
struct PyPlan {
  FFTConvPlan<T> plan;

  PyPlan(const In<T>& k, int64_t L, const std::string& mode, const std::string& solver)
      : plan(make(k, L, mode, solver)) {}

  static FFTConvPlan<T> make(const In<T>& k, int64_t L, const std::string& mode, const std::string& solver) {
    auto sk = shape_of(k);
    check_arg(sk.size() == 2, "k", "expected 2 dimensions (H, Lk), got shape ", shape_str(sk));
    strux::ConvMode m = strux::parse_conv_mode(mode);
    strux::ConvSolver sv = strux::parse_conv_solver(solver);
    return strux::py::run_nogil("k", [&] { return FFTConvPlan<T>(1, sk[0], L, k.data(), sk[1], m, sv); });
  }

  Out<T> forward(const In<T>& u, const Opt<T>& pre, const Opt<T>& post, const Opt<T>& skip) const {
    auto su = check_inputs(plan, u, pre, post, skip);
    Out<T> y = new_array<T>(su, "u");
    strux::py::run_nogil("u", [&] { plan.with_batch(su[0]).forward(u.data(), ptr(pre), ptr(post), ptr(skip), y.data()); });
    return y;
  }

  nb::tuple backward(const In<T>& dy, const In<T>& u, const Opt<T>& pre, const Opt<T>& post,
                     const Opt<T>& skip) const {
    auto su = check_inputs(plan, u, pre, post, skip);
    check_arg(shape_of(dy) == su, "dy", "expected shape ", shape_str(su), " (the shape of u), got ",
              shape_str(shape_of(dy)));
    Out<T> du = new_array<T>(su, "u");
    Out<T> dk = new_array<T>({plan.channels(), plan.filter_length()});
    std::optional<Out<T>> dpre, dpost, dskip;
    if (pre) dpre = new_array<T>(su);
    if (post) dpost = new_array<T>(su);
    if (skip) dskip = new_array<T>({su[1]});
    strux::py::run_nogil("u", [&] {
      plan.with_batch(su[0]).backward(dy.data(), u.data(), ptr(pre), ptr(post), ptr(skip), du.data(), dk.data(),
                                      dpre ? dpre->data() : nullptr, dpost ? dpost->data() : nullptr,
                                      dskip ? dskip->data() : nullptr);
    });
    auto obj = [](std::optional<Out<T>>& a) { return a ? nb::cast(*a) : nb::none(); };
    return nb::make_tuple(du, dk, obj(dpre), obj(dpost), obj(dskip));
  }
};

template <class T>
void bind_dtype(nb::module_& m, const char* plan_name) {
  using P = PyPlan<T>;
  nb::class_<P>(m, plan_name, "fftconv plan: filter spectrum and FFT plans for one (k, L, mode)")
      .def(nb::init<const In<T>&, int64_t, const std::string&, const std::string&>(), nb::arg("k"), nb::arg("L"),
           nb::arg("mode"), nb::arg("solver") = "")
      .def("forward", &P::forward, nb::arg("u"), nb::arg("pregate").none(), nb::arg("postgate").none(),
           nb::arg("skip").none())
      .def("backward", &P::backward, nb::arg("dy"), nb::arg("u"), nb::arg("pregate").none(),
           nb::arg("postgate").none(), nb::arg("skip").none())
      .def_prop_ro("H", [](const P& p) { return p.plan.channels(); })
      .def_prop_ro("L", [](const P& p) { return p.plan.length(); })
      .def_prop_ro("Lk", [](const P& p) { return p.plan.filter_length(); })
      .def_prop_ro("taps_used", [](const P& p) { return p.plan.taps_used(); })
      .def_prop_ro("nfft", [](const P& p) { return p.plan.nfft(); })
      .def_prop_ro("solver", [](const P& p) { return std::string(strux::conv_solver_name(p.plan.solver())); })
      .def_prop_ro("mode", [](const P& p) { return std::string(strux::conv_mode_name(p.plan.mode())); });

  m.def(
      "fftconv_forward",
      [](const In<T>& u, const In<T>& k, const std::string& mode, const Opt<T>& pre, const Opt<T>& post,
         const Opt<T>& skip, const std::string& solver) {
        check_arg(u.ndim() == 3, "u", "expected 3 dimensions (B, H, L), got shape ", shape_str(shape_of(u)));
        return P(k, int64_t(u.shape(2)), mode, solver).forward(u, pre, post, skip);
      },
      nb::arg("u"), nb::arg("k"), nb::arg("mode"), nb::arg("pregate").none(), nb::arg("postgate").none(),
      nb::arg("skip").none(), nb::arg("solver") = "");
  m.def(
      "fftconv_backward",
      [](const In<T>& dy, const In<T>& u, const In<T>& k, const std::string& mode, const Opt<T>& pre,
         const Opt<T>& post, const Opt<T>& skip, const std::string& solver) {
        check_arg(u.ndim() == 3, "u", "expected 3 dimensions (B, H, L), got shape ", shape_str(shape_of(u)));
        return P(k, int64_t(u.shape(2)), mode, solver).backward(dy, u, pre, post, skip);
      },
      nb::arg("dy"), nb::arg("u"), nb::arg("k"), nb::arg("mode"), nb::arg("pregate").none(),
      nb::arg("postgate").none(), nb::arg("skip").none(), nb::arg("solver") = "");
}

// fftconv_spectral (the filter as its lowest m frequencies, complex (H, m)): a plan per call
// (it copies k_hat / n; the FFTW plan is cached by size).
template <class T>
strux::SpectralConvPlan<T> spectral_plan(const In<T>& u, const In<std::complex<T>>& k_hat, const std::string& mode) {
  check_arg(u.ndim() == 3, "u", "expected 3 dimensions (B, H, L), got shape ", shape_str(shape_of(u)));
  auto sk = shape_of(k_hat);
  check_arg(sk.size() == 2 && sk[0] == int64_t(u.shape(1)), "k_hat", "expected shape (", u.shape(1),
            ", m) (H = u.shape[1]), got ", shape_str(sk));
  const strux::ConvMode md = strux::parse_conv_mode(mode);
  return strux::py::run_nogil("k_hat", [&] {
    return strux::SpectralConvPlan<T>(int64_t(u.shape(0)), sk[0], int64_t(u.shape(2)), k_hat.data(), sk[1], md);
  });
}

template <class T>
void bind_spectral(nb::module_& m) {
  using C = std::complex<T>;
  m.def(
      "fftconv_spectral_forward",
      [](const In<T>& u, const In<C>& k_hat, const std::string& mode, const Opt<T>& pre, const Opt<T>& post,
         const Opt<T>& skip) {
        const auto plan = spectral_plan(u, k_hat, mode);
        auto su = check_inputs(plan, u, pre, post, skip);
        Out<T> y = new_array<T>(su, "u");
        strux::py::run_nogil("u", [&] { plan.forward(u.data(), ptr(pre), ptr(post), ptr(skip), y.data()); });
        return y;
      },
      nb::arg("u"), nb::arg("k_hat"), nb::arg("mode"), nb::arg("pregate").none(), nb::arg("postgate").none(),
      nb::arg("skip").none());
  m.def(
      "fftconv_spectral_backward",
      [](const In<T>& dy, const In<T>& u, const In<C>& k_hat, const std::string& mode, const Opt<T>& pre,
         const Opt<T>& post, const Opt<T>& skip) {
        const auto plan = spectral_plan(u, k_hat, mode);
        auto su = check_inputs(plan, u, pre, post, skip);
        check_arg(shape_of(dy) == su, "dy", "expected shape ", shape_str(su), " (the shape of u), got ",
                  shape_str(shape_of(dy)));
        Out<T> du = new_array<T>(su, "u");
        Out<C> dk = new_array<C>({plan.channels(), plan.bins()}, "k_hat");
        std::optional<Out<T>> dpre, dpost, dskip;
        if (pre) dpre = new_array<T>(su);
        if (post) dpost = new_array<T>(su);
        if (skip) dskip = new_array<T>({su[1]});
        strux::py::run_nogil("u", [&] {
          plan.backward(dy.data(), u.data(), ptr(pre), ptr(post), ptr(skip), du.data(), dk.data(),
                        dpre ? dpre->data() : nullptr, dpost ? dpost->data() : nullptr,
                        dskip ? dskip->data() : nullptr);
        });
        auto obj = [](std::optional<Out<T>>& a) { return a ? nb::cast(*a) : nb::none(); };
        return nb::make_tuple(du, dk, obj(dpre), obj(dpost), obj(dskip));
      },
      nb::arg("dy"), nb::arg("u"), nb::arg("k_hat"), nb::arg("mode"), nb::arg("pregate").none(),
      nb::arg("postgate").none(), nb::arg("skip").none());
}

}  // namespace

// The CPU backend's process-wide settings: FFT planning effort and wisdom (used by every
// family's FFTs), thread defaults. strux/_runtime.py is their Python face.
void bind_cpu_settings(nb::module_& m) {
  namespace cpu = strux::cpu;
  m.def("set_fft_planning", [](const std::string& s) { cpu::set_fft_planning(cpu::parse_fft_planning(s)); },
        nb::arg("planning"));
  m.def("fft_planning", []() { return std::string(cpu::fft_planning_name(cpu::fft_planning())); });
  m.def("set_wisdom_dir", [](const std::string& d) {
    nb::gil_scoped_release nogil;
    return cpu::set_wisdom_dir(d);
  }, nb::arg("dir"));
  m.def("wisdom_dir", &cpu::wisdom_dir);
  m.def("save_wisdom", [](const std::string& d) {
    nb::gil_scoped_release nogil;
    cpu::save_wisdom(d);
  }, nb::arg("dir"));
  m.def("good_fft_size", [](int64_t n) {
    nb::gil_scoped_release nogil;
    return cpu::good_fft_size(n);
  }, nb::arg("n"));
  m.def("set_default_threads", &cpu::set_default_threads, nb::arg("n"));
  m.def("default_threads", &cpu::default_threads);
  m.attr("max_threads") = cpu::kMaxThreads;
}

void bind_fftconv(nb::module_& m) {
  bind_dtype<float>(m, "FFTConvPlanFloat32");
  bind_dtype<double>(m, "FFTConvPlanFloat64");
  bind_spectral<float>(m);
  bind_spectral<double>(m);
  bind_cpu_settings(m);
}
