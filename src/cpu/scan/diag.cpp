// Diagonal scan h_t = a_t * h_{t-1} + b_t (real or complex) and its backward pass.
//
// Channels-last makes every time step a contiguous row of n channels: each OpenMP task owns
// one batch item and one chunk of channels and walks time sequentially, so the inner loop is
// a unit-stride element-wise update and h_{t-1} is still in L1 when step t reads it.
// DiagSolver::TimeSplit: with fewer such tasks than threads (few channels, small batch) and a
// long sequence, the forward pass also splits time (a chunked scan with carries): each later segment first
// computes its end state from zero and the product of its a's (reading a and b), a short
// serial pass turns those into the state entering each segment, and every segment then runs
// the plain recurrence from its carry. That reads a and b twice, so it only pays where one
// thread would leave the others idle.
#include <algorithm>
#include <cmath>
#include <complex>
#include <vector>

#include "core/checked_size.hpp"
#include "cpu/fft.hpp"
#include "cpu/scan/kernels.hpp"
#include "cpu/threads.hpp"
#include "strux/core.hpp"
#include "strux/scan.hpp"

namespace strux {
namespace cpu::scan {

namespace {
int64_t g_time_block = 0;
}  // namespace
int64_t time_block_override() { return g_time_block; }

int64_t scan_chunk(int64_t B, int64_t n, int64_t min_chunk) {
  // Tasks wanted, for load balance (handed out dynamically: a thread that loses its core on a
  // shared machine leaves its remaining tasks to the others).
  const int64_t want = 4 * int64_t(num_threads());
  const int64_t per_b = std::max<int64_t>(1, (want + B - 1) / B);
  int64_t c = (n + per_b - 1) / per_b;
  c = std::max<int64_t>(min_chunk, (c + 15) / 16 * 16);
  return std::min(c, n);
}

namespace {

// Channels per task at least: 1 KiB of a row.
template <class S>
constexpr int64_t wide_chunk() {
  return std::max<int64_t>(16, 1024 / int64_t(sizeof(S)));
}

// Steps per time segment at least: below this the extra pass costs more than the idle thread.
constexpr int64_t kMinSegment = 512;

// Row offsets of the channels-last layouts: (b, logical step t) of the state-shaped arrays and
// of a (da), time reversed or not, a broadcast along batch or time (DiagLayout).
struct Rows {
  int64_t T, n, aB, aT;
  bool rev;
  Rows(int64_t T_, int64_t n_, const DiagLayout& L)
      : T(T_), n(n_), aB(L.a_batch ? (L.a_time ? T_ : 1) * n_ : 0), aT(L.a_time ? n_ : 0), rev(L.reverse) {}
  int64_t p(int64_t t) const { return rev ? T - 1 - t : t; }
  int64_t x(int64_t b, int64_t t) const { return (b * T + p(t)) * n; }
  int64_t a(int64_t b, int64_t t) const { return b * aB + p(t) * aT; }
};

// The plain recurrence over steps [t0, t1) of channels [c0, c0 + len) of batch item bi, from
// prev (h_{t0-1}; null: zero, the first step's a * 0 kept).
template <class S>
void forward_run(const Rows& R, int64_t bi, int64_t c0, int64_t len, int64_t t0, int64_t t1, const S* a,
                 const S* b, const S* prev, S* h) {
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t o = R.x(bi, t) + c0, oa = R.a(bi, t) + c0;
    if (h == b) {  // in place: h_t starts as b_t
      if (prev) fma_inplace(a + oa, prev, h + o, len);
      else add_times_zero(a + oa, h + o, len);
    } else if (prev) {
      fma_step(a + oa, prev, b + o, h + o, len);
    } else {
      copy_add<S>(b + o, nullptr, h + o, len);
      add_times_zero(a + oa, h + o, len);  // a_0 * 0: NaN when a_0 is not finite
    }
    prev = h + o;
  }
}

// Products of many |a| < 1 underflow, and with |a| >= 1/2 a subnormal product then stays at
// its last ulp (x * a rounds back to x): every later multiply takes a microcode assist (10x
// slower than the plain scan, on idle cores). Entries below 2^-60 (float; 2^-600 double) are
// set to 0, checked every 64 steps, before they get there: their share of a carried state is
// below 2^-60 of it, far under the rounding of the recurrence itself.
template <class S>
void flush_tiny(S* p, int64_t len) {
  using R = decltype(std::abs(S{}));
  const R tiny = std::ldexp(R(1), sizeof(R) == 4 ? -60 : -600);
  for (int64_t i = 0; i < len; ++i)
    if (std::abs(p[i]) < tiny) p[i] = S(0);
}

// The chunked scan over time: `nseg` segments per task (see the header comment).
template <class S>
void forward_segmented(const Rows& R, int64_t B, int64_t chunk, int64_t nseg, const S* a, const S* b,
                       const S* h0, S* h) {
  const int64_t T = R.T, n = R.n, nch = (n + chunk - 1) / chunk, tasks = B * nch;
  auto seg = [=](int64_t s) { return s * T / nseg; };
  // Per (task, segment): the end state from zero (E), the product of the a's (P), the carry in.
  // Rows padded to whole 128-byte pairs of cache lines: segments updated by different threads
  // every step must not share a line (with 8 channels they did: 10x slower, even on idle cores).
  const int64_t stride = (chunk * int64_t(sizeof(S)) + 127) / 128 * 128 / int64_t(sizeof(S));
  std::vector<S> E(size_t(tasks * nseg * stride + 128 / sizeof(S))), P(E.size()), carry(E.size());
  auto row = [=](std::vector<S>& v, int64_t task, int64_t s) { return v.data() + (task * nseg + s) * stride; };
#pragma omp parallel num_threads(num_threads())
  {
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < tasks * nseg; ++it) {
      const int64_t task = it / nseg, s = it % nseg, bi = task / nch, c0 = (task % nch) * chunk;
      const int64_t len = std::min(chunk, n - c0);
      if (s == 0) {  // the first segment needs no carry: the real scan at once
        forward_run(R, bi, c0, len, 0, seg(1), a, b, h0 ? h0 + bi * n + c0 : nullptr, h);
      } else if (s + 1 < nseg) {
        S* e = row(E, task, s);
        S* p = row(P, task, s);
        copy_add<S>(b + R.x(bi, seg(s)) + c0, nullptr, e, len);
        copy_add<S>(a + R.a(bi, seg(s)) + c0, nullptr, p, len);
        for (int64_t t = seg(s) + 1; t < seg(s + 1); ++t) {
          step_inplace(a + R.a(bi, t) + c0, b + R.x(bi, t) + c0, e, len);
          mul_inplace(a + R.a(bi, t) + c0, p, len);
          if ((t - seg(s)) % 64 == 0) flush_tiny(p, len);
        }
      }
    }
    // The state entering each segment, one task at a time (nseg steps of len values each).
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bi = task / nch, c0 = (task % nch) * chunk, len = std::min(chunk, n - c0);
      copy_add<S>(h + R.x(bi, seg(1) - 1) + c0, nullptr, row(carry, task, 1), len);
      for (int64_t s = 2; s < nseg; ++s) {
        S* c = row(carry, task, s);
        copy_add<S>(row(E, task, s - 1), nullptr, c, len);
        fma_inplace(row(P, task, s - 1), row(carry, task, s - 1), c, len);
      }
    }
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < tasks * (nseg - 1); ++it) {
      const int64_t task = it / (nseg - 1), s = 1 + it % (nseg - 1), bi = task / nch, c0 = (task % nch) * chunk;
      forward_run(R, bi, c0, std::min(chunk, n - c0), seg(s), seg(s + 1), a, b, row(carry, task, s), h);
    }
  }
}

