// SpectralConvPlan: fftconv_spectral on the GPU (strux/cuda/fftconv_spectral.hpp). The cuFFT
// path of plan.cu at the contract's n: pad (pregate fused) -> R2C -> product with k_hat / n over
// the m given bins, zeros above -> C2R -> epilogue (skip, postgate fused); the pad and epilogue
// kernels are fftconv's own (kernels.cuh).
//
// irfft reads only the real parts of bins 0 and n/2 (n even); the products zero those imaginary
// parts, so results do not depend on how C2R treats them. n = 1 (circular, L = 1): a length-1
// transform is the identity (X0 = v, y = Re X0), and cuFFT is skipped: the pad kernel writes the
// row as the pair (v, 0), which is X0 in the in-place layout, and Re X0 is where C2R would put y.
//
// Gradients (g = dz zero-padded to n, G = rfft(g), V = rfft(v); c_f = 1 for bins 0 and n/2,
// else 2, the weight irfft gives a bin):
//   dk_hat[h, f] = (c_f / n) Σ_b conj(V_f) G_f   (f < m),   dv = irfft(G ⊙ conj(K̂), n)[:L],
//   dskip[h] = Σ_b Σ_t dz v (a direct reduction; the product's lag 0 is not formed here).
#include <algorithm>

#include "core/checked_size.hpp"
#include "cuda/buffer.hpp"
#include "cuda/fftconv/kernels.cuh"
#include "strux/cuda/fftconv_spectral.hpp"

namespace strux::cuda {

namespace k = fftconv_kernels;

namespace {

// Bins whose imaginary part irfft drops: 0, and n/2 when n is even (then it is the last bin).
__device__ __forceinline__ bool real_bin(int64_t f, int64_t nf, int64_t n) {
  return f == 0 || (n % 2 == 0 && f == nf - 1);
}

// X[r, f] = f < m ? X[r, f] · K[r mod H, f] · scale : 0 (imaginary part 0 on real bins).
template <class C, class Tc>
__global__ void spectral_mul(C* __restrict__ X, const C* __restrict__ K, int64_t rows, int64_t H, int64_t nf,
                             int64_t m, int64_t n, Tc scale) {
  const int64_t f = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f >= nf) return;
  const bool rb = real_bin(f, nf, n);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    C out{0, 0};
    if (f < m) {
      out = cmul(X[r * nf + f], K[(r % H) * m + f]);
      out.x *= scale;
      out.y = rb ? Tc(0) : out.y * scale;
    }
    X[r * nf + f] = out;
  }
}

// Per (h, f): dK[h, f] = (c_f · scale) Σ_b conj(V) G for f < m; G ← conj(K̂)·G·scale (the dv
// spectrum), V ← K̂·V·scale when need_z (the forward's product, for dpostgate); both 0 for f >= m.
template <class C, class Tc>
__global__ void spectral_backward(C* __restrict__ V, C* __restrict__ G, const C* __restrict__ K, C* __restrict__ dK,
                                  int64_t B, int64_t H, int64_t nf, int64_t m, int64_t n, bool need_z, Tc scale) {
  const int64_t f = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f >= nf) return;
  const bool rb = real_bin(f, nf, n);
  for (int64_t h = blockIdx.y; h < H; h += gridDim.y) {
    if (f >= m) {
      for (int64_t b = 0; b < B; ++b) {
        const int64_t i = (b * H + h) * nf + f;
        G[i] = C{0, 0};
        if (need_z) V[i] = C{0, 0};
      }
      continue;
    }
    C kk = K[h * m + f];
    kk.x *= scale;
    kk.y *= scale;
    const C acc = k::backward_bin(V, G, kk, B, H, h, nf, f, need_z, rb);
    const Tc w = rb ? scale : Tc(2) * scale;
    dK[h * m + f] = C{acc.x * w, rb ? Tc(0) : acc.y * w};
  }
}

// dskip[h] = Σ_b Σ_t (dy ⊙ post)(u ⊙ pre): one block per h, a tree sum in shared memory.
template <class T, class Tc>
__global__ void skip_grad(const T* __restrict__ dy, const T* __restrict__ u, const T* __restrict__ pre,
                          const T* __restrict__ post, int64_t B, int64_t H, int64_t L, T* __restrict__ dskip) {
  __shared__ Tc part[k::kThreads];
  const int64_t BL = B * L;
  for (int64_t h = blockIdx.x; h < H; h += gridDim.x) {
    Tc s = 0;
    for (int64_t j = threadIdx.x; j < BL; j += blockDim.x) {
      const int64_t i = ((j / L) * H + h) * L + j % L;
      Tc dz = Tc(to_c(dy[i]));
      if (post) dz *= Tc(to_c(post[i]));
      Tc v = Tc(to_c(u[i]));
      if (pre) v *= Tc(to_c(pre[i]));
      s += dz * v;
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = k::kThreads / 2; w > 0; w >>= 1) {
      if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) dskip[h] = From<T>::of(part[0]);
    __syncthreads();
  }
}

}  // namespace

