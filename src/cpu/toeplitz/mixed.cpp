// The block Toeplitz product with a precision per phase: input rounding (broadcast), forward FFT,
// per-frequency product with F̂ (complex128, complex64, or bfloat16/float16 pairs with float32
// accumulation), inverse FFT, output rounding (reduce). Same structure as plan.cpp's plain
// product (one parallel region, tiles of columns, frequency-major spectra), with a conversion
// between phases where their precisions differ (done per frequency in a thread's cache).
#include <algorithm>
#include <cmath>
#include <mutex>
#include <type_traits>
#include <vector>

#include "core/checked_size.hpp"
#include "cpu/fft.hpp"
#include "cpu/toeplitz/blas.hpp"
#include "cpu/toeplitz/columns.hpp"
#include "cpu/toeplitz/half.hpp"
#include "cpu/toeplitz/mixed.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace strux::cpu::toeplitz {

using K = ToeplitzPrecisionKind;

namespace {

// Rows of a 16-bit F̂ converted to complex64 at a time: about 32 KiB, so the tile stays in L1/L2
// between its conversion and the BLAS call reading it.
int64_t half_tile_rows(int64_t nd, int64_t nm) { return std::clamp<int64_t>(4096 / nm, 1, nd); }

struct Work {
  AlignedBuffer<cplx<double>> in, out;  // spectra in the FFT / IFFT precision (reinterpreted)
  std::vector<TileScratch<float>> ts_s;
  std::vector<TileScratch<double>> ts_d;
  std::vector<AlignedBuffer<cplx<double>>> px, py;  // one frequency's spectra in the product's precision
  std::vector<AlignedBuffer<cplx<float>>> tile;     // 16-bit F̂ rows as complex64

  // Everything allocated before the parallel region (an allocation failing inside one would
  // throw across OpenMP).
  void prepare(int64_t in_bytes, int64_t out_bytes, int nth, int64_t nfft, bool need_s, bool need_d,
               int64_t px_n, int64_t py_n, int64_t tile_n) {
    const auto grow = [](AlignedBuffer<cplx<double>>& b, int64_t bytes) {
      const int64_t n = (bytes + 15) / 16;
      if (b.size() < n) b = AlignedBuffer<cplx<double>>(std::max<int64_t>(n, 1));
    };
    grow(in, in_bytes);
    grow(out, out_bytes);
    if (need_s) {
      if (int(ts_s.size()) < nth) ts_s.resize(size_t(nth));
      for (auto& t : ts_s) t.ensure(nfft);
    }
    if (need_d) {
      if (int(ts_d.size()) < nth) ts_d.resize(size_t(nth));
      for (auto& t : ts_d) t.ensure(nfft);
    }
    if (int(px.size()) < nth) px.resize(size_t(nth)), py.resize(size_t(nth)), tile.resize(size_t(nth));
    for (int i = 0; i < nth; ++i) {
      if (px[size_t(i)].size() < px_n) px[size_t(i)] = AlignedBuffer<cplx<double>>(px_n);
      if (py[size_t(i)].size() < py_n) py[size_t(i)] = AlignedBuffer<cplx<double>>(py_n);
      if (tile[size_t(i)].size() < tile_n) tile[size_t(i)] = AlignedBuffer<cplx<float>>(tile_n);
    }
  }
  template <class T>
  std::vector<TileScratch<T>>& tiles() {
    if constexpr (std::is_same_v<T, float>)
      return ts_s;
    else
      return ts_d;
  }
};

// Calls f with a value of float (single) or double.
template <class F>
void with_type(K k, F&& f) {
  if (k == K::Double)
    f(double{});
  else
    f(float{});
}

}  // namespace

struct MixedProduct::State {
  int64_t nt = 0, nd = 0, nm = 0, nfft = 0, nfreq = 0;
  ToeplitzPrecision q;
  std::shared_ptr<const RealFFT<float>> fft_s;
  std::shared_ptr<const RealFFT<double>> fft_d;
  AlignedBuffer<cplx<double>> fhat_d;  // product double
  AlignedBuffer<cplx<float>> fhat_s;   // product single, complex64
  AlignedBuffer<float> fhat_h;  // 16-bit (re, im) pairs of F̂ / hscale, one pair per 4-byte slot
  float hscale = 1;
  std::mutex ws_mutex;
  Work ws;

  template <class T>
  const RealFFT<T>& fft() const {
    if constexpr (std::is_same_v<T, float>)
      return *fft_s;
    else
      return *fft_d;
  }
  bool half() const { return q.fhat != ToeplitzStorage::Auto; }
};

namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STRUX_TOEPLITZ_F16C 1
// The hardware float16 conversion (F16C, every x86-64 CPU since 2012), chosen at run time so the
// library keeps its baseline instruction set.
__attribute__((target("avx,f16c"))) void unpack_f16c(const uint16_t* h, int64_t m, float* o) {
  int64_t i = 0;
  for (; i + 8 <= m; i += 8)
    _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < m; ++i) o[i] = from_f16(h[i]);
}
#endif

// n entries (2n 16-bit values) into a complex64 tile.
void unpack_rows(const uint16_t* h, bool bf16, int64_t n, cplx<float>* out) {
  float* o = reinterpret_cast<float*>(out);
  const int64_t m = 2 * n;
  if (bf16) {
    for (int64_t i = 0; i < m; ++i) o[i] = from_bf16(h[i]);
    return;
  }
#ifdef STRUX_TOEPLITZ_F16C
  static const bool f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  if (f16c) return unpack_f16c(h, m, o);
#endif
  for (int64_t i = 0; i < m; ++i) o[i] = from_f16(h[i]);
}

// y (n_out × R) = alpha · F̂[f] x (adjoint: F̂[f]^H x) for a 16-bit F̂: row tiles converted to
// complex64, then BLAS with float32 accumulation (the adjoint sums the tiles with beta = 1).
void half_product(const MixedProduct::State& S, int64_t f, const cplx<float>* x, cplx<float>* y, int64_t R,
                  bool adjoint, cplx<float>* tile) {
  const int64_t nd = S.nd, nm = S.nm, tr = half_tile_rows(nd, nm);
  const bool bf16 = S.q.fhat == ToeplitzStorage::BFloat16;
  const cplx<float> alpha(S.hscale);
  const uint16_t* Fh = reinterpret_cast<const uint16_t*>(S.fhat_h.data()) + 2 * f * nd * nm;
  for (int64_t d0 = 0; d0 < nd; d0 += tr) {
    const int64_t rows = std::min(tr, nd - d0);
    unpack_rows(Fh + 2 * d0 * nm, bf16, rows * nm, tile);
    if (!adjoint) {
      if (R == 1)
        gemv(CblasNoTrans, rows, nm, alpha, tile, nm, x, y + d0);
      else
        gemm(CblasNoTrans, CblasNoTrans, rows, R, nm, alpha, tile, nm, x, R, y + d0 * R, R);
    } else {
      const cplx<float> beta(d0 == 0 ? 0.f : 1.f);
      if (R == 1)
        gemv(CblasConjTrans, rows, nm, alpha, tile, nm, x + d0, y, beta);
      else
        gemm(CblasConjTrans, CblasNoTrans, nm, R, rows, alpha, tile, nm, x + d0 * R, R, y, R, beta);
    }
  }
}

// The product phase: X (nfreq, n_in·R) of precision Tf → Y (nfreq, n_out·R) of precision Ti,
// computed in Tp per frequency. Orphaned `omp for`: call it from every thread of the region.
template <class Tf, class Tp, class Ti>
void product_phase(const MixedProduct::State& S, const cplx<Tf>* X, cplx<Ti>* Y, int64_t R, bool adjoint,
                   Work& w, int tid) {
  const int64_t nd = S.nd, nm = S.nm, n_in = (adjoint ? nd : nm) * R, n_out = (adjoint ? nm : nd) * R;
  cplx<Tp>* px = reinterpret_cast<cplx<Tp>*>(w.px[size_t(tid)].data());
  cplx<Tp>* py = reinterpret_cast<cplx<Tp>*>(w.py[size_t(tid)].data());
  cplx<float>* tile = w.tile[size_t(tid)].data();
  const cplx<Tp> one(1);
#pragma omp for schedule(dynamic, 4)
  for (int64_t f = 0; f < S.nfreq; ++f) {
    const cplx<Tp>* xf;
    if constexpr (std::is_same_v<Tf, Tp>) {
      xf = X + f * n_in;
    } else {
      for (int64_t i = 0; i < n_in; ++i) px[i] = cplx<Tp>(X[f * n_in + i]);
      xf = px;
    }
    cplx<Tp>* yf;
    if constexpr (std::is_same_v<Tp, Ti>)
      yf = Y + f * n_out;
    else
      yf = py;
    bool done = false;
    if constexpr (std::is_same_v<Tp, float>) {
      if (S.half()) half_product(S, f, xf, yf, R, adjoint, tile), done = true;
    }
    if (!done) {
      const cplx<Tp>* Ff;
      if constexpr (std::is_same_v<Tp, float>)
        Ff = S.fhat_s.data() + f * nd * nm;
      else
        Ff = S.fhat_d.data() + f * nd * nm;
      if (!adjoint) {
        if (R == 1)
          gemv(CblasNoTrans, nd, nm, one, Ff, nm, xf, yf);
        else
          gemm(CblasNoTrans, CblasNoTrans, nd, R, nm, one, Ff, nm, xf, R, yf, R);
      } else {
        if (R == 1)
          gemv(CblasConjTrans, nd, nm, one, Ff, nm, xf, yf);
        else
          gemm(CblasConjTrans, CblasNoTrans, nm, R, nd, one, Ff, nm, xf, R, yf, R);
      }
    }
    if constexpr (!std::is_same_v<Tp, Ti>)
      for (int64_t i = 0; i < n_out; ++i) Y[f * n_out + i] = cplx<Ti>(yf[i]);
  }
}

