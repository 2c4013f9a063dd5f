// The blocks solver (blocks.hpp): its kernels around an inner circular FFTConvPlan, and its plan.
// float32 / float64: gather of the blocks (gates applied), scatter of the outputs, the backward's
// overlap sum. float16 / bfloat16: copies of the arrays into blocks and of the outputs out of them
// (no arithmetic: the inner plan applies the gates in float32).
//
// Every kernel runs one grid row per block row rb (grid.x) and kPer·kThreads positions of it per
// CTA (grid.y): the block row's (b, j, h) is worked out once per thread for kPer elements, and
// consecutive threads touch consecutive positions of u, y and the blocks (coalesced).
#include "cuda/fftconv/blocks.hpp"

#include <climits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/fftconv/direct.hpp"
#include "cuda/fftconv/fused.hpp"
#include "cuda/fftconv/kernels.cuh"

namespace strux::cuda::blocks {

namespace k = fftconv_kernels;

namespace {

constexpr int kThreads = 256;
constexpr int kPer = 4;  // positions per thread

struct Row {
  int64_t base;  // (b·H + h)·L: the row of (b, h) in u, y and the gates
  int64_t t0;    // j·S: the first output of block j
  unsigned j;
};

__device__ __forceinline__ Row row_of(const Geom& g, unsigned rb) {
  const unsigned h = rb % g.H, bj = rb / g.H, j = bj % g.nb, b = bj / g.nb;
  return {(int64_t(b) * g.H + h) * g.L, int64_t(j) * g.S, j};
}

// The e-th position of this thread in its CTA's chunk of the block row.
__device__ __forceinline__ int64_t pos(int e) {
  return (int64_t(blockIdx.y) * kPer + e) * blockDim.x + threadIdx.x;
}

dim3 grid(int64_t rows, int64_t cols) {
  return dim3(unsigned(rows), unsigned((cols + kThreads * kPer - 1) / (kThreads * kPer)));
}

// xb[rb][i] = x[b, h, t] · gate[b, h, t] in Tc at t = j·S - (m - 1) + i, i < N: zero at t >= L
// (it reaches only discarded outputs) and, before t = 0, zero (causal) or x[t + L] (circular:
// the row's end is its history). kDz (the backward's dz = dy ⊙ postgate): zero also at
// i < m - 1, the positions whose outputs the forward discards, so that each t's dz enters one
// block only (and the inner correlation never wraps: it reads dz at i + s, s < m).
template <class T, class Tc, bool kDz>
__global__ void __launch_bounds__(kThreads) gather_kernel(Geom g, const T* __restrict__ x,
                                                          const T* __restrict__ gate, Tc* __restrict__ xb) {
  const unsigned rb = blockIdx.x;
  const Row r = row_of(g, rb);
  Tc* out = xb + int64_t(rb) * g.N;
  const int64_t head = r.t0 - (g.m - 1);  // t at i = 0
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int64_t i = pos(e);
    if (i >= g.N) return;
    int64_t t = head + i;
    if (!kDz && g.circular && t < 0) t += g.L;
    Tc v = 0;
    if (t >= 0 && t < g.L && (!kDz || i >= g.m - 1)) {
      v = Tc(to_c(x[r.base + t]));
      if (gate) v *= Tc(to_c(gate[r.base + t]));
    }
    out[i] = v;
  }
}

// y[b, h, t] = yb[rb][m - 1 + q] · post[b, h, t] at t = j·S + q < L, q < S: the block's outputs
// past its first m - 1 (those are the circular sum's wrapped ones).
template <class T, class Tc>
__global__ void __launch_bounds__(kThreads) scatter_kernel(Geom g, const Tc* __restrict__ yb,
                                                           const T* __restrict__ post, T* __restrict__ y) {
  const unsigned rb = blockIdx.x;
  const Row r = row_of(g, rb);
  const Tc* in = yb + int64_t(rb) * g.N + (g.m - 1);
  const int64_t n = g.L - r.t0 < g.S ? g.L - r.t0 : g.S;  // outputs of this block
  T* out = y + r.base + r.t0;
  const T* po = post ? post + r.base + r.t0 : nullptr;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int64_t q = pos(e);
    if (q >= n) return;
    Tc z = in[q];
    if (po) z *= Tc(to_c(po[q]));
    out[q] = From<T>::of(z);
  }
}

