// strux._ext bindings of the ks family: one factor and chains, forward and backward, per dtype
// (suffix _f32 / _f64); `solver` forces a CPU solver (tests, benchmarks; see KSSolver). strux/ks.py has validated everything; the checks here only keep C++
// from misreading memory.
#include <string>
#include <vector>

#include <nanobind/stl/pair.h>

#include "arrays.hpp"
#include "strux/ks.hpp"

namespace {

using namespace strux;
using py::In;
using py::Out;

KSPattern to_pattern(const std::vector<int64_t>& v, size_t at = 0) {
  return KSPattern{v[at], v[at + 1], v[at + 2], v[at + 3]};
}

// Flat (a, b, c, d, a, b, c, d, ...) list of a chain's patterns.
std::vector<KSPattern> to_patterns(const std::vector<int64_t>& flat) {
  check_arg(!flat.empty() && flat.size() % 4 == 0, "patterns", "expected 4 integers per pattern, got ",
            flat.size());
  std::vector<KSPattern> out;
  for (size_t at = 0; at < flat.size(); at += 4) out.push_back(to_pattern(flat, at));
  return out;
}

// The batch size of a rank-2 activation of width `width` in `layout`.
template <class A>
int64_t batch_of(const A& arr, int64_t width, KSLayout layout, const char* name) {
  check_arg(arr.ndim() == 2, name, "expected 2 dimensions, got ", arr.ndim());
  const bool bsl = layout == KSLayout::BatchLast;
  const int64_t w = int64_t(arr.shape(bsl ? 0 : 1)), batch = int64_t(arr.shape(bsl ? 1 : 0));
  check_arg(w == width, name, "expected ", width, " along axis ", bsl ? 0 : 1, ", got ", w);
  return batch;
}

template <class T>
void check_w(const In<T>& w, const KSPattern& p, const char* name) {
  check_arg(w.ndim() == 4 && int64_t(w.shape(0)) == p.a && int64_t(w.shape(1)) == p.b &&
                int64_t(w.shape(2)) == p.c && int64_t(w.shape(3)) == p.d,
            name, "expected shape (", p.a, ", ", p.b, ", ", p.c, ", ", p.d, ")");
}

std::vector<int64_t> act_shape(int64_t width, int64_t batch, KSLayout layout) {
  return layout == KSLayout::BatchLast ? std::vector<int64_t>{width, batch}
                                       : std::vector<int64_t>{batch, width};
}

template <class T>
Out<T> matmul(In<T> x, In<T> w, std::vector<int64_t> pat, std::string layout_s, std::string solver) {
  const KSLayout layout = ks_layout(layout_s);
  check_arg(pat.size() == 4, "pattern", "expected 4 integers, got ", pat.size());
  const KSPlan<T> plan(to_pattern(pat), layout, ks_solver(solver, false));
  const KSPattern& p = plan.pattern();
  check_w(w, p, "w");
  const int64_t batch = batch_of(x, p.cols(), layout, "x");
  Out<T> y = py::new_array<T>(act_shape(p.rows(), batch, layout), "x");
  strux::py::run_nogil("x", [&] {
    plan.forward(x.data(), w.data(), y.data(), batch);
  });
  return y;
}

template <class T>
std::pair<Out<T>, Out<T>> matmul_vjp(In<T> dy, In<T> x, In<T> w, std::vector<int64_t> pat,
                                     std::string layout_s, std::string solver) {
  const KSLayout layout = ks_layout(layout_s);
  check_arg(pat.size() == 4, "pattern", "expected 4 integers, got ", pat.size());
  const KSPlan<T> plan(to_pattern(pat), layout, ks_solver(solver, false));
  const KSPattern& p = plan.pattern();
  check_w(w, p, "w");
  const int64_t batch = batch_of(x, p.cols(), layout, "x");
  check_arg(batch_of(dy, p.rows(), layout, "dy") == batch, "dy", "expected batch ", batch);
  Out<T> dx = py::new_array<T>(act_shape(p.cols(), batch, layout), "dy");
  Out<T> dw = py::new_array<T>({p.a, p.b, p.c, p.d}, "w");
  strux::py::run_nogil("x", [&] {
    plan.backward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), batch);
  });
  return {dx, dw};
}

