// Geometry, launches and plan of the dense fftconv kernels (dense.hpp, dense.cuh).
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/fftconv/dense.cuh"
#include "cuda/fftconv/dense.hpp"

namespace strux::cuda::dense {

namespace {
// Tiles of 16 rows per warp in flight (they share each filter fragment): 2 (4 measured slower
// at nearly every shape, 127–218 registers; NOTES-gpu-fftconv-dense.md round 2).
constexpr int kTiles = 2;

int64_t taps_used(bool circular, int64_t L, int64_t Lk) { return circular ? Lk : std::min(Lk, L); }

// Words per parity copy of the reversed filter: B fragment words reach 16·D + 15 (dense.cuh), and
// kO starts 16 banks after kE.
int kwords_of(int D) {
  const int w = 16 * (D + 1);
  return w % 32 == 0 ? w + 16 : w;
}

bool aligned16(std::initializer_list<const void*> ps) {
  for (const void* q : ps)
    if (reinterpret_cast<uintptr_t>(q) % 16) return false;
  return true;
}

// Rows per CTA and shared memory of a kernel whose CTA holds `buffers` row buffers (S blocks of
// 64 bytes per row each) and `extra` bytes more.
Geometry shape(int64_t B, int64_t H, int64_t L, int64_t m, int buffers, size_t extra_of_D(int),
               size_t target = kSmemTarget, bool pow2_rows = false) {
  check_arg(L >= 1 && L <= kMaxL, "L", "the dense fftconv kernels take L up to ", kMaxL, ", got ", L);
  check_arg(m >= 1 && m <= kMaxTaps, "Lk", "the dense fftconv kernels take 1 to ", kMaxTaps,
            " taps used (causal min(Lk, L), circular Lk), got ", m);
  Geometry g;
  g.NI = int((L + kPb - 1) / kPb);
  g.S = g.NI | 1;
  g.D = int((m + kPb - 2) / kPb) + 1;
  g.kwords = kwords_of(g.D);
  const size_t row_bytes = size_t(g.S) * 64 * buffers, fixed = extra_of_D(g.D) + 64;
  int64_t R = 64;
  while (R > 1 && size_t(R) * row_bytes + fixed > target) R /= 2;
  // Fewer rows per CTA while the grid is under kWaves CTAs per SM: with ~5 resident CTAs per SM a
  // grid of 1–2 waves leaves SMs idle in its last wave (B = 64, H = 768, L = 256: 768 CTAs of 64
  // rows on 132 SMs). Not under 16 rows (a tile of 16 rows then still shares one block index), nor
  // under 4 groups of 2 tiles per CTA (one per warp: at L = 128, 16 rows left two warps idle).
  constexpr int64_t kWaves = 16;
  const int64_t want = kWaves * int64_t(current_sm_count());
  while (R > 16 && (R / 2) * g.NI >= 4 * 32 && H * ((B + R - 1) / R) < want) R /= 2;
  g.R = int(std::min(R, B));
  while (pow2_rows && (g.R & (g.R - 1))) ++g.R;  // a batch under R rows: up to a power of two (dead rows)
  const int64_t nchunk = (B + g.R - 1) / g.R;
  check_arg(nchunk <= INT32_MAX, "B", "the dense fftconv kernels take at most 2^31 - 1 chunks of ", g.R,
            " batch rows, got B = ", B);
  g.nchunk = int(nchunk);
  g.smem = size_t(g.R) * row_bytes + fixed;
  int dev = 0, optin = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  g.fits = g.smem <= size_t(optin);
  return g;
}

// Calls f(std::true_type or std::false_type, ...) for the run-time flags, in order: one template
// instance of the kernel per combination.
template <class F>
void with_flags(F&& f) {
  f();
}
template <class F, class... Rest>
void with_flags(F&& f, bool flag, Rest... rest) {
  if (flag)
    with_flags([&](auto... c) { f(std::true_type{}, c...); }, rest...);
  else
    with_flags([&](auto... c) { f(std::false_type{}, c...); }, rest...);
}

template <class K>
void set_smem(K kernel, size_t smem) {
  if (smem > 48 * 1024) STRUX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
}

// One pass of the forward kernel: y = post ⊙ (k * v + skip ⊙ v), v = src ⊙ gate (and y2 with post2),
// rows back to front when rev.
template <class T>
void conv_pass(const Geometry& g, const T* k, const T* src, const T* gate, const T* post, const T* skip, T* y, T* y2,
               const T* post2, int64_t B, int64_t H, int64_t L, int64_t m, bool circular, bool rev, cudaStream_t s) {
  const Params<T> p{k, src, gate, post, skip, y, y2, post2, B, H, L, int(m), g.NI, g.S, g.D, g.R, g.nchunk, g.kwords,
                    circular};
  const bool vec = L % 8 == 0 && aligned16({src, gate, post, y, y2, post2});
  with_flags(
      [&](auto split, auto v, auto r) {
        auto kernel = forward_kernel<T, kTiles, decltype(split)::value, decltype(v)::value, decltype(r)::value>;
        set_smem(kernel, g.smem);
        kernel<<<unsigned(H * g.nchunk), kThreads, g.smem, s>>>(p);
      },
      gate != nullptr, vec, rev);
  STRUX_LAUNCH("fftconv dense forward");
}

template <class T>
void grad_pass(const Geometry& g, const T* u, const T* pre, const T* dy, const T* post, float* part, float* part_s,
               int64_t B, int64_t H, int64_t L, int64_t m, bool circular, cudaStream_t s) {
  const GradParams<T> p{u, pre, dy, post, part, part_s, B, H, L, int(m), g.NI, g.S, g.D, g.R, g.nchunk, circular};
  const bool vec = L % 8 == 0 && aligned16({u, pre, dy, post});
  with_flags(
      [&](auto sv, auto sz, auto v) {
        auto kernel = filter_grad_kernel<T, decltype(sv)::value, decltype(sz)::value, decltype(v)::value>;
        set_smem(kernel, g.smem);
        kernel<<<unsigned(H * g.nchunk), kThreads, g.smem, s>>>(p);
      },
      pre != nullptr, post != nullptr, vec);
  STRUX_LAUNCH("fftconv dense filter gradient");
}

template <class T>
const T* cp(const void* p) { return static_cast<const T*>(p); }
template <class T>
T* mp(void* p) { return static_cast<T*>(p); }

template <class F>
void with_type(DType dt, F&& f) {
  if (dt == DType::f16)
    f(__half{});
  else
    f(__nv_bfloat16{});
}
}  // namespace

bool supported_dtype(DType dt) { return dt == DType::f16 || dt == DType::bf16; }

bool supported(DType dt, bool circular, int64_t L, int64_t Lk) {
  return supported_dtype(dt) && taps_used(circular, L, Lk) <= kMaxTaps && L <= kMaxL &&
         (!circular || (L % kPb == 0 && Lk <= L));
}

double taps_per_output(bool circular, int64_t L, int64_t Lk) {
  const double m = double(taps_used(circular, L, Lk));
  return circular ? m : m - m * m / (2.0 * double(L));
}

double dense_ns_per_row(bool circular, int64_t L, int64_t Lk, bool gated) {
  return (gated ? 2.0 : 1.0) * 2.0 * taps_per_output(circular, L, Lk) * double(L) / kDenseFlopPerNs;
}

double fft_ns_per_row(bool circular, int64_t L, int64_t Lk) {
  // The automatic FFT solvers' forward per row (float16, B = 64, H = 768, filter given per call) on
  // an H200, 2026-11-28: nfft 256 tensor 1.95 ns, 512 tensor 4.41, 1K fused 5.10, 2K 9.9, 4K 16.4,
  // 8K 31.7, 16K 95.6; past 16K ×2.2 per doubling (the fused kernels' growth from 8K to 16K is
  // ×3, the four-step's ×2.1). Log-linear between anchors (circular nfft L need not be a power of 2).
  // Circular L not a power of two runs cuFFT: 0.689 ms at L = 768, 2.9× the table's 4.8 ns.
  static constexpr double kNs[] = {1.95, 4.41, 5.10, 9.9, 16.4, 31.7, 95.6};
  const double m = double(taps_used(circular, L, Lk));
  double n = circular ? double(L) : std::exp2(std::ceil(std::log2(double(L) + m - 1.0)));
  const double general = circular && (L & (L - 1)) != 0 ? 2.9 : 1.0;
  n = std::max(n, 256.0);
  const double e = std::log2(n) - 8.0;
  if (e >= 6.0) return general * kNs[6] * std::pow(2.2, e - 6.0);
  const int i = int(e);
  return general * kNs[i] * std::pow(kNs[i + 1] / kNs[i], e - i);
}

double wgmma_ns_per_row(DType dt, bool circular, int64_t B, int64_t H, int64_t L, int64_t Lk) {
  if (!supported(dt, circular, L, Lk) || !wg::supported(dt, circular, L, Lk)) return INFINITY;
  const wg::Geometry g = wg::plan(B, H, L, taps_used(circular, L, Lk), circular);
  if (!g.fits) return INFINITY;
  // The share of the products that is live: columns of V over the tiles' (a last tile part empty),
  // times rows of the batch over the CTAs' rows (rows past B are zeros, multiplied all the same).
  const double live = double(g.NI) * g.R / (double(g.ntile) * wg::kN) * double(B) / (double(g.nchunk) * g.R);
  return 2.0 * taps_per_output(circular, L, Lk) * double(L) / (kWgmmaFlopPerNs * live);
}

bool automatic_wgmma(DType dt, bool circular, int64_t B, int64_t H, int64_t L, int64_t Lk) {
  return wgmma_ns_per_row(dt, circular, B, H, L, Lk) < dense_ns_per_row(circular, L, Lk, false);
}

bool automatic(DType dt, bool circular, int64_t B, int64_t H, int64_t L, int64_t Lk) {
  if (!supported(dt, circular, L, Lk) || std::min<int64_t>(B, 64) * ((L + kPb - 1) / kPb) < kAutoMinRows) return false;
  const double dense = std::min(dense_ns_per_row(circular, L, Lk, false), wgmma_ns_per_row(dt, circular, B, H, L, Lk));
  return dense <= fft_ns_per_row(circular, L, Lk);
}

bool automatic_gated(bool circular, int64_t L, int64_t Lk) {
  return dense_ns_per_row(circular, L, Lk, true) <= fft_ns_per_row(circular, L, Lk);
}

bool automatic_backward(bool circular, int64_t L, int64_t Lk) {
  return dense_ns_per_row(circular, L, Lk, false) <= kAutoBwdRatio * fft_ns_per_row(circular, L, Lk);
}

Geometry plan(int64_t B, int64_t H, int64_t L, int64_t m, bool split) {
  return shape(B, H, L, m, split ? 2 : 1, [](int D) { return 2 * size_t(kwords_of(D)) * 4; });
}

Geometry plan_grad(int64_t B, int64_t H, int64_t L, int64_t m, bool split_v, bool split_dz) {
  // Four CTAs per SM (56 KB each on an H200: at two, 8 warps per SM left the kernel latency-bound,
  // NOTES-gpu-fftconv-dense.md round 7); rows per CTA a power of two (the kernel's addressing).
  return shape(B, H, L, m, 2 + int(split_v) + int(split_dz), [](int) { return size_t(grad_floats()) * 4; },
               kGradSmemTarget, true);
}

Plan::Plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, bool with_backward, Wgmma wgmma)
    : dt_(dt), B_(B), H_(H), L_(L), Lk_(Lk), m_(taps_used(circular, L, Lk)), circular_(circular),
      wgmma_(wgmma == Wgmma::forced || (wgmma == Wgmma::automatic && automatic_wgmma(dt, circular, B, H, L, Lk))) {
  check_arg(supported_dtype(dt), "dtype", "the dense fftconv kernels take float16 or bfloat16, got ", dtype_name(dt));
  if (circular) {
    check_arg(Lk <= L, "k", "circular mode needs Lk <= L, got Lk = ", Lk, " and L = ", L);
    check_arg(L % kPb == 0, "L", "the dense fftconv kernels take circular L a multiple of ", kPb, ", got ", L);
  }
  g_ = plan(B, H, L, m_, false);
  g_split_ = plan(B, H, L, m_, true);
  check_arg(g_.fits && g_split_.fits, "L", "a CTA of the dense fftconv kernels needs ", g_split_.smem,
            " bytes of shared memory, more than the device has per block (L = ", L, ", taps ", m_, ")");
  check_arg(H * g_split_.nchunk <= int64_t(INT32_MAX), "H", "the dense fftconv kernels launch H × ",
            g_split_.nchunk, " CTAs, at most 2^31 − 1; got H = ", H);
  if (wgmma_) {
    check_arg(wg::supported(dt, circular, L, Lk), "algo", "the dense wgmma kernel (algo 17) takes float16 or "
              "bfloat16 on a device of compute capability 9.0 running its sm_90a build, circular L a multiple of ",
              wg::kB, "; got ",
              dtype_name(dt), ", L = ", L, circular ? " (circular)" : " (causal)");
    wg_ = wg::plan(B, H, L, m_, circular);
    check_arg(wg_.smem_fits, "L", "a CTA of the dense wgmma kernel needs ", wg_.smem,
              " bytes of shared memory, more than the device has per block (L = ", L, ", taps ", m_, ")");
    check_arg(wg_.fits, "H", "the dense wgmma kernel launches H × ", (B + wg_.R - 1) / wg_.R,
              " CTAs, at most 2^31 − 1; got B = ", B, ", H = ", H);
  }
  taps_.allocate(size_t(H * m_) * 2);
  if (!with_backward) return;
  int64_t chunks = 0;
  has_backward_ = true;
  for (int i = 0; i < 4; ++i) {
    gg_[i] = plan_grad(B, H, L, m_, i >= 2, i % 2 == 1);
    has_backward_ = has_backward_ && gg_[i].fits && H * gg_[i].nchunk <= int64_t(INT32_MAX);
    chunks = std::max<int64_t>(chunks, gg_[i].nchunk);
  }
  if (!has_backward_) return;
  part_stride_ = chunks * H * m_;
  part_.allocate(size_t(part_stride_ + chunks * H) * sizeof(float));
}

