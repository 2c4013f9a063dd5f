// Block-circulant scan: A_t is a p x p grid of k x k circulant blocks, block (i, j) = circ(a_t[i, j]).
//
// The real DFT along k diagonalises every block at once, so per frequency f the recurrence
// is a p x p complex matrix-vector one:
//   H_t[i, f] = sum_j A_t[i, j, f] H_{t-1}[j, f] + U_t[i, f],   A = rfft(a) along k.
// Spectra are stored (B, T, p, p, kfs) and (B, T, p, kfs) with frequency innermost, so the
// p x p products run as unit-stride element-wise updates over a chunk of frequencies; OpenMP
// splits (batch, frequency chunk).
// Backward (G_t = rfft(g_t)): G_t[j] = D_t[j] + sum_i conj(A_{t+1}[i, j]) G_{t+1}[i]
// (the adjoint: blocks transposed and each circ^T is conj in frequency), du = irfft(G) / k,
// da_t[i, j] = irfft(G_t[i] conj(H_{t-1}[j])) / k, dh0[j] = irfft(sum_i conj(A_0[i, j]) G_0[i]) / k.
// The da spectrum of step t+1 is written over A_{t+1} as soon as G_t has used it, so the
// backward pass needs no buffer beyond the forward one plus G.
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
BlockCirculantScan<R>::BlockCirculantScan(int64_t B, int64_t T_, int64_t p, int64_t k)
    : B_(B), T_(T_), p_(p), k_(k) {
  check_positive(B, "B");
  check_positive(T_, "T");
  check_positive(p, "p");
  check_positive(k, "k");
  // a (B, T, p, p, k) and its spectra (B, T, p, p, k/2 + 1) complex must be addressable.
  checked_count("p", {B, T_, p, p, k, int64_t(sizeof(R))});
  checked_count("p", {B, T_, p, p, k / 2 + 1, int64_t(sizeof(std::complex<R>))});
  dft_ = kern::ShortDft<R>::get(k);
  kfs_ = kern::padded_stride<R>(k / 2 + 1, dft_ != nullptr);
  fft_ = RealFFT<R>::get(k);
}

template <class R>
const char* BlockCirculantScan<R>::dft_name() const {
  return dft_ ? dft_->describe() : "FFTW";
}

namespace {

template <class R>
struct Spectra {
  int64_t B, nt, p, kfs;
  std::complex<R>* A;  // (B, T, p, p, kfs)
  std::complex<R>* H;  // (B, T, p, kfs)
  const std::complex<R>* H0;  // (B, p, kfs) or null
  std::complex<R>* a(int64_t b, int64_t t, int64_t i, int64_t j) const {
    return A + (((b * nt + t) * p + i) * p + j) * kfs;
  }
  std::complex<R>* h(int64_t b, int64_t t, int64_t i) const { return H + ((b * nt + t) * p + i) * kfs; }
};

// H (holding U on entry) becomes the scanned state spectra.
template <class R>
void block_forward_scan(const Spectra<R>& s) {
  using C = std::complex<R>;
  const int64_t chunk = kern::scan_chunk(s.B, s.kfs), nch = (s.kfs + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic) num_threads(cpu::num_threads())
  for (int64_t task = 0; task < s.B * nch; ++task) {
    const int64_t b = task / nch, f0 = (task % nch) * chunk, len = std::min(chunk, s.kfs - f0);
    for (int64_t t = 0; t < s.nt; ++t) {
      if (t == 0 && !s.H0) {  // h_{-1} = 0: H_0 = U_0 + A_0 * 0 (NaN where A_0 is not finite)
        for (int64_t i = 0; i < s.p; ++i)
          for (int64_t j = 0; j < s.p; ++j) kern::add_times_zero(s.a(b, 0, i, j) + f0, s.h(b, 0, i) + f0, len);
        continue;
      }
      for (int64_t i = 0; i < s.p; ++i) {
        C* y = s.h(b, t, i) + f0;
        for (int64_t j = 0; j < s.p; ++j) {
          const C* x = (t == 0 ? s.H0 + (b * s.p + j) * s.kfs : s.h(b, t - 1, j)) + f0;
          kern::fma_inplace(s.a(b, t, i, j) + f0, x, y, len);
        }
      }
    }
  }
}

// G: D on entry, G on exit. A: overwritten by the da spectra X. dH0: conj(A_0)^T G_0 or null.
template <class R>
void block_backward_scan(const Spectra<R>& s, std::complex<R>* Gbuf, std::complex<R>* dH0) {
  using C = std::complex<R>;
  const int64_t chunk = kern::scan_chunk(s.B, s.kfs), nch = (s.kfs + chunk - 1) / chunk;
  const int64_t p = s.p, kfs = s.kfs;
  auto g = [&](int64_t b, int64_t t, int64_t i) { return Gbuf + ((b * s.nt + t) * p + i) * kfs; };
#pragma omp parallel for schedule(dynamic) num_threads(cpu::num_threads())
  for (int64_t task = 0; task < s.B * nch; ++task) {
    const int64_t b = task / nch, f0 = (task % nch) * chunk, len = std::min(chunk, kfs - f0);
    for (int64_t t = s.nt - 2; t >= 0; --t) {
      // G_t += A_{t+1}^H G_{t+1}
      for (int64_t j = 0; j < p; ++j)
        for (int64_t i = 0; i < p; ++i)
          kern::conj_fma_inplace(s.a(b, t + 1, i, j) + f0, g(b, t + 1, i) + f0, g(b, t, j) + f0, len);
      // A_{t+1} is no longer needed: X_{t+1}[i, j] = G_{t+1}[i] conj(H_t[j]) takes its place.
      for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < p; ++j)
          kern::mul_conj(g(b, t + 1, i) + f0, s.h(b, t, j) + f0, s.a(b, t + 1, i, j) + f0, len);
    }
    if (dH0) {
      for (int64_t j = 0; j < p; ++j) {
        C* y = dH0 + (b * p + j) * kfs + f0;
        kern::fill_zero(y, len);
        for (int64_t i = 0; i < p; ++i) kern::conj_fma_inplace(s.a(b, 0, i, j) + f0, g(b, 0, i) + f0, y, len);
      }
    }
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < p; ++j) {
        if (s.H0)
          kern::mul_conj(g(b, 0, i) + f0, s.H0 + (b * p + j) * kfs + f0, s.a(b, 0, i, j) + f0, len);
        else
          kern::fill_zero(s.a(b, 0, i, j) + f0, len);
      }
  }
}

}  // namespace

