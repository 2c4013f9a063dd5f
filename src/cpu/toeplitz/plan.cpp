// BlockToeplitzPlan: Fhat once, then FFT -> per-frequency complex GEMV/GEMM -> inverse FFT.
#include <climits>
#include <mutex>
#include <type_traits>

#include "core/checked_size.hpp"
#include "cpu/fft.hpp"
#include "cpu/toeplitz/blas.hpp"
#include "cpu/toeplitz/columns.hpp"
#include "cpu/toeplitz/mixed.hpp"
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


namespace {

// Everything one product needs besides Fhat: the input and output spectra (frequency-major)
// and one tile scratch per thread.
template <class T>
struct Workspace {
  AlignedBuffer<cplx<T>> in, out;
  std::vector<cpu::toeplitz::TileScratch<T>> tiles;

  // Everything is allocated here, before the parallel region: an allocation failing inside
  // one would throw across OpenMP and terminate the process.
  void prepare(int64_t n_in, int64_t n_out, int nthreads, int64_t nfft) {
    if (in.size() < n_in) in = AlignedBuffer<cplx<T>>(n_in);
    if (out.size() < n_out) out = AlignedBuffer<cplx<T>>(n_out);
    if (int(tiles.size()) < nthreads) tiles.resize(size_t(nthreads));
    for (auto& t : tiles) t.ensure(nfft);
  }
};

}  // namespace

template <class T>
struct BlockToeplitzPlan<T>::Impl {
  int64_t nt = 0, nd = 0, nm = 0, nfft = 0, nfreq = 0;
  std::shared_ptr<const RealFFT<T>> fft;
  AlignedBuffer<cplx<T>> fhat;  // (nfreq, nd, nm), scaled by 1/nfft
  ToeplitzPrecision precision;   // resolved
  // Every precision but the plain one: F̂ and the products live here (fhat stays empty).
  std::unique_ptr<cpu::toeplitz::MixedProduct> mixed;

  // Kept between calls so that the hot path neither allocates nor page-faults megabytes each
  // time. A call that finds it busy (another thread using the plan) makes its own.
  std::mutex ws_mutex;
  Workspace<T> ws;
};

namespace {

// The plan's workspace when free, else a private one.
template <class Impl, class T>
struct ScopedWorkspace {
  std::unique_lock<std::mutex> lock;
  Workspace<T> own;
  Workspace<T>* w;
  explicit ScopedWorkspace(Impl& p) : lock(p.ws_mutex, std::try_to_lock) {
    w = lock.owns_lock() ? &p.ws : &own;
  }
};

// Pointers and R; the vectors (nt, max(nd, nm), R) and the spectra (nfreq, max(nd, nm), R) of
// complex double must be addressable, and R must fit the 32-bit BLAS sizes (a BLAS that gets a
// negative size prints a message and returns without writing the output).
void check_apply_args(const void* x, const char* xname, const void* y, const char* yname, int64_t R, int64_t nt,
                      int64_t nfreq, int64_t nd, int64_t nm) {
  check_arg(x != nullptr, xname, "expected a data pointer, got null");
  check_arg(y != nullptr, yname, "expected a data pointer, got null");
  check_arg(R >= 1, "R", "expected the number of right-hand sides >= 1, got ", R);
  check_arg(R <= INT32_MAX, "R", "expected at most 2^31-1 right-hand sides (BLAS sizes), got ", R);
  const int64_t n = std::max(nd, nm);
  checked_count("R", {nt, n, R});
  checked_bytes("R", {nfreq, n, R}, int64_t(sizeof(std::complex<double>)));
}

// y = F x (adjoint: y = F^T x). One parallel region for the three phases, so a product pays
// one fork/join and two barriers: on a busy machine each fork/join can wait a whole time slice.
template <class T, class Impl>
void apply(Impl& p, const T* x, T* y, int64_t R, ToeplitzLayout layout, bool adjoint) {
  const int64_t nf = p.nfreq, nd = p.nd, nm = p.nm;
  const int64_t n_in = adjoint ? nd : nm, n_out = adjoint ? nm : nd;
  const Columns cin{n_in, R, p.nt, layout}, cout{n_out, R, p.nt, layout};
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int nth = cpu::num_threads();
  ScopedWorkspace<Impl, T> sw(p);
  Workspace<T>& w = *sw.w;
  w.prepare(nf * n_in * R, nf * n_out * R, nth, p.nfft);
  const cplx<T>* F = p.fhat.data();
  cplx<T>* X = w.in.data();
  cplx<T>* Y = w.out.data();
  const cplx<T> one(1);
  const RealFFT<T>& fft = *p.fft;
#pragma omp parallel num_threads(nth) if (nth > 1)
  {
    cpu::toeplitz::serial_blas_in_region();
    auto& ts = w.tiles[size_t(cpu::toeplitz::thread_index())];
    cpu::toeplitz::forward_columns(fft, x, cin, X, T(1), ts);
    // Frequencies are independent. For the adjoint, F^T in time is Fhat[f]^H per frequency of
    // the half spectrum (F is real): ConjTrans on the same stored Fhat, no transposed copy.
    // Dynamic: a thread that loses its core mid-loop leaves its frequencies to the others.
#pragma omp for schedule(dynamic, 4)
    for (int64_t f = 0; f < nf; ++f) {
      const cplx<T>* Ff = F + f * nd * nm;
      const cplx<T>* Xf = X + f * n_in * R;
      cplx<T>* Yf = Y + f * n_out * R;
      if (!adjoint) {
        if (R == 1)
          cpu::toeplitz::gemv(CblasNoTrans, nd, nm, one, Ff, nm, Xf, Yf);
        else
          cpu::toeplitz::gemm(CblasNoTrans, CblasNoTrans, nd, R, nm, one, Ff, nm, Xf, R, Yf, R);
      } else {
        if (R == 1)
          cpu::toeplitz::gemv(CblasConjTrans, nd, nm, one, Ff, nm, Xf, Yf);
        else
          cpu::toeplitz::gemm(CblasConjTrans, CblasNoTrans, nm, R, nd, one, Ff, nm, Xf, R, Yf, R);
      }
    }
    cpu::toeplitz::inverse_columns(fft, Y, cout, y, ts);
  }
}

}  // namespace