// The backward's last pass, at t = j·S + q < L (q < S). dv[t] = the sum over the copies of v[t]
// in the blocks: block j at m - 1 + q; block j + 1 at its head position q - S + m - 1 (where
// q >= S - (m - 1) and j + 1 < nb); in circular mode block 0 of the row at t - L + m - 1 (where
// t >= L - (m - 1): its head is the row's end). No other block holds v[t] (S > m - 1, and copies
// past L are zeros, not v). Then, as the plan's epilogue_backward: du = dv ⊙ pre, dpre = dv ⊙ u,
// dpost = dy ⊙ zb (zb: the blocks of z + skip·v, the forward before its postgate).
template <class T, class Tc>
__global__ void __launch_bounds__(kThreads)
    finish_kernel(Geom g, const Tc* __restrict__ dvb, const Tc* __restrict__ zb, const T* __restrict__ dy,
                  const T* __restrict__ u, const T* __restrict__ pre, T* __restrict__ du, T* __restrict__ dpre,
                  T* __restrict__ dpost) {
  const unsigned rb = blockIdx.x;
  const Row r = row_of(g, rb);
  const int64_t n = g.L - r.t0 < g.S ? g.L - r.t0 : g.S;
  const int64_t own = int64_t(rb) * g.N + (g.m - 1);                 // + q: block j at m - 1 + q
  const int64_t next = own + int64_t(g.H) * g.N - g.S;               // + q: block j + 1 at q - S + m - 1
  const int64_t first = own - int64_t(r.j) * g.H * g.N - g.L + r.t0;  // + q: block 0 at t - L + m - 1
  const int64_t head_from = g.S - (g.m - 1);  // q from which block j + 1's head holds v[t]
  const bool has_next = r.j + 1 < g.nb;
  const int64_t wrap_from = g.L - (g.m - 1);  // t from which block 0's head holds v[t] (circular)
  const int64_t o = r.base + r.t0;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int64_t q = pos(e);
    if (q >= n) return;
    Tc dv = dvb[own + q];
    if (has_next && q >= head_from) dv += dvb[next + q];
    if (g.circular && r.t0 + q >= wrap_from) dv += dvb[first + q];
    const int64_t i = o + q;
    if (pre) {
      du[i] = From<T>::of(dv * Tc(to_c(pre[i])));
      if (dpre) dpre[i] = From<T>::of(dv * Tc(to_c(u[i])));
    } else {
      du[i] = From<T>::of(dv);
    }
    if (dpost) dpost[i] = From<T>::of(Tc(to_c(dy[i])) * zb[own + q]);
  }
}

// ---- the 16-bit path (blocks.hpp): copies only, no arithmetic --------------------------------
// Which t block j's position i holds, in one of three layouts (-1: a zero there):
//   kHist:    the forward's, t = j·S - (m - 1) + i (before 0: zero, or circular t + L);
//   kAheadV:  the 16-bit backward's u and pregate, t = j·S + i at i < S only (each v[t] in one
//             block, so dk counts it once and the correlation at i < S never wraps);
//   kAheadDz: its dy and postgate, t = j·S + i at every i < N (circular: t - L past L, the row's
//             start; one wrap reaches every t + s < L + m - 1 an output at i < S reads).
enum Lay : int { kHist, kAheadV, kAheadDz };

__device__ __forceinline__ int64_t src_t(const Geom& g, int lay, int64_t t0, int64_t i) {
  int64_t t;
  if (lay == kHist) {
    t = t0 - (g.m - 1) + i;
    if (g.circular && t < 0) t += g.L;
  } else {
    if (lay == kAheadV && i >= g.S) return -1;
    t = t0 + i;
    if (lay == kAheadDz && g.circular && t >= g.L) t -= g.L;
  }
  return t >= 0 && t < g.L ? t : -1;
}

// Up to four arrays moved by one launch: rows (B, H, L) on one side, blocks (rows, N) on the other.
template <class T>
struct Arrays {
  const T* src[4];
  T* dst[4];
  int lay[4];  // copy_in_kernel: each array's layout
  int n = 0;
  void add(const T* from, T* to, int layout) {
    src[n] = from, dst[n] = to, lay[n] = layout;
    ++n;
  }
};

