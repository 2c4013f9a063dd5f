// strux scan family: linear recurrences h_t = A_t h_{t-1} + b_t over time, CPU backend.
//
// Shapes are (B, T, n) channels-last, row-major: element (b, t, i) lives at (b*T + t)*n + i.
// h_{-1} = h0 ((B, n), or zeros when the pointer is null).
//
//   DiagScan<S>            A_t = diag(a_t); S = float, double, complex<float>, complex<double>.
//   CirculantScan<T>       A_t = circ(a_t), circ(a)[i, j] = a[(i - j) mod n]; T = float, double.
//                          Spatial form: a (B, T, n) real. Fourier form: a given by its half
//                          spectrum a_hat = rfft(a) (B, T, n/2 + 1) complex.
//   BlockCirculantScan<T>  A_t = p x p grid of k x k circulant blocks, block (i, j) = circ(a_t[i, j]),
//                          a (B, T, p, p, k), n = p*k, state index i*k + r.
//
// Every plan has forward(...) -> h (B, T, n) and backward(...) -> gradients of every input.
//
// Backward convention (PyTorch's, conj = identity for real S): given dh = dL/dconj(h) and an
// optional dh_last added to dh_{T-1},
//   g_{T-1} = dh_{T-1} + dh_last,  g_t = dh_t + A_{t+1}^H g_{t+1},
//   db_t = g_t,  da_t = g_t conj(h_{t-1}) (diagonal; the structured analogue for circulants),
//   dh0 = A_0^H g_0.
// The backward passes recompute h (nothing from the forward pass is kept), so the calls are
// independent.
//
// Fourier form of CirculantScan: the operator is circ(irfft(a_hat, n)), i.e. like numpy's irfft
// the imaginary parts of a_hat at frequency 0 (and n/2 for even n) are ignored. Its gradient
// da_hat is dL/dRe(a_hat) + i dL/dIm(a_hat) (the same packing as PyTorch's .grad of a complex
// leaf); its imaginary part at those frequencies is therefore 0.
//
// Algorithm: circulant forms are diagonalised by the real DFT along n (k for blocks): rfft of
// a_t, u_t and h0; a complex diagonal scan over the n/2 + 1 frequencies (a p x p complex
// matrix-vector recurrence per frequency for blocks); irfft. The adjoint of circ(a) is circ of
// the index-reversed a, i.e. conj(a_hat) in the Fourier domain, and the da of a circulant is the
// cyclic cross-correlation of g_t and h_{t-1}, i.e. irfft(G_t conj(H_{t-1})) / n.
//
// Threads: OpenMP over (batch, channel chunks) for scans, over rows for FFTs
// (cpu::num_threads()). All pointers: C-contiguous; outputs must not alias inputs.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>

namespace strux {

namespace cpu {
template <class T>
class RealFFT;
namespace scan {
template <class T>
class ShortDft;
}
}

// Layouts of DiagScan's arrays besides (B, T, n) channels-last (DESIGN.md "scan": axis,
// reverse, a broadcast), read and written in place, without copies:
//   time_last: every array of shape (B, T, n) is (B, n, T) instead (a too, in its own shape);
//   reverse:   time runs backwards, h_t = a_t h_{t+1} + b_t, h_T = h0 (the gradients likewise);
//   a_batch / a_time = false: a (and da) have size 1 along batch / time (broadcast; da is
//   summed over that dimension).
struct DiagLayout {
  bool time_last = false, reverse = false, a_batch = true, a_time = true;
};

// The CPU diagonal scan's solvers: Automatic = Rows; Rows = one task per (batch item, chunk
// of >= 1 KiB of channels), each walking all of time; TimeSplit = besides, where there are
// fewer such tasks than threads, a chunked scan over time with carries (forward, channels-last;
// it reads a and b twice: where one core already reaches the memory bandwidth, as on the 2-core
// machine measured, it loses to one thread, bench/NOTES-cpu.md "diag_scan").
enum class DiagSolver { Automatic, Rows, TimeSplit };
// "" (Automatic), "rows", "time-split"; anything else is a ValueError naming `arg`.
DiagSolver diag_solver(const std::string& s, const char* arg = "solver");

template <class S>
class DiagScan {
 public:
  DiagScan(int64_t B, int64_t T, int64_t n, DiagLayout layout = {}, DiagSolver solver = DiagSolver::Automatic);
  int64_t B() const { return B_; }
  int64_t T() const { return T_; }
  int64_t n() const { return n_; }
  // a, b, h: (B, T, n) (or the layout's shapes); h0: (B, n) or null.
  void forward(const S* a, const S* b, const S* h0, S* h) const;
  // dh: (B, T, n); dh_last, h0: (B, n) or null. da (a's shape), db: (B, T, n); dh0: (B, n) or
  // null (skipped).
  void backward(const S* dh, const S* dh_last, const S* a, const S* b, const S* h0, S* da, S* db,
                S* dh0) const;