template <class T>
BlockToeplitzPlan<T>::BlockToeplitzPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

template <class T>
BlockToeplitzPlan<T>::BlockToeplitzPlan(const T* blocks, int64_t nt, int64_t nd, int64_t nm)
    : BlockToeplitzPlan(blocks, nt, nd, nm, ToeplitzPrecision{}) {}

template <class T>
BlockToeplitzPlan<T>::BlockToeplitzPlan(const T* blocks, int64_t nt, int64_t nd, int64_t nm,
                                        const ToeplitzPrecision& precision)
    : impl_(std::make_unique<Impl>()) {
  check_arg(blocks != nullptr, "blocks", "expected a data pointer, got null");
  check_positive(nt, "Nt");
  check_positive(nd, "Nd");
  check_positive(nm, "Nm");
  checked_bytes("blocks", {nt, nd, nm}, sizeof(T));
  // FFTW transforms take 32-bit sizes.
  check_arg(nt <= (int64_t(INT32_MAX) + 1) / 2, "blocks", "expected Nt <= 2^30 (the FFT of 2 Nt - 1 points ",
            "must fit FFTW's 32-bit sizes), got Nt = ", nt);
  checked_bytes("blocks", {nt + 1, nd, nm}, sizeof(cplx<T>));
  Impl& p = *impl_;
  p.nt = nt;
  p.nd = nd;
  p.nm = nm;
  constexpr bool dbl = std::is_same_v<T, double>;
  p.precision = resolve_toeplitz_precision(precision, dbl);
  if (!is_plain_toeplitz_precision(p.precision, dbl)) {
    p.mixed = std::make_unique<cpu::toeplitz::MixedProduct>(blocks, nt, nd, nm, p.precision);
    p.nfft = p.mixed->nfft();
    p.nfreq = p.mixed->nfreq();
    p.fft = RealFFT<T>::get(p.nfft);  // grad_blocks' transforms stay in T
    return;
  }
  // 2 Nt - 1 is the shortest circulant whose wrap-around misses the first Nt outputs.
  p.nfft = cpu::good_fft_size(2 * nt - 1);
  p.fft = RealFFT<T>::get(p.nfft);
  p.nfreq = p.fft->nfreq();
  p.fhat = AlignedBuffer<cplx<T>>(p.nfreq * nd * nm);
  // Every (row, col) entry of the blocks is one time series: time-major columns of count nd*nm.
  const Columns cols{nd * nm, 1, nt, ToeplitzLayout::TimeMajor};
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  Workspace<T> w;
  const int nth = cpu::num_threads();
  w.prepare(0, 0, nth, p.nfft);
#pragma omp parallel num_threads(nth) if (nth > 1)
  cpu::toeplitz::forward_columns(*p.fft, blocks, cols, p.fhat.data(), T(1) / T(p.nfft),
                                 w.tiles[size_t(cpu::toeplitz::thread_index())]);
}

