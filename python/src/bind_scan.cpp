// Bindings of the scan family. strux/scan.py validates and converts; these functions take
// C-contiguous arrays of one compute dtype (suffix _f, _d, _cf, _cd), re-check shapes, build
// the plan and run it without the GIL.
#include <complex>
#include <optional>

#include "arrays.hpp"
#include "strux/core.hpp"
#include "strux/scan.hpp"

using namespace strux;
using strux::py::In;
using strux::py::new_array;
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
nb::object maybe(bool want, const std::vector<int64_t>& shape, S** p) {
  if (!want) {
    *p = nullptr;
    return nb::none();
  }
  auto arr = new_array<S>(shape);
  *p = arr.data();
  return nb::cast(arr);
}

template <class S>
void bind_diag(nb::module_& m, const char* sfx) {
  m.def((std::string("scan_diag_fwd_") + sfx).c_str(),
        [](In<S> a, In<S> b, Opt<S> h0) {
          auto s = btn(shape_of(a), "a");
          check_same(shape_of(b), s, "b");
          check_opt(h0, {s[0], s[2]}, "h0");
          auto h = new_array<S>(s);
          {
            nb::gil_scoped_release r;
            DiagScan<S>(s[0], s[1], s[2]).forward(a.data(), b.data(), ptr(h0), h.data());
          }
          return h;
        },
        nb::arg("a"), nb::arg("b"), nb::arg("h0").none());
  m.def((std::string("scan_diag_bwd_") + sfx).c_str(),
        [](In<S> dh, Opt<S> dh_last, In<S> a, In<S> b, Opt<S> h0, bool want_dh0) {
          auto s = btn(shape_of(a), "a");
          check_same(shape_of(b), s, "b");
          check_same(shape_of(dh), s, "dh");
          check_opt(h0, {s[0], s[2]}, "h0");
          check_opt(dh_last, {s[0], s[2]}, "dh_last");
          auto da = new_array<S>(s), db = new_array<S>(s);
          S* pdh0;
          nb::object dh0 = maybe<S>(want_dh0, {s[0], s[2]}, &pdh0);
          {
            nb::gil_scoped_release r;
            DiagScan<S>(s[0], s[1], s[2]).backward(dh.data(), ptr(dh_last), a.data(), b.data(), ptr(h0),
                                                  da.data(), db.data(), pdh0);
          }
          return nb::make_tuple(da, db, dh0);
        },
        nb::arg("dh"), nb::arg("dh_last").none(), nb::arg("a"), nb::arg("b"), nb::arg("h0").none(),
        nb::arg("want_dh0"));
}

template <class R>
void bind_circ(nb::module_& m, const char* sfx) {
  using C = std::complex<R>;
  // Spatial (a real, like u) and Fourier (a complex half spectrum) forms.
  m.def((std::string("scan_circ_fwd_") + sfx).c_str(),
        [](In<R> a, In<R> u, Opt<R> h0) {
          auto s = btn(shape_of(u), "u");
          check_same(shape_of(a), s, "a");
          check_opt(h0, {s[0], s[2]}, "h0");
          auto h = new_array<R>(s);
          {
            nb::gil_scoped_release r;
            CirculantScan<R>(s[0], s[1], s[2]).forward(a.data(), u.data(), ptr(h0), h.data());
          }
          return h;
        },
        nb::arg("a"), nb::arg("u"), nb::arg("h0").none());
  m.def((std::string("scan_circ_fourier_fwd_") + sfx).c_str(),
        [](In<C> a_hat, In<R> u, Opt<R> h0) {
          auto s = btn(shape_of(u), "u");
          check_same(shape_of(a_hat), {s[0], s[1], s[2] / 2 + 1}, "a");
          check_opt(h0, {s[0], s[2]}, "h0");
          auto h = new_array<R>(s);
          {
            nb::gil_scoped_release r;
            CirculantScan<R>(s[0], s[1], s[2]).forward_fourier(a_hat.data(), u.data(), ptr(h0), h.data());
          }
          return h;
        },
        nb::arg("a"), nb::arg("u"), nb::arg("h0").none());
  m.def((std::string("scan_circ_bwd_") + sfx).c_str(),
        [](In<R> dh, Opt<R> dh_last, In<R> a, In<R> u, Opt<R> h0, bool want_dh0) {
          auto s = btn(shape_of(u), "u");
          check_same(shape_of(a), s, "a");
          check_same(shape_of(dh), s, "dh");
          check_opt(h0, {s[0], s[2]}, "h0");
          check_opt(dh_last, {s[0], s[2]}, "dh_last");
          auto da = new_array<R>(s), du = new_array<R>(s);
          R* pdh0;
          nb::object dh0 = maybe<R>(want_dh0, {s[0], s[2]}, &pdh0);
          {
            nb::gil_scoped_release r;
            CirculantScan<R>(s[0], s[1], s[2]).backward(dh.data(), ptr(dh_last), a.data(), u.data(), ptr(h0),
                                                        da.data(), du.data(), pdh0);
          }
          return nb::make_tuple(da, du, dh0);
        },
        nb::arg("dh"), nb::arg("dh_last").none(), nb::arg("a"), nb::arg("u"), nb::arg("h0").none(),
        nb::arg("want_dh0"));
  m.def((std::string("scan_circ_fourier_bwd_") + sfx).c_str(),
        [](In<R> dh, Opt<R> dh_last, In<C> a_hat, In<R> u, Opt<R> h0, bool want_dh0) {
          auto s = btn(shape_of(u), "u");
          std::vector<int64_t> sa{s[0], s[1], s[2] / 2 + 1};
          check_same(shape_of(a_hat), sa, "a");
          check_same(shape_of(dh), s, "dh");
          check_opt(h0, {s[0], s[2]}, "h0");
          check_opt(dh_last, {s[0], s[2]}, "dh_last");
          auto da = new_array<C>(sa);
          auto du = new_array<R>(s);
          R* pdh0;
          nb::object dh0 = maybe<R>(want_dh0, {s[0], s[2]}, &pdh0);
          {
            nb::gil_scoped_release r;
            CirculantScan<R>(s[0], s[1], s[2]).backward_fourier(dh.data(), ptr(dh_last), a_hat.data(), u.data(),
                                                                ptr(h0), da.data(), du.data(), pdh0);
          }
          return nb::make_tuple(da, du, dh0);
        },
        nb::arg("dh"), nb::arg("dh_last").none(), nb::arg("a"), nb::arg("u"), nb::arg("h0").none(),
        nb::arg("want_dh0"));
}

