// strux operator API: the core types every operator takes (DType, Device, View, Stream,
// Workspace, Options). See <strux/strux.hpp> for the contract they serve.
#pragma once

#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "strux/core.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*; no CUDA header is needed here

namespace strux {

// Element type at the array boundary. Half types compute in float32 (CUDA only).
enum class DType : int { f16, bf16, f32, f64, c64, c128 };

const char* dtype_name(DType t);     // "float16", ..., "complex128"
size_t dtype_size(DType t);          // bytes per element
bool is_complex(DType t);
DType complex_of(DType real);        // f32 -> c64, f64 -> c128 (TypeError otherwise)

// C++ element type -> DType (float, double, std::complex<float|double>).
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<std::complex<float>> { static constexpr DType value = DType::c64; };
template <> struct dtype_of<std::complex<double>> { static constexpr DType value = DType::c128; };

enum class DeviceKind : int { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;  // CUDA ordinal; 0 on the CPU
  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceKind::CUDA, index}; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};
std::string device_name(const Device& d);  // "cpu", "cuda:0"

// A non-owning tensor view: pointer, dtype, device, shape and strides in elements. The
// operators read inputs through it and write outputs through it; a default (null) View is an
// absent optional argument. Inputs are only read, although the pointer is not const.
// Strides: the operators need C-contiguous memory (strides of size-1 axes are ignored); any
// other stride is a ValueError naming the argument, never a silent copy or misread.
// Memory: an output may not share a byte with another output nor partly overlap an input
// (ValueError naming both); it may be the very same array as an input where the family runs in
// place (the scans; toeplitz, but for dm on m with dblocks), not in fftconv and ks.
struct View {
  static constexpr int kMaxDims = 8;
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device{};
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};

  View() = default;
  // C-contiguous view of `shape` (at most kMaxDims axes).
  View(void* p, DType t, std::initializer_list<int64_t> dims, Device dev = {});
  template <class T>
  View(T* p, std::initializer_list<int64_t> dims, Device dev = {})
      : View(const_cast<void*>(static_cast<const void*>(p)), dtype_of<std::remove_const_t<T>>::value, dims, dev) {}

  bool empty() const { return data == nullptr; }
  int64_t numel() const;
  bool contiguous() const;  // C-contiguous, ignoring size-1 axes
};

// A CUDA stream (cudaStream_t) or nothing (the legacy default stream; ignored on the CPU).
struct Stream {
  void* handle = nullptr;
  Stream() = default;
  Stream(CUstream_st* s) : handle(s) {}  // implicit from cudaStream_t
  explicit Stream(void* s) : handle(s) {}
};

// Scratch memory the caller lends a call, on the operator's device. An empty Workspace makes
// the operator use its own (allocated once, at the first call that needs it, and kept).
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};

// Plan options shared by every family. `solver` forces one entry of the family's solver table
// (for tests and benchmarks); "" lets the plan choose. The names a family and backend accept are
// listed in its header; any other name is a ValueError naming 'options.solver'. describe() says
// what was chosen either way.
struct Options {
  std::string solver;
  // Plan the backward pass too (CUDA fftconv allocates its backward workspace only then).
  bool with_backward = true;
};

}  // namespace strux