// dst[k][rb][i] = src[k][b, h, t] at t = src_t(lay[k], i), else 0: the blocks of each array.
template <class T>
__global__ void __launch_bounds__(kThreads) copy_in_kernel(Geom g, Arrays<T> a) {
  const unsigned rb = blockIdx.x;
  const Row r = row_of(g, rb);
  const int64_t o = int64_t(rb) * g.N;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int64_t i = pos(e);
    if (i >= g.N) return;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (k >= a.n) break;
      const int64_t t = src_t(g, a.lay[k], r.t0, i);
      a.dst[k][o + i] = t >= 0 ? a.src[k][r.base + t] : From<T>::of(0.f);
    }
  }
}

// dst[k][b, h, j·S + q] = src[k][rb][off + q] for q < S, j·S + q < L: each t's output from the
// one block that holds it (off = m - 1 for the forward's layout, 0 for the backward's).
template <class T>
__global__ void __launch_bounds__(kThreads) copy_out_kernel(Geom g, int64_t off, Arrays<T> a) {
  const unsigned rb = blockIdx.x;
  const Row r = row_of(g, rb);
  const int64_t n = g.L - r.t0 < g.S ? g.L - r.t0 : g.S;  // outputs of this block
  const int64_t from = int64_t(rb) * g.N + off, to = r.base + r.t0;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const int64_t q = pos(e);
    if (q >= n) return;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (k >= a.n) break;
      a.dst[k][to + q] = a.src[k][from + q];
    }
  }
}

// out[h, s] = in[h, s] for s < n, 0 for n <= s < ld_out (rows of stride ld_in): the taps used,
// and dk from the inner plan's (H, m) (taps past m never matter).
template <class T>
__global__ void rows_kernel(const T* __restrict__ in, int64_t ld_in, int64_t n, int64_t H, int64_t ld_out,
                            T* __restrict__ out) {
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= ld_out) return;
  for (int64_t h = blockIdx.y; h < H; h += gridDim.y)
    out[h * ld_out + s] = s < n ? in[h * ld_in + s] : From<T>::of(0.f);
}

}  // namespace

int64_t fft_size(int64_t m, int ratio) {
  if (ratio == kAutoSize) return auto_fft_size(m);
  int64_t n = kMinN;
  while (n / ratio < m) n *= 2;  // n >= ratio · m without forming it
  return n;
}

int64_t auto_fft_size(int64_t m) {
  const int64_t n = std::max(fft_size(m, 8), std::min<int64_t>(fft_size(m, 16), 4096));
  return n <= 2 * fused::kMaxN ? n : fft_size(m, kRatio);  // the fused kernels' largest circular N
}

bool is_algo(int algo) { return algo >= kAlgo && algo <= kAlgo + 3; }

int ratio_of(int algo) {
  const int ratios[] = {kAutoSize, 8, 16, kRatio};
  return is_algo(algo) ? ratios[algo - kAlgo] : kAutoSize;
}

bool automatic(bool circular, DType dt, int64_t L, int64_t Lk) {
  if (!(dt == DType::f32 || dt == DType::f16 || dt == DType::bf16)) return false;
  const int64_t m = direct::taps(circular, L, Lk), row = L + m - 1;
  return m > direct::kAutoTaps && m <= kMaxTaps && row > 2 * fused::kMaxN && kAutoRatio * fft_size(m, kRatio) <= row;
}

