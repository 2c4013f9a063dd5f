// ToeplitzPlan: strided cuFFT plans (time axis with stride = columns, so spectra come out
// frequency-major with no reorder pass) around cuBLAS strided-batched gemv/gemm on F̂.
#include <algorithm>
#include <climits>

#include "cuda/buffer.hpp"
#include "cuda/elem.cuh"
#include "cuda/toeplitz/multi.hpp"
#include "strux/cuda/toeplitz.hpp"

namespace strux::cuda {

namespace {

constexpr int kThreads = 256;

// Source time index of padded row t: t itself, or (nfft - t) mod nfft when reversed
// (time reversal conjugates the real FFT). -1 when it falls in the zero padding.
__device__ __forceinline__ int64_t src_time(int64_t t, int64_t Nt, int64_t nfft, bool reverse) {
  const int64_t s = reverse ? (t == 0 ? 0 : nfft - t) : t;
  return s < Nt ? s : -1;
}

// Offset of element (time s, column col = n·R + r) of a vector in its layout.
__device__ __forceinline__ int64_t vec_offset(int64_t s, int64_t col, int64_t Nt, int64_t R, bool space_major,
                                              int64_t cols) {
  if (!space_major) return s * cols + col;
  const int64_t n = col / R, r = col - n * R;
  return (n * Nt + s) * R + r;
}

// P[t, col] (nfft × cols, time-major) from a vector x in its layout, zero past Nt.
// Threads run along col (coalesced for time-major); grid y strides over t.
template <class T>
__global__ void gather_pad(const T* __restrict__ x, int64_t Nt, int64_t cols, int64_t R, bool space_major,
                           bool reverse, int64_t nfft, T* __restrict__ P) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  for (int64_t t = blockIdx.y; t < nfft; t += gridDim.y) {
    const int64_t s = src_time(t, Nt, nfft, reverse);
    P[t * cols + col] = s >= 0 ? x[vec_offset(s, col, Nt, R, space_major, cols)] : T(0);
  }
}

// out (layout) [t < Nt, col] = Q[src_time(t), col].
template <class T>
__global__ void scatter_out(const T* __restrict__ Q, int64_t Nt, int64_t cols, int64_t R, bool space_major,
                            bool reverse, int64_t nfft, T* __restrict__ out) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  for (int64_t t = blockIdx.y; t < Nt; t += gridDim.y) {
    const int64_t s = reverse ? (t == 0 ? 0 : nfft - t) : t;
    out[vec_offset(t, col, Nt, R, space_major, cols)] = Q[s * cols + col];
  }
}

// Space-major vectors: threads along time (coalesced reads of each (n, r) row when R = 1).
template <class T>
__global__ void gather_pad_sm(const T* __restrict__ x, int64_t Nt, int64_t cols, int64_t R, bool reverse,
                              int64_t nfft, T* __restrict__ P) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= nfft) return;
  const int64_t s = src_time(t, Nt, nfft, reverse);
  for (int64_t col = blockIdx.y; col < cols; col += gridDim.y)
    P[t * cols + col] = s >= 0 ? x[vec_offset(s, col, Nt, R, true, cols)] : T(0);
}

template <class T>
__global__ void scatter_out_sm(const T* __restrict__ Q, int64_t Nt, int64_t cols, int64_t R, bool reverse,
                               int64_t nfft, T* __restrict__ out) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= Nt) return;
  const int64_t s = reverse ? (t == 0 ? 0 : nfft - t) : t;
  for (int64_t col = blockIdx.y; col < cols; col += gridDim.y) out[vec_offset(t, col, Nt, R, true, cols)] = Q[s * cols + col];
}

// P[t, j] = blocks[t, c0 + j] for t < Nt, 0 below nfft.
template <class T>
__global__ void pad_blocks(const T* __restrict__ blocks, int64_t Nt, int64_t cols, int64_t c0, int64_t chunk,
                           int64_t nfft, T* __restrict__ P) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= chunk) return;
  for (int64_t t = blockIdx.y; t < nfft; t += gridDim.y) P[t * chunk + j] = t < Nt ? blocks[t * cols + c0 + j] : T(0);
}

