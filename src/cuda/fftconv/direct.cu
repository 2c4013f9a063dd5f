// dtype dispatch and launch geometry of the direct fftconv kernels (direct.hpp; the launches are
// instantiated in direct_<dtype>.cu).
#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/check.hpp"
#include "cuda/fftconv/direct.hpp"

namespace strux::cuda::direct {

template <class T>
void forward_t(const Launch& g, const T* k, const T* u, const T* pre, const T* post, const T* skip, T* y,
               int64_t B, int64_t H, int64_t L, int64_t m, bool circular, cudaStream_t s);
template <class T>
void backward_t(const Launch& g, const T* k, const T* dy, const T* u, const T* pre, const T* post, const T* skip,
                T* du, T* dk, T* dpre, T* dpost, T* dskip, void* part, int64_t B, int64_t H, int64_t L, int64_t m,
                int64_t Lk, bool circular, cudaStream_t s);

namespace {
constexpr int kOut = 4;          // outputs per thread (direct.cuh kV)
constexpr int kMaxThreads = 256;  // per CTA
template <class F>
void with_type(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
    default: check_arg(false, "dtype", "the direct fftconv kernels take float16, bfloat16, float32 or float64");
  }
}
size_t elem_bytes(DType dt) { return dt == DType::f64 ? 8 : dt == DType::f32 ? 4 : 2; }
template <class T>
const T* cp(const void* p) { return static_cast<const T*>(p); }
template <class T>
T* mp(void* p) { return static_cast<T*>(p); }
}  // namespace

int64_t taps(bool circular, int64_t L, int64_t Lk) { return circular ? Lk : std::min(Lk, L); }
bool supported(bool circular, int64_t L, int64_t Lk) { return taps(circular, L, Lk) <= kMaxTaps; }
bool automatic(bool circular, int64_t L, int64_t Lk) { return taps(circular, L, Lk) <= kAutoTaps; }

Launch plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t m) {
  check_arg(m >= 1 && m <= kMaxTaps, "Lk", "the direct fftconv kernels take 1 to ", kMaxTaps,
            " taps used (causal min(Lk, L), circular Lk), got ", m);
  Launch g;
  g.K = 4;
  while (g.K < m) g.K *= 2;
  // Threads along time: enough for the row (kOut outputs each, fwd_nv groups of them in the
  // forward), 32 … 256; short rows share a CTA.
  g.fwd_nv = fwd_groups(elem_bytes(dt));
  const auto threads = [&](int64_t per) {
    int tx = 32;
    while (tx < kMaxThreads && tx * per < L) tx *= 2;
    return tx;
  };
  g.fwd_tx = threads(int64_t(kOut) * g.fwd_nv);
  g.bwd_tx = threads(kOut);
  g.fwd_ry = kMaxThreads / g.fwd_tx;
  const int64_t fwd_tile = int64_t(g.fwd_tx) * kOut * g.fwd_nv, bwd_tile = int64_t(g.bwd_tx) * kOut;
  g.fwd_tiles = (L + fwd_tile - 1) / fwd_tile;
  g.bwd_tiles = (L + bwd_tile - 1) / bwd_tile;
  check_arg(g.bwd_tiles <= 65535, "L", "the direct fftconv kernels take L up to ", 65535 * bwd_tile, ", got ", L);
  check_arg((B * H + g.fwd_ry - 1) / g.fwd_ry <= INT32_MAX && H * g.bwd_tiles <= INT32_MAX, "B",
            "too many rows for one launch of the direct fftconv kernels: B·H = ", B * H);
  // Backward: batch chunks so that the grid fills about 8 CTAs per SM.
  int dev = 0, sms = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int64_t want = int64_t(8) * sms, have = H * g.bwd_tiles;
  g.nchunk = std::clamp<int64_t>((want + have - 1) / have, 1, std::min<int64_t>(B, 65535));
  const size_t acc = dt == DType::f64 ? sizeof(double) : sizeof(float);
  g.part_bytes = size_t(g.nchunk * g.bwd_tiles * H) * size_t(g.K + 1) * acc;
  return g;
}

void forward(DType dt, const Launch& g, const void* taps, const void* u, const void* pre, const void* post,
             const void* skip, void* y, int64_t B, int64_t H, int64_t L, int64_t m, bool circular,
             cudaStream_t s) {
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    forward_t<T>(g, cp<T>(taps), cp<T>(u), cp<T>(pre), cp<T>(post), cp<T>(skip), mp<T>(y), B, H, L, m, circular, s);
  });
}

void backward(DType dt, const Launch& g, const void* taps, const void* dy, const void* u, const void* pre,
              const void* post, const void* skip, void* du, void* dk, void* dpre, void* dpost, void* dskip, void* part,
              int64_t B, int64_t H, int64_t L, int64_t m, int64_t Lk, bool circular, cudaStream_t s) {
  with_type(dt, [&](auto t) {
    using T = decltype(t);
    backward_t<T>(g, cp<T>(taps), cp<T>(dy), cp<T>(u), cp<T>(pre), cp<T>(post), cp<T>(skip), mp<T>(du), mp<T>(dk),
                  mp<T>(dpre), mp<T>(dpost), mp<T>(dskip), part, B, H, L, m, Lk, circular, s);
  });
}

Plan::Plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, bool with_backward)
    : dt_(dt), B_(B), H_(H), L_(L), Lk_(Lk), m_(taps(circular, L, Lk)), circular_(circular) {
  if (circular) check_arg(Lk <= L, "k", "circular mode needs Lk <= L, got Lk = ", Lk, " and L = ", L);
  check_arg(m_ <= kMaxTaps, "algo", "the direct fftconv kernels take at most ", kMaxTaps,
            " taps used (causal min(Lk, L), circular Lk), got ", m_, " (L = ", L, ", Lk = ", Lk, ")");
  with_type(dt, [](auto) {});  // the dtype check
  g_ = plan(dt, B, H, L, m_);
  taps_.allocate(size_t(H * m_) * elem_bytes(dt));
  if (with_backward) part_.allocate(g_.part_bytes);
}

void Plan::set_filter(const void* k, cudaStream_t s) {
  const size_t e = elem_bytes(dt_);
  STRUX_CUDA(cudaMemcpy2DAsync(taps_.get(), size_t(m_) * e, k, size_t(Lk_) * e, size_t(m_) * e, size_t(H_),
                               cudaMemcpyDeviceToDevice, s));
}

void Plan::forward(const void* u, const void* pre, const void* post, const void* skip, void* y,
                   cudaStream_t s) const {
  direct::forward(dt_, g_, taps_.get(), u, pre, post, skip, y, B_, H_, L_, m_, circular_, s);
}

void Plan::backward(const void* dy, const void* u, const void* pre, const void* post, const void* skip, void* du,
                    void* dk, void* dpre, void* dpost, void* dskip, cudaStream_t s) const {
  check_arg(part_.get() != nullptr, "plan", "this plan was made without backward workspace");
  direct::backward(dt_, g_, taps_.get(), dy, u, pre, post, skip, du, dk, dpre, dpost, dskip, part_.get(), B_, H_, L_,
                   m_, Lk_, circular_, s);
}

}  // namespace strux::cuda::direct