template <class T>
Out<T> chain(In<T> x, std::vector<In<T>> ws, std::vector<int64_t> flat, std::string layout_s,
             std::string solver) {
  const KSLayout layout = ks_layout(layout_s);
  KSChainPlan<T> plan(to_patterns(flat), layout, 0, ks_solver(solver, true));
  check_arg(ws.size() == plan.size(), "ws", "expected ", plan.size(), " arrays, got ", ws.size());
  std::vector<const T*> wp;
  for (size_t q = 0; q < ws.size(); ++q) {
    check_w(ws[q], plan.factor(q).pattern(), "ws");
    wp.push_back(ws[q].data());
  }
  const int64_t batch = batch_of(x, plan.cols(), layout, "x");
  Out<T> y = py::new_array<T>(act_shape(plan.rows(), batch, layout), "x");
  strux::py::run_nogil("x", [&] {
    plan.forward(x.data(), wp.data(), y.data(), batch);
  });
  return y;
}

template <class T>
std::pair<Out<T>, std::vector<Out<T>>> chain_vjp(In<T> dy, In<T> x, std::vector<In<T>> ws,
                                                 std::vector<int64_t> flat, std::string layout_s,
                                                 std::string solver) {
  const KSLayout layout = ks_layout(layout_s);
  KSChainPlan<T> plan(to_patterns(flat), layout, 0, ks_solver(solver, true));
  check_arg(ws.size() == plan.size(), "ws", "expected ", plan.size(), " arrays, got ", ws.size());
  std::vector<const T*> wp;
  std::vector<Out<T>> dws;
  std::vector<T*> dwp;
  for (size_t q = 0; q < ws.size(); ++q) {
    const KSPattern& p = plan.factor(q).pattern();
    check_w(ws[q], p, "ws");
    wp.push_back(ws[q].data());
    dws.push_back(py::new_array<T>({p.a, p.b, p.c, p.d}, "w"));
    dwp.push_back(dws.back().data());
  }
  const int64_t batch = batch_of(x, plan.cols(), layout, "x");
  check_arg(batch_of(dy, plan.rows(), layout, "dy") == batch, "dy", "expected batch ", batch);
  Out<T> dx = py::new_array<T>(act_shape(plan.cols(), batch, layout), "dy");
  strux::py::run_nogil("x", [&] {
    plan.backward(dy.data(), x.data(), wp.data(), dx.data(), dwp.data(), batch);
  });
  return {dx, dws};
}

template <class T>
void bind_dtype(nb::module_& m, const char* suffix) {
  const std::string s(suffix);
  m.def(("ks_matmul" + s).c_str(), &matmul<T>, nb::arg("x"), nb::arg("w"), nb::arg("pattern"),
        nb::arg("layout"), nb::arg("solver") = "");
  m.def(("ks_matmul_vjp" + s).c_str(), &matmul_vjp<T>, nb::arg("dy"), nb::arg("x"), nb::arg("w"),
        nb::arg("pattern"), nb::arg("layout"), nb::arg("solver") = "");
  m.def(("ks_chain" + s).c_str(), &chain<T>, nb::arg("x"), nb::arg("ws"), nb::arg("patterns"),
        nb::arg("layout"), nb::arg("solver") = "");
  m.def(("ks_chain_vjp" + s).c_str(), &chain_vjp<T>, nb::arg("dy"), nb::arg("x"), nb::arg("ws"),
        nb::arg("patterns"), nb::arg("layout"), nb::arg("solver") = "");
}

}  // namespace

void bind_ks(nb::module_& m) {
  bind_dtype<float>(m, "_f32");
  bind_dtype<double>(m, "_f64");
}