Plan::Plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, bool with_backward, int ratio)
    : dt_(dt),
      B_(B),
      H_(H),
      L_(L),
      Lk_(Lk),
      m_(direct::taps(circular, L, Lk)),
      circular_(circular),
      with_backward_(with_backward) {
  if (!(dt == DType::f32 || dt == DType::f64 || dt == DType::f16 || dt == DType::bf16))
    throw TypeError(msg("argument 'dtype': the blocks fftconv solver takes float16, bfloat16, float32 or float64, got ",
                        dtype_name(dt)));
  if (circular) check_arg(Lk <= L, "k", "circular mode needs Lk <= L, got Lk = ", Lk, " and L = ", L);
  static_assert(kMaxN / (kThreads * kPer) <= 65535, "grid.y of the largest block");
  const int least = ratio == kAutoSize ? kRatio : ratio;
  check_arg(m_ <= kMaxN / least, "k", "the blocks solver takes at most ", kMaxN / least, " taps used (block FFT <= ",
            kMaxN, ", ", least, " times the taps), got ", m_, " (L = ", L, ", Lk = ", Lk, ")");
  N_ = blocks::fft_size(m_, ratio);
  S_ = N_ - (m_ - 1);
  nb_ = (L + S_ - 1) / S_;
  rows_ = checked_count("L", {B, nb_, H});
  check_arg(rows_ <= INT_MAX, "L", "the blocks solver takes fewer than 2^31 blocks in all, got B·H·ceil(L / S) = ",
            rows_, " (S = ", S_, " outputs per block of ", N_, ")");
  geom_ = Geom{L, N_, S_, m_, unsigned(H), unsigned(nb_), circular};
  const int64_t e = dt == DType::f64 ? 8 : dt == DType::f32 ? 4 : 2;
  const size_t bytes = size_t(checked_bytes("L", {rows_, N_}, e));
  const size_t taps_bytes = size_t(checked_bytes("k", {H, m_}, e));
  const bool b16 = e == 2;
  inner_ = std::make_unique<FFTConvPlan>(B * nb_, H, N_, m_, true, dt, with_backward);
  x_.allocate(bytes);
  o_.allocate(bytes);
  taps_.allocate(taps_bytes);
  if (b16) {
    p_.allocate(bytes);
    q_.allocate(bytes);
  }
  if (with_backward) {
    z_.allocate(bytes);
    dtaps_.allocate(taps_bytes);
    if (b16) r_.allocate(bytes);
  }
}

Plan::~Plan() = default;

size_t Plan::workspace_bytes() const {
  return x_.bytes() + z_.bytes() + o_.bytes() + p_.bytes() + q_.bytes() + r_.bytes() + taps_.bytes() +
         dtaps_.bytes() + inner_->workspace_bytes();
}

template <class T>
void Plan::set_filter(const T* kf, cudaStream_t s) {
  rows_kernel<T><<<grid2(m_, H_, k::kThreads), k::kThreads, 0, s>>>(kf, Lk_, m_, H_, m_, taps_.as<T>());
  STRUX_LAUNCH("fftconv blocks rows(k)");
  inner_->set_filter(taps_.get(), s);
}

template <class T>
void Plan::forward(const T* u, const T* pre, const T* post, const T* skip, T* y, cudaStream_t s) {
  if constexpr (sizeof(T) == 2) {
    forward16(u, pre, post, skip, y, s);
  } else {
    gather_kernel<T, T, false><<<grid(rows_, N_), kThreads, 0, s>>>(geom_, u, pre, x_.as<T>());
    STRUX_LAUNCH("fftconv blocks gather(v)");
    inner_->forward(x_.get(), nullptr, nullptr, skip, o_.get(), s);
    scatter_kernel<T, T><<<grid(rows_, S_), kThreads, 0, s>>>(geom_, o_.as<T>(), post, y);
    STRUX_LAUNCH("fftconv blocks scatter(y)");
  }
}

template <class T>
void Plan::forward16(const T* u, const T* pre, const T* post, const T* skip, T* y, cudaStream_t s) {
  Arrays<T> in{};
  in.add(u, x_.as<T>(), kHist);
  if (pre) in.add(pre, p_.as<T>(), kHist);
  if (post) in.add(post, q_.as<T>(), kHist);
  copy_in_kernel<T><<<grid(rows_, N_), kThreads, 0, s>>>(geom_, in);
  STRUX_LAUNCH("fftconv blocks copy_in(u)");
  inner_->forward(x_.get(), pre ? p_.get() : nullptr, post ? q_.get() : nullptr, skip, o_.get(), s);
  Arrays<T> out{};
  out.add(o_.as<T>(), y, 0);
  copy_out_kernel<T><<<grid(rows_, S_), kThreads, 0, s>>>(geom_, m_ - 1, out);
  STRUX_LAUNCH("fftconv blocks copy_out(y)");
}

