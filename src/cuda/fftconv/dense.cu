// Geometry, launches and plan of the dense fftconv kernel (dense.hpp, dense.cuh).
#include <algorithm>
#include <initializer_list>

#include "cuda/device.hpp"

#include "cuda/check.hpp"
#include "cuda/fftconv/dense.cuh"
#include "cuda/fftconv/dense.hpp"

namespace strux::cuda::dense {

namespace {
// Shared memory a CTA aims at: R rows are halved until the CTA fits, so that about four CTAs
// (16 warps) share an SM and one CTA's staging overlaps another's products.
constexpr size_t kSmemTarget = 48 * 1024;

int64_t taps_used(bool circular, int64_t L, int64_t Lk) { return circular ? Lk : std::min(Lk, L); }

bool aligned16(std::initializer_list<const void*> ps) {
  for (const void* q : ps)
    if (reinterpret_cast<uintptr_t>(q) % 16) return false;
  return true;
}

// Tiles of 16 rows per warp in flight (they share each filter fragment): 2 (4 measured slower
// at nearly every shape, 127–218 registers; NOTES-gpu-fftconv-dense.md round 2).
constexpr int kTiles = 2;

template <class T, bool SPLIT, bool VEC>
void launch(const Geometry& g, const Params<T>& p, unsigned grid, cudaStream_t s) {
  auto kernel = forward_kernel<T, kTiles, SPLIT, VEC>;
  if (g.smem > 48 * 1024)
    STRUX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(g.smem)));
  kernel<<<grid, kThreads, g.smem, s>>>(p);
}

template <class T>
void forward_t(const Geometry& g, const T* k, const T* u, const T* pre, const T* post, const T* skip, T* y,
               int64_t B, int64_t H, int64_t L, int64_t m, bool circular, cudaStream_t s) {
  const Params<T> p{k, u, pre, post, skip, y, B, H, L, int(m), g.NI, g.S, g.D, g.R, g.nchunk, g.kwords, circular};
  const unsigned grid = unsigned(H * g.nchunk);
  const bool vec = L % 8 == 0 && aligned16({u, pre, post, y});
  if (pre) {
    vec ? launch<T, true, true>(g, p, grid, s) : launch<T, true, false>(g, p, grid, s);
  } else {
    vec ? launch<T, false, true>(g, p, grid, s) : launch<T, false, false>(g, p, grid, s);
  }
  STRUX_LAUNCH("fftconv dense forward");
}
}  // namespace

bool supported_dtype(DType dt) { return dt == DType::f16 || dt == DType::bf16; }

bool supported(DType dt, bool circular, int64_t L, int64_t Lk) {
  return supported_dtype(dt) && taps_used(circular, L, Lk) <= kMaxTaps && L <= kMaxL &&
         (!circular || (L % kPb == 0 && Lk <= L));
}

bool automatic(DType dt, bool circular, int64_t B, int64_t L, int64_t Lk) {
  if (!supported(dt, circular, L, Lk) || std::min<int64_t>(B, 64) * ((L + kPb - 1) / kPb) < kAutoMinRows) return false;
  const double m = double(taps_used(circular, L, Lk));
  return (circular ? m : m - m * m / (2.0 * double(L))) <= kAutoTapsPerOutput;
}

