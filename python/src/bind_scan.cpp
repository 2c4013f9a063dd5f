// Bindings of the scan family. strux/scan.py validates and converts; these functions take
// C-contiguous arrays of one compute dtype (suffix _f, _d, _cf, _cd), re-check shapes, build
// the plan and run it without the GIL. Outputs are passed in, allocated by numpy (np.empty):
// numpy asks for transparent huge pages on large arrays and does not zero them, which on the
// first touch of fresh memory costs several times less than operator new[] here.
#include <complex>
#include <optional>

#include "arrays.hpp"
#include "strux/core.hpp"
#include "strux/scan.hpp"

using namespace strux;
using strux::py::In;
using strux::py::shape_of;

namespace {

template <class S>
using Opt = std::optional<In<S>>;

template <class S>
const S* ptr(const Opt<S>& x) {
  return x ? x->data() : nullptr;
}

void check_same(const std::vector<int64_t>& got, const std::vector<int64_t>& want, const char* name) {
  check_arg(got == want, name, "expected shape ", shape_str(want), ", got ", shape_str(got));
}

// (B, T, n) of x, checked rank 3.
std::vector<int64_t> btn(const std::vector<int64_t>& s, const char* name) {
  check_arg(s.size() == 3, name, "expected 3 dimensions (B, T, n), got shape ", shape_str(s));
  return s;
}

template <class S>
void check_opt(const Opt<S>& x, std::vector<int64_t> want, const char* name) {
  if (x) check_same(shape_of(*x), want, name);
}

template <class S>
using Out = nb::ndarray<S, nb::c_contig, nb::device::cpu>;
template <class S>
using OptOut = std::optional<Out<S>>;

template <class S>
S* out_ptr(Out<S>& x, const std::vector<int64_t>& want, const char* name) {
  check_same(shape_of(x), want, name);
  return x.data();
}
template <class S>
S* out_ptr(OptOut<S>& x, const std::vector<int64_t>& want, const char* name) {
  return x ? out_ptr(*x, want, name) : nullptr;
}

template <class S>
void bind_diag(nb::module_& m, const char* sfx) {
  m.def((std::string("scan_diag_fwd_") + sfx).c_str(),
        [](In<S> a, In<S> b, Opt<S> h0, Out<S> h, std::string solver) {
          auto s = btn(shape_of(a), "a");
          check_same(shape_of(b), s, "b");
          check_opt(h0, {s[0], s[2]}, "h0");
          S* ph = out_ptr(h, s, "h");
          const DiagSolver sv = diag_solver(solver);
          strux::py::run_nogil("b", [&] {
            DiagScan<S>(s[0], s[1], s[2], {}, sv).forward(a.data(), b.data(), ptr(h0), ph);
          });
        },
        nb::arg("a"), nb::arg("b"), nb::arg("h0").none(), nb::arg("h"), nb::arg("solver") = "");
  m.def((std::string("scan_diag_bwd_") + sfx).c_str(),
        [](In<S> dh, Opt<S> dh_last, In<S> a, In<S> b, Opt<S> h0, Out<S> da, Out<S> db, OptOut<S> dh0) {
          auto s = btn(shape_of(a), "a");
          check_same(shape_of(b), s, "b");
          check_same(shape_of(dh), s, "dh");
          check_opt(h0, {s[0], s[2]}, "h0");
          check_opt(dh_last, {s[0], s[2]}, "dh_last");
          S *pa = out_ptr(da, s, "da"), *pb = out_ptr(db, s, "db"), *p0 = out_ptr(dh0, {s[0], s[2]}, "dh0");
          strux::py::run_nogil("b", [&] {
            DiagScan<S>(s[0], s[1], s[2]).backward(dh.data(), ptr(dh_last), a.data(), b.data(), ptr(h0), pa, pb, p0);
          });
        },
        nb::arg("dh"), nb::arg("dh_last").none(), nb::arg("a"), nb::arg("b"), nb::arg("h0").none(),
        nb::arg("da"), nb::arg("db"), nb::arg("dh0").none());
}

// The layouts of DiagLayout: b (and h, dh, db) (B, T, n) or, time_last, (B, n, T); a (and da)
// that shape or with size 1 along batch and/or time. Returns (B, T, n) and fills the layout.
std::vector<int64_t> layout_dims(const std::vector<int64_t>& sa, const std::vector<int64_t>& sb, bool time_last,
                                 bool reverse, DiagLayout& L) {
  check_arg(sb.size() == 3, "b", "expected 3 dimensions, got shape ", shape_str(sb));
  const int64_t B = sb[0], T = time_last ? sb[2] : sb[1], n = time_last ? sb[1] : sb[2];
  check_arg(sa.size() == 3, "a", "expected 3 dimensions, got shape ", shape_str(sa));
  const int64_t aT = time_last ? sa[2] : sa[1], an = time_last ? sa[1] : sa[2];
  check_arg((sa[0] == B || sa[0] == 1) && (aT == T || aT == 1) && an == n, "a",
            "expected a shape broadcasting to ", shape_str(sb), " along batch and time only, got ", shape_str(sa));
  L = DiagLayout{time_last, reverse, sa[0] == B, aT == T};
  return {B, T, n};
}

template <class S>
void bind_diag_layout(nb::module_& m, const char* sfx) {
  m.def((std::string("scan_diag_layout_fwd_") + sfx).c_str(),
        [](In<S> a, In<S> b, Opt<S> h0, Out<S> h, bool time_last, bool reverse) {
          DiagLayout L;
          const auto sb = shape_of(b);
          const auto d = layout_dims(shape_of(a), sb, time_last, reverse, L);
          check_opt(h0, {d[0], d[2]}, "h0");
          S* ph = out_ptr(h, sb, "h");
          strux::py::run_nogil("b", [&] { DiagScan<S>(d[0], d[1], d[2], L).forward(a.data(), b.data(), ptr(h0), ph); });
        },
        nb::arg("a"), nb::arg("b"), nb::arg("h0").none(), nb::arg("h"), nb::arg("time_last"), nb::arg("reverse"));
  m.def((std::string("scan_diag_layout_bwd_") + sfx).c_str(),
        [](In<S> dh, Opt<S> dh_last, In<S> a, In<S> b, Opt<S> h0, Out<S> da, Out<S> db, OptOut<S> dh0, bool time_last,
           bool reverse) {
          DiagLayout L;
          const auto sb = shape_of(b);
          const auto d = layout_dims(shape_of(a), sb, time_last, reverse, L);
          check_same(shape_of(dh), sb, "dh");
          check_opt(h0, {d[0], d[2]}, "h0");
          check_opt(dh_last, {d[0], d[2]}, "dh_last");
          S *pa = out_ptr(da, shape_of(a), "da"), *pb = out_ptr(db, sb, "db"), *p0 = out_ptr(dh0, {d[0], d[2]}, "dh0");
          strux::py::run_nogil("b", [&] {
            DiagScan<S>(d[0], d[1], d[2], L).backward(dh.data(), ptr(dh_last), a.data(), b.data(), ptr(h0), pa, pb, p0);
          });
        },
        nb::arg("dh"), nb::arg("dh_last").none(), nb::arg("a"), nb::arg("b"), nb::arg("h0").none(), nb::arg("da"),
        nb::arg("db"), nb::arg("dh0").none(), nb::arg("time_last"), nb::arg("reverse"));
}

// float16 forward: the arrays as their uint16 bit patterns (numpy's .view(np.uint16)), in the
// channels-last layouts (time_last must be false).
void bind_diag_half(nb::module_& m) {
  m.def("scan_diag_half_fwd",
        [](In<uint16_t> a, In<uint16_t> b, Opt<uint16_t> h0, Out<uint16_t> h, bool reverse) {
          DiagLayout L;
          const auto sb = shape_of(b);
          const auto d = layout_dims(shape_of(a), sb, false, reverse, L);
          check_opt(h0, {d[0], d[2]}, "h0");
          uint16_t* ph = out_ptr(h, sb, "h");
          strux::py::run_nogil("b", [&] { diag_scan_forward_half(d[0], d[1], d[2], a.data(), b.data(), ptr(h0), ph, L); });
        },
        nb::arg("a"), nb::arg("b"), nb::arg("h0").none(), nb::arg("h"), nb::arg("reverse"));
}

// Spatial (a real, like u) and Fourier (a complex half spectrum) forms.
template <class R, class A, bool Fourier>
void bind_circ_form(nb::module_& m, const std::string& base, const std::string& sfx) {
  auto a_shape = [](const std::vector<int64_t>& s) {
    return Fourier ? std::vector<int64_t>{s[0], s[1], s[2] / 2 + 1} : s;
  };
  m.def((base + "_fwd_" + sfx).c_str(),
        [a_shape](In<A> a, In<R> u, Opt<R> h0, Out<R> h) {
          auto s = btn(shape_of(u), "u");
          check_same(shape_of(a), a_shape(s), "a");
          check_opt(h0, {s[0], s[2]}, "h0");
          R* ph = out_ptr(h, s, "h");
          strux::py::run_nogil("u", [&] {
            CirculantScan<R> plan(s[0], s[1], s[2]);
            if constexpr (Fourier)
              plan.forward_fourier(a.data(), u.data(), ptr(h0), ph);
            else
              plan.forward(a.data(), u.data(), ptr(h0), ph);
          });
        },
        nb::arg("a"), nb::arg("u"), nb::arg("h0").none(), nb::arg("h"));
  m.def((base + "_bwd_" + sfx).c_str(),
        [a_shape](In<R> dh, Opt<R> dh_last, In<A> a, In<R> u, Opt<R> h0, Out<A> da, Out<R> du, OptOut<R> dh0) {
          auto s = btn(shape_of(u), "u");
          check_same(shape_of(a), a_shape(s), "a");
          check_same(shape_of(dh), s, "dh");
          check_opt(h0, {s[0], s[2]}, "h0");
          check_opt(dh_last, {s[0], s[2]}, "dh_last");
          A* pa = out_ptr(da, a_shape(s), "da");
          R *pu = out_ptr(du, s, "du"), *p0 = out_ptr(dh0, {s[0], s[2]}, "dh0");
          strux::py::run_nogil("u", [&] {
            CirculantScan<R> plan(s[0], s[1], s[2]);
            if constexpr (Fourier)
              plan.backward_fourier(dh.data(), ptr(dh_last), a.data(), u.data(), ptr(h0), pa, pu, p0);
            else
              plan.backward(dh.data(), ptr(dh_last), a.data(), u.data(), ptr(h0), pa, pu, p0);
          });
        },
        nb::arg("dh"), nb::arg("dh_last").none(), nb::arg("a"), nb::arg("u"), nb::arg("h0").none(),
        nb::arg("da"), nb::arg("du"), nb::arg("dh0").none());
}

template <class R>
void bind_block(nb::module_& m, const char* sfx) {
  // a: (B, T, p, p, k), u: (B, T, p*k) -> (B, T, p, k)
  auto dims = [](const In<R>& a, const In<R>& u) {
    auto sa = shape_of(a);
    auto s = btn(shape_of(u), "u");
    check_arg(sa.size() == 5 && sa[2] == sa[3] && sa[0] == s[0] && sa[1] == s[1] && sa[2] * sa[4] == s[2], "a",
              "expected shape (B, T, p, p, k) with p*k = n = ", s[2], ", got ", shape_str(sa));
    return std::vector<int64_t>{s[0], s[1], sa[2], sa[4]};
  };
  m.def((std::string("scan_block_fwd_") + sfx).c_str(),
        [dims](In<R> a, In<R> u, Opt<R> h0, Out<R> h) {
          auto d = dims(a, u);
          const int64_t n = d[2] * d[3];
          check_opt(h0, {d[0], n}, "h0");
          R* ph = out_ptr(h, shape_of(u), "h");
          strux::py::run_nogil("u", [&] {
            BlockCirculantScan<R>(d[0], d[1], d[2], d[3]).forward(a.data(), u.data(), ptr(h0), ph);
          });
        },
        nb::arg("a"), nb::arg("u"), nb::arg("h0").none(), nb::arg("h"));
  m.def((std::string("scan_block_bwd_") + sfx).c_str(),
        [dims](In<R> dh, Opt<R> dh_last, In<R> a, In<R> u, Opt<R> h0, Out<R> da, Out<R> du, OptOut<R> dh0) {
          auto d = dims(a, u);
          const int64_t n = d[2] * d[3];
          check_same(shape_of(dh), shape_of(u), "dh");
          check_opt(h0, {d[0], n}, "h0");
          check_opt(dh_last, {d[0], n}, "dh_last");
          R *pa = out_ptr(da, shape_of(a), "da"), *pu = out_ptr(du, shape_of(u), "du");
          R* p0 = out_ptr(dh0, {d[0], n}, "dh0");
          strux::py::run_nogil("u", [&] {
            BlockCirculantScan<R>(d[0], d[1], d[2], d[3]).backward(dh.data(), ptr(dh_last), a.data(), u.data(),
                                                                   ptr(h0), pa, pu, p0);
          });
        },
        nb::arg("dh"), nb::arg("dh_last").none(), nb::arg("a"), nb::arg("u"), nb::arg("h0").none(),
        nb::arg("da"), nb::arg("du"), nb::arg("dh0").none());
}

}  // namespace