template <class T>
void Plan::backward(const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du, T* dk, T* dpre,
                    T* dpost, T* dskip, cudaStream_t s) {
  check_arg(with_backward_, "plan", "this plan was made without backward workspace");
  if constexpr (sizeof(T) == 2) {
    backward16(dy, u, pre, post, skip, du, dk, dpre, dpost, dskip, s);
  } else {
    gather_kernel<T, T, false><<<grid(rows_, N_), kThreads, 0, s>>>(geom_, u, pre, x_.as<T>());
    STRUX_LAUNCH("fftconv blocks gather(v)");
    gather_kernel<T, T, true><<<grid(rows_, N_), kThreads, 0, s>>>(geom_, dy, post, z_.as<T>());
    STRUX_LAUNCH("fftconv blocks gather(dz)");
    // The inner gradients: dv blocks into o_, dk (summed over every block) into dtaps_; skip gives
    // dv its skip·dz. dskip = dk[h, 0] (both are Σ dz·v), written by filter_grad below.
    inner_->backward(z_.get(), x_.get(), nullptr, nullptr, skip, o_.get(), dtaps_.get(), nullptr, nullptr, nullptr,
                     s);
    // dpostgate needs the forward's z + skip·v: the inner forward again, into the dz blocks (read by now).
    if (dpost) inner_->forward(x_.get(), nullptr, nullptr, skip, z_.get(), s);
    finish_kernel<T, T><<<grid(rows_, S_), kThreads, 0, s>>>(geom_, o_.as<T>(), z_.as<T>(), dy, u, pre, du, dpre,
                                                             dpost);
    STRUX_LAUNCH("fftconv blocks finish(du)");
    k::filter_grad<T, T><<<grid2(Lk_, H_, k::kThreads), k::kThreads, 0, s>>>(dtaps_.as<T>(), m_, H_, Lk_, m_, dk,
                                                                             dskip);
    STRUX_LAUNCH("fftconv blocks filter_grad");
  }
}

template <class T>
void Plan::backward16(const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du, T* dk, T* dpre,
                      T* dpost, T* dskip, cudaStream_t s) {
  // dpost = dy ⊙ (z + skip·v): the forward with dy as its postgate (its blocks are reused below).
  if (dpost) forward16(u, pre, dy, skip, dpost, s);
  Arrays<T> in{};
  in.add(u, x_.as<T>(), kAheadV);
  in.add(dy, z_.as<T>(), kAheadDz);
  if (pre) in.add(pre, p_.as<T>(), kAheadV);
  if (post) in.add(post, q_.as<T>(), kAheadDz);
  copy_in_kernel<T><<<grid(rows_, N_), kThreads, 0, s>>>(geom_, in);
  STRUX_LAUNCH("fftconv blocks copy_in(u, dy)");
  // du (and dpre) blocks, whole at i < S; dk and dskip summed over every block by the inner plan,
  // straight into dk when its rows are m long.
  T* dki = Lk_ == m_ ? dk : dtaps_.as<T>();
  inner_->backward(z_.get(), x_.get(), pre ? p_.get() : nullptr, post ? q_.get() : nullptr, skip, o_.get(), dki,
                   dpre ? r_.get() : nullptr, nullptr, dskip, s);
  Arrays<T> out{};
  out.add(o_.as<T>(), du, 0);
  if (dpre) out.add(r_.as<T>(), dpre, 0);
  copy_out_kernel<T><<<grid(rows_, S_), kThreads, 0, s>>>(geom_, 0, out);
  STRUX_LAUNCH("fftconv blocks copy_out(du)");
  if (dki != dk) {
    rows_kernel<T><<<grid2(Lk_, H_, k::kThreads), k::kThreads, 0, s>>>(dki, m_, m_, H_, Lk_, dk);
    STRUX_LAUNCH("fftconv blocks rows(dk)");
  }
}

#define STRUX_BLOCKS(T)                                                                                          \
  template void Plan::set_filter<T>(const T*, cudaStream_t);                                                     \
  template void Plan::forward<T>(const T*, const T*, const T*, const T*, T*, cudaStream_t);                      \
  template void Plan::backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, cudaStream_t);
STRUX_BLOCKS(float)
STRUX_BLOCKS(double)
STRUX_BLOCKS(__half)
STRUX_BLOCKS(__nv_bfloat16)
#undef STRUX_BLOCKS

}  // namespace strux::cuda::blocks