namespace {
// rfft of the rows of one time block of an array with m rows of k per time step (B, T, m, k),
// + `last` (B, m, k) added at t = T-1. Local row r = (b*tb + t - t0)*m + q.
template <class R>
void load_rows(const kern::Transform<R>& fft, const R* src, const R* last, int64_t B, int64_t T, int64_t m,
               int64_t t0, int64_t tb, int64_t kfs, std::complex<R>* dst) {
  const int64_t k = fft.n();
  if (const auto* dft = fft.dft) {  // the rows of each b are contiguous
    dft->forward(src + t0 * m * k, T * m * k, B, tb * m, dst, kfs);
    if (last && t0 + tb == T) {  // + rfft(last) at t = T-1, by linearity
      std::vector<std::complex<R>> sp(size_t(B * m * kfs));
      dft->forward(last, m * k, B, m, sp.data(), kfs);
      for (int64_t b = 0; b < B; ++b) {
        std::complex<R>* d = dst + (b * tb + tb - 1) * m * kfs;
        for (int64_t i = 0; i < m * kfs; ++i) d[i] += sp[size_t(b * m * kfs + i)];
      }
    }
    return;
  }
  kern::rfft_rows(fft.fft, B * tb * m, kfs, dst, [=](int64_t r, R* x) {
    const int64_t q = r % m, bt = r / m, b = bt / tb, t = t0 + bt % tb;
    kern::copy_add<R>(src + ((b * T + t) * m + q) * k, (last && t == T - 1) ? last + (b * m + q) * k : nullptr, x, k);
  });
}

// irfft / k of the rows of one time block into (B, T, m, k) (rows are destroyed).
template <class R>
void store_rows(const kern::Transform<R>& fft, std::complex<R>* src, int64_t B, int64_t T, int64_t m, int64_t t0,
                int64_t tb, int64_t kfs, R* dst) {
  const int64_t k = fft.n();
  const R scale = R(1) / R(k);
  if (const auto* dft = fft.dft)
    return dft->inverse(src, kfs, B, tb * m, dst + t0 * m * k, T * m * k, scale);
  kern::irfft_rows(fft.fft, B * tb * m, kfs, src, [=](int64_t r, const R* x) {
    const int64_t q = r % m, bt = r / m, b = bt / tb, t = t0 + bt % tb;
    R* y = dst + ((b * T + t) * m + q) * k;
    for (int64_t i = 0; i < k; ++i) y[i] = x[i] * scale;
  });
}

// carry[b] = the p state rows of the last step of a block.
template <class C>
void copy_last(const C* H, int64_t B, int64_t tb, int64_t p, int64_t kfs, C* carry) {
  for (int64_t b = 0; b < B; ++b)
    kern::copy_add<C>(H + (b * tb + tb - 1) * p * kfs, nullptr, carry + b * p * kfs, p * kfs);
}
}  // namespace