// F̂ = rfft(blocks) / nfft in precision Tb, then stored as the precision asks.
template <class Tb, class T>
void build_fhat(MixedProduct::State& S, const T* blocks) {
  const int64_t nf = S.nfreq, n = nf * S.nd * S.nm;
  const auto fft = RealFFT<Tb>::get(S.nfft);
  AlignedBuffer<cplx<Tb>> tmp(n);
  const Columns cols{S.nd * S.nm, 1, S.nt, ToeplitzLayout::TimeMajor};
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int nth = cpu::num_threads();
  std::vector<TileScratch<Tb>> ts(static_cast<size_t>(nth));
  for (auto& t : ts) t.ensure(S.nfft);
#pragma omp parallel num_threads(nth) if (nth > 1)
  forward_columns<Tb, T, T>(*fft, blocks, cols, tmp.data(), Tb(1) / Tb(S.nfft), ts[size_t(thread_index())]);
  if (S.q.fhat != ToeplitzStorage::Auto) {
    // A power of two puts the largest part near the top of the 16-bit range (exact scaling;
    // float16 then keeps 2^28 of dynamic range below it before its subnormals).
    double mx = 0;
    for (int64_t i = 0; i < n; ++i) mx = std::max({mx, double(std::abs(tmp[i].real())), double(std::abs(tmp[i].imag()))});
    S.hscale = mx > 0 && std::isfinite(mx) ? std::ldexp(1.0f, int(std::floor(std::log2(mx))) - 14) : 1.0f;
    S.fhat_h = AlignedBuffer<float>(n);
    const bool bf16 = S.q.fhat == ToeplitzStorage::BFloat16;
    const double inv = 1.0 / double(S.hscale);
    uint16_t* h = reinterpret_cast<uint16_t*>(S.fhat_h.data());
#pragma omp parallel for num_threads(nth) if (nth > 1)
    for (int64_t i = 0; i < n; ++i) {
      const float re = float(double(tmp[i].real()) * inv), im = float(double(tmp[i].imag()) * inv);
      h[2 * i] = bf16 ? to_bf16(re) : to_f16(re);
      h[2 * i + 1] = bf16 ? to_bf16(im) : to_f16(im);
    }
  } else if (S.q.product == K::Double) {
    if constexpr (std::is_same_v<Tb, double>) {
      S.fhat_d = std::move(tmp);
    } else {
      S.fhat_d = AlignedBuffer<cplx<double>>(n);
      for (int64_t i = 0; i < n; ++i) S.fhat_d[i] = cplx<double>(tmp[i]);
    }
  } else {
    if constexpr (std::is_same_v<Tb, float>) {
      S.fhat_s = std::move(tmp);
    } else {
      S.fhat_s = AlignedBuffer<cplx<float>>(n);
      for (int64_t i = 0; i < n; ++i) S.fhat_s[i] = cplx<float>(tmp[i]);
    }
  }
}

}  // namespace

template <class T>
MixedProduct::MixedProduct(const T* blocks, int64_t nt, int64_t nd, int64_t nm, const ToeplitzPrecision& q)
    : s_(std::make_unique<State>()) {
  State& S = *s_;
  S.nt = nt, S.nd = nd, S.nm = nm, S.q = q;
  S.nfft = good_fft_size(2 * nt - 1);
  S.nfreq = S.nfft / 2 + 1;
  const int64_t elem = q.fhat != ToeplitzStorage::Auto ? 4 : q.product == K::Double ? 16 : 8;
  checked_bytes("blocks", {S.nfreq, nd, nm}, std::max<int64_t>(elem, 2 * sizeof(T)));
  if (q.fft == K::Single || q.ifft == K::Single) S.fft_s = RealFFT<float>::get(S.nfft);
  if (q.fft == K::Double || q.ifft == K::Double) S.fft_d = RealFFT<double>::get(S.nfft);
  // F̂ in double whenever the blocks or the product are double; stored rounded.
  if (std::is_same_v<T, double> || q.product == K::Double)
    build_fhat<double>(S, blocks);
  else
    build_fhat<float>(S, blocks);
}

