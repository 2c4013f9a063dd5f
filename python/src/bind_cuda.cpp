// strux._ext.cuda: the CUDA plans, taking device arrays (DLPack: torch, CuPy, ...) and a stream
// handle (uintptr_t, the caller's current stream). Outputs are preallocated by Python. The
// Python layer (strux/_cuda.py) validates first; these checks re-verify dtype, shape, device
// and contiguity so C++ never misreads memory.
#include "arrays.hpp"

#ifdef STRUX_HAVE_CUDA
#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string>

#include "cuda/check.hpp"
#include "strux/cuda/fftconv.hpp"
#include "strux/cuda/toeplitz.hpp"

namespace {

using strux::check_arg;
using strux::msg;
using strux::shape_str;
using namespace strux::cuda;

using Arr = nb::ndarray<nb::device::cuda, nb::c_contig>;
using OptArr = std::optional<Arr>;

DType parse_dtype(const std::string& s) {
  if (s == "float32") return DType::f32;
  if (s == "float64") return DType::f64;
  if (s == "float16") return DType::f16;
  if (s == "bfloat16") return DType::bf16;
  throw strux::TypeError(msg("argument 'dtype': expected float32, float64, float16 or bfloat16, got ", s));
}

bool is(const nb::dlpack::dtype& d, nb::dlpack::dtype_code c, int bits) {
  return d.code == uint8_t(c) && d.bits == bits && d.lanes == 1;
}

bool has_dtype(const Arr& a, DType t, bool complex) {
  using C = nb::dlpack::dtype_code;
  const auto d = a.dtype();
  if (complex) return is(d, C::Complex, t == DType::f64 ? 128 : 64);
  switch (t) {
    case DType::f32: return is(d, C::Float, 32);
    case DType::f64: return is(d, C::Float, 64);
    case DType::f16: return is(d, C::Float, 16);
    case DType::bf16: return is(d, C::Bfloat, 16);
  }
  return false;
}

int current_device() {
  int d = 0;
  STRUX_CUDA(cudaGetDevice(&d));
  return d;
}

// dtype, exact shape and device of one array.
void check(const Arr& a, const char* name, DType t, const std::vector<int64_t>& shape, int device,
           bool complex = false) {
  if (!has_dtype(a, t, complex))
    throw strux::TypeError(msg("argument '", name, "': expected dtype ", complex ? (t == DType::f64 ? "complex128" : "complex64") : dtype_name(t)));
  // Messages are built only on failure: this runs on every call.
  std::vector<int64_t> s = strux::py::shape_of(a);
  if (s != shape) throw strux::ValueError(msg("argument '", name, "': expected shape ", shape_str(shape), ", got ", shape_str(s)));
  if (int(a.device_id()) != device)
    throw strux::ValueError(msg("argument '", name, "': expected an array on CUDA device ", device, ", got device ", a.device_id()));
}

const void* ptr(const OptArr& a) { return a ? a->data() : nullptr; }
void* mptr(const OptArr& a) { return a ? a->data() : nullptr; }
Stream stream_of(uintptr_t s) { return reinterpret_cast<Stream>(s); }

struct FFTConv {
  std::unique_ptr<FFTConvPlan> plan;
  int64_t B, H, L, Lk;
  DType dt;
  int device;
  bool backward;

