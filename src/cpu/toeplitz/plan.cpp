// BlockToeplitzPlan: Fhat once, then FFT -> per-frequency complex GEMV/GEMM -> inverse FFT.
#include <mutex>

#include "cpu/fft.hpp"
#include "cpu/toeplitz/blas.hpp"
#include "cpu/toeplitz/columns.hpp"
#include "strux/toeplitz.hpp"

namespace strux {

using cpu::AlignedBuffer;
using cpu::cplx;
using cpu::RealFFT;
using cpu::toeplitz::Columns;

ToeplitzLayout parse_toeplitz_layout(const std::string& s) {
  if (s == "time-major") return ToeplitzLayout::TimeMajor;
  if (s == "space-major") return ToeplitzLayout::SpaceMajor;
  throw ValueError(msg("argument 'layout': expected one of 'time-major', 'space-major', got '", s, "'"));
}

const char* toeplitz_layout_name(ToeplitzLayout layout) {
  return layout == ToeplitzLayout::TimeMajor ? "time-major" : "space-major";
}

template <class T>
struct BlockToeplitzPlan<T>::Impl {
  int64_t nt = 0, nd = 0, nm = 0, nfft = 0, nfreq = 0;
  std::shared_ptr<const RealFFT<T>> fft;
  AlignedBuffer<cplx<T>> fhat;  // (nfreq, nd, nm), scaled by 1/nfft

  // Spectra of the input and output series, kept between calls so that the hot path does not
  // allocate (and page-fault) megabytes each time. A call that finds them busy (another thread)
  // allocates its own.
  std::mutex ws_mutex;
  AlignedBuffer<cplx<T>> ws_in, ws_out;
};

namespace {

// Scratch spectra for one call: the plan's cached pair when free, else fresh buffers.
template <class Impl, class C>
struct Scratch {
  std::unique_lock<std::mutex> lock;
  AlignedBuffer<C> own_in, own_out;
  C* in = nullptr;
  C* out = nullptr;