template <class T>
BlockToeplitzPlan<T> BlockToeplitzPlan<T>::from_lti(const T* A, const T* B, const T* C, const T* D,
                                                    int64_t ns, int64_t nd, int64_t nm, int64_t nt) {
  check_positive(nt, "nt");
  check_positive(nd, "Nd");
  check_positive(nm, "Nm");
  std::vector<T> blocks(size_t(checked_bytes("nt", {nt, nd, nm}, sizeof(T)) / int64_t(sizeof(T))));
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
  if (!impl_->mixed) return impl_->fhat.data();
  const std::complex<T>* f = impl_->mixed->template spectrum<T>();
  check_arg(f != nullptr, "spectrum", "F̂ is stored in another type than complex of the plan's dtype (",
            describe_toeplitz_precision(impl_->precision, std::is_same_v<T, double>), ")");
  return f;
}

template <class T>
const ToeplitzPrecision& BlockToeplitzPlan<T>::precision() const {
  return impl_->precision;
}

template <class T>
int64_t BlockToeplitzPlan<T>::spectrum_bytes() const {
  return impl_->mixed ? impl_->mixed->spectrum_bytes() : impl_->fhat.size() * int64_t(sizeof(cplx<T>));
}

template <class T>
void BlockToeplitzPlan<T>::matvec(const T* m, T* d, int64_t R, ToeplitzLayout layout) const {
  check_apply_args(m, "m", d, "d", R, impl_->nt, impl_->nfreq, impl_->nd, impl_->nm);
  if (impl_->mixed) return impl_->mixed->apply(m, d, R, layout, false);
  apply(*impl_, m, d, R, layout, false);
}

template <class T>
void BlockToeplitzPlan<T>::rmatvec(const T* d, T* m, int64_t R, ToeplitzLayout layout) const {
  check_apply_args(d, "d", m, "m", R, impl_->nt, impl_->nfreq, impl_->nd, impl_->nm);
  if (impl_->mixed) return impl_->mixed->apply(d, m, R, layout, true);
  apply(*impl_, d, m, R, layout, true);
}

template <class T>
void BlockToeplitzPlan<T>::grad_blocks(const T* m, const T* dd, T* dblocks, int64_t R,
                                       ToeplitzLayout layout) const {
  check_apply_args(m, "m", dd, "dd", R, impl_->nt, impl_->nfreq, impl_->nd, impl_->nm);
  check_arg(dblocks != nullptr, "dblocks", "expected a data pointer, got null");
  Impl& p = *impl_;
  const int64_t nf = p.nfreq, nd = p.nd, nm = p.nm;
  // A gradient call, not the hot matvec: plain buffers.
  AlignedBuffer<cplx<T>> mh(nf * nm * R), dh(nf * nd * R), g(nf * nd * nm);
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  Workspace<T> w;
  const int nth = cpu::num_threads();
  w.prepare(0, 0, nth, p.nfft);
  // Cross-correlation c[k] = sum_i dd[i] m[i-k]^T is DD[f] M[f]^H per frequency; with
  // nfft >= 2 Nt - 1 the negative lags wrap past index Nt - 1 and never reach k < Nt.
  const cplx<T> alpha(T(1) / T(p.nfft));
  const RealFFT<T>& fft = *p.fft;
#pragma omp parallel num_threads(nth) if (nth > 1)
  {
    cpu::toeplitz::serial_blas_in_region();
    auto& ts = w.tiles[size_t(cpu::toeplitz::thread_index())];
    cpu::toeplitz::forward_columns(fft, m, Columns{nm, R, p.nt, layout}, mh.data(), T(1), ts);
    cpu::toeplitz::forward_columns(fft, dd, Columns{nd, R, p.nt, layout}, dh.data(), T(1), ts);
#pragma omp for schedule(dynamic, 4)
    for (int64_t f = 0; f < nf; ++f)
      cpu::toeplitz::gemm(CblasNoTrans, CblasConjTrans, nd, nm, R, alpha, dh.data() + f * nd * R, R,
                          mh.data() + f * nm * R, R, g.data() + f * nd * nm, nm);
    cpu::toeplitz::inverse_columns(fft, g.data(), Columns{nd * nm, 1, p.nt, ToeplitzLayout::TimeMajor},
                                   dblocks, ts);
  }
}

template class BlockToeplitzPlan<float>;
template class BlockToeplitzPlan<double>;

}  // namespace strux