struct SpectralConvPlan::Impl {
  int64_t B, H, L, m, n, nf;
  bool with_backward;
  DType dtype;
  FFTPlan r2c, c2r;  // B·H rows, in place (real rows of stride 2·nf); not made when n = 1
  DeviceBuffer slotA, slotB, work;

  bool use_fft() const { return n > 1; }

  template <class T>
  void forward(const T* u, const void* kh, const T* pre, const T* post, const T* skip, T* y, cudaStream_t s);
  template <class T>
  void backward(const T* dy, const T* u, const void* kh, const T* pre, const T* post, const T* skip, T* du,
                void* dkh, T* dpre, T* dpost, T* dskip, cudaStream_t s);
};

SpectralConvPlan::SpectralConvPlan(int64_t B, int64_t H, int64_t L, int64_t m, bool circular, DType dtype,
                                   bool with_backward)
    : impl_(new Impl) {
  check_positive(B, "B");
  check_positive(H, "H");
  check_positive(L, "L");
  check_positive(m, "k_hat");
  check_arg(dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16, "dtype",
            "expected float32, float64, float16 or bfloat16 (the dtype of u), got ", dtype_name(dtype));
  check_arg(L <= (int64_t(1) << 40), "L", "expected L <= 2^40, got ", L);
  Impl& p = *impl_;
  p.B = B, p.H = H, p.L = L, p.m = m;
  p.n = circular ? L : 2 * L;
  p.nf = p.n / 2 + 1;
  check_arg(m <= p.nf, "k_hat", "expected at most n/2 + 1 = ", p.nf, " frequencies (n = ", p.n, ", ",
            circular ? "circular" : "causal", " mode, L = ", L, "), got m = ", m);
  p.with_backward = with_backward, p.dtype = dtype;
  const int64_t tc = dtype == DType::f64 ? int64_t(sizeof(double)) : int64_t(sizeof(float));
  const int64_t rows = checked_count("u", {B, H}), ld = 2 * p.nf;
  const int64_t slot = checked_bytes("u", {rows, ld}, tc);
  if (p.use_fft()) {
    const cufftType r2c = dtype == DType::f64 ? CUFFT_D2Z : CUFFT_R2C;
    const cufftType c2r = dtype == DType::f64 ? CUFFT_Z2D : CUFFT_C2R;
    p.r2c.make(p.n, rows, 1, ld, ld, 1, p.nf, p.nf, r2c);
    p.c2r.make(p.n, rows, 1, p.nf, p.nf, 1, ld, ld, c2r);
    p.work.allocate(std::max({p.r2c.work_size(), p.c2r.work_size(), size_t(256)}));
    p.r2c.set_work(p.work.get());
    p.c2r.set_work(p.work.get());
  }
  p.slotA.allocate(size_t(slot));
  if (with_backward) p.slotB.allocate(size_t(slot));
}

SpectralConvPlan::~SpectralConvPlan() = default;
int64_t SpectralConvPlan::nfft() const { return impl_->n; }
size_t SpectralConvPlan::workspace_bytes() const {
  return impl_->slotA.bytes() + impl_->slotB.bytes() + impl_->work.bytes();
}

template <class T>
void SpectralConvPlan::Impl::forward(const T* u, const void* kh, const T* pre, const T* post, const T* skip, T* y,
                                     cudaStream_t s) {
  using Tc = typename Compute<T>::type;
  using F = Fft<Tc>;
  using C = typename F::C;
  const int64_t rows = B * H, ld = 2 * nf;
  Tc* a = slotA.as<Tc>();
  // Zeros up to ld, not n: for n = 1 the pair (v, 0) is the transform (file comment).
  k::pad<T, Tc><<<grid2(ld, rows, k::kThreads), k::kThreads, 0, s>>>(u, pre, rows, L, L, ld, ld, Tc(1), a);
  STRUX_LAUNCH("fftconv_spectral pad(u)");
  if (use_fft()) {
    STRUX_CUFFT(cufftSetStream(r2c.get(), s));
    F::forward(r2c.get(), a, slotA.as<C>());
  }
  spectral_mul<C, Tc><<<grid2(nf, rows, k::kThreads), k::kThreads, 0, s>>>(
      slotA.as<C>(), static_cast<const C*>(kh), rows, H, nf, m, n, Tc(1) / Tc(n));
  STRUX_LAUNCH("fftconv_spectral mul");
  if (use_fft()) {
    STRUX_CUFFT(cufftSetStream(c2r.get(), s));
    F::inverse(c2r.get(), slotA.as<C>(), a);
  }
  k::epilogue_forward<T, Tc><<<grid2(L, rows, k::kThreads), k::kThreads, 0, s>>>(a, ld, u, pre, post, skip, rows,
                                                                                  H, L, y);
  STRUX_LAUNCH("fftconv_spectral epilogue_forward");
}