Geometry plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t m, bool split) {
  check_arg(supported_dtype(dt), "dtype", "the dense fftconv kernels take float16 or bfloat16, got ", dtype_name(dt));
  check_arg(L >= 1 && L <= kMaxL, "L", "the dense fftconv kernels take L up to ", kMaxL, ", got ", L);
  check_arg(m >= 1 && m <= kMaxTaps, "Lk", "the dense fftconv kernels take 1 to ", kMaxTaps,
            " taps used (causal min(Lk, L), circular Lk), got ", m);
  Geometry g;
  g.split = split;
  g.NI = int((L + kPb - 1) / kPb);
  g.S = g.NI | 1;
  g.D = int((m + kPb - 2) / kPb) + 1;
  // B fragment words reach 16·D + 15 (dense.cuh); kO starts 16 banks after kE.
  g.kwords = 16 * (g.D + 1);
  if (g.kwords % 32 == 0) g.kwords += 16;
  const size_t row_bytes = size_t(g.S) * 64 * (split ? 2 : 1), fixed = 64 + 2 * size_t(g.kwords) * 4;
  int64_t R = 64;
  while (R > 1 && size_t(R) * row_bytes + fixed > kSmemTarget) R /= 2;
  // Fewer rows per CTA while the grid is under kWaves CTAs per SM: with ~5 resident CTAs per SM a
  // grid of 1–2 waves leaves SMs idle in its last wave (B = 64, H = 768, L = 256: 768 CTAs of 64
  // rows on 132 SMs). Not under 16 rows (a tile of 16 rows then still shares one block index), nor
  // under 4 groups of 2 tiles per CTA (one per warp: at L = 128, 16 rows left two warps idle).
  constexpr int64_t kWaves = 16;
  const int64_t want = kWaves * int64_t(current_sm_count());
  while (R > 16 && (R / 2) * g.NI >= 4 * 32 && H * ((B + R - 1) / R) < want) R /= 2;
  g.R = int(std::min(R, B));
  g.nchunk = int((B + g.R - 1) / g.R);
  g.smem = size_t(g.R) * row_bytes + fixed;
  int dev = 0, optin = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  check_arg(g.smem <= size_t(optin), "L", "a row of the dense fftconv kernels needs ", g.smem,
            " bytes of shared memory, the device has ", optin, " per block (L = ", L, ", taps ", m, ")");
  return g;
}

void forward(DType dt, const Geometry& g, const void* taps, const void* u, const void* pre, const void* post,
             const void* skip, void* y, int64_t B, int64_t H, int64_t L, int64_t m, bool circular, cudaStream_t s) {
  check_arg(H * g.nchunk <= int64_t(INT32_MAX), "H", "too many CTAs for one launch of the dense fftconv kernels: H = ",
            H, " × ", g.nchunk, " row chunks");
  if (dt == DType::f16) {
    using T = __half;
    forward_t<T>(g, static_cast<const T*>(taps), static_cast<const T*>(u), static_cast<const T*>(pre),
                 static_cast<const T*>(post), static_cast<const T*>(skip), static_cast<T*>(y), B, H, L, m, circular, s);
  } else {
    using T = __nv_bfloat16;
    forward_t<T>(g, static_cast<const T*>(taps), static_cast<const T*>(u), static_cast<const T*>(pre),
                 static_cast<const T*>(post), static_cast<const T*>(skip), static_cast<T*>(y), B, H, L, m, circular, s);
  }
}

Plan::Plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular)
    : dt_(dt), B_(B), H_(H), L_(L), Lk_(Lk), m_(taps_used(circular, L, Lk)), circular_(circular) {
  if (circular) {
    check_arg(Lk <= L, "k", "circular mode needs Lk <= L, got Lk = ", Lk, " and L = ", L);
    check_arg(L % kPb == 0, "L", "the dense fftconv kernels take circular L a multiple of ", kPb, ", got ", L);
  }
  g_ = plan(dt, B, H, L, m_, false);
  g_split_ = plan(dt, B, H, L, m_, true);
  check_arg(H * g_split_.nchunk <= int64_t(INT32_MAX), "H",
            "too many CTAs for one launch of the dense fftconv kernels: H = ", H);
  taps_.allocate(size_t(H * m_) * 2);
}

void Plan::set_filter(const void* k, cudaStream_t s) {
  STRUX_CUDA(cudaMemcpy2DAsync(taps_.get(), size_t(m_) * 2, k, size_t(Lk_) * 2, size_t(m_) * 2, size_t(H_),
                               cudaMemcpyDeviceToDevice, s));
}

void Plan::forward(const void* u, const void* pre, const void* post, const void* skip, void* y,
                   cudaStream_t s) const {
  dense::forward(dt_, pre ? g_split_ : g_, taps_.get(), u, pre, post, skip, y, B_, H_, L_, m_, circular_, s);
}

}  // namespace strux::cuda::dense