// Backward of channels [c0, c0 + len) of batch item bi (see diag_backward). `tmp`: len values
// of scratch. da full-shaped: da (the a offsets equal the state offsets) holds the shifted
// states first, as scratch. Broadcast a: db holds them (so db must not be dh), and da_t is
// added into `dacc` (a not varying in time: len values, zeroed by the caller) or into da's
// rows (a varying in time, shared by the batch: `first` = the first batch item, which assigns).
template <class S>
void backward_run(const Rows& R, bool full, int64_t bi, int64_t c0, int64_t len, const S* dh, const S* dh_last,
                  const S* a, const S* b, const S* h0, S* da, S* db, S* dh0, S* tmp, S* dacc, bool first) {
  const int64_t T = R.T, n = R.n;
  S* hs = full ? da : db;  // hs[t] = h_{t-1}
  if (h0)
    copy_add<S>(h0 + bi * n + c0, nullptr, hs + R.x(bi, 0) + c0, len);
  else
    fill_zero(hs + R.x(bi, 0) + c0, len);
  for (int64_t t = 0; t + 1 < T; ++t)
    fma_step(a + R.a(bi, t) + c0, hs + R.x(bi, t) + c0, b + R.x(bi, t) + c0, hs + R.x(bi, t + 1) + c0, len);
  // Reverse time: g_t = dh_t + conj(a_{t+1}) g_{t+1}, db_t = g_t, da_t = g_t conj(h_{t-1}).
  const S* last = dh_last ? dh_last + bi * n + c0 : nullptr;
  for (int64_t t = T - 1; t >= 0; --t) {
    const int64_t o = R.x(bi, t) + c0;
    if (full) {
      if (t == T - 1) {
        if (db != dh) {
          copy_add(dh + o, last, db + o, len);
        } else if (last) {
          for (int64_t i = 0; i < len; ++i) db[o + i] += last[i];
        }
      } else if (db == dh) {
        conj_fma_inplace(a + R.a(bi, t + 1) + c0, db + R.x(bi, t + 1) + c0, db + o, len);
      } else {
        conj_fma_step(a + R.a(bi, t + 1) + c0, db + R.x(bi, t + 1) + c0, dh + o, db + o, len);
      }
      mul_conj_inplace(db + o, da + o, len);
      continue;
    }
    if (t == T - 1)
      copy_add(dh + o, last, tmp, len);
    else
      conj_fma_step(a + R.a(bi, t + 1) + c0, db + R.x(bi, t + 1) + c0, dh + o, tmp, len);
    if (dacc)
      mul_conj_add(tmp, db + o, dacc, len);
    else if (first)
      mul_conj(tmp, db + o, da + R.a(bi, t) + c0, len);
    else
      mul_conj_add(tmp, db + o, da + R.a(bi, t) + c0, len);
    copy_add<S>(tmp, nullptr, db + o, len);
  }
  if (dh0) {
    S* d0 = dh0 + bi * n + c0;
    fill_zero(d0, len);
    conj_fma_inplace(a + R.a(bi, 0) + c0, db + R.x(bi, 0) + c0, d0, len);
  }
}

}  // namespace

