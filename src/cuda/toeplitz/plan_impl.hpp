// ToeplitzPlan's state, shared by its construction (plan.cu) and its execution (execute.cu).
#pragma once

#include <cublas_v2.h>

#include "cuda/buffer.hpp"
#include "strux/cuda/toeplitz.hpp"

namespace strux::cuda {

struct ToeplitzPlan::Impl {
  int64_t Nt, Nd, Nm, R, nfft, nfreq;
  bool space_major;
  int algo, algo_adj;  // product per direction
  int fft;             // transform layout: 0 strided R2C/C2R, 1 paired C2C, 2 contiguous + transposes
  bool half = false;   // fft 2 with even nfft: half-length C2C with r2c_post / c2r_pre_transpose
  int storage = 0;     // F̂: 0 complex, 1 bfloat16 pairs, 2 float16 pairs (then the product is apply_fhat_half)
  double fhat_scale = 1;  // of the current call (16-bit F̂)
  DType dtype;
  // fft 0: r2c/c2r per side; fft 1: c2c_m/c2c_d in the r2c slots; fft 2: contiguous r2c/c2r
  // (even nfft: the half-length C2C per side in the r2c slots, both directions; no c2r plans).
  FFTPlan r2c_m, c2r_m, r2c_d, c2r_d;
  // fft 2: P holds the padded input rows, zeroed at plan time (the gathers write data entries
  // only); Prev the same for the time-reversed gather (R = 1 rmatvec with gemv), whose zero
  // region differs; Wt the twiddles of r2c_post_transpose.
  DeviceBuffer P, Prev, X, Y, T1, Wt, work, blas_work;
  cublasHandle_t blas = nullptr;

  ~Impl() {
    if (blas) cublasDestroy(blas);
  }
  template <class T>
  void apply(const void* fhat, const T* in, T* out, bool adjoint, cudaStream_t s);
  template <class T>
  void product(const void* fhat, const void* Xin, void* Xout, bool adjoint, cudaStream_t s);
  // fft 2's two transform sides (apply = stage_in, product, stage_out).
  template <class T>
  void stage_in(const T* in, bool adjoint, cudaStream_t s);
  template <class T>
  void stage_out(T* out, bool adjoint, cudaStream_t s);
};

}  // namespace strux::cuda