  FFTConv(int64_t B_, int64_t H_, int64_t L_, int64_t Lk_, const std::string& mode, const std::string& dtype,
          bool with_backward, int algo)
      : B(B_), H(H_), L(L_), Lk(Lk_), dt(parse_dtype(dtype)), device(current_device()), backward(with_backward) {
    check_arg(mode == "causal" || mode == "circular", "mode", "expected 'causal' or 'circular', got '", mode, "'");
    plan = std::make_unique<FFTConvPlan>(B, H, L, Lk, mode == "circular", dt, with_backward, algo);
  }
  std::vector<int64_t> bhl() const { return {B, H, L}; }
  void same_device() const {
    check_arg(current_device() == device, "device", "plan made on CUDA device ", device,
              ", but the current device is ", current_device());
  }
  void set_filter(const Arr& k, uintptr_t s) {
    same_device();
    check(k, "k", dt, {H, Lk}, device);
    plan->set_filter(k.data(), stream_of(s));
  }
  void forward(const Arr& u, const OptArr& pre, const OptArr& post, const OptArr& skip, Arr& y, uintptr_t s) {
    same_device();
    check(u, "u", dt, bhl(), device);
    if (pre) check(*pre, "pregate", dt, bhl(), device);
    if (post) check(*post, "postgate", dt, bhl(), device);
    if (skip) check(*skip, "skip", dt, {H}, device);
    check(y, "y", dt, bhl(), device);
    plan->forward(u.data(), ptr(pre), ptr(post), ptr(skip), y.data(), stream_of(s));
  }
  void backward_(const Arr& dy, const Arr& u, const OptArr& pre, const OptArr& post, const OptArr& skip, Arr& du,
                 Arr& dk, const OptArr& dpre, const OptArr& dpost, const OptArr& dskip, uintptr_t s) {
    same_device();
    check(dy, "dy", dt, bhl(), device);
    check(u, "u", dt, bhl(), device);
    if (pre) check(*pre, "pregate", dt, bhl(), device);
    if (post) check(*post, "postgate", dt, bhl(), device);
    if (skip) check(*skip, "skip", dt, {H}, device);
    check(du, "du", dt, bhl(), device);
    check(dk, "dk", dt, {H, Lk}, device);
    check_arg(!dpre || pre, "dpregate", "given without pregate");
    check_arg(!dpost || post, "dpostgate", "given without postgate");
    check_arg(!dskip || skip, "dskip", "given without skip");
    if (dpre) check(*dpre, "dpregate", dt, bhl(), device);
    if (dpost) check(*dpost, "dpostgate", dt, bhl(), device);
    if (dskip) check(*dskip, "dskip", dt, {H}, device);
    plan->backward(dy.data(), u.data(), ptr(pre), ptr(post), ptr(skip), du.data(), dk.data(), mptr(dpre),
                   mptr(dpost), mptr(dskip), stream_of(s));
  }
};

struct Toeplitz {
  std::unique_ptr<ToeplitzPlan> plan;
  int64_t Nt, Nd, Nm, R;
  bool space_major;
  DType dt;
  int device;

  Toeplitz(int64_t Nt_, int64_t Nd_, int64_t Nm_, int64_t R_, const std::string& layout, const std::string& dtype,
           int algo, int fft)
      : Nt(Nt_), Nd(Nd_), Nm(Nm_), R(R_), dt(parse_dtype(dtype)), device(current_device()) {
    check_arg(layout == "time-major" || layout == "space-major", "layout",
              "expected 'time-major' or 'space-major', got '", layout, "'");
    space_major = layout == "space-major";
    plan = std::make_unique<ToeplitzPlan>(Nt, Nd, Nm, R, space_major, dt, algo, fft);
  }
  // Shape of a vector with n components per time step (R = 1 drops the trailing axis).
  std::vector<int64_t> vshape(int64_t n, bool with_r) const {
    std::vector<int64_t> s = space_major ? std::vector<int64_t>{n, Nt} : std::vector<int64_t>{Nt, n};
    if (with_r) s.push_back(R);
    return s;
  }
  void checks(const Arr& fhat, const Arr& x, const char* xn, int64_t nx, const Arr& y, const char* yn, int64_t ny) {
    check_arg(current_device() == device, "device", "plan made on CUDA device ", device,
              ", but the current device is ", current_device());
    check(fhat, "fhat", dt, {plan->nfreq(), Nd, Nm}, device, true);
    const bool with_r = x.ndim() == 3;
    check_arg(with_r || R == 1, xn, "expected a trailing axis of size R = ", R);
    check(x, xn, dt, vshape(nx, with_r), device);
    check(y, yn, dt, vshape(ny, with_r), device);
  }
  void matvec(const Arr& fhat, const Arr& m, Arr& d, uintptr_t s) {
    checks(fhat, m, "m", Nm, d, "d", Nd);
    plan->matvec(fhat.data(), m.data(), d.data(), stream_of(s));
  }
  void rmatvec(const Arr& fhat, const Arr& d, Arr& m, uintptr_t s) {
    checks(fhat, d, "d", Nd, m, "m", Nm);
    plan->rmatvec(fhat.data(), d.data(), m.data(), stream_of(s));
  }
};

}  // namespace