template <class S>
void diag_forward(int64_t B, int64_t T, int64_t n, const S* a, const S* b, const S* h0, S* h, const DiagLayout& L,
                  bool time_split) {
  if (L.time_last && n > 1 && T > 1) return diag_forward_time_last(B, T, n, a, b, h0, h, L);
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int nt = num_threads();
  const Rows R(T, n, L);
  // Chunks of at least 1 KiB of a row: narrower ones walk the arrays in short strided pieces
  // that the prefetchers serve poorly (half the bandwidth at 128-byte chunks of 512-byte rows);
  // the threads are kept busy by splitting time instead.
  const int64_t chunk = scan_chunk(B, n, wide_chunk<S>());
  const int64_t nch = (n + chunk - 1) / chunk;
  if (time_split && B * nch < nt) {  // (in place too: a segment's b is read before its h is written)
    // Segments per task: enough for every thread, each at least kMinSegment steps.
    const int64_t nseg = std::min<int64_t>((2 * nt + B * nch - 1) / (B * nch) + 1, T / kMinSegment);
    if (nseg >= 2) return forward_segmented(R, B, chunk, nseg, a, b, h0, h);
  }
#pragma omp parallel for schedule(dynamic) num_threads(nt)
  for (int64_t task = 0; task < B * nch; ++task) {
    const int64_t bi = task / nch, c0 = (task % nch) * chunk, len = std::min(chunk, n - c0);
    forward_run(R, bi, c0, len, 0, T, a, b, h0 ? h0 + bi * n + c0 : nullptr, h);
  }
}

