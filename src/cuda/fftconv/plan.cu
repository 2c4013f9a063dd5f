// FFTConvPlan: cuFFT plans, filter spectrum and workspace made once; execute = fused pad,
// R2C, filter multiply, C2R, fused epilogue, all on the caller's stream.
#include <algorithm>
#include <memory>

#include "cuda/buffer.hpp"
#include "cuda/device.hpp"
#include "cuda/fftconv/blocks.hpp"
#include "cuda/fftconv/dense.hpp"
#include "cuda/fftconv/fourstep.hpp"
#include "cuda/fftconv/direct.hpp"
#include "cuda/fftconv/fused.hpp"
#include "cuda/fftconv/kernels.cuh"
#include "cuda/fftconv/tensor.hpp"
#include "strux/cuda/fftconv.hpp"

namespace strux::cuda {

namespace k = fftconv_kernels;

struct FFTConvPlan::Impl {
  int64_t B, H, L, Lk, Lmin, nfft, nf;
  bool circular, with_backward, filter = false;
  DType dtype;
  FFTPlan r2c_rows, c2r_rows, r2c_h, c2r_h;
  DeviceBuffer slotA, slotB, khat, dkhat, work;
  // Fused path (fused.cuh): one kernel per call, own FFTs (the filter spectrum too: one more
  // kernel per set_filter); cuFFT only for the inverse transform of dK̂ in backward (H rows).
  bool fused = false;
  fused::Launch fwd_launch, bwd_launch;
  DeviceBuffer dkpart, vh;
  // Tensor-core path (tensor.cuh; algo 2, or algo 0 at small nfft): K̂ as [H][nfft] complex in its
  // kernels' frequency order, computed by its own spectrum kernel. Its kernels run forward only: a
  // plan with backward holds an algo-4 plan (`grad`) for the gradients, given the filter that the
  // last set_filter saw (the call sequence set_filter → backward of the bindings).
  bool tensor = false, tc_split = true;  // tc_split false: algo 3, the one-product probe
  int tc_variant = 0;                     // tensor::forward's kernel variant: algo 5 → 1, 6 → 2, 7 → 3
  tensor::Launch tc;
  std::unique_ptr<FFTConvPlan> grad;
  const void* kf_last = nullptr;
  // Four-step path (fourstep.cuh; algo 8, or algo 0 at FFT sizes 65536 … 4M): K̂ in pass B's order, the
  // intermediate in slotA. Backward by its own passes (fourstep_bwd.cuh): v's and dz's
  // intermediates in slotA and slotB (B·H rows each), dK̂'s in dkhat (H rows); or, where its row
  // pass would have too few CTAs (fs_own_bwd false), by the cuFFT plan `grad` as the tensor path.
  bool fourstep = false, fs_own_bwd = true;
  fourstep::Geometry fs;
  std::unique_ptr<direct::Plan> direct;  // direct sums for short filters (direct.hpp; algo 9)
  // Toeplitz-block products on tensor cores (dense.hpp; algo 15, and 17 or the automatic rule with
  // the ungated forward on wgmma: dense_wgmma.hpp), forward and gradients. Where the
  // automatic rule gives the gated forward or the backward (dense_bwd false) to the FFT solvers
  // (dense.hpp's cost model: the dense gradients measured 0.10–0.60× the FFT ones where it keeps
  // them, 1.16–3.2× beyond; NOTES-gpu-fftconv-dense.md rounds 7–9), or the gradient kernel's shared
  // memory would not fit (long rows with many taps), those calls run through algo-16 plans (the
  // automatic choice without them): gated forwards through `gated` (forward only, Lk = the taps
  // used, given the dense plan's own copy of them: a call may come long after set_filter),
  // gradients through `grad`, given the filter that the last set_filter saw, as for the tensor path.
  std::unique_ptr<dense::Plan> dense;
  std::unique_ptr<FFTConvPlan> gated;
  bool dense_bwd = true;
  // Overlap-save over blocks for filters much shorter than the row (blocks.hpp; algo 10, or algo 0
  // by blocks::automatic); nfft is then the block transform size.
  std::unique_ptr<blocks::Plan> blocks;