template <class R>
void bind_block(nb::module_& m, const char* sfx) {
  // a: (B, T, p, p, k), u: (B, T, p*k)
  auto dims = [](const In<R>& a, const In<R>& u) {
    auto sa = shape_of(a);
    auto s = btn(shape_of(u), "u");
    check_arg(sa.size() == 5 && sa[2] == sa[3] && sa[0] == s[0] && sa[1] == s[1] && sa[2] * sa[4] == s[2], "a",
              "expected shape (B, T, p, p, k) with p*k = n = ", s[2], ", got ", shape_str(sa));
    return std::vector<int64_t>{s[0], s[1], sa[2], sa[4]};
  };
  m.def((std::string("scan_block_fwd_") + sfx).c_str(),
        [dims](In<R> a, In<R> u, Opt<R> h0) {
          auto d = dims(a, u);
          const int64_t n = d[2] * d[3];
          check_opt(h0, {d[0], n}, "h0");
          auto h = new_array<R>({d[0], d[1], n});
          {
            nb::gil_scoped_release r;
            BlockCirculantScan<R>(d[0], d[1], d[2], d[3]).forward(a.data(), u.data(), ptr(h0), h.data());
          }
          return h;
        },
        nb::arg("a"), nb::arg("u"), nb::arg("h0").none());
  m.def((std::string("scan_block_bwd_") + sfx).c_str(),
        [dims](In<R> dh, Opt<R> dh_last, In<R> a, In<R> u, Opt<R> h0, bool want_dh0) {
          auto d = dims(a, u);
          const int64_t n = d[2] * d[3];
          check_same(shape_of(dh), shape_of(u), "dh");
          check_opt(h0, {d[0], n}, "h0");
          check_opt(dh_last, {d[0], n}, "dh_last");
          auto da = new_array<R>(shape_of(a));
          auto du = new_array<R>(shape_of(u));
          R* pdh0;
          nb::object dh0 = maybe<R>(want_dh0, {d[0], n}, &pdh0);
          {
            nb::gil_scoped_release r;
            BlockCirculantScan<R>(d[0], d[1], d[2], d[3]).backward(dh.data(), ptr(dh_last), a.data(), u.data(),
                                                                   ptr(h0), da.data(), du.data(), pdh0);
          }
          return nb::make_tuple(da, du, dh0);
        },
        nb::arg("dh"), nb::arg("dh_last").none(), nb::arg("a"), nb::arg("u"), nb::arg("h0").none(),
        nb::arg("want_dh0"));
}

}  // namespace

void bind_scan(nb::module_& m) {
  bind_diag<float>(m, "f");
  bind_diag<double>(m, "d");
  bind_diag<std::complex<float>>(m, "cf");
  bind_diag<std::complex<double>>(m, "cd");
  bind_circ<float>(m, "f");
  bind_circ<double>(m, "d");
  bind_block<float>(m, "f");
  bind_block<double>(m, "d");
}
