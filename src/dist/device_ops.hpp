// What the distributed operator does to memory besides the local products and communication,
// on the CPU or on the operator's CUDA device: owned buffers, strided row copies, sums, a side
// stream and events (ordering between streams and phase times). On the CPU the stream is
// ignored, events hold host clock readings and waits are nothing (every call is synchronous).
#pragma once

#include <chrono>
#include <cstddef>

#include "strux/api/types.hpp"

namespace strux::dist {

class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  // At least `bytes` on `dev` (kept when already as large; contents are not kept).
  void reserve(size_t bytes, const Device& dev);
  void* get() const { return p_; }
  size_t bytes() const { return n_; }

 private:
  void release();
  void* p_ = nullptr;
  size_t n_ = 0;
  Device dev_{};
};

// rows × width bytes from src (rows spitch apart) to dst (rows dpitch apart), on stream s.
void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows, const Device& dev,
               Stream s);
// bytes zeros at dst, on stream s.
void zero(void* dst, size_t bytes, const Device& dev, Stream s);
// dst[i] += src[i], i < n, real float32 or float64.
void add_into(void* dst, const void* src, size_t n, DType t, const Device& dev, Stream s);
// dst[i] = src[i] converted, i < n, between float32 and float64.
void cast(void* dst, DType dt, const void* src, DType st, size_t n, const Device& dev, Stream s);
// Waits for everything queued on s (nothing on the CPU).
void synchronize(const Device& dev, Stream s);

// A stream of the operator's own (CUDA; none on the CPU), for communication beside the caller's.
class SideStream {
 public:
  explicit SideStream(const Device& dev);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
  Stream get() const { return Stream(handle_); }

 private:
  void* handle_ = nullptr;
  Device dev_{};
};

class Event {
 public:
  explicit Event(const Device& dev);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(Stream s);
  void wait(Stream s) const;  // s waits for the work before record()
  // Seconds from `start` to this event (both recorded; CUDA: synchronizes on this one).
  double seconds_since(const Event& start) const;

 private:
  void* handle_ = nullptr;
  Device dev_{};
  std::chrono::steady_clock::time_point t_{};
};

}  // namespace strux::dist