template <class S>
void diag_backward(int64_t B, int64_t T, int64_t n, const S* dh, const S* dh_last, const S* a,
                   const S* b, const S* h0, S* da, S* db, S* dh0, const DiagLayout& L) {
  if (L.time_last && n > 1 && T > 1) return diag_backward_time_last(B, T, n, dh, dh_last, a, b, h0, da, db, dh0, L);
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const Rows R(T, n, L);
  const bool a_batch = L.a_batch || B == 1, a_time = L.a_time || T == 1, full = a_batch && a_time;
  check_arg(full || db != dh, "db", "expected db apart from dh when a is broadcast");
  // Chunks of at least 1 KiB of a row, as in forward (no time split here: a task of few
  // channels runs on one thread, still faster than narrow chunks on every thread).
  const int64_t chunk = scan_chunk(a_batch ? B : 1, n, wide_chunk<S>());
  const int64_t nch = (n + chunk - 1) / chunk;
  // a shared by the batch: one task per channel chunk walks every batch item in order (da sums
  // over them deterministically); otherwise one task per (batch item, chunk).
  const int64_t tasks = a_batch ? B * nch : nch;
  const int nt = num_threads();
  std::vector<S> scratch(full ? 0 : size_t(2 * chunk * int64_t(nt)));  // tmp, dacc per thread
#pragma omp parallel num_threads(nt)
  {
    S* tmp = full ? nullptr : scratch.data() + 2 * chunk * int64_t(thread_index());
    S* dacc = a_time ? nullptr : tmp + chunk;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t c0 = (task % nch) * chunk, len = std::min(chunk, n - c0);
      const int64_t b0 = a_batch ? task / nch : 0, b1 = a_batch ? b0 + 1 : B;
      if (dacc) fill_zero(dacc, len);
      for (int64_t bi = b0; bi < b1; ++bi)
        backward_run(R, full, bi, c0, len, dh, dh_last, a, b, h0, da, db, dh0, tmp, dacc, bi == b0);
      if (dacc) copy_add<S>(dacc, nullptr, da + R.a(b0, 0) + c0, len);
    }
  }
}

#define STRUX_DIAG_INST(S)                                                                          \
  template void diag_forward<S>(int64_t, int64_t, int64_t, const S*, const S*, const S*, S*,        \
                                const DiagLayout&, bool);                                           \
  template void diag_backward<S>(int64_t, int64_t, int64_t, const S*, const S*, const S*,           \
                                 const S*, const S*, S*, S*, S*, const DiagLayout&);
STRUX_DIAG_INST(float)
STRUX_DIAG_INST(double)
STRUX_DIAG_INST(std::complex<float>)
STRUX_DIAG_INST(std::complex<double>)
#undef STRUX_DIAG_INST

}  // namespace cpu::scan

void set_scan_time_block(int64_t steps) {
  check_arg(steps >= 0, "steps", "expected >= 0 (0 = automatic), got ", steps);
  cpu::scan::g_time_block = steps;
}

DiagSolver diag_solver(const std::string& s, const char* arg) {
  if (s.empty()) return DiagSolver::Automatic;
  if (s == "rows") return DiagSolver::Rows;
  if (s == "time-split") return DiagSolver::TimeSplit;
  throw ValueError(msg("argument '", arg, "': expected one of '', 'rows', 'time-split', got '", s, "'"));
}

template <class S>
DiagScan<S>::DiagScan(int64_t B, int64_t T, int64_t n, DiagLayout layout, DiagSolver solver)
    : B_(B), T_(T), n_(n), layout_(layout), time_split_(solver == DiagSolver::TimeSplit) {
  check_positive(B, "B");
  check_positive(T, "T");
  check_positive(n, "n");
  checked_count("n", {B, T, n, int64_t(sizeof(S))});  // (B, T, n) arrays must be addressable
}

template <class S>
void DiagScan<S>::forward(const S* a, const S* b, const S* h0, S* h) const {
  check_arg(a && b && h, "h", "expected non-null a, b and h");
  cpu::scan::diag_forward(B_, T_, n_, a, b, h0, h, layout_, time_split_);
}

template <class S>
void DiagScan<S>::backward(const S* dh, const S* dh_last, const S* a, const S* b, const S* h0,
                           S* da, S* db, S* dh0) const {
  check_arg(dh && a && b && da && db, "dh", "expected non-null dh, a, b, da and db");
  cpu::scan::diag_backward(B_, T_, n_, dh, dh_last, a, b, h0, da, db, dh0, layout_);
}

template class DiagScan<float>;
template class DiagScan<double>;
template class DiagScan<std::complex<float>>;
template class DiagScan<std::complex<double>>;

}  // namespace strux