template <class T>
void SpectralConvPlan::Impl::backward(const T* dy, const T* u, const void* kh, const T* pre, const T* post,
                                      const T* skip, T* du, void* dkh, T* dpre, T* dpost, T* dskip, cudaStream_t s) {
  using Tc = typename Compute<T>::type;
  using F = Fft<Tc>;
  using C = typename F::C;
  check_arg(with_backward, "plan", "this plan was made without backward workspace");
  const int64_t rows = B * H, ld = 2 * nf;
  Tc* a = slotA.as<Tc>();
  Tc* g = slotB.as<Tc>();
  const dim3 gp = grid2(ld, rows, k::kThreads);
  k::pad<T, Tc><<<gp, k::kThreads, 0, s>>>(u, pre, rows, L, L, ld, ld, Tc(1), a);
  STRUX_LAUNCH("fftconv_spectral pad(v)");
  k::pad<T, Tc><<<gp, k::kThreads, 0, s>>>(dy, post, rows, L, L, ld, ld, Tc(1), g);
  STRUX_LAUNCH("fftconv_spectral pad(dz)");
  if (use_fft()) {
    STRUX_CUFFT(cufftSetStream(r2c.get(), s));
    STRUX_CUFFT(cufftSetStream(c2r.get(), s));
    F::forward(r2c.get(), a, slotA.as<C>());
    F::forward(r2c.get(), g, slotB.as<C>());
  }
  const bool need_z = dpost != nullptr;
  spectral_backward<C, Tc><<<grid2(nf, H, 128), 128, 0, s>>>(slotA.as<C>(), slotB.as<C>(),
                                                              static_cast<const C*>(kh), static_cast<C*>(dkh), B, H,
                                                              nf, m, n, need_z, Tc(1) / Tc(n));
  STRUX_LAUNCH("fftconv_spectral backward");
  if (use_fft()) {
    F::inverse(c2r.get(), slotB.as<C>(), g);
    if (need_z) F::inverse(c2r.get(), slotA.as<C>(), a);
  }
  k::epilogue_backward<T, Tc><<<grid2(L, rows, k::kThreads), k::kThreads, 0, s>>>(
      g, a, ld, dy, u, pre, post, skip, rows, H, L, du, dpre, dpost);
  STRUX_LAUNCH("fftconv_spectral epilogue_backward");
  if (dskip) {
    skip_grad<T, Tc><<<unsigned(std::min<int64_t>(H, 65535)), k::kThreads, 0, s>>>(dy, u, pre, post, B, H, L,
                                                                                    dskip);
    STRUX_LAUNCH("fftconv_spectral skip_grad");
  }
}

// ---- dtype dispatch -----------------------------------------------------------------------------
#define STRUX_SPECTRAL_DISPATCH(dtype, CALL)                    \
  switch (dtype) {                                              \
    case DType::f32: { using T = float; CALL; break; }          \
    case DType::f64: { using T = double; CALL; break; }         \
    case DType::f16: { using T = __half; CALL; break; }         \
    case DType::bf16: { using T = __nv_bfloat16; CALL; break; } \
    default: throw TypeError(msg("fftconv_spectral: unsupported dtype ", dtype_name(dtype))); \
  }

void SpectralConvPlan::forward(const void* u, const void* kh, const void* pre, const void* post, const void* skip,
                               void* y, Stream s) {
  check_arg(u != nullptr, "u", "expected a device pointer, got null");
  check_arg(kh != nullptr, "k_hat", "expected a device pointer, got null");
  check_arg(y != nullptr, "y", "expected a device pointer, got null");
  STRUX_SPECTRAL_DISPATCH(impl_->dtype,
                          impl_->forward<T>(static_cast<const T*>(u), kh, static_cast<const T*>(pre),
                                            static_cast<const T*>(post), static_cast<const T*>(skip),
                                            static_cast<T*>(y), s));
}

void SpectralConvPlan::backward(const void* dy, const void* u, const void* kh, const void* pre, const void* post,
                                const void* skip, void* du, void* dkh, void* dpre, void* dpost, void* dskip,
                                Stream s) {
  check_arg(dy != nullptr, "dy", "expected a device pointer, got null");
  check_arg(u != nullptr, "u", "expected a device pointer, got null");
  check_arg(kh != nullptr, "k_hat", "expected a device pointer, got null");
  check_arg(du != nullptr, "du", "expected a device pointer, got null");
  check_arg(dkh != nullptr, "dk_hat", "expected a device pointer, got null");
  if (!pre) dpre = nullptr;
  if (!post) dpost = nullptr;
  if (!skip) dskip = nullptr;
  STRUX_SPECTRAL_DISPATCH(impl_->dtype,
                          impl_->backward<T>(static_cast<const T*>(dy), static_cast<const T*>(u), kh,
                                             static_cast<const T*>(pre), static_cast<const T*>(post),
                                             static_cast<const T*>(skip), static_cast<T*>(du), dkh,
                                             static_cast<T*>(dpre), static_cast<T*>(dpost), static_cast<T*>(dskip),
                                             s));
}

}  // namespace strux::cuda
