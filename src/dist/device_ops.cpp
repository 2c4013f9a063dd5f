// device_ops.hpp on the CPU; CUDA devices go to device_ops_cuda.cu (a build with CUDA).
#include "dist/device_ops.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "api/common.hpp"
#include "core/checked_size.hpp"

namespace strux::dist {

#ifdef STRUX_HAVE_CUDA
namespace cuda_ops {
void* alloc(size_t bytes, int device);
void free(void* p, int device);
void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows, int device,
               void* stream);
void zero(void* dst, size_t bytes, int device, void* stream);
void add_into(void* dst, const void* src, size_t n, bool f64, int device, void* stream);
void cast(void* dst, bool dst_f64, const void* src, size_t n, int device, void* stream);
void synchronize(int device, void* stream);
void* stream_create(int device);
void stream_destroy(void* s, int device);
void* event_create(int device);
void event_destroy(void* e, int device);
void event_record(void* e, int device, void* stream);
void event_wait(void* e, int device, void* stream);
double event_seconds(void* start, void* end, int device);
}  // namespace cuda_ops
#define STRUX_DIST_ON_CUDA(dev, call, ...) \
  if ((dev).kind == DeviceKind::CUDA) return cuda_ops::call(__VA_ARGS__)
#else
#define STRUX_DIST_ON_CUDA(dev, call, ...) \
  if ((dev).kind == DeviceKind::CUDA) api::no_cuda(dev)
#endif
// (The CPU paths ignore the stream.)

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (!p_) return;
#ifdef STRUX_HAVE_CUDA
  if (dev_.kind == DeviceKind::CUDA)
    cuda_ops::free(p_, dev_.index);
  else
#endif
    std::free(p_);
  p_ = nullptr;
  n_ = 0;
}

void Buffer::reserve(size_t bytes, const Device& dev) {
  if (p_ && n_ >= bytes && dev_ == dev) return;
  release();
  dev_ = dev;
  if (!bytes) return;
#ifdef STRUX_HAVE_CUDA
  if (dev.kind == DeviceKind::CUDA) {
    p_ = cuda_ops::alloc(bytes, dev.index);
    n_ = bytes;
    return;
  }
#else
  if (dev.kind == DeviceKind::CUDA) api::no_cuda(dev);
#endif
  p_ = std::malloc(bytes);
  if (!p_) throw MemoryError(msg("out of memory allocating ", bytes, " bytes for a distributed operator's buffer"));
  n_ = bytes;
}

void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows, const Device& dev,
               Stream s) {
  STRUX_DIST_ON_CUDA(dev, copy_rows, dst, dpitch, src, spitch, width, rows, dev.index, s.handle);
  (void)s;
  for (size_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
}

void zero(void* dst, size_t bytes, const Device& dev, Stream s) {
  STRUX_DIST_ON_CUDA(dev, zero, dst, bytes, dev.index, s.handle);
  (void)s;
  if (bytes) std::memset(dst, 0, bytes);
}

namespace {
template <class T>
void add_host(void* dst, const void* src, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] += x[i];
}
}  // namespace

void add_into(void* dst, const void* src, size_t n, DType t, const Device& dev, Stream s) {
  if (t != DType::f32 && t != DType::f64)
    throw TypeError(msg("argument 'dtype': sums of float32 or float64 only, got ", dtype_name(t)));
  STRUX_DIST_ON_CUDA(dev, add_into, dst, src, n, t == DType::f64, dev.index, s.handle);
  (void)s;
  if (t == DType::f64)
    add_host<double>(dst, src, n);
  else
    add_host<float>(dst, src, n);
}

void cast(void* dst, DType dt, const void* src, DType st, size_t n, const Device& dev, Stream s) {
  const bool ok = (dt == DType::f32 && st == DType::f64) || (dt == DType::f64 && st == DType::f32);
  if (!ok) throw TypeError(msg("argument 'dtype': casts between float32 and float64 only, got ", dtype_name(st), " to ",
                               dtype_name(dt)));
  STRUX_DIST_ON_CUDA(dev, cast, dst, dt == DType::f64, src, n, dev.index, s.handle);
  (void)s;
  if (dt == DType::f64)
    std::copy(static_cast<const float*>(src), static_cast<const float*>(src) + n, static_cast<double*>(dst));
  else
    std::copy(static_cast<const double*>(src), static_cast<const double*>(src) + n, static_cast<float*>(dst));
}

void synchronize(const Device& dev, Stream s) {
  STRUX_DIST_ON_CUDA(dev, synchronize, dev.index, s.handle);
  (void)s;
}

SideStream::SideStream(const Device& dev) : dev_(dev) {
#ifdef STRUX_HAVE_CUDA
  if (dev.kind == DeviceKind::CUDA) handle_ = cuda_ops::stream_create(dev.index);
#endif
}
SideStream::~SideStream() {
#ifdef STRUX_HAVE_CUDA
  if (handle_) cuda_ops::stream_destroy(handle_, dev_.index);
#endif
}

Event::Event(const Device& dev) : dev_(dev) {
#ifdef STRUX_HAVE_CUDA
  if (dev.kind == DeviceKind::CUDA) handle_ = cuda_ops::event_create(dev.index);
#endif
}
Event::~Event() {
#ifdef STRUX_HAVE_CUDA
  if (handle_) cuda_ops::event_destroy(handle_, dev_.index);
#endif
}
void Event::record(Stream s) {
#ifdef STRUX_HAVE_CUDA
  if (handle_) return cuda_ops::event_record(handle_, dev_.index, s.handle);
#endif
  (void)s;
  t_ = std::chrono::steady_clock::now();
}
void Event::wait(Stream s) const {
#ifdef STRUX_HAVE_CUDA
  if (handle_) cuda_ops::event_wait(handle_, dev_.index, s.handle);
#endif
  (void)s;
}
double Event::seconds_since(const Event& start) const {
#ifdef STRUX_HAVE_CUDA
  if (handle_) return cuda_ops::event_seconds(start.handle_, handle_, dev_.index);
#endif
  return std::chrono::duration<double>(t_ - start.t_).count();
}

}  // namespace strux::dist