void bind_cuda(nb::module_& m) {
  nb::module_ c = m.def_submodule("cuda", "CUDA plans (use strux._cuda, not this module)");
  nb::class_<FFTConv>(c, "FFTConvPlan")
      .def(nb::init<int64_t, int64_t, int64_t, int64_t, const std::string&, const std::string&, bool, int>(),
           nb::arg("B"), nb::arg("H"), nb::arg("L"), nb::arg("Lk"), nb::arg("mode"), nb::arg("dtype"),
           nb::arg("with_backward"), nb::arg("algo") = 0)
      .def("set_filter", &FFTConv::set_filter, nb::arg("k"), nb::arg("stream"))
      .def("forward", &FFTConv::forward, nb::arg("u"), nb::arg("pregate").none(), nb::arg("postgate").none(),
           nb::arg("skip").none(), nb::arg("y"), nb::arg("stream"))
      .def("backward", &FFTConv::backward_, nb::arg("dy"), nb::arg("u"), nb::arg("pregate").none(),
           nb::arg("postgate").none(), nb::arg("skip").none(), nb::arg("du"), nb::arg("dk"),
           nb::arg("dpregate").none(), nb::arg("dpostgate").none(), nb::arg("dskip").none(), nb::arg("stream"))
      .def_prop_ro("nfft", [](const FFTConv& p) { return p.plan->nfft(); })
      .def_prop_ro("fused", [](const FFTConv& p) { return p.plan->fused(); })
      .def_prop_ro("workspace_bytes", [](const FFTConv& p) { return p.plan->workspace_bytes(); });
  nb::class_<Toeplitz>(c, "ToeplitzPlan")
      .def(nb::init<int64_t, int64_t, int64_t, int64_t, const std::string&, const std::string&, int, int>(),
           nb::arg("Nt"), nb::arg("Nd"), nb::arg("Nm"), nb::arg("R"), nb::arg("layout"), nb::arg("dtype"),
           nb::arg("algo") = -1, nb::arg("fft") = -1)
      .def("matvec", &Toeplitz::matvec, nb::arg("fhat"), nb::arg("m"), nb::arg("d"), nb::arg("stream"))
      .def("rmatvec", &Toeplitz::rmatvec, nb::arg("fhat"), nb::arg("d"), nb::arg("m"), nb::arg("stream"))
      .def_prop_ro("nfft", [](const Toeplitz& p) { return p.plan->nfft(); })
      .def_prop_ro("nfreq", [](const Toeplitz& p) { return p.plan->nfreq(); })
      .def_prop_ro("algo", [](const Toeplitz& p) { return p.plan->algo(false); })
      .def_prop_ro("rmatvec_algo", [](const Toeplitz& p) { return p.plan->algo(true); })
      .def_prop_ro("fft", [](const Toeplitz& p) { return p.plan->fft(); })
      .def_prop_ro("workspace_bytes", [](const Toeplitz& p) { return p.plan->workspace_bytes(); });
  c.def("toeplitz_nfft", &toeplitz_nfft, nb::arg("Nt"));
  c.def(
      "build_toeplitz_fhat",
      [](const Arr& blocks, Arr& fhat, const std::string& dtype, uintptr_t s) {
        const DType dt = parse_dtype(dtype);
        const int dev = current_device();
        check_arg(blocks.ndim() == 3, "blocks", "expected 3 dimensions (Nt, Nd, Nm), got ", blocks.ndim());
        const int64_t Nt = blocks.shape(0), Nd = blocks.shape(1), Nm = blocks.shape(2);
        check(blocks, "blocks", dt, {Nt, Nd, Nm}, dev);
        check(fhat, "fhat", dt, {toeplitz_nfft(Nt) / 2 + 1, Nd, Nm}, dev, true);
        build_toeplitz_fhat(Nt, Nd, Nm, dt, blocks.data(), fhat.data(), stream_of(s));
      },
      nb::arg("blocks"), nb::arg("fhat"), nb::arg("dtype"), nb::arg("stream"));
}

#else
void bind_cuda(nb::module_&) {}
#endif