void bind_scan(nb::module_& m) {
  bind_diag<float>(m, "f");
  bind_diag<double>(m, "d");
  bind_diag<std::complex<float>>(m, "cf");
  bind_diag<std::complex<double>>(m, "cd");
  bind_diag_layout<float>(m, "f");
  bind_diag_layout<double>(m, "d");
  bind_diag_layout<std::complex<float>>(m, "cf");
  bind_diag_layout<std::complex<double>>(m, "cd");
  bind_diag_half(m);
  bind_circ_form<float, float, false>(m, "scan_circ", "f");
  bind_circ_form<double, double, false>(m, "scan_circ", "d");
  bind_circ_form<float, std::complex<float>, true>(m, "scan_circ_fourier", "f");
  bind_circ_form<double, std::complex<double>, true>(m, "scan_circ_fourier", "d");
  bind_block<float>(m, "f");
  bind_block<double>(m, "d");
  m.def("scan_set_time_block", &strux::set_scan_time_block, nb::arg("steps"),
        "Time steps per block of the circulant pipelines (0 = automatic); a tuning/testing knob.");
  m.def("scan_set_dft_gemm_max", &strux::set_scan_dft_gemm_max, nb::arg("k"),
        "Largest transform length of the circulant scans done by GEMM (default 64, 0 = always FFTW); a "
        "tuning/testing knob.");
  m.def("scan_set_dft_radix2", &strux::set_scan_dft_radix2, nb::arg("on"),
        "Powers of two among the short transforms by the radix-2 FFT (default True) or by GEMM; a "
        "testing knob.");
}
