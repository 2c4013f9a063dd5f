// The blocks solver (blocks.hpp): its three kernels (gather of the blocks, scatter of the outputs,
// the backward's overlap sum) around an inner circular FFTConvPlan, and its plan.
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

}  // namespace

int64_t fft_size(int64_t m) {
  int64_t n = kMinN;
  while (n / 4 < m) n *= 2;  // n >= 4m without forming 4m
  return n;
}

bool automatic(bool circular, DType dt, int64_t L, int64_t Lk) {
  if (circular || !(dt == DType::f32 || dt == DType::f16 || dt == DType::bf16)) return false;
  const int64_t m = direct::taps(false, L, Lk), row = L + m - 1;
  return m > direct::kAutoTaps && m <= kMaxTaps && row > 2 * fused::kMaxN && kAutoRatio * fft_size(m) <= row;
}

Plan::Plan(DType dt, int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, bool with_backward)
    : dt_(dt),
      ct_(dt == DType::f64 ? DType::f64 : DType::f32),
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
  static_assert(4 * kMaxTaps / (kThreads * kPer) <= 65535, "grid.y of the largest block");
  check_arg(m_ <= kMaxTaps, "k", "the blocks solver takes at most ", kMaxTaps, " taps used (block FFT <= ",
            4 * kMaxTaps, "), got ", m_, " (L = ", L, ", Lk = ", Lk, ")");
  N_ = blocks::fft_size(m_);
  S_ = N_ - (m_ - 1);
  nb_ = (L + S_ - 1) / S_;
  rows_ = checked_count("L", {B, nb_, H});
  check_arg(rows_ <= INT_MAX, "L", "the blocks solver takes fewer than 2^31 blocks in all, got B·H·ceil(L / S) = ",
            rows_, " (S = ", S_, " outputs per block of ", N_, ")");
  geom_ = Geom{L, N_, S_, m_, unsigned(H), unsigned(nb_), circular};
  const int64_t ce = ct_ == DType::f64 ? 8 : 4;
  const size_t bytes = size_t(checked_bytes("L", {rows_, N_}, ce));
  const size_t taps_bytes = size_t(checked_bytes("k", {H, m_}, ce));
  inner_ = std::make_unique<FFTConvPlan>(B * nb_, H, N_, m_, true, ct_, with_backward);
  x_.allocate(bytes);
  o_.allocate(bytes);
  taps_.allocate(taps_bytes);
  skip_.allocate(size_t(checked_bytes("skip", {H}, ce)));
  if (with_backward) {
    z_.allocate(bytes);
    dtaps_.allocate(taps_bytes);
  }
}

Plan::~Plan() = default;

size_t Plan::workspace_bytes() const {
  return x_.bytes() + z_.bytes() + o_.bytes() + taps_.bytes() + dtaps_.bytes() + skip_.bytes() +
         inner_->workspace_bytes();
}

template <class T>
const void* Plan::skip_c(const T* skip, cudaStream_t s) {
  if (!skip) return nullptr;
  using Tc = typename Compute<T>::type;
  k::pad<T, Tc><<<grid2(H_, 1, k::kThreads), k::kThreads, 0, s>>>(skip, nullptr, 1, H_, H_, H_, H_, Tc(1),
                                                                   skip_.as<Tc>());
  STRUX_LAUNCH("fftconv blocks pad(skip)");
  return skip_.get();
}

template <class T>
void Plan::set_filter(const T* kf, cudaStream_t s) {
  using Tc = typename Compute<T>::type;
  k::pad<T, Tc><<<grid2(m_, H_, k::kThreads), k::kThreads, 0, s>>>(kf, nullptr, H_, Lk_, m_, m_, m_, Tc(1),
                                                                    taps_.as<Tc>());
  STRUX_LAUNCH("fftconv blocks pad(k)");
  inner_->set_filter(taps_.get(), s);
}

template <class T>
void Plan::forward(const T* u, const T* pre, const T* post, const T* skip, T* y, cudaStream_t s) {
  using Tc = typename Compute<T>::type;
  gather_kernel<T, Tc, false><<<grid(rows_, N_), kThreads, 0, s>>>(geom_, u, pre, x_.as<Tc>());
  STRUX_LAUNCH("fftconv blocks gather(v)");
  inner_->forward(x_.get(), nullptr, nullptr, skip_c(skip, s), o_.get(), s);
  scatter_kernel<T, Tc><<<grid(rows_, S_), kThreads, 0, s>>>(geom_, o_.as<Tc>(), post, y);
  STRUX_LAUNCH("fftconv blocks scatter(y)");
}

template <class T>
void Plan::backward(const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du, T* dk, T* dpre,
                    T* dpost, T* dskip, cudaStream_t s) {
  using Tc = typename Compute<T>::type;
  check_arg(with_backward_, "plan", "this plan was made without backward workspace");
  gather_kernel<T, Tc, false><<<grid(rows_, N_), kThreads, 0, s>>>(geom_, u, pre, x_.as<Tc>());
  STRUX_LAUNCH("fftconv blocks gather(v)");
  gather_kernel<T, Tc, true><<<grid(rows_, N_), kThreads, 0, s>>>(geom_, dy, post, z_.as<Tc>());
  STRUX_LAUNCH("fftconv blocks gather(dz)");
  // The inner gradients: dv blocks into o_, dk (summed over every block) into dtaps_; skip gives
  // dv its skip·dz. dskip = dk[h, 0] (both are Σ dz·v), written by filter_grad below.
  const void* sk = skip_c(skip, s);
  inner_->backward(z_.get(), x_.get(), nullptr, nullptr, sk, o_.get(), dtaps_.get(), nullptr, nullptr, nullptr, s);
  // dpostgate needs the forward's z + skip·v: the inner forward again, into the dz blocks (read by now).
  if (dpost) inner_->forward(x_.get(), nullptr, nullptr, sk, z_.get(), s);
  finish_kernel<T, Tc><<<grid(rows_, S_), kThreads, 0, s>>>(geom_, o_.as<Tc>(), z_.as<Tc>(), dy, u, pre, du, dpre,
                                                             dpost);
  STRUX_LAUNCH("fftconv blocks finish(du)");
  k::filter_grad<T, Tc><<<grid2(Lk_, H_, k::kThreads), k::kThreads, 0, s>>>(dtaps_.as<Tc>(), m_, H_, Lk_, m_, dk,
                                                                             dskip);
  STRUX_LAUNCH("fftconv blocks filter_grad");
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