MixedProduct::~MixedProduct() = default;
int64_t MixedProduct::nfft() const { return s_->nfft; }
int64_t MixedProduct::nfreq() const { return s_->nfreq; }
int64_t MixedProduct::spectrum_bytes() const {
  const State& S = *s_;
  return S.fhat_d.size() * 16 + S.fhat_s.size() * 8 + S.fhat_h.size() * 4;
}

template <class T>
const std::complex<T>* MixedProduct::spectrum() const {
  if constexpr (std::is_same_v<T, float>)
    return s_->fhat_s.size() ? s_->fhat_s.data() : nullptr;
  else
    return s_->fhat_d.size() ? s_->fhat_d.data() : nullptr;
}

template <class T>
void MixedProduct::apply(const T* x, T* y, int64_t R, ToeplitzLayout layout, bool adjoint) const {
  State& S = *s_;
  const ToeplitzPrecision& q = S.q;
  const int64_t n_in = adjoint ? S.nd : S.nm, n_out = adjoint ? S.nm : S.nd, nf = S.nfreq;
  const Columns cin{n_in, R, S.nt, layout}, cout{n_out, R, S.nt, layout};
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int nth = cpu::num_threads();
  std::unique_lock<std::mutex> lock(S.ws_mutex, std::try_to_lock);
  Work own;
  Work& w = lock.owns_lock() ? S.ws : own;
  const auto sz = [](K k) { return int64_t(k == K::Double ? 16 : 8); };
  const int64_t tile_n = S.half() ? half_tile_rows(S.nd, S.nm) * S.nm : 0;
  w.prepare(nf * n_in * R * sz(q.fft), nf * n_out * R * sz(q.ifft), nth, S.nfft,
            q.fft == K::Single || q.ifft == K::Single, q.fft == K::Double || q.ifft == K::Double,
            q.fft != q.product ? n_in * R : 0, q.ifft != q.product ? n_out * R : 0, tile_n);
  void* X = w.in.data();
  void* Y = w.out.data();
#pragma omp parallel num_threads(nth) if (nth > 1)
  {
    serial_blas_in_region();
    const int tid = thread_index();
    with_type(q.fft, [&](auto tf) {
      using Tf = decltype(tf);
      auto& ts = w.tiles<Tf>()[size_t(tid)];
      if (q.broadcast == K::Single)
        forward_columns<Tf, T, float>(S.fft<Tf>(), x, cin, static_cast<cplx<Tf>*>(X), Tf(1), ts);
      else
        forward_columns<Tf, T, T>(S.fft<Tf>(), x, cin, static_cast<cplx<Tf>*>(X), Tf(1), ts);
    });
    with_type(q.fft, [&](auto tf) {
      with_type(q.product, [&](auto tp) {
        with_type(q.ifft, [&](auto ti) {
          using Tf = decltype(tf);
          using Tp = decltype(tp);
          using Ti = decltype(ti);
          product_phase<Tf, Tp, Ti>(S, static_cast<const cplx<Tf>*>(X), static_cast<cplx<Ti>*>(Y), R, adjoint,
                                    w, tid);
        });
      });
    });
    with_type(q.ifft, [&](auto ti) {
      using Ti = decltype(ti);
      auto& ts = w.tiles<Ti>()[size_t(tid)];
      if (q.reduce == K::Single)
        inverse_columns<Ti, T, float>(S.fft<Ti>(), static_cast<const cplx<Ti>*>(Y), cout, y, ts);
      else
        inverse_columns<Ti, T, T>(S.fft<Ti>(), static_cast<const cplx<Ti>*>(Y), cout, y, ts);
    });
  }
}

template MixedProduct::MixedProduct(const float*, int64_t, int64_t, int64_t, const ToeplitzPrecision&);
template MixedProduct::MixedProduct(const double*, int64_t, int64_t, int64_t, const ToeplitzPrecision&);
template void MixedProduct::apply<float>(const float*, float*, int64_t, ToeplitzLayout, bool) const;
template void MixedProduct::apply<double>(const double*, double*, int64_t, ToeplitzLayout, bool) const;
template const std::complex<float>* MixedProduct::spectrum<float>() const;
template const std::complex<double>* MixedProduct::spectrum<double>() const;

}  // namespace strux::cpu::toeplitz