  Scratch(Impl& p, int64_t n_in, int64_t n_out) : lock(p.ws_mutex, std::try_to_lock) {
    if (lock.owns_lock()) {
      if (p.ws_in.size() < n_in) p.ws_in = AlignedBuffer<C>(n_in);
      if (p.ws_out.size() < n_out) p.ws_out = AlignedBuffer<C>(n_out);
      in = p.ws_in.data();
      out = p.ws_out.data();
    } else {
      own_in = AlignedBuffer<C>(n_in);
      own_out = AlignedBuffer<C>(n_out);
      in = own_in.data();
      out = own_out.data();
    }
  }
};

void check_apply_args(const void* x, const char* xname, const void* y, const char* yname, int64_t R) {
  check_arg(x != nullptr, xname, "expected a data pointer, got null");
  check_arg(y != nullptr, yname, "expected a data pointer, got null");
  check_arg(R >= 1, "R", "expected the number of right-hand sides >= 1, got ", R);
}

}  // namespace

template <class T>
BlockToeplitzPlan<T>::BlockToeplitzPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

template <class T>
BlockToeplitzPlan<T>::BlockToeplitzPlan(const T* blocks, int64_t nt, int64_t nd, int64_t nm)
    : impl_(std::make_unique<Impl>()) {
  check_arg(blocks != nullptr, "blocks", "expected a data pointer, got null");
  check_positive(nt, "Nt");
  check_positive(nd, "Nd");
  check_positive(nm, "Nm");
  Impl& p = *impl_;
  p.nt = nt;
  p.nd = nd;
  p.nm = nm;
  // 2 Nt - 1 is the shortest circulant whose wrap-around misses the first Nt outputs.
  p.nfft = cpu::good_fft_size(2 * nt - 1);
  p.fft = RealFFT<T>::get(p.nfft);
  p.nfreq = p.fft->nfreq();
  p.fhat = AlignedBuffer<cplx<T>>(p.nfreq * nd * nm);
  // Every (row, col) entry of the blocks is one time series: time-major columns of count nd*nm.
  const Columns cols{nd * nm, 1, nt, ToeplitzLayout::TimeMajor};
  cpu::toeplitz::forward_columns(*p.fft, blocks, cols, p.fhat.data(), T(1) / T(p.nfft));
}

template <class T>
BlockToeplitzPlan<T> BlockToeplitzPlan<T>::from_lti(const T* A, const T* B, const T* C, const T* D,
                                                    int64_t ns, int64_t nd, int64_t nm, int64_t nt) {
  check_positive(nt, "nt");
  check_positive(nd, "Nd");
  check_positive(nm, "Nm");
  std::vector<T> blocks(size_t(nt * nd * nm));
  lti_blocks(A, B, C, D, ns, nd, nm, nt, blocks.data());
  return BlockToeplitzPlan(blocks.data(), nt, nd, nm);
}

template <class T>
BlockToeplitzPlan<T>::BlockToeplitzPlan(BlockToeplitzPlan&&) noexcept = default;
template <class T>
BlockToeplitzPlan<T>& BlockToeplitzPlan<T>::operator=(BlockToeplitzPlan&&) noexcept = default;
template <class T>
BlockToeplitzPlan<T>::~BlockToeplitzPlan() = default;

template <class T> int64_t BlockToeplitzPlan<T>::nt() const { return impl_->nt; }
template <class T> int64_t BlockToeplitzPlan<T>::nd() const { return impl_->nd; }
template <class T> int64_t BlockToeplitzPlan<T>::nm() const { return impl_->nm; }
template <class T> int64_t BlockToeplitzPlan<T>::nfft() const { return impl_->nfft; }
template <class T> int64_t BlockToeplitzPlan<T>::nfreq() const { return impl_->nfreq; }
template <class T>
const std::complex<T>* BlockToeplitzPlan<T>::spectrum() const {
  return impl_->fhat.data();
}

template <class T>
void BlockToeplitzPlan<T>::matvec(const T* m, T* d, int64_t R, ToeplitzLayout layout) const {
  check_apply_args(m, "m", d, "d", R);
  Impl& p = *impl_;
  const int64_t nf = p.nfreq, nd = p.nd, nm = p.nm;
  Scratch<Impl, cplx<T>> s(p, nf * nm * R, nf * nd * R);
  cpu::toeplitz::forward_columns(*p.fft, m, Columns{nm, R, p.nt, layout}, s.in, T(1));
  const cplx<T>* F = p.fhat.data();
  const cplx<T> one(1);
  // Frequencies are independent; BLAS runs serially inside the parallel region.
#pragma omp parallel for num_threads(cpu::num_threads()) schedule(static)
  for (int64_t f = 0; f < nf; ++f) {
    const cplx<T>* Ff = F + f * nd * nm;
    if (R == 1)
      cpu::toeplitz::gemv(CblasNoTrans, nd, nm, one, Ff, nm, s.in + f * nm, s.out + f * nd);
    else
      cpu::toeplitz::gemm(CblasNoTrans, CblasNoTrans, nd, R, nm, one, Ff, nm, s.in + f * nm * R, R,
                          s.out + f * nd * R, R);
  }
  cpu::toeplitz::inverse_columns(*p.fft, s.out, Columns{nd, R, p.nt, layout}, d);
}

template <class T>
void BlockToeplitzPlan<T>::rmatvec(const T* d, T* m, int64_t R, ToeplitzLayout layout) const {
  check_apply_args(d, "d", m, "m", R);
  Impl& p = *impl_;
  const int64_t nf = p.nfreq, nd = p.nd, nm = p.nm;
  Scratch<Impl, cplx<T>> s(p, nf * nd * R, nf * nm * R);
  cpu::toeplitz::forward_columns(*p.fft, d, Columns{nd, R, p.nt, layout}, s.in, T(1));
  const cplx<T>* F = p.fhat.data();
  const cplx<T> one(1);
  // F^T in time is Fhat[f]^H per frequency of the half spectrum (F real): ConjTrans on the same
  // stored Fhat.
#pragma omp parallel for num_threads(cpu::num_threads()) schedule(static)
  for (int64_t f = 0; f < nf; ++f) {
    const cplx<T>* Ff = F + f * nd * nm;
    if (R == 1)
      cpu::toeplitz::gemv(CblasConjTrans, nd, nm, one, Ff, nm, s.in + f * nd, s.out + f * nm);
    else
      cpu::toeplitz::gemm(CblasConjTrans, CblasNoTrans, nm, R, nd, one, Ff, nm, s.in + f * nd * R, R,
                          s.out + f * nm * R, R);
  }
  cpu::toeplitz::inverse_columns(*p.fft, s.out, Columns{nm, R, p.nt, layout}, m);
}

template <class T>
void BlockToeplitzPlan<T>::grad_blocks(const T* m, const T* dd, T* dblocks, int64_t R,
                                       ToeplitzLayout layout) const {
  check_apply_args(m, "m", dd, "dd", R);
  check_arg(dblocks != nullptr, "dblocks", "expected a data pointer, got null");
  Impl& p = *impl_;
  const int64_t nf = p.nfreq, nd = p.nd, nm = p.nm;
  // A gradient call, not the hot matvec: plain buffers.
  AlignedBuffer<cplx<T>> mh(nf * nm * R), dh(nf * nd * R), g(nf * nd * nm);
  cpu::toeplitz::forward_columns(*p.fft, m, Columns{nm, R, p.nt, layout}, mh.data(), T(1));
  cpu::toeplitz::forward_columns(*p.fft, dd, Columns{nd, R, p.nt, layout}, dh.data(), T(1));
  // Cross-correlation c[k] = sum_i dd[i] m[i-k]^T is DD[f] M[f]^H per frequency; with
  // nfft >= 2 Nt - 1 the negative lags wrap past index Nt - 1 and never reach k < Nt.
  const cplx<T> alpha(T(1) / T(p.nfft));
#pragma omp parallel for num_threads(cpu::num_threads()) schedule(static)
  for (int64_t f = 0; f < nf; ++f)
    cpu::toeplitz::gemm(CblasNoTrans, CblasConjTrans, nd, nm, R, alpha, dh.data() + f * nd * R, R,
                        mh.data() + f * nm * R, R, g.data() + f * nd * nm, nm);
  cpu::toeplitz::inverse_columns(*p.fft, g.data(), Columns{nd * nm, 1, p.nt, ToeplitzLayout::TimeMajor},
                                 dblocks);
}

template class BlockToeplitzPlan<float>;
template class BlockToeplitzPlan<double>;

}  // namespace strux