// cuBLAS entry points per real type.
template <class T>
struct Blas;
template <>
struct Blas<float> {
  using C = cuComplex;
  static void gemv(cublasHandle_t h, cublasOperation_t op, int m, int n, const C* a, const C* A, int lda,
                   long long sA, const C* x, long long sx, const C* b, C* y, long long sy, int batch) {
    STRUX_CUBLAS(cublasCgemvStridedBatched(h, op, m, n, a, A, lda, sA, x, 1, sx, b, y, 1, sy, batch));
  }
  static void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const C* a,
                   const C* A, int lda, long long sA, const C* B, int ldb, long long sB, const C* b, C* Cm, int ldc,
                   long long sC, int batch) {
    STRUX_CUBLAS(cublasCgemmStridedBatched(h, ta, tb, m, n, k, a, A, lda, sA, B, ldb, sB, b, Cm, ldc, sC, batch));
  }
};
template <>
struct Blas<double> {
  using C = cuDoubleComplex;
  static void gemv(cublasHandle_t h, cublasOperation_t op, int m, int n, const C* a, const C* A, int lda,
                   long long sA, const C* x, long long sx, const C* b, C* y, long long sy, int batch) {
    STRUX_CUBLAS(cublasZgemvStridedBatched(h, op, m, n, a, A, lda, sA, x, 1, sx, b, y, 1, sy, batch));
  }
  static void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const C* a,
                   const C* A, int lda, long long sA, const C* B, int ldb, long long sB, const C* b, C* Cm, int ldc,
                   long long sC, int batch) {
    STRUX_CUBLAS(cublasZgemmStridedBatched(h, ta, tb, m, n, k, a, A, lda, sA, B, ldb, sB, b, Cm, ldc, sC, batch));
  }
};

void check_int(int64_t v, const char* arg) {
  check_arg(v <= INT_MAX, arg, "expected a size below 2^31 (cuBLAS dimension), got ", v);
}

}  // namespace

// The one place that picks the product for algo = -1, per direction. Measured on the H200
// (2026-11-21, Nt=1000, Nd=100, Nm=5000, float32; bench/NOTES-gpu.md version 3), whole calls:
// matvec  R=1: cuBLAS gemv 1.182 ms, own 1.246;  R=16: cuBLAS gemm 7.31, own 7.65;
// rmatvec R=1: cuBLAS gemv 1.306 ms, own 1.244;  R=16: cuBLAS gemm 7.04, own 6.49.
// float64 and other shapes are unmeasured: the same choice.
int toeplitz_auto_algo(int64_t Nd, int64_t Nm, int64_t R, DType dtype, bool adjoint) {
  (void)Nd, (void)Nm, (void)R, (void)dtype;
  return adjoint ? 2 : 0;
}

int64_t toeplitz_nfft(int64_t Nt) { return std::max<int64_t>(2, good_fft_size(2 * Nt - 1)); }

template <class T>
static void build_fhat_t(int64_t Nt, int64_t Nd, int64_t Nm, const T* blocks, void* fhat, cudaStream_t s) {
  using C = typename Fft<T>::C;
  const int64_t nfft = toeplitz_nfft(Nt), cols = Nd * Nm;
  // Columns per pass: bounds the padded temporary to about 1 GiB.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(cols, (int64_t(1) << 30) / (nfft * int64_t(sizeof(T)))));
  DeviceBuffer P(size_t(nfft) * chunk * sizeof(T));
  for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
    const int64_t n = std::min(chunk, cols - c0);
    FFTPlan plan;
    plan.make(nfft, n, n, 1, nfft, cols, 1, nfft / 2 + 1, Fft<T>::r2c);
    DeviceBuffer work(std::max<size_t>(plan.work_size(), 256));
    plan.set_work(work.get());
    STRUX_CUFFT(cufftSetStream(plan.get(), s));
    pad_blocks<T><<<grid2(n, nfft, kThreads), kThreads, 0, s>>>(blocks, Nt, cols, c0, n, nfft, P.as<T>());
    STRUX_LAUNCH("toeplitz pad_blocks");
    Fft<T>::forward(plan.get(), P.as<T>(), static_cast<C*>(fhat) + c0);
    // The plan, its work area and P are freed or reused next: finish this pass first.
    STRUX_CUDA(cudaStreamSynchronize(s));
  }
}

void build_toeplitz_fhat(int64_t Nt, int64_t Nd, int64_t Nm, DType dtype, const void* blocks, void* fhat, Stream s) {
  check_positive(Nt, "Nt");
  check_positive(Nd, "Nd");
  check_positive(Nm, "Nm");
  check_arg(blocks && fhat, "blocks", "expected device pointers, got null");
  if (dtype == DType::f32)
    build_fhat_t<float>(Nt, Nd, Nm, static_cast<const float*>(blocks), fhat, s);
  else if (dtype == DType::f64)
    build_fhat_t<double>(Nt, Nd, Nm, static_cast<const double*>(blocks), fhat, s);
  else
    throw TypeError(msg("argument 'blocks': expected float32 or float64, got ", dtype_name(dtype)));
}

