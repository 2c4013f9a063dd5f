// Bindings of the toeplitz family: plan classes per dtype, LTI blocks, FFTMatvec files.
// strux/toeplitz.py validates first; the checks here only keep C++ from misreading memory.
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "strux/toeplitz.hpp"

namespace {

using strux::check_arg;
using strux::ToeplitzLayout;
using strux::py::In;
using strux::py::new_array;
using strux::py::Out;
using strux::py::shape_of;

// (space, R) of a vector argument in `layout`: time-major (nt, n[, R]), space-major (n, nt[, R]).
template <class T>
int64_t rhs_count(const In<T>& x, const char* name, int64_t nt, int64_t n, ToeplitzLayout layout) {
  const auto s = shape_of(x);
  const bool tm = layout == ToeplitzLayout::TimeMajor;
  const bool ok = (s.size() == 2 || s.size() == 3) && s[tm ? 0 : 1] == nt && s[tm ? 1 : 0] == n &&
                  (s.size() == 2 || s[2] >= 1);
  check_arg(ok, name, "expected shape ", tm ? strux::shape_str({nt, n}) : strux::shape_str({n, nt}),
            " or with a trailing right-hand-side axis (", strux::toeplitz_layout_name(layout),
            " layout), got ", strux::shape_str(s));
  return s.size() == 3 ? s[2] : 1;
}

template <class T>
std::vector<int64_t> vec_shape(int64_t nt, int64_t n, int64_t R, bool has_r, ToeplitzLayout layout) {
  std::vector<int64_t> s = layout == ToeplitzLayout::TimeMajor ? std::vector<int64_t>{nt, n}
                                                                : std::vector<int64_t>{n, nt};
  if (has_r) s.push_back(R);
  return s;
}

// Precision as a {phase: name} dict ("broadcast", "fft", "product", "ifft", "reduce": "auto" /
// "single" / "double"; "fhat": "auto" / "bfloat16" / "float16"); strux/toeplitz.py builds it.
using PrecisionDict = std::map<std::string, std::string>;

strux::ToeplitzPrecision to_precision(const PrecisionDict& d) {
  strux::ToeplitzPrecision p;
  for (const auto& [k, v] : d) {
    const std::string arg = "precision." + k;
    if (k == "broadcast") p.broadcast = strux::parse_toeplitz_precision(v, arg.c_str());
    else if (k == "fft") p.fft = strux::parse_toeplitz_precision(v, arg.c_str());
    else if (k == "product") p.product = strux::parse_toeplitz_precision(v, arg.c_str());
    else if (k == "ifft") p.ifft = strux::parse_toeplitz_precision(v, arg.c_str());
    else if (k == "reduce") p.reduce = strux::parse_toeplitz_precision(v, arg.c_str());
    else if (k == "fhat") p.fhat = strux::parse_toeplitz_storage(v);
    else
      check_arg(false, "precision", "expected keys broadcast, fft, product, ifft, reduce, fhat, got '", k, "'");
  }
  return p;
}

PrecisionDict from_precision(const strux::ToeplitzPrecision& p) {
  return {{"broadcast", strux::toeplitz_precision_name(p.broadcast)},
          {"fft", strux::toeplitz_precision_name(p.fft)},
          {"product", strux::toeplitz_precision_name(p.product)},
          {"ifft", strux::toeplitz_precision_name(p.ifft)},
          {"reduce", strux::toeplitz_precision_name(p.reduce)},
          {"fhat", strux::toeplitz_storage_name(p.fhat)}};
}

template <class T>
void bind_plan(nb::module_& m, const char* name) {
  using P = strux::BlockToeplitzPlan<T>;
  nb::class_<P>(m, name)
      .def("__init__",
           [](P* self, In<T> blocks) {
             check_arg(blocks.ndim() == 3, "blocks", "expected 3 dimensions (Nt, Nd, Nm), got ",
                       blocks.ndim());
             const auto s = shape_of(blocks);
             strux::py::run_nogil("blocks", [&] { new (self) P(blocks.data(), s[0], s[1], s[2]); });
           })
      .def("__init__",
           [](P* self, In<T> blocks, const PrecisionDict& precision) {
             check_arg(blocks.ndim() == 3, "blocks", "expected 3 dimensions (Nt, Nd, Nm), got ",
                       blocks.ndim());
             const auto s = shape_of(blocks);
             const strux::ToeplitzPrecision p = to_precision(precision);
             strux::py::run_nogil("blocks", [&] { new (self) P(blocks.data(), s[0], s[1], s[2], p); });
           })
      .def_prop_ro("precision", [](const P& p) { return from_precision(p.precision()); })
      .def_prop_ro("spectrum_bytes", &P::spectrum_bytes)
      .def_prop_ro("nt", &P::nt)
      .def_prop_ro("nd", &P::nd)
      .def_prop_ro("nm", &P::nm)
      .def_prop_ro("nfft", &P::nfft)
      .def_prop_ro("nfreq", &P::nfreq)
      .def("spectrum",
           [](const P& p) {
             auto out = new_array<std::complex<T>>({p.nfreq(), p.nd(), p.nm()});
             std::copy(p.spectrum(), p.spectrum() + p.nfreq() * p.nd() * p.nm(), out.data());
             return out;
           })
      .def("matvec",
           [](const P& p, In<T> x, const std::string& layout_s) {
             const ToeplitzLayout layout = strux::parse_toeplitz_layout(layout_s);
             const int64_t R = rhs_count(x, "m", p.nt(), p.nm(), layout);
             auto y = new_array<T>(vec_shape<T>(p.nt(), p.nd(), R, x.ndim() == 3, layout), "m");
             strux::py::run_nogil("m", [&] { p.matvec(x.data(), y.data(), R, layout); });
             return y;
           })
      .def("rmatvec",
           [](const P& p, In<T> x, const std::string& layout_s) {
             const ToeplitzLayout layout = strux::parse_toeplitz_layout(layout_s);
             const int64_t R = rhs_count(x, "d", p.nt(), p.nd(), layout);
             auto y = new_array<T>(vec_shape<T>(p.nt(), p.nm(), R, x.ndim() == 3, layout), "d");
             strux::py::run_nogil("d", [&] { p.rmatvec(x.data(), y.data(), R, layout); });
             return y;
           })
      .def("grad_blocks", [](const P& p, In<T> mv, In<T> dd, const std::string& layout_s) {
        const ToeplitzLayout layout = strux::parse_toeplitz_layout(layout_s);
        const int64_t R = rhs_count(mv, "m", p.nt(), p.nm(), layout);
        const int64_t Rd = rhs_count(dd, "dd", p.nt(), p.nd(), layout);
        check_arg(Rd == R && dd.ndim() == mv.ndim(), "dd", "expected ", R,
                  " right-hand sides like 'm', got shape ", strux::shape_str(shape_of(dd)));
        auto g = new_array<T>({p.nt(), p.nd(), p.nm()}, "dd");
        strux::py::run_nogil("dd", [&] { p.grad_blocks(mv.data(), dd.data(), g.data(), R, layout); });
        return g;
      });
}

template <class T>
Out<T> lti(In<T> A, In<T> B, In<T> C, std::optional<In<T>> D, int64_t nt) {
  check_arg(A.ndim() == 2 && A.shape(0) == A.shape(1), "A", "expected a square matrix (ns, ns), got ",
            strux::shape_str(shape_of(A)));
  const int64_t ns = int64_t(A.shape(0));
  check_arg(B.ndim() == 2 && int64_t(B.shape(0)) == ns, "B", "expected shape (", ns, ", Nm), got ",
            strux::shape_str(shape_of(B)));
  check_arg(C.ndim() == 2 && int64_t(C.shape(1)) == ns, "C", "expected shape (Nd, ", ns, "), got ",
            strux::shape_str(shape_of(C)));
  const int64_t nm = int64_t(B.shape(1)), nd = int64_t(C.shape(0));
  if (D)
    check_arg(D->ndim() == 2 && int64_t(D->shape(0)) == nd && int64_t(D->shape(1)) == nm, "D",
              "expected shape ", strux::shape_str({nd, nm}), ", got ", strux::shape_str(shape_of(*D)));
  strux::check_positive(nt, "nt");
  auto out = new_array<T>({nt, nd, nm}, "nt");
  const T* dp = D ? D->data() : nullptr;
  strux::py::run_nogil("nt", [&] { strux::lti_blocks<T>(A.data(), B.data(), C.data(), dp, ns, nd, nm, nt, out.data()); });
  return out;
}

}  // namespace

