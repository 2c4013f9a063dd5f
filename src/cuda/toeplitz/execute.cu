// ToeplitzPlan execution: gather, forward transforms, the per-frequency product with F̂,
// inverse transforms and scatter, for each transform layout (fft 0, 1, 2) and direction.
#include <algorithm>

#include <cublas_v2.h>

#include "cuda/buffer.hpp"
#include "cuda/elem.cuh"
#include "cuda/toeplitz/multi.hpp"
#include "cuda/toeplitz/plan_impl.hpp"
#include "cuda/toeplitz/transforms.cuh"
#include "strux/cuda/toeplitz.hpp"

namespace strux::cuda {

using namespace toeplitz_detail;

namespace {

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
  static void rgemm(cublasHandle_t h, int m, int n, int k, const float* a, const float* A, int lda, long long sA,
                    const float* B, int ldb, long long sB, const float* b, float* Cm, int ldc, long long sC, int batch) {
    STRUX_CUBLAS(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, a, A, lda, sA, B, ldb, sB, b, Cm, ldc,
                                           sC, batch));
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
  static void rgemm(cublasHandle_t h, int m, int n, int k, const double* a, const double* A, int lda, long long sA,
                    const double* B, int ldb, long long sB, const double* b, double* Cm, int ldc, long long sC, int batch) {
    STRUX_CUBLAS(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, a, A, lda, sA, B, ldb, sB, b, Cm, ldc,
                                           sC, batch));
  }
};

// Complex-to-complex transforms (fft 1), in place.
void exec_c2c(cufftHandle p, float2* z, int dir) {
  STRUX_CUFFT(cufftExecC2C(p, reinterpret_cast<cufftComplex*>(z), reinterpret_cast<cufftComplex*>(z), dir));
}
void exec_c2c(cufftHandle p, double2* z, int dir) {
  STRUX_CUFFT(
      cufftExecZ2Z(p, reinterpret_cast<cufftDoubleComplex*>(z), reinterpret_cast<cufftDoubleComplex*>(z), dir));
}
// Out of place (fft 2's half-length transforms: forward on the input side, inverse on the output side).
void exec_c2c(cufftHandle p, const float2* in, float2* out, int dir = CUFFT_FORWARD) {
  STRUX_CUFFT(cufftExecC2C(p, reinterpret_cast<cufftComplex*>(const_cast<float2*>(in)),
                           reinterpret_cast<cufftComplex*>(out), dir));
}
void exec_c2c(cufftHandle p, const double2* in, double2* out, int dir = CUFFT_FORWARD) {
  STRUX_CUFFT(cufftExecZ2Z(p, reinterpret_cast<cufftDoubleComplex*>(const_cast<double2*>(in)),
                           reinterpret_cast<cufftDoubleComplex*>(out), dir));
}

}  // namespace