struct ToeplitzPlan::Impl {
  int64_t Nt, Nd, Nm, R, nfft, nfreq;
  bool space_major;
  int algo, algo_adj;  // product per direction
  DType dtype;
  FFTPlan r2c_m, c2r_m, r2c_d, c2r_d;
  DeviceBuffer P, X, Y, work, blas_work;
  cublasHandle_t blas = nullptr;

  ~Impl() {
    if (blas) cublasDestroy(blas);
  }
  template <class T>
  void apply(const void* fhat, const T* in, T* out, bool adjoint, cudaStream_t s);
};

ToeplitzPlan::ToeplitzPlan(int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, bool space_major, DType dtype, int algo)
    : impl_(new Impl) {
  check_positive(Nt, "Nt");
  check_positive(Nd, "Nd");
  check_positive(Nm, "Nm");
  check_positive(R, "R");
  if (dtype != DType::f32 && dtype != DType::f64)
    throw TypeError(msg("argument 'dtype': expected float32 or float64, got ", dtype_name(dtype)));
  check_arg(algo >= -1 && algo <= 2, "algo",
            "expected -1 (automatic), 0 (cuBLAS gemv/gemm), 1 (cuBLAS gemm) or 2 (own kernels), got ", algo);
  check_int(Nd * Nm, "Nd*Nm");
  check_int(std::max(Nd, Nm) * R, "R");
  Impl& p = *impl_;
  p.Nt = Nt, p.Nd = Nd, p.Nm = Nm, p.R = R, p.space_major = space_major, p.dtype = dtype;
  p.algo = algo < 0 ? toeplitz_auto_algo(Nd, Nm, R, dtype, false) : algo;
  p.algo_adj = algo < 0 ? toeplitz_auto_algo(Nd, Nm, R, dtype, true) : algo;
  p.nfft = toeplitz_nfft(Nt);
  p.nfreq = p.nfft / 2 + 1;
  check_int(p.nfreq, "Nt");
  const bool dbl = dtype == DType::f64;
  const size_t tr = dbl ? 8 : 4;
  const cufftType r2c = dbl ? CUFFT_D2Z : CUFFT_R2C, c2r = dbl ? CUFFT_Z2D : CUFFT_C2R;
  const int64_t cm = Nm * R, cd = Nd * R, nfft = p.nfft, nfreq = p.nfreq;
  // Transform along time with stride = columns, one transform per column: frequency-major out.
  p.r2c_m.make(nfft, cm, cm, 1, nfft, cm, 1, nfreq, r2c);
  p.c2r_m.make(nfft, cm, cm, 1, nfreq, cm, 1, nfft, c2r);
  p.r2c_d.make(nfft, cd, cd, 1, nfft, cd, 1, nfreq, r2c);
  p.c2r_d.make(nfft, cd, cd, 1, nfreq, cd, 1, nfft, c2r);
  const size_t ws = std::max({p.r2c_m.work_size(), p.c2r_m.work_size(), p.r2c_d.work_size(), p.c2r_d.work_size(),
                              size_t(256)});
  p.work.allocate(ws);
  for (FFTPlan* f : {&p.r2c_m, &p.c2r_m, &p.r2c_d, &p.c2r_d}) f->set_work(p.work.get());
  p.P.allocate(size_t(nfft) * std::max(cm, cd) * tr);
  p.X.allocate(size_t(nfreq) * cm * 2 * tr);
  p.Y.allocate(size_t(nfreq) * cd * 2 * tr);
  STRUX_CUBLAS(cublasCreate(&p.blas));
  // Own cuBLAS workspace, so no allocation happens inside a call (or a graph capture).
  p.blas_work.allocate(size_t(32) << 20);
}

ToeplitzPlan::~ToeplitzPlan() = default;
int64_t ToeplitzPlan::nfft() const { return impl_->nfft; }
int64_t ToeplitzPlan::nfreq() const { return impl_->nfreq; }
int ToeplitzPlan::algo(bool adjoint) const { return adjoint ? impl_->algo_adj : impl_->algo; }
size_t ToeplitzPlan::workspace_bytes() const {
  const Impl& p = *impl_;
  return p.P.bytes() + p.X.bytes() + p.Y.bytes() + p.work.bytes() + p.blas_work.bytes();
}