void bind_toeplitz(nb::module_& m) {
  bind_plan<float>(m, "ToeplitzPlanF32");
  bind_plan<double>(m, "ToeplitzPlanF64");
  m.def("toeplitz_resolve_precision", [](const PrecisionDict& p, bool dbl) {
    return from_precision(strux::resolve_toeplitz_precision(to_precision(p), dbl));
  });
  m.def("toeplitz_describe_precision", [](const PrecisionDict& p, bool dbl) {
    return strux::describe_toeplitz_precision(to_precision(p), dbl);
  });
  m.def("toeplitz_error_estimate", [](const PrecisionDict& p, bool dbl, int64_t nt, int64_t n_in) {
    return strux::toeplitz_error_estimate(to_precision(p), dbl, nt, n_in);
  });
  m.def("toeplitz_error_rms", [](const PrecisionDict& p, bool dbl, int64_t nt, int64_t n_in) {
    return strux::toeplitz_error_rms(to_precision(p), dbl, nt, n_in);
  });
  m.def("toeplitz_product_bytes", [](const PrecisionDict& p, bool dbl, int64_t nt, int64_t nd, int64_t nm, int64_t R) {
    return strux::toeplitz_product_bytes(to_precision(p), dbl, nt, nd, nm, R);
  });
  m.def("toeplitz_precision_candidates", [](bool cuda_only) {
    std::vector<PrecisionDict> out;
    for (const auto& c : strux::toeplitz_precision_candidates(cuda_only)) out.push_back(from_precision(c));
    return out;
  });
  m.def("toeplitz_choose_precision", [](double tol, bool dbl, int64_t nt, int64_t nd, int64_t nm, int64_t R,
                                        bool cuda_only) {
    return from_precision(strux::toeplitz_choose_precision(tol, dbl, nt, nd, nm, R, cuda_only));
  });
  m.def("toeplitz_lti_blocks", &lti<float>, nb::arg("A"), nb::arg("B"), nb::arg("C"),
        nb::arg("D").none(), nb::arg("nt"));
  m.def("toeplitz_lti_blocks", &lti<double>, nb::arg("A"), nb::arg("B"), nb::arg("C"),
        nb::arg("D").none(), nb::arg("nt"));

  // Files: HDF5 of this build is not thread-safe, so these keep the GIL.
  m.def("toeplitz_read_fftmatvec", [](const std::string& dir) {
    strux::FFTMatvecMeta meta;
    std::vector<double> b = strux::with_oom_context("directory", [&] { return strux::read_fftmatvec(dir, &meta); });
    auto out = new_array<double>({meta.nt, meta.nd, meta.nm}, "directory");
    std::copy(b.begin(), b.end(), out.data());
    nb::dict info;
    info["Nd"] = meta.nd;
    info["Nm"] = meta.nm;
    info["Nt"] = meta.nt;
    info["prefix"] = meta.prefix;
    info["extension"] = meta.extension;
    info["is_p2q"] = meta.is_p2q;
    info["checksum"] = meta.checksum;
    info["meta_path"] = meta.meta_path;
    return std::make_pair(out, info);
  });
  m.def("toeplitz_write_fftmatvec",
        [](const std::string& dir, In<double> blocks, const std::string& prefix, int64_t is_p2q,
           int64_t checksum) {
          check_arg(blocks.ndim() == 3, "blocks", "expected 3 dimensions (Nt, Nd, Nm), got ",
                    blocks.ndim());
          const auto s = shape_of(blocks);
          strux::with_oom_context("blocks", [&] {
            strux::write_fftmatvec(dir, blocks.data(), s[0], s[1], s[2], prefix, is_p2q, checksum);
          });
        });
  m.def("toeplitz_read_vector", [](const std::string& path) {
    strux::VectorFile v = strux::with_oom_context("path", [&] { return strux::read_vector_file(path); });
    auto out = new_array<double>({v.n, v.nt}, "path");
    std::copy(v.data.begin(), v.data.end(), out.data());
    return std::make_pair(out, std::string(v.space == strux::VectorSpace::Param ? "param" : "obs"));
  });
  m.def("toeplitz_write_vector", [](const std::string& path, In<double> x, const std::string& space) {
    check_arg(x.ndim() == 2, "x", "expected 2 dimensions (n, nt), got ", x.ndim());
    check_arg(space == "param" || space == "obs", "space", "expected 'param' or 'obs', got '", space, "'");
    strux::write_vector_file(path, x.data(), int64_t(x.shape(0)), int64_t(x.shape(1)),
                             space == "param" ? strux::VectorSpace::Param : strux::VectorSpace::Obs);
  });
}
