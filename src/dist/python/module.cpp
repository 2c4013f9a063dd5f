// The nanobind module strux._dist: strux::dist::BlockToeplitz for strux/dist.py. Arrays cross as
// raw pointers (host or CUDA device memory; 0 = absent) that strux/dist.py has checked and made
// C-contiguous; communicators as their Fortran handle (mpi4py's comm.py2f()), turned back into an
// MPI_Comm with MPI_Comm_f2c, which needs this module and mpi4py to use the same MPI library.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "arrays.hpp"  // python/src: numpy results
#include "strux/toeplitz.hpp"

#include "dist/comm.hpp"
#include "strux/dist.hpp"

using namespace strux;
using dist::BlockToeplitz;

namespace {

DType parse_dtype(const std::string& s) {
  if (s == "float32") return DType::f32;
  if (s == "float64") return DType::f64;
  throw TypeError(msg("argument 'dtype': the distributed operator takes float32 or float64, got ", s));
}

dist::BlockToeplitzProblem problem(int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, const std::string& layout,
                                   const std::string& dtype, int device, std::pair<int, int> grid,
                                   const std::string& vectors) {
  dist::BlockToeplitzProblem p;
  p.Nt = Nt, p.Nd = Nd, p.Nm = Nm, p.R = R;
  p.layout = parse_toeplitz_layout(layout);
  p.dtype = parse_dtype(dtype);
  p.device = device < 0 ? Device::cpu() : Device::cuda(device);
  p.grid = {grid.first, grid.second};
  p.vectors = dist::parse_vectors(vectors);
  return p;
}

// This rank's vector with n space entries at address `ptr` (0: an empty view).
View vec(uintptr_t ptr, int64_t n, const dist::BlockToeplitzProblem& p) {
  if (!ptr) return View();
  void* d = reinterpret_cast<void*>(ptr);
  const bool tm = p.layout == ToeplitzLayout::TimeMajor;
  const int64_t a = tm ? p.Nt : n, b = tm ? n : p.Nt;
  return p.R == 1 ? View(d, p.dtype, {a, b}, p.device) : View(d, p.dtype, {a, b, p.R}, p.device);
}

Stream stream(uintptr_t s) { return Stream(reinterpret_cast<void*>(s)); }

std::vector<Stream> streams(const std::vector<uintptr_t>& s) {
  std::vector<Stream> out;
  for (uintptr_t x : s) out.push_back(stream(x));
  return out;
}

// Communication precision code: bit 0 broadcasts in float32, bit 1 sums in float32.
dist::DistOptions options(const std::string& comm, int chunks, const std::string& solver, bool check, bool timing,
                          int single) {
  dist::DistOptions o;
  o.broadcast_single = single & 1;
  o.reduce_single = (single >> 1) & 1;
  o.local.solver = solver;
  o.comm = dist::parse_comm(comm);
  o.chunks = chunks;
  o.check_ranks = check;
  o.timing = timing;
  return o;
}

nb::dict timings_dict(const dist::Timings& t) {
  nb::dict d;
  d["broadcast"] = t.broadcast;
  d["local"] = t.local;
  d["reduce"] = t.reduce;
  d["total"] = t.total;
  d["fft"] = t.fft;
  d["product"] = t.product;
  d["ifft"] = t.ifft;
  return d;
}

}  // namespace