// Xout (nfreq, cout) = alpha · F̂[f] Xin[f] (or F̂[f]^H), frequency-major, per the direction's algo.
template <class T>
void ToeplitzPlan::Impl::product(const void* fhat, const void* Xin_, void* Xout_, bool adjoint, cudaStream_t s) {
  using B = Blas<T>;
  using C = typename B::C;
  const C* Xin = static_cast<const C*>(Xin_);
  C* Xout = static_cast<C*>(Xout_);
  const int64_t cm = Nm * R, cd = Nd * R;
  const int algo = adjoint ? algo_adj : this->algo;
  const bool gemv = R == 1 && algo == 0;
  if (algo == 3) {  // [Re D̂ | Im D̂] (Nd × 2R) = F̂ as real (Nd × 2Nm) · X (2Nm × 2R), column-major transposed
    STRUX_CUBLAS(cublasSetStream(blas, s));
    STRUX_CUBLAS(cublasSetWorkspace(blas, blas_work.get(), blas_work.bytes()));
    const T ra = T(1) / T(nfft), rb = T(0);
    B::rgemm(blas, int(2 * R), int(Nd), int(2 * Nm), &ra, reinterpret_cast<const T*>(Xin), int(2 * R), 4 * cm,
             static_cast<const T*>(fhat), int(2 * Nm), 2LL * Nd * Nm, &rb, reinterpret_cast<T*>(Xout), int(2 * R),
             2 * cd, int(nfreq));
    return;
  }
  if (storage != 0) {
    if constexpr (sizeof(T) == 4)
      toeplitz_detail::apply_fhat_half(fhat, storage == 1, Xin, Xout, nfreq, Nd, Nm, R, adjoint,
                                       float(fhat_scale / double(nfft)), s);
    return;
  }
  if (algo == 2) {
    toeplitz_detail::apply_fhat_multi<T>(fhat, Xin, Xout, nfreq, Nd, Nm, R, adjoint, T(1) / T(nfft), s);
    return;
  }
  STRUX_CUBLAS(cublasSetStream(blas, s));
  STRUX_CUBLAS(cublasSetWorkspace(blas, blas_work.get(), blas_work.bytes()));
  const C alpha{T(1) / T(nfft), 0}, beta{0, 0};
  const C* A = static_cast<const C*>(fhat);
  const long long sA = (long long)(Nd * Nm);
  const int nb = int(nfreq);
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

// fft 2, the input side: gather (transpose) → contiguous R2C (even nfft: half-length C2C) →
// transpose to frequency-major (even nfft: fused with the R2C post step) into (adjoint ? Y : X).
template <class T>
void ToeplitzPlan::Impl::stage_in(const T* in, bool adjoint, cudaStream_t s) {
  using F = Fft<T>;
  using C = typename F::C;
  const int64_t cin = (adjoint ? Nd : Nm) * R;
  const int algo = adjoint ? algo_adj : this->algo;
  const bool reverse = adjoint && R == 1 && algo == 0;
  C* Xin = (adjoint ? Y : X).as<C>();
  FFTPlan& fin = adjoint ? r2c_d : r2c_m;
  C* Tc = T1.as<C>();
  T* Pin = reverse ? Prev.as<T>() : P.as<T>();
  const dim3 tb(kTile, kTRows);
  const dim3 gg(unsigned((Nt + kGT - 1) / kGT), unsigned(std::min<int64_t>((cin + kGT - 1) / kGT, 65535)));
  if (space_major)
    gather_data<T, true><<<gg, kGThreads, 0, s>>>(in, Nt, cin, R, reverse, nfft, Pin);
  else
    gather_data<T, false><<<gg, kGThreads, 0, s>>>(in, Nt, cin, R, reverse, nfft, Pin);
  STRUX_LAUNCH("toeplitz gather_data");
  STRUX_CUFFT(cufftSetStream(fin.get(), s));
  if (half) {
    const int64_t M = nfft / 2;
    exec_c2c(fin.get(), reinterpret_cast<const C*>(Pin), Tc);
    if (algo == 3)
      r2c_post_transpose<C, true><<<tile_grid(M / 2 + 1, cin), tb, 0, s>>>(Tc, cin, M, Wt.as<C>(), Xin, R);
    else
      r2c_post_transpose<C><<<tile_grid(M / 2 + 1, cin), tb, 0, s>>>(Tc, cin, M, Wt.as<C>(), Xin);
    STRUX_LAUNCH("toeplitz r2c_post_transpose");
  } else {
    F::forward(fin.get(), Pin, Tc);
    if (algo == 3)
      transpose_c<C, true><<<tile_grid(nfreq, cin), tb, 0, s>>>(Tc, cin, nfreq, Xin, R);
    else
      transpose_c<C><<<tile_grid(nfreq, cin), tb, 0, s>>>(Tc, cin, nfreq, Xin);
    STRUX_LAUNCH("toeplitz transpose_c");
  }
}

// fft 2, the output side: the product's spectra (adjoint ? X : Y) → transpose back → inverse
// transform into that buffer (free by then) → scatter (transpose). Even nfft: the transpose does
// the C2R pre step (c2r_pre_transpose) and the inverse is the side's half-length C2C run backwards
// (one pass over the spectra and one launch fewer than cuFFT's C2R); odd nfft: cuFFT's C2R.
template <class T>
void ToeplitzPlan::Impl::stage_out(T* out, bool adjoint, cudaStream_t s) {
  using F = Fft<T>;
  using C = typename F::C;
  const int64_t cout = (adjoint ? Nm : Nd) * R;
  const int algo = adjoint ? algo_adj : this->algo;
  const bool reverse = adjoint && R == 1 && algo == 0;
  C* Xout = (adjoint ? X : Y).as<C>();
  C* Tc = T1.as<C>();
  T* Q = reinterpret_cast<T*>(Xout);  // nfreq·cout complex >= nfft·cout real
  const dim3 tb(kTile, kTRows);
  if (half) {
    const int64_t M = nfft / 2;
    FFTPlan& fout = adjoint ? r2c_m : r2c_d;  // C2C(M) over cout rows
    STRUX_CUFFT(cufftSetStream(fout.get(), s));
    if (algo == 3)
      c2r_pre_transpose<C, true><<<tile_grid(M / 2 + 1, cout), tb, 0, s>>>(Xout, cout, M, Wt.as<C>(), Tc, R);
    else
      c2r_pre_transpose<C><<<tile_grid(M / 2 + 1, cout), tb, 0, s>>>(Xout, cout, M, Wt.as<C>(), Tc);
    STRUX_LAUNCH("toeplitz c2r_pre_transpose");
    exec_c2c(fout.get(), Tc, reinterpret_cast<C*>(Q), CUFFT_INVERSE);
  } else {
    FFTPlan& fout = adjoint ? c2r_m : c2r_d;
    STRUX_CUFFT(cufftSetStream(fout.get(), s));
    if (algo == 3)
      transpose_c<C, false, true><<<tile_grid(cout, nfreq), tb, 0, s>>>(Xout, nfreq, cout, Tc, R);
    else
      transpose_c<C><<<tile_grid(cout, nfreq), tb, 0, s>>>(Xout, nfreq, cout, Tc);
    STRUX_LAUNCH("toeplitz transpose_c");
    F::inverse(fout.get(), Tc, Q);
  }
  if (space_major)
    scatter_rows<T, true><<<tile_grid(Nt, cout), tb, 0, s>>>(Q, Nt, cout, R, reverse, nfft, out);
  else
    scatter_rows<T, false><<<tile_grid(Nt, cout), tb, 0, s>>>(Q, Nt, cout, R, reverse, nfft, out);
  STRUX_LAUNCH("toeplitz scatter_rows");
}

template <class T>
void ToeplitzPlan::Impl::apply(const void* fhat, const T* in, T* out, bool adjoint, cudaStream_t s) {
  using F = Fft<T>;
  using C = typename F::C;
  const int64_t cm = Nm * R, cd = Nd * R;
  // Input/output column counts and transforms for this direction.
  const int64_t cin = adjoint ? cd : cm, cout = adjoint ? cm : cd;
  const int algo = adjoint ? algo_adj : this->algo;
  // conj via time reversal (gemv has no "conj, no transpose"): folded into gather and scatter.
  const bool reverse = adjoint && R == 1 && algo == 0;
  C* Xin = (adjoint ? Y : X).as<C>();
  C* Xout = (adjoint ? X : Y).as<C>();
  T* Pr = P.as<T>();

  if (fft == 2) {
    stage_in<T>(in, adjoint, s);
    product<T>(fhat, Xin, Xout, adjoint, s);
    stage_out<T>(out, adjoint, s);
    return;
  }

  // fft 0: P (nfft, cin) real, strided R2C. fft 1: P (nfft, 2h) real = (nfft, h) complex pairs,
  // h = ceil(nsp/2)·R, strided C2C in place, then split.
  const int64_t nin = adjoint ? Nd : Nm, nout = adjoint ? Nm : Nd;
  const int64_t hnin = fft == 1 ? (nin + 1) / 2 : 0, hnout = fft == 1 ? (nout + 1) / 2 : 0;
  const int64_t ldin = fft == 1 ? 2 * hnin * R : cin, ldout = fft == 1 ? 2 * hnout * R : cout;
  if (space_major) {
    gather_pad_sm<T><<<grid2(nfft, ldin, kThreads), kThreads, 0, s>>>(in, Nt, nin, R, hnin, ldin, reverse, nfft, Pr);
  } else {
    gather_pad<T><<<grid2(ldin, nfft, kThreads), kThreads, 0, s>>>(in, Nt, nin, R, hnin, ldin, false, reverse, nfft,
                                                                   Pr);
  }
  STRUX_LAUNCH("toeplitz gather_pad");
  if (fft == 0) {
    FFTPlan& fin = adjoint ? r2c_d : r2c_m;
    FFTPlan& fout = adjoint ? c2r_m : c2r_d;
    STRUX_CUFFT(cufftSetStream(fin.get(), s));
    STRUX_CUFFT(cufftSetStream(fout.get(), s));
    F::forward(fin.get(), Pr, Xin);
    product<T>(fhat, Xin, Xout, adjoint, s);
    F::inverse(fout.get(), Xout, Pr);
  } else {
    FFTPlan& fin = adjoint ? r2c_d : r2c_m;
    FFTPlan& fout = adjoint ? r2c_m : r2c_d;
    C* Z = P.as<C>();
    STRUX_CUFFT(cufftSetStream(fin.get(), s));
    STRUX_CUFFT(cufftSetStream(fout.get(), s));
    exec_c2c(fin.get(), Z, CUFFT_FORWARD);
    split_pairs<C><<<grid2(hnin * R, nfreq, kThreads), kThreads, 0, s>>>(Z, nin, R, hnin, nfft, nfreq, Xin);
    STRUX_LAUNCH("toeplitz split_pairs");
    product<T>(fhat, Xin, Xout, adjoint, s);
    merge_pairs<C><<<grid2(hnout * R, nfft, kThreads), kThreads, 0, s>>>(Xout, nout, R, hnout, nfft, nfreq, Z);
    STRUX_LAUNCH("toeplitz merge_pairs");
    exec_c2c(fout.get(), Z, CUFFT_INVERSE);
  }
  if (space_major) {
    scatter_out_sm<T><<<grid2(Nt, cout, kThreads), kThreads, 0, s>>>(Pr, Nt, nout, R, hnout, ldout, reverse, nfft,
                                                                      out);
  } else {
    scatter_out<T><<<grid2(cout, Nt, kThreads), kThreads, 0, s>>>(Pr, Nt, nout, R, hnout, ldout, false, reverse,
                                                                     nfft, out);
  }
  STRUX_LAUNCH("toeplitz scatter_out");
}

void ToeplitzPlan::transform_in(const void* x, bool adjoint, Stream s) {
  check_arg(x != nullptr, "x", "expected a device pointer, got null");
  check_arg(impl_->fft == 2, "fft", "expected a plan with transform layout 2 for the staged product, got ", impl_->fft);
  if (impl_->dtype == DType::f32)
    impl_->stage_in<float>(static_cast<const float*>(x), adjoint, s);
  else
    impl_->stage_in<double>(static_cast<const double*>(x), adjoint, s);
}

void ToeplitzPlan::product_only(const void* fhat, bool adjoint, Stream s, double fhat_scale,
                                const void* spectra_in) {
  check_arg(fhat != nullptr, "fhat", "expected a device pointer, got null");
  Impl& p = *impl_;
  p.fhat_scale = fhat_scale;
  const void* Xin = spectra_in ? spectra_in : (adjoint ? p.Y : p.X).get();
  void* Xout = (adjoint ? p.X : p.Y).get();
  if (p.dtype == DType::f32)
    p.product<float>(fhat, Xin, Xout, adjoint, s);
  else
    p.product<double>(fhat, Xin, Xout, adjoint, s);
}

void ToeplitzPlan::transform_out(void* y, bool adjoint, Stream s) {
  check_arg(y != nullptr, "y", "expected a device pointer, got null");
  check_arg(impl_->fft == 2, "fft", "expected a plan with transform layout 2 for the staged product, got ", impl_->fft);
  if (impl_->dtype == DType::f32)
    impl_->stage_out<float>(static_cast<float*>(y), adjoint, s);
  else
    impl_->stage_out<double>(static_cast<double*>(y), adjoint, s);
}

void* ToeplitzPlan::spectra(bool adjoint, bool output) const {
  const Impl& p = *impl_;
  return (adjoint != output ? p.Y : p.X).get();
}

DType ToeplitzPlan::dtype() const { return impl_->dtype; }
std::array<int64_t, 5> ToeplitzPlan::problem() const {
  const Impl& p = *impl_;
  return {p.Nt, p.Nd, p.Nm, p.R, p.space_major ? 1 : 0};
}

void ToeplitzPlan::matvec(const void* fhat, const void* m, void* d, Stream s, double fhat_scale) {
  check_arg(fhat && m && d, "m", "expected device pointers, got null");
  impl_->fhat_scale = fhat_scale;
  if (impl_->dtype == DType::f32)
    impl_->apply<float>(fhat, static_cast<const float*>(m), static_cast<float*>(d), false, s);
  else
    impl_->apply<double>(fhat, static_cast<const double*>(m), static_cast<double*>(d), false, s);
}

void ToeplitzPlan::rmatvec(const void* fhat, const void* d, void* m, Stream s, double fhat_scale) {
  check_arg(fhat && m && d, "d", "expected device pointers, got null");
  impl_->fhat_scale = fhat_scale;
  if (impl_->dtype == DType::f32)
    impl_->apply<float>(fhat, static_cast<const float*>(d), static_cast<float*>(m), true, s);
  else
    impl_->apply<double>(fhat, static_cast<const double*>(d), static_cast<double*>(m), true, s);
}

}  // namespace strux::cuda