namespace {
// Spectra bytes of a block of steps of one item when each thread runs whole items: 256 KiB
// beat 1 MiB by 6-10% at p = 2, 4, 8 (equal at p = 16; bench/NOTES-cpu.md "block-circulant
// p <= 4, 2026-11-27").
constexpr int64_t kItemBlockBytes = int64_t(1) << 18;

// The forward pipeline of B batch items (a, u, h0, h at their first item): blocks of tb steps
// (spectra stay in cache), the state at a block's end carries on. Ah, Hh, carry: workspace of
// Tb steps of the B items.
template <class R>
void forward_items(const kern::Transform<R>& fft, int64_t B, int64_t T, int64_t p, int64_t kfs, int64_t Tb,
                   const R* a, const R* u, const R* h0, R* h, std::complex<R>* Ah, std::complex<R>* Hh,
                   std::complex<R>* carry) {
  if (h0) load_rows<R>(fft, h0, nullptr, B, 1, p, 0, 1, kfs, carry);
  bool have_carry = h0 != nullptr;
  for (int64_t t0 = 0; t0 < T; t0 += Tb) {
    const int64_t tb = std::min(Tb, T - t0);
    load_rows<R>(fft, a, nullptr, B, T, p * p, t0, tb, kfs, Ah);
    load_rows<R>(fft, u, nullptr, B, T, p, t0, tb, kfs, Hh);
    block_forward_scan(Spectra<R>{B, tb, p, kfs, Ah, Hh, have_carry ? carry : nullptr});
    copy_last(Hh, B, tb, p, kfs, carry);
    have_carry = true;
    store_rows<R>(fft, Hh, B, T, p, t0, tb, kfs, h);
  }
}
}  // namespace

// With at least two items per team, each thread runs whole items through the pipeline by
// itself: one parallel region per call instead of four per block of steps, each thread's
// spectra in its own core's cache, and no barrier for a thread that a shared machine
// descheduled to hold up (bench/NOTES-cpu.md "block-circulant p <= 4, 2026-11-27"). Otherwise
// (B = 1, or one thread) the items share every stage, each stage split across the team.
template <class R>
void BlockCirculantScan<R>::forward(const R* a, const R* u, const R* h0, R* h) const {
  check_arg(a && u && h, "h", "expected non-null a, u and h");
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int64_t B = B_, T = T_, p = p_, kfs = kfs_, nth = team.size();
  const kern::Transform<R> fft{*fft_, dft_};
  const int64_t step = (p * p + p) * kfs * int64_t(sizeof(C));  // spectra bytes of one item and step
  if (nth > 1 && B >= 2) {
    const int64_t Tb = kern::time_block(1, T, step, kItemBlockBytes), na = Tb * p * p * kfs, nh = Tb * p * kfs;
    AlignedBuffer<C> Ah(nth * na), Hh(nth * nh), carry(nth * p * kfs);
#pragma omp parallel num_threads(int(nth))
    {
      const cpu::SerialScope serial;
      const int64_t i = cpu::thread_index();
#pragma omp for schedule(dynamic, 1)
      for (int64_t b = 0; b < B; ++b)
        forward_items<R>(fft, 1, T, p, kfs, Tb, a + b * T * p * p * k_, u + b * T * p * k_,
                         h0 ? h0 + b * p * k_ : nullptr, h + b * T * p * k_, Ah.data() + i * na,
                         Hh.data() + i * nh, carry.data() + i * p * kfs);  // item b
    }
    return;
  }
  const int64_t Tb = kern::time_block(B, T, B * step);
  AlignedBuffer<C> Ah(B * Tb * p * p * kfs), Hh(B * Tb * p * kfs), carry(B * p * kfs);
  forward_items<R>(fft, B, T, p, kfs, Tb, a, u, h0, h, Ah.data(), Hh.data(), carry.data());
}

