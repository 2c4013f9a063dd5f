// What the operator layer (src/api/) shares: the one check of a View against a problem, the
// check of options.solver, backend selection, the CPU backend factory and the factories of each
// family's CUDA backends.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/dispatch.hpp"
#include "strux/strux.hpp"

namespace strux::api {

// dtype (TypeError), device, rank, shape and C-contiguity (ValueError), naming `name`.
void check_view(const View& v, const char* name, DType dt, const Device& dev,
                std::initializer_list<int64_t> shape);
// Whether check_view would pass (no message is built: for names made per call, like "w[3]").
bool matches(const View& v, DType dt, const Device& dev, std::initializer_list<int64_t> shape);
// The same for an optional argument: false when v is empty.
bool check_optional(const View& v, const char* name, DType dt, const Device& dev,
                    std::initializer_list<int64_t> shape);
// A checked view and the name of the argument it came in as, for check_overlaps.
struct Named {
  const View* v;
  std::string name;
};
// Outputs may not share a byte with one another nor partly overlap an input (a kernel would read
// what it already wrote): ValueError naming both arguments. An output that is the very same array
// as an input (same bytes) is allowed where the family runs in place (`in_place`: the scans and
// toeplitz), else refused too (fftconv, ks). Empty (absent) views are skipped.
void check_overlaps(const std::vector<Named>& outputs, const std::vector<Named>& inputs, bool in_place);
// Caller's workspace: empty, or at least `need` bytes (ValueError naming 'workspace').
void* check_workspace(const Workspace& ws, size_t need);

// Index of options.solver in `names` ("" is always index 0, "automatic"); ValueError naming
// 'options.solver' with the accepted names otherwise.
int solver_index(const Options& o, const char* where, std::initializer_list<const char*> names);

// ValueError for a CUDA device in a build without the CUDA backend.
[[noreturn]] void no_cuda(const Device& d);

// "(2, 3, 4)" from a problem's sizes, for describe().
std::string dims(std::initializer_list<int64_t> s);

// A view's data as the backend's element type.
template <class T>
T* ptr(const View& v) {
  return static_cast<T*>(v.data);
}

// Backends of each family (the CPU ones in src/api/<family>.cpp, the CUDA ones in
// src/api/cuda_<family>.cu, compiled only with STRUX_HAVE_CUDA).
using FFTConvBackend = op::detail::Backend<op::FFTConvForward, op::FFTConvBackward>;
struct ToeplitzBackend : op::detail::Backend<op::BlockToeplitzForward, op::BlockToeplitzBackward> {
  virtual void set_blocks(const View& blocks, Stream s) = 0;
  // A product in three steps, for operators that share an input (the distributed operator's row
  // chunks transform m once for all of them) and for timing each phase: the input's spectra
  // (held by the backend until its next call), the product from spectra that any backend with
  // the same spectra_key() made, and the inverse transforms of the output. spectra_key()
  // describes the matvec input's spectra (empty: this backend has no steps).
  virtual std::string spectra_key() const { return {}; }
  virtual const void* stage_in(const View&, bool, Stream) { return nullptr; }
  virtual void stage_product(const void*, bool, Stream) {}
  virtual void stage_out(const View&, bool, Stream) {}
};
using KSFactorBackend = op::detail::Backend<op::KSFactorForward, op::KSFactorBackward>;
using KSChainBackend = op::detail::Backend<op::KSChainForward, op::KSChainBackward>;
using ScanBackend = op::detail::Backend<op::ScanForward, op::ScanBackward>;

std::unique_ptr<FFTConvBackend> cuda_fftconv(const op::FFTConvProblem& p, const Options& o);
std::unique_ptr<ToeplitzBackend> cuda_toeplitz(const op::BlockToeplitzProblem& p, const Options& o);
std::unique_ptr<KSFactorBackend> cuda_ks_factor(const op::KSFactorProblem& p, const Options& o);
std::unique_ptr<KSChainBackend> cuda_ks_chain(const op::KSChainProblem& p, const Options& o);
std::unique_ptr<ScanBackend> cuda_diag_scan(const op::DiagScanProblem& p, const Options& o);
std::unique_ptr<ScanBackend> cuda_circulant_scan(const op::CirculantScanProblem& p, const Options& o);
std::unique_ptr<ScanBackend> cuda_block_circulant_scan(const op::BlockCirculantScanProblem& p,
                                                       const Options& o);

// The CPU backend Impl<T> of problem p, T = Set's element type for p.dtype. The CPU backends
// take no solver: options.solver must be "" (solver_index names `where`); an unsupported dtype is
// a TypeError naming `dtype_where` (`where` when null).
template <class Base, template <class> class Impl, class Set, class P>
std::unique_ptr<Base> make_cpu(const P& p, const Options& o, const char* where, const char* dtype_where = nullptr) {
  solver_index(o, where, {""});
  std::unique_ptr<Base> b;
  core::dispatch<Set>(p.dtype, "problem.dtype", dtype_where ? dtype_where : where,
                      [&](auto tag) { b = std::make_unique<Impl<typename decltype(tag)::type>>(p); });
  return b;
}

}  // namespace strux::api

// impl_ = the backend of `device`: `cpu` on the CPU, `cuda` on a CUDA device (only referenced
// in a CUDA build).
#ifdef STRUX_HAVE_CUDA
#define STRUX_PICK_BACKEND(device, cpu, cuda) \
  ((device).kind == ::strux::DeviceKind::CUDA ? (cuda) : (cpu))
#else
#define STRUX_PICK_BACKEND(device, cpu, cuda) \
  ((device).kind == ::strux::DeviceKind::CUDA ? (::strux::api::no_cuda(device), nullptr) : (cpu))
#endif
