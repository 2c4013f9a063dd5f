// The nanobind module strux._ext: one bind_* function per operator family.
#include "arrays.hpp"
#include "cpu/fft.hpp"
#include "strux/core.hpp"

#ifdef STRUX_HAVE_CUDA
#include "cuda/device.hpp"
#endif

void bind_fftconv(nb::module_& m);
void bind_toeplitz(nb::module_& m);
void bind_ks(nb::module_& m);
void bind_scan(nb::module_& m);
#ifdef STRUX_HAVE_CUDA
void bind_cuda(nb::module_& m);
void bind_cuda_ks(nb::module_& m);
void bind_cuda_scan(nb::module_& m);
void bind_cuda_f64(nb::module_& m);
#endif

NB_MODULE(_ext, m) {
  m.doc() = "strux native extension (use the strux package, not this module)";
  // Cached plans live until interpreter exit by design; nanobind would report them as leaks.
  nb::set_leak_warnings(false);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const strux::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });
  m.attr("__version__") = strux::kVersion;
#ifdef STRUX_HAVE_HDF5
  m.attr("has_hdf5") = true;
#else
  m.attr("has_hdf5") = false;
#endif
#ifdef STRUX_HAVE_CUDA
  m.attr("has_cuda") = true;
  m.def("cuda_device_count", &strux::cuda::device_count);
  m.def("cuda_device_name", &strux::cuda::device_name);
#else
  m.attr("has_cuda") = false;
  m.def("cuda_clear_plan_cache", []() {});
  m.def("cuda_device_count", []() { return 0; });
  m.def("cuda_device_name", [](int) { return std::string(); });
#endif
  m.def("num_threads", &strux::cpu::num_threads);
  m.def("set_num_threads", &strux::cpu::set_num_threads);
  bind_fftconv(m);
  bind_toeplitz(m);
  bind_ks(m);
  bind_scan(m);
#ifdef STRUX_HAVE_CUDA
  bind_cuda(m);
  bind_cuda_ks(m);
  bind_cuda_scan(m);
  bind_cuda_f64(m);
#endif
}