NB_MODULE(_dist, m) {
  m.doc() = "strux distributed operators (use strux.dist, not this module)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const strux::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });
  m.def("have_nccl", &dist::have_nccl);
  // (Nd, Nm, Nt) of an FFTMatvec directory, and this rank's part of its blocks, float64.
  m.def("fftmatvec_sizes", [](const std::string& dir) {
    const auto meta = read_fftmatvec_meta(dir);
    return std::make_tuple(meta.nd, meta.nm, meta.nt);
  });
  m.def("read_fftmatvec_part", [](const std::string& dir, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    std::vector<double> b = py::run_nogil("directory", [&] { return read_fftmatvec_part(dir, r0, r1, c0, c1); });
    const int64_t nt = int64_t(b.size()) / ((r1 - r0) * (c1 - c0));
    auto out = py::new_array<double>({nt, r1 - r0, c1 - c0}, "directory");
    std::copy(b.begin(), b.end(), out.data());
    return out;
  });
  m.def("block_range", [](int64_t n, int64_t parts, int64_t q) {
    const auto r = dist::block_range(n, parts, q);
    return std::make_pair(r.begin, r.end);
  });
  m.def("choose_grid", [](int P, int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, const std::string& dtype, int device,
                          const std::string& vectors, const std::string& comm) {
    const auto p = problem(Nt, Nd, Nm, R, "time-major", dtype, device, {0, 0}, vectors);
    const auto g = dist::choose_grid(P, p, dist::parse_comm(comm));
    return std::make_pair(g.rows, g.cols);
  });
  m.def("modelled_seconds", [](std::pair<int, int> grid, int64_t Nt, int64_t Nd, int64_t Nm, int64_t R,
                               const std::string& dtype, int device, const std::string& vectors,
                               const std::string& comm) {
    const auto p = problem(Nt, Nd, Nm, R, "time-major", dtype, device, {0, 0}, vectors);
    return dist::modelled_seconds({grid.first, grid.second}, p, dist::parse_comm(comm), {});
  });

  nb::class_<BlockToeplitz>(m, "Toeplitz")
      .def(
          "__init__",
          [](BlockToeplitz* self, int64_t comm_f, int64_t Nt, int64_t Nd, int64_t Nm, int64_t R,
             const std::string& layout, const std::string& dtype, int device, std::pair<int, int> grid,
             const std::string& vectors, const std::string& comm, int chunks, const std::string& solver, bool check,
             bool timing, int single) {
            const auto p = problem(Nt, Nd, Nm, R, layout, dtype, device, grid, vectors);
            const auto o = options(comm, chunks, solver, check, timing, single);
            const MPI_Comm c = MPI_Comm_f2c(MPI_Fint(comm_f));
            nb::gil_scoped_release nogil;
            new (self) BlockToeplitz(c, p, o);
          },
          nb::arg("comm"), nb::arg("Nt"), nb::arg("Nd"), nb::arg("Nm"), nb::arg("R"), nb::arg("layout"),
          nb::arg("dtype"), nb::arg("device"), nb::arg("grid"), nb::arg("vectors"), nb::arg("comm_kind"),
          nb::arg("chunks"), nb::arg("solver"), nb::arg("check"), nb::arg("timing"), nb::arg("single"))
      .def("describe", &BlockToeplitz::describe)
      .def_prop_ro("grid", [](const BlockToeplitz& F) {
        return std::make_pair(F.problem().grid.rows, F.problem().grid.cols);
      })
      .def_prop_ro("grid_pos", &BlockToeplitz::grid_pos)
      .def_prop_ro("rows", [](const BlockToeplitz& F) { return std::make_pair(F.rows().begin, F.rows().end); })
      .def_prop_ro("cols", [](const BlockToeplitz& F) { return std::make_pair(F.cols().begin, F.cols().end); })
      .def_prop_ro("chunks", &BlockToeplitz::chunks)
      .def("set_blocks",
           [](BlockToeplitz& F, uintptr_t blocks, uintptr_t s) {
             const auto& p = F.problem();
             View v(reinterpret_cast<void*>(blocks), p.dtype, {p.Nt, F.rows().size(), F.cols().size()}, p.device);
             nb::gil_scoped_release nogil;
             F.set_blocks(v, stream(s));
           })
      .def("matvec",
           [](BlockToeplitz& F, uintptr_t m, uintptr_t d, uintptr_t s) {
             const auto& p = F.problem();
             const BlockToeplitz::Forward a{vec(m, F.cols().size(), p), vec(d, F.rows().size(), p)};
             nb::gil_scoped_release nogil;
             F.forward(a, {}, stream(s));
           })
      .def("rmatvec",
           [](BlockToeplitz& F, uintptr_t d, uintptr_t m, uintptr_t s) {
             const auto& p = F.problem();
             BlockToeplitz::Backward a;
             a.dd = vec(d, F.rows().size(), p);
             a.dm = vec(m, F.cols().size(), p);
             nb::gil_scoped_release nogil;
             F.backward(a, {}, stream(s));
           })
      .def("timings", [](const BlockToeplitz& F) { return timings_dict(F.timings()); });

  // One process, several devices (device -1: CPU threads); per-rank lists in rank order.
  using dist::BlockToeplitzGroup;
  nb::class_<BlockToeplitzGroup>(m, "ToeplitzGroup")
      .def(
          "__init__",
          [](BlockToeplitzGroup* self, const std::vector<int>& devices, int64_t Nt, int64_t Nd, int64_t Nm, int64_t R,
             const std::string& layout, const std::string& dtype, std::pair<int, int> grid, const std::string& vectors,
             int chunks, const std::string& solver, bool timing, int single) {
            const auto p = problem(Nt, Nd, Nm, R, layout, dtype, -1, grid, vectors);
            std::vector<Device> devs;
            for (int d : devices) devs.push_back(d < 0 ? Device::cpu() : Device::cuda(d));
            const auto o = options("auto", chunks, solver, true, timing, single);
            nb::gil_scoped_release nogil;
            new (self) BlockToeplitzGroup(p, devs, o);
          })
      .def_prop_ro("size", &BlockToeplitzGroup::size)
      .def_prop_ro("grid", [](const BlockToeplitzGroup& G) {
        return std::make_pair(G.rank(0).problem().grid.rows, G.rank(0).problem().grid.cols);
      })
      .def("grid_pos", [](const BlockToeplitzGroup& G, int q) { return G.rank(q).grid_pos(); })
      .def("rows", [](const BlockToeplitzGroup& G, int q) { return std::make_pair(G.rank(q).rows().begin, G.rank(q).rows().end); })
      .def("cols", [](const BlockToeplitzGroup& G, int q) { return std::make_pair(G.rank(q).cols().begin, G.rank(q).cols().end); })
      .def("describe", [](const BlockToeplitzGroup& G, int q) { return G.rank(q).describe(); })
      .def("timings", [](const BlockToeplitzGroup& G, int q) { return timings_dict(G.rank(q).timings()); })
      .def("set_blocks",
           [](BlockToeplitzGroup& G, const std::vector<uintptr_t>& blocks, const std::vector<uintptr_t>& s) {
             std::vector<View> v;
             for (int q = 0; q < G.size() && q < int(blocks.size()); ++q) {
               const auto& F = G.rank(q);
               const auto& p = F.problem();
               v.push_back(View(reinterpret_cast<void*>(blocks[size_t(q)]), p.dtype,
                                {p.Nt, F.rows().size(), F.cols().size()}, p.device));
             }
             nb::gil_scoped_release nogil;
             G.set_blocks(v, streams(s));
           })
      .def("matvec",
           [](BlockToeplitzGroup& G, const std::vector<uintptr_t>& m, const std::vector<uintptr_t>& d,
              const std::vector<uintptr_t>& s) {
             std::vector<BlockToeplitz::Forward> a;
             for (int q = 0; q < G.size() && q < int(m.size()) && q < int(d.size()); ++q) {
               const auto& F = G.rank(q);
               a.push_back({vec(m[size_t(q)], F.cols().size(), F.problem()), vec(d[size_t(q)], F.rows().size(), F.problem())});
             }
             nb::gil_scoped_release nogil;
             G.forward(a, streams(s));
           })
      .def("rmatvec", [](BlockToeplitzGroup& G, const std::vector<uintptr_t>& d, const std::vector<uintptr_t>& m,
                         const std::vector<uintptr_t>& s) {
        std::vector<BlockToeplitz::Backward> a;
        for (int q = 0; q < G.size() && q < int(m.size()) && q < int(d.size()); ++q) {
          const auto& F = G.rank(q);
          BlockToeplitz::Backward b;
          b.dd = vec(d[size_t(q)], F.rows().size(), F.problem());
          b.dm = vec(m[size_t(q)], F.cols().size(), F.problem());
          a.push_back(b);
        }
        nb::gil_scoped_release nogil;
        G.backward(a, streams(s));
      });
}
