// Circulant scan h_t = circ(a_t) h_{t-1} + u_t through the real DFT along n.
//
// rfft diagonalises every circ(a_t) at once (circ(a) x = a (*) x, cyclic convolution), so the
// recurrence becomes n/2 + 1 independent complex diagonal recurrences
//   H_t = A_t H_{t-1} + U_t,  A_t = rfft(a_t), U_t = rfft(u_t), H_{-1} = rfft(h0),
// run by the diagonal-scan kernels on the padded spectra, then h_t = irfft(H_t) / n.
// Backward, with G_t = rfft(g_t), D_t = rfft(dh_t): G_t = D_t + conj(A_{t+1}) G_{t+1}
// (circ(a)^T = circ(reversed a) has spectrum conj(A)), du_t = irfft(G_t) / n,
// dh0 = irfft(conj(A_0) G_0) / n, and da_t[m] = sum_i g_t[i] h_{t-1}[i - m] (a cyclic
// cross-correlation) = irfft(G_t conj(H_{t-1})) / n. That is exactly the complex diagonal
// backward pass with (dh, a, b, h0) = (D, A, U, H_{-1}), so it is reused as is.
#include <algorithm>
#include <complex>
#include <vector>

#include "core/checked_size.hpp"
#include "cpu/fft.hpp"
#include "cpu/scan/dft.hpp"
#include "cpu/scan/kernels.hpp"
#include "cpu/scan/spectra.hpp"
#include "strux/core.hpp"
#include "strux/scan.hpp"

namespace strux {

using cpu::AlignedBuffer;
using cpu::RealFFT;
namespace kern = cpu::scan;

template <class R>
CirculantScan<R>::CirculantScan(int64_t B, int64_t T_, int64_t n) : B_(B), T_(T_), n_(n) {
  check_positive(B, "B");
  check_positive(T_, "T");
  check_positive(n, "n");
  // (B, T, n) real and (B, T, n/2 + 1) complex arrays (and their spectra) must be addressable.
  checked_count("n", {B, T_, n, int64_t(sizeof(R))});
  checked_count("n", {B, T_, n / 2 + 1, int64_t(sizeof(std::complex<R>))});
  dft_ = kern::ShortDft<R>::get(n);
  nfs_ = kern::padded_stride<R>(n / 2 + 1, dft_ != nullptr);
  fft_ = RealFFT<R>::get(n);
}

template <class R>
const char* CirculantScan<R>::dft_name() const {
  return dft_ ? dft_->describe() : "FFTW";
}

namespace {
// Spectra of the a rows of one time block: rfft of the spatial form, or a copy of the user's
// half spectrum dropping the imaginary parts at frequency 0 and n/2 (even n): the Fourier form
// means circ(irfft(a_hat, n)), as numpy's irfft. Local row r = b*tb + (t - t0).
template <bool Fourier, class R, class A>
void load_a(const kern::Transform<R>& fft, const A* a, int64_t B, int64_t T, int64_t t0, int64_t tb, int64_t nfs,
            std::complex<R>* dst) {
  const int64_t n = fft.n(), nf = n / 2 + 1, rows = B * tb;
  auto grow = [=](int64_t r) { return (r / tb) * T + t0 + r % tb; };
  if constexpr (Fourier) {
#pragma omp parallel for schedule(dynamic, 16) num_threads(cpu::num_threads())
    for (int64_t r = 0; r < rows; ++r) {
      const std::complex<R>* s = a + grow(r) * nf;
      std::complex<R>* d = dst + r * nfs;
      for (int64_t f = 0; f < nf; ++f) d[f] = s[f];
      for (int64_t f = nf; f < nfs; ++f) d[f] = 0;
      d[0].imag(0);
      if (n % 2 == 0) d[nf - 1].imag(0);
    }
  } else if (const auto* dft = fft.dft) {  // the rows of each b are contiguous
    dft->forward(a + t0 * n, T * n, B, tb, dst, nfs);
  } else {
    kern::rfft_rows(fft.fft, rows, nfs, dst, [=](int64_t r, R* x) { kern::copy_add<R>(a + grow(r) * n, nullptr, x, n); });
  }
}

// rfft of rows of a (B, T, n) real array for one time block (+ `last` (B, n) added at t = T-1).
template <class R>
void load_rows(const kern::Transform<R>& fft, const R* src, const R* last, int64_t B, int64_t T, int64_t t0, int64_t tb,
               int64_t nfs, std::complex<R>* dst) {
  const int64_t n = fft.n();
  if (const auto* dft = fft.dft) {
    dft->forward(src + t0 * n, T * n, B, tb, dst, nfs);
    if (last && t0 + tb == T) {  // + rfft(last) at t = T-1, by linearity
      std::vector<std::complex<R>> sp(size_t(B * nfs));
      dft->forward(last, n, B, 1, sp.data(), nfs);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t f = 0; f < nfs; ++f) dst[(b * tb + tb - 1) * nfs + f] += sp[size_t(b * nfs + f)];
    }
    return;
  }
  kern::rfft_rows(fft.fft, B * tb, nfs, dst, [=](int64_t r, R* x) {
    const int64_t b = r / tb, t = t0 + r % tb;
    kern::copy_add<R>(src + (b * T + t) * n, (last && t == T - 1) ? last + b * n : nullptr, x, n);
  });
}

// irfft / n of the rows of one time block into a (B, T, n) real array (rows are destroyed).
template <class R>
void store_rows(const kern::Transform<R>& fft, std::complex<R>* src, int64_t B, int64_t T, int64_t t0, int64_t tb,
                int64_t nfs, R* dst) {
  const int64_t n = fft.n();
  const R scale = R(1) / R(n);
  if (const auto* dft = fft.dft) return dft->inverse(src, nfs, B, tb, dst + t0 * n, T * n, scale);
  kern::irfft_rows(fft.fft, B * tb, nfs, src, [=](int64_t r, const R* x) {
    R* y = dst + ((r / tb) * T + t0 + r % tb) * n;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  });
}

// carry[b] = rows[b*tb + tb - 1]: the state at the end of a block.
template <class C>
void copy_last(const C* rows, int64_t B, int64_t tb, int64_t nfs, C* carry) {
  for (int64_t b = 0; b < B; ++b) kern::copy_add<C>(rows + (b * tb + tb - 1) * nfs, nullptr, carry + b * nfs, nfs);
}
}  // namespace