  template <class T>
  void set_filter(const T* kf, cudaStream_t s);
  template <class T>
  void forward(const T* u, const T* pre, const T* post, const T* skip, T* y, cudaStream_t s,
               const fused::OwnFilter& own = {});
  template <class T>
  void backward(const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du, T* dk, T* dpre,
                T* dpost, T* dskip, cudaStream_t s);
};

FFTConvPlan::FFTConvPlan(int64_t B, int64_t H, int64_t L, int64_t Lk, bool circular, DType dtype,
                         bool with_backward, int algo)
    : impl_(new Impl) {
  check_positive(B, "B");
  check_positive(H, "H");
  check_positive(L, "L");
  check_positive(Lk, "Lk");
  // Algo 16 is the automatic choice that never takes the dense kernels (their plans' gradients).
  const bool auto_rule = algo == 0 || algo == dense::kAlgoNoDense;
  if (algo == dense::kAlgo || algo == dense::kAlgoWgmma ||
      (algo == 0 && dense::automatic(dtype, circular, B, H, L, Lk) && !direct::automatic(circular, L, Lk))) {
    check_arg(dense::supported(dtype, circular, L, Lk), "algo",
              "the dense fftconv kernels (algo 15) take float16 or bfloat16, at most ", dense::kMaxTaps,
              " taps used, L <= ", dense::kMaxL, " and circular L a multiple of ", dense::kPb, "; got ",
              dtype_name(dtype), ", L = ", L, ", Lk = ", Lk, circular ? " (circular)" : " (causal)");
    Impl& p = *impl_;
    const bool forced = algo == dense::kAlgo || algo == dense::kAlgoWgmma;
    using W = dense::Plan::Wgmma;
    const W wg = algo == dense::kAlgoWgmma ? W::forced : algo == dense::kAlgo ? W::off : W::automatic;
    p.dense = std::make_unique<dense::Plan>(dtype, B, H, L, Lk, circular, with_backward, wg);
    p.dense_bwd = p.dense->has_backward() && (forced || dense::automatic_backward(circular, L, Lk));
    if (with_backward && !p.dense_bwd)
      p.grad = std::make_unique<FFTConvPlan>(B, H, L, Lk, circular, dtype, true, dense::kAlgoNoDense);
    if (!forced && !dense::automatic_gated(circular, L, Lk))
      p.gated = std::make_unique<FFTConvPlan>(B, H, L, p.dense->taps_count(), circular, dtype, false,
                                              dense::kAlgoNoDense);
    impl_->nfft = impl_->nf = 0;  // no transform
    impl_->Lk = Lk;
    impl_->dtype = dtype, impl_->with_backward = with_backward, impl_->circular = circular;
    return;
  }
  if (algo == direct::kAlgo || (auto_rule && direct::automatic(circular, L, Lk))) {
    impl_->direct = std::make_unique<direct::Plan>(dtype, B, H, L, Lk, circular, with_backward);
    impl_->nfft = impl_->nf = 0;  // no transform
    impl_->dtype = dtype, impl_->with_backward = with_backward, impl_->circular = circular;
    return;
  }
  if (blocks::is_algo(algo) || (auto_rule && blocks::automatic(circular, dtype, L, Lk))) {
    impl_->blocks =
        std::make_unique<blocks::Plan>(dtype, B, H, L, Lk, circular, with_backward, blocks::ratio_of(algo));
    impl_->nfft = impl_->blocks->fft_size(), impl_->nf = 0;
    impl_->dtype = dtype, impl_->with_backward = with_backward, impl_->circular = circular;
    return;
  }
  check_arg((algo >= 0 && algo <= 8) || algo == 14 || algo == dense::kAlgoNoDense, "algo",
            "expected 0 (automatic), 1 (cuFFT), 2 (tensor cores), 3 (tensor cores, one product per real "
            "product: a benchmark probe), 4 (fused kernels where they apply, else cuFFT), 5 (tensor cores, "
            "short mma chains), 6 (as 5 with the radix passes' indices out of their loops), 7 (as 2 with factored "
            "twiddles), 8 (four-step kernels, FFT sizes 65536 to 4194304), 9 (direct sums, at most 64 "
            "taps), 10 (blocks: overlap-save over blocks of a few times the taps), 11, 12 or 13 (blocks of 8, 16 "
            "or 4 times the taps: probes), 14 (as 8 with pass B's grid row by row: a probe), 15 (dense: Toeplitz "
            "blocks on tensor cores), 16 (automatic without the dense kernels), 17 (dense, the ungated forward "
            "on wgmma, sm_90a), got ", algo);
  if (circular) check_arg(Lk <= L, "k", "circular mode needs Lk <= L, got Lk = ", Lk, " and L = ", L);
  Impl& p = *impl_;
  p.B = B, p.H = H, p.L = L, p.Lk = Lk, p.Lmin = std::min(Lk, L);
  p.circular = circular, p.with_backward = with_backward, p.dtype = dtype;
  // Causal: zero padding to L + Lmin - 1 makes the circular convolution the linear one on t < L.
  // Length-1 transforms are avoided: with L = 1 circular equals causal, so both pad to 2.
  p.nfft = (circular && L > 1) ? L : std::max<int64_t>(2, good_fft_size(L + p.Lmin - 1));
  // Tensor cores: causal nfft = the next power of two >= max(256, L + Lmin - 1), circular
  // nfft = L; both in [256, 16384]. Forced by algo 2, 3, 5, 6 and 7; algo 0 takes them for float16 /
  // bfloat16 up to nfft = tensor::kAutoMaxN (tensor.hpp says why).
  const int64_t n_tc = tensor::fft_size(circular, L, p.Lmin);
  const bool tensor_auto = auto_rule && tensor::supported_dtype(dtype) && tensor::supported_n(n_tc) &&
                           n_tc <= tensor::kAutoMaxN;
  if (algo == 2 || algo == 3 || (algo >= 5 && algo <= 7) || tensor_auto) {
    check_arg(tensor::supported_dtype(dtype), "dtype", "the tensor solver takes float16 or bfloat16, got ",
              dtype_name(dtype));
    check_arg(tensor::supported_n(n_tc), "L",
              "the tensor solver needs circular L a power of two in [256, 16384] or causal L + min(Lk, L) - 1 "
              "<= 16384, got L = ", L, ", Lk = ", Lk, circular ? " (circular)" : " (causal)");
    p.tensor = true;
    p.tc_split = algo != 3;
    p.tc_variant = (algo >= 5 && algo <= 7) ? algo - 4 : 0;
    p.nfft = n_tc;
    p.nf = n_tc / 2 + 1;
    p.khat.allocate(size_t(H) * n_tc * sizeof(float2));
    tensor::plan(dtype, n_tc, p.tc);
    if (with_backward) p.grad = std::make_unique<FFTConvPlan>(B, H, L, Lk, circular, dtype, true, 4);
    return;
  }
  // Four-step: forced by algo 8; algo 0 takes it for float32 / float16 / bfloat16 past the fused
  // kernels' sizes (causal L + Lmin - 1 > 32768, circular L a power of two >= 65536), where it
  // was measured faster than the cuFFT path at every size (bench/NOTES-gpu-fftconv-long.md).
  const int64_t n_fs = fourstep::fft_size(circular, L, p.Lmin);
  const bool fourstep_auto = auto_rule && fourstep::supported_dtype(dtype) && n_fs != 0 &&
                             (circular || L + p.Lmin - 1 > fourstep::kMinNfft / 2);
  if (algo == 8 || algo == 14 || fourstep_auto) {
    check_arg(fourstep::supported_dtype(dtype), "dtype", "the four-step solver takes float32, float16 or bfloat16, got ",
              dtype_name(dtype));
    const int64_t n = n_fs;
    check_arg(n != 0, "L",
              "the four-step solver needs circular L a power of two in [65536, 4194304] or causal "
              "L + min(Lk, L) - 1 <= 4194304, got L = ", L, ", Lk = ", Lk, circular ? " (circular)" : " (causal)");
    p.fourstep = true;
    p.nfft = n;
    p.nf = n / 2 + 1;
    p.fs = fourstep::plan(dtype, n);
    p.fs.rows_by_k1 = algo == 14;
    p.khat.allocate(fourstep::khat_bytes(p.fs, H));
    p.slotA.allocate(fourstep::scratch_bytes(p.fs, B * H));
    // The backward's row pass has one CTA per (h, k1), each looping over the B batch rows: with
    // fewer than two per SM (small H) the batch runs serialized on a few SMs, so the automatic
    // rule hands those gradients to the cuFFT plan; forced algo 8 / 14 keep the own passes.
    p.fs_own_bwd = !auto_rule || B == 1 || H * (p.fs.M1 / 2 + 1) >= 2 * int64_t(current_sm_count());
    if (with_backward && p.fs_own_bwd) {
      p.slotB.allocate(fourstep::scratch_bytes(p.fs, B * H));
      p.dkhat.allocate(fourstep::scratch_bytes(p.fs, H));
    } else if (with_backward) {
      p.grad = std::make_unique<FFTConvPlan>(B, H, L, Lk, circular, dtype, true, 1);
    }
    return;
  }
  // The fused kernels take float32 arithmetic and power-of-two nfft (causal: any length up to
  // L + Lmin - 1 <= 32768, padded to at least 1024; circular: L itself a supported power of two).
  if ((auto_rule || algo == 4) && dtype != DType::f64) {
    if (circular && L > 1) {
      p.fused = fused::supported_n(L / 2) && L % 2 == 0;
      if (p.fused) p.nfft = L;
    } else {
      int64_t n = 2 * fused::kMinN;
      while (n < L + p.Lmin - 1) n *= 2;
      p.fused = fused::supported_n(n / 2);
      if (p.fused) p.nfft = n;
    }
  }
  p.nf = p.nfft / 2 + 1;
  const size_t tc = dtype == DType::f64 ? sizeof(double) : sizeof(float);
  const cufftType r2c = dtype == DType::f64 ? CUFFT_D2Z : CUFFT_R2C;
  const cufftType c2r = dtype == DType::f64 ? CUFFT_Z2D : CUFFT_C2R;
  const int64_t rows = B * H, nf = p.nf, ld = 2 * nf;
  // In-place layout: real rows of stride 2·nf, complex rows of stride nf.
  p.r2c_h.make(p.nfft, H, 1, ld, ld, 1, nf, nf, r2c);
  p.c2r_h.make(p.nfft, H, 1, nf, nf, 1, ld, ld, c2r);
  p.khat.allocate(size_t(H) * ld * tc);
  if (with_backward) p.dkhat.allocate(size_t(H) * ld * tc);
  if (p.fused) {
    p.work.allocate(std::max({p.r2c_h.work_size(), p.c2r_h.work_size(), size_t(256)}));
    for (FFTPlan* f : {&p.r2c_h, &p.c2r_h}) f->set_work(p.work.get());
    p.fwd_launch = fused::plan_forward(dtype, p.nfft / 2, B, H);
    if (with_backward) {
      p.bwd_launch = fused::plan_backward(dtype, p.nfft / 2, B, H);
      const fused::Launch& g = p.bwd_launch;
      p.dkpart.allocate(size_t(g.nchunk) * H * nf * sizeof(float2));
      if (!g.vh_smem) p.vh.allocate(size_t(g.nchunk) * H * nf * sizeof(float2));
    }
    return;
  }
  p.r2c_rows.make(p.nfft, rows, 1, ld, ld, 1, nf, nf, r2c);
  p.c2r_rows.make(p.nfft, rows, 1, nf, nf, 1, ld, ld, c2r);
  const size_t ws = std::max({p.r2c_rows.work_size(), p.c2r_rows.work_size(), p.r2c_h.work_size(),
                              p.c2r_h.work_size(), size_t(256)});
  p.work.allocate(ws);
  for (FFTPlan* f : {&p.r2c_rows, &p.c2r_rows, &p.r2c_h, &p.c2r_h}) f->set_work(p.work.get());
  p.slotA.allocate(size_t(rows) * ld * tc);
  if (with_backward) p.slotB.allocate(size_t(rows) * ld * tc);
}

FFTConvPlan::~FFTConvPlan() = default;
int64_t FFTConvPlan::nfft() const { return impl_->nfft; }
bool FFTConvPlan::filter_set() const { return impl_->filter; }
size_t FFTConvPlan::workspace_bytes() const {
  const Impl& p = *impl_;
  if (p.direct) return p.direct->workspace_bytes();
  if (p.dense)
    return p.dense->workspace_bytes() + (p.grad ? p.grad->workspace_bytes() : 0) +
           (p.gated ? p.gated->workspace_bytes() : 0);
  if (p.blocks) return p.blocks->workspace_bytes();
  return p.slotA.bytes() + p.slotB.bytes() + p.khat.bytes() + p.dkhat.bytes() + p.work.bytes() + p.dkpart.bytes() +
         p.vh.bytes() + p.tc.tw.bytes() + (p.grad ? p.grad->workspace_bytes() : 0);
}
bool FFTConvPlan::fused() const { return impl_->fused; }
bool FFTConvPlan::tensor() const { return impl_->tensor; }
bool FFTConvPlan::fourstep() const { return impl_->fourstep; }
bool FFTConvPlan::direct() const { return impl_->direct != nullptr; }
bool FFTConvPlan::dense() const { return impl_->dense != nullptr; }
bool FFTConvPlan::dense_gated() const { return impl_->dense && !impl_->gated; }
bool FFTConvPlan::dense_wgmma() const { return impl_->dense && impl_->dense->wgmma(); }
bool FFTConvPlan::dense_backward() const { return impl_->dense && impl_->dense_bwd; }
bool FFTConvPlan::blocks() const { return impl_->blocks != nullptr; }
int64_t FFTConvPlan::blocks_per_row() const { return impl_->blocks ? impl_->blocks->blocks_per_row() : 0; }
const FFTConvPlan* FFTConvPlan::inner() const { return impl_->blocks ? &impl_->blocks->inner() : nullptr; }

template <class T>
void FFTConvPlan::Impl::set_filter(const T* kf, cudaStream_t s) {
  using Tc = typename Compute<T>::type;
  using F = Fft<Tc>;
  if (direct) {  // no spectrum: the taps are copied
    direct->set_filter(kf, s);
    filter = true;
    return;
  }
  if (dense) {  // the taps are copied; `grad` gets the filter at backward
    dense->set_filter(kf, s);
    kf_last = kf;
    filter = true;
    return;
  }
  if (blocks) {  // the inner plan's spectrum, of the taps used
    blocks->set_filter(kf, s);
    filter = true;
    return;
  }
  if (tensor) {  // K̂ unscaled: the tensor kernels' forward transform carries the 1/nfft
    tensor::spectrum(dtype, tc, kf, H, Lk, Lmin, khat.as<float2>(), s);
    kf_last = kf;
    filter = true;
    return;
  }
  // 1/nfft of the inverse transform is folded into the filter spectrum once, here.
  if (fourstep) {
    fourstep::spectrum(dtype, fs, kf, H, Lk, Lmin, 1.f / float(nfft), slotA.as<float2>(), khat.as<float2>(), s);
    kf_last = kf;  // for `grad`, where the cuFFT plan takes the gradients
    filter = true;
    return;
  }
  if (fused) {  // one launch: the fused kernels' own transform (fused.cuh spectrum_kernel)
    fused::spectrum(dtype, fwd_launch, kf, H, Lk, Lmin, 1.f / float(nfft), khat.as<float2>(), s);
    filter = true;
    return;
  }
  const int64_t ld = 2 * nf;
  Tc* kr = khat.as<Tc>();
  k::pad<T, Tc><<<grid2(nfft, H, k::kThreads), k::kThreads, 0, s>>>(kf, nullptr, H, Lk, Lmin, nfft, ld,
                                                                      Tc(1) / Tc(nfft), kr);
  STRUX_LAUNCH("fftconv pad(k)");
  STRUX_CUFFT(cufftSetStream(r2c_h.get(), s));
  F::forward(r2c_h.get(), kr, khat.as<typename F::C>());
  filter = true;
}

template <class T>
void FFTConvPlan::Impl::forward(const T* u, const T* pre, const T* post, const T* skip, T* y, cudaStream_t s,
                                const fused::OwnFilter& own) {
  using Tc = typename Compute<T>::type;
  using F = Fft<Tc>;
  using C = typename F::C;
  check_arg(filter || own.k, "k", "no filter set on this plan (call set_filter first)");
  if (direct) return direct->forward(u, pre, post, skip, y, s);
  if (dense && pre && gated) {  // a gated call the cost model gives to the FFT solvers
    gated->set_filter(dense->taps(), s);
    return gated->impl_->forward(u, pre, post, skip, y, s);
  }
  if (dense) return dense->forward(u, pre, post, skip, y, s);
  if (blocks) return blocks->forward(u, pre, post, skip, y, s);
  if (tensor) {
    tensor::forward(dtype, tc, u, pre, post, skip, khat.as<float2>(), y, B, H, L, tc_split, tc_variant, s);
    return;
  }
  if (fourstep) {
    fourstep::forward(dtype, fs, u, pre, post, skip, khat.as<float2>(), slotA.as<float2>(), y, B, H, L, s);
    return;
  }
  if (fused) {
    fused::forward(dtype, fwd_launch, u, pre, post, skip, khat.as<float2>(), y, B, H, L, own, s);
    if (own.k) filter = true;
    return;
  }
  const int64_t rows = B * H, ld = 2 * nf;
  Tc* a = slotA.as<Tc>();
  k::pad<T, Tc><<<grid2(nfft, rows, k::kThreads), k::kThreads, 0, s>>>(u, pre, rows, L, L, nfft, ld, Tc(1), a);
  STRUX_LAUNCH("fftconv pad(u)");
  STRUX_CUFFT(cufftSetStream(r2c_rows.get(), s));
  STRUX_CUFFT(cufftSetStream(c2r_rows.get(), s));
  F::forward(r2c_rows.get(), a, slotA.as<C>());
  k::mul_filter<C><<<grid2(nf, rows, k::kThreads), k::kThreads, 0, s>>>(slotA.as<C>(), khat.as<C>(), rows, H, nf);
  STRUX_LAUNCH("fftconv mul_filter");
  F::inverse(c2r_rows.get(), slotA.as<C>(), a);
  k::epilogue_forward<T, Tc><<<grid2(L, rows, k::kThreads), k::kThreads, 0, s>>>(a, ld, u, pre, post, skip, rows,
                                                                                  H, L, y);
  STRUX_LAUNCH("fftconv epilogue_forward");
}

template <class T>
void FFTConvPlan::Impl::backward(const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du, T* dk,
                                 T* dpre, T* dpost, T* dskip, cudaStream_t s) {
  using Tc = typename Compute<T>::type;
  using F = Fft<Tc>;
  using C = typename F::C;
  check_arg(filter, "k", "no filter set on this plan (call set_filter first)");
  check_arg(with_backward, "plan", "this plan was made without backward workspace");
  if (direct) return direct->backward(dy, u, pre, post, skip, du, dk, dpre, dpost, dskip, s);
  if (blocks) return blocks->backward(dy, u, pre, post, skip, du, dk, dpre, dpost, dskip, s);
  if (dense && dense_bwd) return dense->backward(dy, u, pre, post, skip, du, dk, dpre, dpost, dskip, s);
  if (dense || tensor || (fourstep && !fs_own_bwd)) {  // gradients by the `grad` plan
    grad->set_filter(kf_last, s);
    grad->backward(dy, u, pre, post, skip, du, dk, dpre, dpost, dskip, s);
    return;
  }
  if (fourstep) {  // passes A (v, dz), B' (dV̂, dK̂ summed over b, Ẑ for dpost), C (three epilogues)
    fourstep::backward(dtype, fs, dy, u, pre, post, skip, khat.as<float2>(), slotA.as<float2>(), slotB.as<float2>(),
                       dkhat.as<float2>(), du, dk, dpre, dpost, dskip, B, H, L, Lk, Lmin, s);
    return;
  }
  const int64_t rows = B * H, ld = 2 * nf;
  if (fused) {
    // dK̂ partials per batch chunk, summed and scaled into dkhat, then the cuFFT path's C2R on
    // H rows and its filter_grad.
    fused::backward(dtype, bwd_launch, dy, u, pre, post, skip, khat.as<float2>(), dkpart.as<float2>(),
                    vh.as<float2>(), du, dpre, dpost, B, H, L, s);
    fused::reduce_dk(dkpart.as<float2>(), bwd_launch.nchunk, H, nf, 1.f / float(nfft), dkhat.as<float2>(), s);
    STRUX_CUFFT(cufftSetStream(c2r_h.get(), s));
    F::inverse(c2r_h.get(), dkhat.as<C>(), dkhat.as<Tc>());
    k::filter_grad<T, Tc><<<grid2(Lk, H, k::kThreads), k::kThreads, 0, s>>>(dkhat.as<Tc>(), ld, H, Lk, Lmin, dk,
                                                                             dskip);
    STRUX_LAUNCH("fftconv filter_grad");
    return;
  }
  Tc* a = slotA.as<Tc>();
  Tc* g = slotB.as<Tc>();
  const dim3 gp = grid2(nfft, rows, k::kThreads);
  k::pad<T, Tc><<<gp, k::kThreads, 0, s>>>(u, pre, rows, L, L, nfft, ld, Tc(1), a);
  STRUX_LAUNCH("fftconv pad(v)");
  k::pad<T, Tc><<<gp, k::kThreads, 0, s>>>(dy, post, rows, L, L, nfft, ld, Tc(1), g);
  STRUX_LAUNCH("fftconv pad(dz)");
  STRUX_CUFFT(cufftSetStream(r2c_rows.get(), s));
  STRUX_CUFFT(cufftSetStream(c2r_rows.get(), s));
  STRUX_CUFFT(cufftSetStream(c2r_h.get(), s));
  F::forward(r2c_rows.get(), a, slotA.as<C>());
  F::forward(r2c_rows.get(), g, slotB.as<C>());
  const bool need_z = dpost != nullptr;
  k::backward_spectra<C, Tc><<<grid2(nf, H, 128), 128, 0, s>>>(slotA.as<C>(), slotB.as<C>(), khat.as<C>(),
                                                                dkhat.as<C>(), B, H, nf, need_z, Tc(1) / Tc(nfft));
  STRUX_LAUNCH("fftconv backward_spectra");
  F::inverse(c2r_rows.get(), slotB.as<C>(), g);
  if (need_z) F::inverse(c2r_rows.get(), slotA.as<C>(), a);
  F::inverse(c2r_h.get(), dkhat.as<C>(), dkhat.as<Tc>());
  k::epilogue_backward<T, Tc><<<grid2(L, rows, k::kThreads), k::kThreads, 0, s>>>(
      g, a, ld, dy, u, pre, post, skip, rows, H, L, du, dpre, dpost);
  STRUX_LAUNCH("fftconv epilogue_backward");
  k::filter_grad<T, Tc><<<grid2(Lk, H, k::kThreads), k::kThreads, 0, s>>>(dkhat.as<Tc>(), ld, H, Lk, Lmin, dk,
                                                                           dskip);
  STRUX_LAUNCH("fftconv filter_grad");
}

// ---- dtype dispatch -----------------------------------------------------------------------------
#define STRUX_DISPATCH(dtype, CALL)                      \
  switch (dtype) {                                       \
    case DType::f32: { using T = float; CALL; break; }   \
    case DType::f64: { using T = double; CALL; break; }  \
    case DType::f16: { using T = __half; CALL; break; }  \
    case DType::bf16: { using T = __nv_bfloat16; CALL; break; } \
    default: throw TypeError(msg("fftconv: unsupported dtype ", dtype_name(dtype))); \
  }

void FFTConvPlan::set_filter(const void* kf, Stream s) {
  check_arg(kf != nullptr, "k", "expected a device pointer, got null");
  STRUX_DISPATCH(impl_->dtype, impl_->set_filter<T>(static_cast<const T*>(kf), s));
}

void FFTConvPlan::forward(const void* u, const void* pre, const void* post, const void* skip, void* y, Stream s) {
  check_arg(u != nullptr, "u", "expected a device pointer, got null");
  check_arg(y != nullptr, "y", "expected a device pointer, got null");
  STRUX_DISPATCH(impl_->dtype,
                 impl_->forward<T>(static_cast<const T*>(u), static_cast<const T*>(pre), static_cast<const T*>(post),
                                   static_cast<const T*>(skip), static_cast<T*>(y), s));
}

void FFTConvPlan::forward(const void* k, const void* u, const void* pre, const void* post, const void* skip,
                          void* y, Stream s) {
  Impl& p = *impl_;
  // One CTA per h (nchunk = 1) transforms its own filter row inside the forward kernel: one
  // launch per call instead of two, and no spectrum computed twice.
  if (!p.fused || p.fwd_launch.nchunk != 1) {
    set_filter(k, s);
    forward(u, pre, post, skip, y, s);
    return;
  }
  check_arg(k != nullptr, "k", "expected a device pointer, got null");
  check_arg(u != nullptr, "u", "expected a device pointer, got null");
  check_arg(y != nullptr, "y", "expected a device pointer, got null");
  const fused::OwnFilter own{k, p.Lk, p.Lmin, 1.f / float(p.nfft)};
  STRUX_DISPATCH(p.dtype, p.forward<T>(static_cast<const T*>(u), static_cast<const T*>(pre),
                                       static_cast<const T*>(post), static_cast<const T*>(skip), static_cast<T*>(y),
                                       s, own));
}

void FFTConvPlan::backward(const void* dy, const void* u, const void* pre, const void* post, const void* skip,
                           void* du, void* dk, void* dpre, void* dpost, void* dskip, Stream s) {
  check_arg(dy != nullptr, "dy", "expected a device pointer, got null");
  check_arg(u != nullptr, "u", "expected a device pointer, got null");
  check_arg(du != nullptr, "du", "expected a device pointer, got null");
  check_arg(dk != nullptr, "dk", "expected a device pointer, got null");
  STRUX_DISPATCH(impl_->dtype,
                 impl_->backward<T>(static_cast<const T*>(dy), static_cast<const T*>(u), static_cast<const T*>(pre),
                                    static_cast<const T*>(post), static_cast<const T*>(skip), static_cast<T*>(du),
                                    static_cast<T*>(dk), static_cast<T*>(dpre), static_cast<T*>(dpost),
                                    static_cast<T*>(dskip), s));
}

}  // namespace strux::cuda
