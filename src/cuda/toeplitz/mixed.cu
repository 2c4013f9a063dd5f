// The block Toeplitz product with its phases in different precisions on the GPU: the forward
// transforms of one plan, the product of another, the inverse transforms of a third (one plan per
// precision, fft 2 / algo 2, which keep the plain frequency-major spectra), and a conversion of
// the spectra between them. A plan shared by two phases skips its conversion.
#include <algorithm>

#include "cuda/buffer.hpp"
#include "cuda/elem.cuh"
#include "strux/cuda/toeplitz.hpp"

namespace strux::cuda {

namespace {

template <class From, class To>
__global__ void convert_complex(const From* __restrict__ in, To* __restrict__ out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const From v = in[i];
    out[i] = To{decltype(To{}.x)(v.x), decltype(To{}.x)(v.y)};
  }
}

// n complex values from a's spectra buffer to b's, each in its plan's precision.
void convert(const ToeplitzPlan& a, bool a_out, const ToeplitzPlan& b, bool b_out, bool adjoint, int64_t n,
             cudaStream_t s) {
  const void* src = a.spectra(adjoint, a_out);
  void* dst = b.spectra(adjoint, b_out);
  const unsigned grid = unsigned(std::min<int64_t>((n + 255) / 256, 65535));
  const bool fd = a.dtype() == DType::f64, td = b.dtype() == DType::f64;
  if (fd == td) {
    STRUX_CUDA(cudaMemcpyAsync(dst, src, size_t(n) * (fd ? 16 : 8), cudaMemcpyDeviceToDevice, s));
    return;
  }
  if (fd)
    convert_complex<double2, float2><<<grid, 256, 0, s>>>(static_cast<const double2*>(src), static_cast<float2*>(dst), n);
  else
    convert_complex<float2, double2><<<grid, 256, 0, s>>>(static_cast<const float2*>(src), static_cast<double2*>(dst), n);
  STRUX_LAUNCH("toeplitz convert_complex");
}

void check_stage_plan(const ToeplitzPlan& p, const ToeplitzPlan& ref, const char* name) {
  check_arg(p.fft() == 2 && p.algo(false) == 2 && p.algo(true) == 2, name,
            "expected a plan with transform layout 2 and product algo 2 for a mixed-precision product, got fft ",
            p.fft(), ", algo ", p.algo(false), "/", p.algo(true));
  check_arg(p.problem() == ref.problem(), name, "expected the same (Nt, Nd, Nm, R, layout) as the other plans");
}

}  // namespace

void toeplitz_mixed_apply(ToeplitzPlan& in, ToeplitzPlan& prod, ToeplitzPlan& out, const void* fhat, const void* x,
                          void* y, bool adjoint, Stream s, double fhat_scale) {
  check_stage_plan(in, prod, "in");
  check_stage_plan(prod, prod, "prod");
  check_stage_plan(out, prod, "out");
  const auto pr = prod.problem();  // Nt, Nd, Nm, R
  const int64_t nf = prod.nfreq(), n_in = (adjoint ? pr[1] : pr[2]) * pr[3], n_out = (adjoint ? pr[2] : pr[1]) * pr[3];
  cudaStream_t st = s;
  in.transform_in(x, adjoint, s);
  if (&in != &prod) convert(in, false, prod, false, adjoint, nf * n_in, st);
  prod.product_only(fhat, adjoint, s, fhat_scale);
  if (&out != &prod) convert(prod, true, out, true, adjoint, nf * n_out, st);
  out.transform_out(y, adjoint, s);
}

}  // namespace strux::cuda