// Forward: blocks of tb steps; the state spectrum at the end of a block carries into the next.
template <class R>
template <bool Fourier, class A>
void CirculantScan<R>::run_forward(const A* a, const R* u, const R* h0, R* h) const {
  check_arg(a && u && h, "h", "expected non-null a, u and h");
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int64_t B = B_, T = T_, nfs = nfs_;
  const kern::Transform<R> fft{*fft_, dft_};
  const int64_t Tb = kern::time_block(B, T, 2 * B * nfs * int64_t(sizeof(C)));
  AlignedBuffer<C> Ah(B * Tb * nfs), Hh(B * Tb * nfs), carry(B * nfs);
  if (h0) load_rows<R>(fft, h0, nullptr, B, 1, 0, 1, nfs, carry.data());
  bool have_carry = h0 != nullptr;
  for (int64_t t0 = 0; t0 < T; t0 += Tb) {
    const int64_t tb = std::min(Tb, T - t0);
    load_a<Fourier>(fft, a, B, T, t0, tb, nfs, Ah.data());
    load_rows<R>(fft, u, nullptr, B, T, t0, tb, nfs, Hh.data());
    kern::diag_forward<C>(B, tb, nfs, Ah.data(), Hh.data(), have_carry ? carry.data() : nullptr, Hh.data());
    copy_last(Hh.data(), B, tb, nfs, carry.data());
    have_carry = true;
    store_rows<R>(fft, Hh.data(), B, T, t0, tb, nfs, h);
  }
}