namespace {
// Complex values of the backward pipeline's workspace for B items and blocks of Tb steps:
// A, H and G spectra of a block, a checkpoint per block, two carries.
int64_t backward_workspace(int64_t B, int64_t T, int64_t Tb, int64_t p, int64_t kfs) {
  const int64_t nblk = (T + Tb - 1) / Tb;
  return B * kfs * (Tb * (p * p + 2 * p) + (nblk + 2) * p);
}

// The backward pipeline of B items (every array at its first item): checkpoints of the state
// at each block start from a forward sweep; the reverse sweep recomputes a block's states from
// its checkpoint, adds A_{t1}^H G_{t1} (the later block's "dH0") to its last step, and runs
// the block backward pass.
template <class R>
void backward_items(const kern::Transform<R>& fft, int64_t B, int64_t T, int64_t p, int64_t kfs, int64_t Tb,
                    const R* dh, const R* dh_last, const R* a, const R* u, const R* h0, R* da, R* du, R* dh0,
                    std::complex<R>* ws) {
  using C = std::complex<R>;
  const int64_t sp = p * kfs, nblk = (T + Tb - 1) / Tb;  // sp: one step's state spectra
  C* Ah = ws;
  C* Hh = Ah + B * Tb * p * p * kfs;
  C* G = Hh + B * Tb * sp;
  C* ckpt = G + B * Tb * sp;
  C* gin = ckpt + nblk * B * sp;
  C* gout = gin + B * sp;
  if (h0) load_rows<R>(fft, h0, nullptr, B, 1, p, 0, 1, kfs, ckpt);
  for (int64_t j = 0; j + 1 < nblk; ++j) {
    const int64_t t0 = j * Tb, tb = Tb;
    const C* prev = (j > 0 || h0) ? ckpt + j * B * sp : nullptr;
    load_rows<R>(fft, a, nullptr, B, T, p * p, t0, tb, kfs, Ah);
    load_rows<R>(fft, u, nullptr, B, T, p, t0, tb, kfs, Hh);
    block_forward_scan(Spectra<R>{B, tb, p, kfs, Ah, Hh, prev});
    copy_last(Hh, B, tb, p, kfs, ckpt + (j + 1) * B * sp);
  }
  C* carry_in = nullptr;
  for (int64_t j = nblk - 1; j >= 0; --j) {
    const int64_t t0 = j * Tb, tb = std::min(Tb, T - t0);
    const C* prev = (j > 0 || h0) ? ckpt + j * B * sp : nullptr;
    load_rows<R>(fft, a, nullptr, B, T, p * p, t0, tb, kfs, Ah);
    load_rows<R>(fft, u, nullptr, B, T, p, t0, tb, kfs, Hh);
    load_rows<R>(fft, dh, dh_last, B, T, p, t0, tb, kfs, G);
    if (carry_in)
      for (int64_t b = 0; b < B; ++b) {
        C* g = G + (b * tb + tb - 1) * sp;
        const C* c = carry_in + b * sp;
        for (int64_t i = 0; i < sp; ++i) g[i] += c[i];
      }
    const Spectra<R> s{B, tb, p, kfs, Ah, Hh, prev};
    block_forward_scan(s);
    C* carry_out = (carry_in == gout) ? gin : gout;
    block_backward_scan(s, G, (j > 0 || dh0) ? carry_out : nullptr);
    carry_in = carry_out;
    store_rows<R>(fft, G, B, T, p, t0, tb, kfs, du);
    store_rows<R>(fft, Ah, B, T, p * p, t0, tb, kfs, da);
  }
  if (dh0) store_rows<R>(fft, carry_in, B, 1, p, 0, 1, kfs, dh0);
}
}  // namespace

// Whole items per thread where there are at least two, as in forward().
template <class R>
void BlockCirculantScan<R>::backward(const R* dh, const R* dh_last, const R* a, const R* u,
                                     const R* h0, R* da, R* du, R* dh0) const {
  check_arg(dh && a && u && da && du, "dh", "expected non-null dh, a, u, da and du");
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int64_t B = B_, T = T_, p = p_, k = k_, kfs = kfs_, nth = team.size();
  const kern::Transform<R> fft{*fft_, dft_};
  const int64_t step = (p * p + 2 * p) * kfs * int64_t(sizeof(C));  // spectra bytes of one item and step
  if (nth > 1 && B >= 2) {
    const int64_t Tb = kern::time_block(1, T, step, kItemBlockBytes), nw = backward_workspace(1, T, Tb, p, kfs);
    AlignedBuffer<C> ws(nth * nw);
#pragma omp parallel num_threads(int(nth))
    {
      const cpu::SerialScope serial;
      C* mine = ws.data() + cpu::thread_index() * nw;
#pragma omp for schedule(dynamic, 1)
      for (int64_t b = 0; b < B; ++b) {
        const int64_t x = b * T * p * k, xa = x * p, x0 = b * p * k;  // item b of (B, T, n), a, (B, n)
        backward_items<R>(fft, 1, T, p, kfs, Tb, dh + x, dh_last ? dh_last + x0 : nullptr, a + xa, u + x,
                          h0 ? h0 + x0 : nullptr, da + xa, du + x, dh0 ? dh0 + x0 : nullptr, mine);
      }
    }
    return;
  }
  const int64_t Tb = kern::time_block(B, T, B * step);
  AlignedBuffer<C> ws(backward_workspace(B, T, Tb, p, kfs));
  backward_items<R>(fft, B, T, p, kfs, Tb, dh, dh_last, a, u, h0, da, du, dh0, ws.data());
}

template class BlockCirculantScan<float>;
template class BlockCirculantScan<double>;

}  // namespace strux