void Plan::set_filter(const void* k, cudaStream_t s) {
  STRUX_CUDA(cudaMemcpy2DAsync(taps_.get(), size_t(m_) * 2, k, size_t(Lk_) * 2, size_t(m_) * 2, size_t(H_),
                               cudaMemcpyDeviceToDevice, s));
}

void Plan::forward(const void* u, const void* pre, const void* post, const void* skip, void* y,
                   cudaStream_t s) const {
  if (wgmma_ && !pre && !post && !skip) return wg::forward(dt_, wg_, taps_.get(), u, y, B_, H_, L_, m_, circular_, s);
  with_type(dt_, [&](auto t) {
    using T = decltype(t);
    conv_pass<T>(pre ? g_split_ : g_, cp<T>(taps_.get()), cp<T>(u), cp<T>(pre), cp<T>(post), cp<T>(skip), mp<T>(y),
                 nullptr, nullptr, B_, H_, L_, m_, circular_, false, s);
  });
}

void Plan::backward(const void* dy, const void* u, const void* pre, const void* post, const void* skip, void* du,
                    void* dk, void* dpre, void* dpost, void* dskip, cudaStream_t s) const {
  check_arg(has_backward_, "plan", "this dense plan has no backward workspace");
  with_type(dt_, [&](auto t) {
    using T = decltype(t);
    const T* k = cp<T>(taps_.get());
    // dpost = dy ⊙ (k * v + skip ⊙ v): the forward with dy as its postgate
    if (dpost && post)
      conv_pass<T>(pre ? g_split_ : g_, k, cp<T>(u), cp<T>(pre), cp<T>(dy), cp<T>(skip), mp<T>(dpost), nullptr,
                   nullptr, B_, H_, L_, m_, circular_, false, s);
    // dv = k ⋆ dz + skip ⊙ dz (dz = dy ⊙ post): the forward on reversed rows; du = pre ⊙ dv, dpre = u ⊙ dv
    conv_pass<T>(post ? g_split_ : g_, k, cp<T>(dy), cp<T>(post), cp<T>(pre), cp<T>(skip), mp<T>(du),
                 (pre && dpre) ? mp<T>(dpre) : nullptr, cp<T>(u), B_, H_, L_, m_, circular_, true, s);
    // dk, dskip: per-CTA partials, then their sum in a fixed order
    const Geometry& g = gg_[2 * (pre != nullptr) + (post != nullptr)];
    float* part = part_.as<float>();
    float* part_s = (skip && dskip) ? part + part_stride_ : nullptr;
    grad_pass<T>(g, cp<T>(u), cp<T>(pre), cp<T>(dy), cp<T>(post), part, part_s, B_, H_, L_, m_, circular_, s);
    const int64_t n = std::max(H_ * Lk_, H_);
    reduce_kernel<T><<<unsigned((n + 255) / 256), 256, 0, s>>>(part, part_s, g.nchunk, H_, int(m_), Lk_, mp<T>(dk),
                                                                part_s ? mp<T>(dskip) : nullptr);
    STRUX_LAUNCH("fftconv dense reduce");
  });
}

}  // namespace strux::cuda::dense