// Backward: a forward sweep keeps only the state at each block start (checkpoints); the reverse
// sweep recomputes each block from its checkpoint inside diag_backward, and passes
// conj(A_{t0}) G_{t0} (the block's "dh0") to the previous block as its dh_last.
template <class R>
template <bool Fourier, class A, class DA>
void CirculantScan<R>::run_backward(const R* dh, const R* dh_last, const A* a, const R* u,
                                    const R* h0, DA* da, R* du, R* dh0) const {
  check_arg(dh && a && u && da && du, "dh", "expected non-null dh, a, u, da and du");
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int64_t B = B_, T = T_, n = n_, nfs = nfs_, nf = n / 2 + 1;
  const kern::Transform<R> fft{*fft_, dft_};
  const int64_t Tb = kern::time_block(B, T, 4 * B * nfs * int64_t(sizeof(C)));
  const int64_t nblk = (T + Tb - 1) / Tb;
  AlignedBuffer<C> Ah(B * Tb * nfs), Uh(B * Tb * nfs), G(B * Tb * nfs), X(B * Tb * nfs);
  AlignedBuffer<C> ckpt(nblk * B * nfs), gin(B * nfs), gout(B * nfs);
  // ckpt block 0 = rfft(h0) (unused without h0); block j > 0 = H_{j*Tb - 1}.
  if (h0) load_rows<R>(fft, h0, nullptr, B, 1, 0, 1, nfs, ckpt.data());
  for (int64_t j = 0; j + 1 < nblk; ++j) {
    const int64_t t0 = j * Tb, tb = Tb;
    const C* prev = (j > 0 || h0) ? ckpt.data() + j * B * nfs : nullptr;
    load_a<Fourier>(fft, a, B, T, t0, tb, nfs, Ah.data());
    load_rows<R>(fft, u, nullptr, B, T, t0, tb, nfs, Uh.data());
    kern::diag_forward<C>(B, tb, nfs, Ah.data(), Uh.data(), prev, Uh.data());
    copy_last(Uh.data(), B, tb, nfs, ckpt.data() + (j + 1) * B * nfs);
  }
  C* carry_in = nullptr;  // conj(A_{t1}) G_{t1} from the later block
  for (int64_t j = nblk - 1; j >= 0; --j) {
    const int64_t t0 = j * Tb, tb = std::min(Tb, T - t0);
    const C* prev = (j > 0 || h0) ? ckpt.data() + j * B * nfs : nullptr;
    load_a<Fourier>(fft, a, B, T, t0, tb, nfs, Ah.data());
    load_rows<R>(fft, u, nullptr, B, T, t0, tb, nfs, Uh.data());
    load_rows<R>(fft, dh, dh_last, B, T, t0, tb, nfs, G.data());
    C* carry_out = (carry_in == gout.data()) ? gin.data() : gout.data();
    const bool need_out = j > 0 || dh0;
    // G: D in, G out (in place); X = G conj(H_{t-1}).
    kern::diag_backward<C>(B, tb, nfs, G.data(), carry_in, Ah.data(), Uh.data(), prev, X.data(), G.data(),
                           need_out ? carry_out : nullptr);
    carry_in = carry_out;
    store_rows<R>(fft, G.data(), B, T, t0, tb, nfs, du);
    if constexpr (Fourier) {
      // dL/dRe + i dL/dIm of a_hat: a = irfft(a_hat) puts 2/n on interior frequencies, 1/n on
      // the real parts at 0 and n/2, and ignores those imaginary parts (see the header).
      const R two = R(2) / R(n), one = R(1) / R(n);
#pragma omp parallel for schedule(dynamic, 16) num_threads(cpu::num_threads())
      for (int64_t r = 0; r < B * tb; ++r) {
        const C* x = X.data() + r * nfs;
        C* y = da + ((r / tb) * T + t0 + r % tb) * nf;
        for (int64_t f = 0; f < nf; ++f) y[f] = x[f] * two;
        y[0] = C(x[0].real() * one, 0);
        if (n % 2 == 0) y[nf - 1] = C(x[nf - 1].real() * one, 0);
      }
    } else {
      store_rows<R>(fft, X.data(), B, T, t0, tb, nfs, da);
    }
  }
  if (dh0) store_rows<R>(fft, carry_in, B, 1, 0, 1, nfs, dh0);
}

template <class R>
void CirculantScan<R>::forward(const R* a, const R* u, const R* h0, R* h) const {
  run_forward<false>(a, u, h0, h);
}
template <class R>
void CirculantScan<R>::forward_fourier(const C* a_hat, const R* u, const R* h0, R* h) const {
  run_forward<true>(a_hat, u, h0, h);
}
template <class R>
void CirculantScan<R>::backward(const R* dh, const R* dh_last, const R* a, const R* u, const R* h0,
                                R* da, R* du, R* dh0) const {
  run_backward<false>(dh, dh_last, a, u, h0, da, du, dh0);
}
template <class R>
void CirculantScan<R>::backward_fourier(const R* dh, const R* dh_last, const C* a_hat, const R* u,
                                        const R* h0, C* da_hat, R* du, R* dh0) const {
  run_backward<true>(dh, dh_last, a_hat, u, h0, da_hat, du, dh0);
}

template class CirculantScan<float>;
template class CirculantScan<double>;

}  // namespace strux