template <class T>
void ToeplitzPlan::Impl::apply(const void* fhat, const T* in, T* out, bool adjoint, cudaStream_t s) {
  using F = Fft<T>;
  using B = Blas<T>;
  using C = typename B::C;
  const int64_t cm = Nm * R, cd = Nd * R;
  // Input/output column counts and transforms for this direction.
  const int64_t cin = adjoint ? cd : cm, cout = adjoint ? cm : cd;
  FFTPlan& fin = adjoint ? r2c_d : r2c_m;
  FFTPlan& fout = adjoint ? c2r_m : c2r_d;
  const int algo = adjoint ? algo_adj : this->algo;
  const bool gemv = R == 1 && algo == 0;
  const bool reverse = adjoint && gemv;  // conj via time reversal (gemv has no "conj, no transpose")
  C* Xin = (adjoint ? Y : X).as<C>();
  C* Xout = (adjoint ? X : Y).as<C>();
  T* Pr = P.as<T>();

  if (space_major) {
    gather_pad_sm<T><<<grid2(nfft, cin, kThreads), kThreads, 0, s>>>(in, Nt, cin, R, reverse, nfft, Pr);
  } else {
    gather_pad<T><<<grid2(cin, nfft, kThreads), kThreads, 0, s>>>(in, Nt, cin, R, false, reverse, nfft, Pr);
  }
  STRUX_LAUNCH("toeplitz gather_pad");
  STRUX_CUFFT(cufftSetStream(fin.get(), s));
  STRUX_CUFFT(cufftSetStream(fout.get(), s));
  F::forward(fin.get(), Pr, reinterpret_cast<typename F::C*>(Xin));

  STRUX_CUBLAS(cublasSetStream(blas, s));
  STRUX_CUBLAS(cublasSetWorkspace(blas, blas_work.get(), blas_work.bytes()));
  const C alpha{T(1) / T(nfft), 0}, beta{0, 0};
  const C* A = static_cast<const C*>(fhat);
  const long long sA = (long long)(Nd * Nm);
  const int nb = int(nfreq);
  if (algo == 2) {
    toeplitz_detail::apply_fhat_multi<T>(fhat, Xin, Xout, nfreq, Nd, Nm, R, adjoint, T(1) / T(nfft), s);
  } else {
  // Column-major view of F̂[f] (row-major Nd × Nm) is A' = F̂[f]ᵀ (Nm × Nd, lda = Nm).
  if (gemv) {
    if (!adjoint)  // d̂ = A'ᵀ m̂
      B::gemv(blas, CUBLAS_OP_T, int(Nm), int(Nd), &alpha, A, int(Nm), sA, Xin, Nm, &beta, Xout, Nd, nb);
    else  // conj(m̂) = A' conj(d̂)
      B::gemv(blas, CUBLAS_OP_N, int(Nm), int(Nd), &alpha, A, int(Nm), sA, Xin, Nd, &beta, Xout, Nm, nb);
  } else {
    if (!adjoint)  // D̂ᵀ (R × Nd) = M̂ᵀ (R × Nm) · A'
      B::gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, int(R), int(Nd), int(Nm), &alpha, Xin, int(R), cm, A, int(Nm), sA,
              &beta, Xout, int(R), cd, nb);
    else  // M̂ᵀ (R × Nm) = D̂ᵀ (R × Nd) · conj(F̂) = D̂ᵀ · A'^H
      B::gemm(blas, CUBLAS_OP_N, CUBLAS_OP_C, int(R), int(Nm), int(Nd), &alpha, Xin, int(R), cd, A, int(Nm), sA,
              &beta, Xout, int(R), cm, nb);
  }
  }
  F::inverse(fout.get(), reinterpret_cast<typename F::C*>(Xout), Pr);
  if (space_major) {
    scatter_out_sm<T><<<grid2(Nt, cout, kThreads), kThreads, 0, s>>>(Pr, Nt, cout, R, reverse, nfft, out);
  } else {
    scatter_out<T><<<grid2(cout, Nt, kThreads), kThreads, 0, s>>>(Pr, Nt, cout, R, false, reverse, nfft, out);
  }
  STRUX_LAUNCH("toeplitz scatter_out");
}

void ToeplitzPlan::matvec(const void* fhat, const void* m, void* d, Stream s) {
  check_arg(fhat && m && d, "m", "expected device pointers, got null");
  if (impl_->dtype == DType::f32)
    impl_->apply<float>(fhat, static_cast<const float*>(m), static_cast<float*>(d), false, s);
  else
    impl_->apply<double>(fhat, static_cast<const double*>(m), static_cast<double*>(d), false, s);
}

void ToeplitzPlan::rmatvec(const void* fhat, const void* d, void* m, Stream s) {
  check_arg(fhat && m && d, "d", "expected device pointers, got null");
  if (impl_->dtype == DType::f32)
    impl_->apply<float>(fhat, static_cast<const float*>(d), static_cast<float*>(m), true, s);
  else
    impl_->apply<double>(fhat, static_cast<const double*>(d), static_cast<double*>(m), true, s);
}

}  // namespace strux::cuda