 private:
  int64_t B_, T_, n_;
  DiagLayout layout_;
  bool time_split_ = false;
};

// The forward diagonal scan on float16 arrays (IEEE binary16 bit patterns), computed in
// float32 and rounded once per value: a, b, h in the (channels-last) layouts of DiagLayout
// (not time_last), h0 (B, n) or null.
void diag_scan_forward_half(int64_t B, int64_t T, int64_t n, const uint16_t* a, const uint16_t* b,
                            const uint16_t* h0, uint16_t* h, DiagLayout layout = {});

template <class R>  // R = float or double
class CirculantScan {
 public:
  using C = std::complex<R>;
  CirculantScan(int64_t B, int64_t T, int64_t n);
  int64_t B() const { return B_; }
  int64_t T() const { return T_; }
  int64_t n() const { return n_; }
  int64_t nfreq() const { return n_ / 2 + 1; }
  const char* dft_name() const;  // which kernel runs the real DFTs (dft.hpp's, else FFTW)
  // Spatial form. a, u, h: (B, T, n); h0: (B, n) or null.
  void forward(const R* a, const R* u, const R* h0, R* h) const;
  // Fourier form. a_hat: (B, T, n/2 + 1).
  void forward_fourier(const C* a_hat, const R* u, const R* h0, R* h) const;
  // dh: (B, T, n); dh_last: (B, n) or null. da, du: (B, T, n); dh0: (B, n) or null (skipped).
  void backward(const R* dh, const R* dh_last, const R* a, const R* u, const R* h0, R* da, R* du,
                R* dh0) const;
  // Fourier form: da_hat (B, T, n/2 + 1), packed dL/dRe + i dL/dIm (see the top of this file).
  void backward_fourier(const R* dh, const R* dh_last, const C* a_hat, const R* u, const R* h0,
                        C* da_hat, R* du, R* dh0) const;

 private:
  template <bool Fourier, class A>
  void run_forward(const A* a, const R* u, const R* h0, R* h) const;
  template <bool Fourier, class A, class DA>
  void run_backward(const R* dh, const R* dh_last, const A* a, const R* u, const R* h0, DA* da,
                    R* du, R* dh0) const;
  int64_t B_, T_, n_, nfs_;  // nfs_: padded row stride of spectra (keeps rows SIMD-aligned)
  std::shared_ptr<const cpu::RealFFT<R>> fft_;
  const cpu::scan::ShortDft<R>* dft_ = nullptr;  // the short transforms (dft.hpp), else FFTW
};

template <class R>
class BlockCirculantScan {
 public:
  using C = std::complex<R>;
  BlockCirculantScan(int64_t B, int64_t T, int64_t p, int64_t k);
  int64_t B() const { return B_; }
  int64_t T() const { return T_; }
  int64_t p() const { return p_; }
  int64_t k() const { return k_; }
  int64_t n() const { return p_ * k_; }
  const char* dft_name() const;  // which kernel runs the real DFTs (dft.hpp's, else FFTW)
  // a: (B, T, p, p, k); u, h: (B, T, p*k); h0: (B, p*k) or null.
  void forward(const R* a, const R* u, const R* h0, R* h) const;
  // dh: (B, T, p*k); dh_last: (B, p*k) or null. da like a, du like u, dh0 (B, p*k) or null.
  void backward(const R* dh, const R* dh_last, const R* a, const R* u, const R* h0, R* da, R* du,
                R* dh0) const;

 private:
  int64_t B_, T_, p_, k_, kfs_;  // kfs_: padded row stride of spectra
  std::shared_ptr<const cpu::RealFFT<R>> fft_;
  const cpu::scan::ShortDft<R>* dft_ = nullptr;  // the short transforms (dft.hpp), else FFTW
};

// Time steps per block of the circulant pipelines (rfft, scan and irfft of one block of steps
// at a time, so spectra stay in cache): 0 = automatic (about 1 MiB of spectra per block).
// A tuning and testing knob (process-wide, not thread-safe against running plans).
void set_scan_time_block(int64_t steps);
// Largest transform length of the circulant scans done by the short-DFT kernels (a radix-2 FFT
// across rows for powers of two, else a GEMM with the DFT matrix) instead of FFTW (default 64;
// 0 = always FFTW). A tuning and testing knob, like the one above.
void set_scan_dft_gemm_max(int64_t k);
// Powers of two among those by the radix-2 FFT (default) or, off, by the GEMM. Plans made
// from then on; a testing knob.
void set_scan_dft_radix2(bool on);

}  // namespace strux
