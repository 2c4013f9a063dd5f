// One KS factor on the CPU: per group (i, j) a dense GEMM, OpenMP over (group, batch chunk)
// work items with serial BLAS inside. Every region that calls BLAS starts with
// serial_blas_in_region(): in a team of one (set_num_threads(1)) OpenBLAS would otherwise open a
// team of its own per GEMM (cpu/threads.hpp).
#include <algorithm>
#include <climits>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/checked_size.hpp"
#include "cpu/threads.hpp"
#include "cpu/ks/gemm.hpp"
#include "cpu/ks/tiles.hpp"
#include "cpu/ks/transpose.hpp"
#include "strux/ks.hpp"

namespace strux {

namespace {

using cpu::ks::gemm;

// Per-thread tile budget in values (256 KiB of float): the gathered input and output tiles
// of one work item stay in L2 between the gather, the GEMMs and the scatter.
constexpr int64_t kTileElems = int64_t(1) << 16;

int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

// Batch rows (bsf) or columns (bsl) per work item: as many as the tile budget allows for
// `per_row` values each (at least `floor_rows`), then fewer if that leaves under two items
// per thread, so that small batches still spread over the threads.
int64_t pick_chunk(int64_t batch, int64_t groups, int64_t per_row, int64_t floor_rows, int nt) {
  int64_t t = std::max(floor_rows, kTileElems / std::max<int64_t>(per_row, 1));
  t = std::min(t, batch);
  const int64_t want = 2 * int64_t(nt);
  if (groups * ceil_div(batch, t) < want) t = ceil_div(batch, ceil_div(want, groups));
  return std::max<int64_t>(t, 1);
}

// Group (i, j)'s c×b block as a contiguous row-major b×c matrix: wp[i, j, k, l] = w[i, k, l, j].
// BLAS needs a unit stride, which w only has along l when d == 1 (then wp is w itself).
template <class T>
const T* pack_weights(const KSPattern& p, const T* w, std::vector<T>& buf, int nt) {
  if (p.d == 1) return w;
  const int64_t b = p.b, c = p.c, d = p.d;
  buf.resize(size_t(p.nnz()));
  T* out = buf.data();
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t ik = 0; ik < p.a * b; ++ik) {
    const int64_t i = ik / b, k = ik % b;
    const T* src = w + ik * c * d;  // w[i, k, :, :]
    for (int64_t l = 0; l < c; ++l)
      for (int64_t j = 0; j < d; ++j) out[((i * d + j) * b + k) * c + l] = src[l * d + j];
  }
  return out;
}

// dw[i, k, l, j] = Σ_threads acc_t[i, j, k, l] (acc in the packed layout, `nacc` of them).
template <class T>
void reduce_weights(const KSPattern& p, const T* acc, int64_t nacc, T* dw, int nt) {
  const int64_t b = p.b, c = p.c, d = p.d, nnz = p.nnz();
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t ik = 0; ik < p.a * b; ++ik) {
    const int64_t i = ik / b, k = ik % b;
    T* dst = dw + ik * c * d;
    for (int64_t l = 0; l < c; ++l)
      for (int64_t j = 0; j < d; ++j) {
        const int64_t q = ((i * d + j) * b + k) * c + l;
        T s = acc[q];
        for (int64_t t = 1; t < nacc; ++t) s += acc[t * nnz + q];
        dst[l * d + j] = s;
      }
  }
}

// Batch-size-first gather/scatter of one batch row restricted to block i: the row's c·d
// values (l, j) become d contiguous runs of c (a c×d → d×c transpose), and back.
template <class T>
inline void gather_row(const T* src, T* dst, int64_t c, int64_t d) {  // dst[j*c + l] = src[l*d + j]
  cpu::ks::transpose(src, d, dst, c, c, d);
}
template <class T>
inline void scatter_row(const T* src, T* dst, int64_t c, int64_t d) {  // dst[l*d + j] = src[j*c + l]
  cpu::ks::transpose(src, c, dst, d, d, c);
}

void check_call(const KSPattern& p, int64_t batch) {
  check_positive(batch, "batch");
  // BLAS takes 32-bit sizes and leading dimensions.
  const int64_t big = std::max({p.rows(), p.cols(), p.d * batch, batch});
  check_arg(big <= INT_MAX, "batch", "sizes and strides must fit in 32 bits, got ", big);
}

// The arrays a product reads and writes; dx and dw of a backward call are optional.
void check_ptrs(std::initializer_list<std::pair<const void*, const char*>> required) {
  for (const auto& [ptr, name] : required) check_arg(ptr != nullptr, name, "expected a data pointer, got null");
}

}  // namespace

KSLayout ks_layout(const std::string& s, const char* arg) {
  if (s == "bsf") return KSLayout::BatchFirst;
  if (s == "bsl") return KSLayout::BatchLast;
  throw ValueError(msg("argument '", arg, "': expected one of 'bsf', 'bsl', got '", s, "'"));
}

KSSolver ks_solver(const std::string& s, bool chain, const char* arg) {
  if (s.empty()) return KSSolver::Automatic;
  if (s == "gemm") return KSSolver::Gemm;
  if (!chain && s == "tiles") return KSSolver::Tiles;
  if (chain && s == "fused") return KSSolver::Fused;
  if (chain && s == "factors") return KSSolver::Factors;
  if (chain && s == "pairs") return KSSolver::Pairs;
  throw ValueError(msg("argument '", arg, "': expected one of ",
                       chain ? "'', 'fused', 'factors', 'gemm', 'pairs'" : "'', 'gemm', 'tiles'", ", got '", s, "'"));
}

void ks_check_pattern(const KSPattern& p, const char* arg) {
  check_arg(p.a >= 1 && p.b >= 1 && p.c >= 1 && p.d >= 1, arg,
            "expected (a, b, c, d) with every entry >= 1, got (", p.a, ", ", p.b, ", ", p.c, ", ",
            p.d, ")");
  checked_count(arg, {p.a, p.b, p.c, p.d});  // nnz; rows and columns are sub-products
}

template <class T>
KSPlan<T>::KSPlan(KSPattern p, KSLayout layout, KSSolver solver) : p_(p), layout_(layout) {
  ks_check_pattern(p_);
  check_arg(solver == KSSolver::Automatic || solver == KSSolver::Gemm || solver == KSSolver::Tiles, "solver",
            "expected Automatic, Gemm or Tiles for one factor, got Fused, Factors or Pairs (chain solvers)");
  tiles_ = solver == KSSolver::Tiles ||
           (solver == KSSolver::Automatic && cpu::ks::tiles_suit({p_}, int64_t(sizeof(T))));
}

template <class T>
void KSPlan<T>::forward(const T* x, const T* w, T* y, int64_t batch) const {
  check_call(p_, batch);
  check_ptrs({{x, "x"}, {w, "w"}, {y, "y"}});
  if (tiles_) return cpu::ks::tiles_forward<T>({p_}, layout_, x, &w, y, batch);
  const int64_t a = p_.a, b = p_.b, c = p_.c, d = p_.d, bc = b * c;
  const int64_t M = p_.rows(), N = p_.cols();
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int nt = cpu::num_threads();
  const int np = cpu::partition_threads();  // cuts the work (same chunks whichever team runs it)
  std::vector<T> wbuf;
  const T* wp = pack_weights(p_, w, wbuf, nt);

  if (layout_ == KSLayout::BatchLast) {
    // Group (i, j): Y_ij (b × batch) = W_ij (b × c) · X_ij (c × batch); both are strided
    // row sets of x and y (stride d·batch), contiguous along the batch: no gather at all.
    const int64_t ch = pick_chunk(batch, a * d, b + c, 64, np), nch = ceil_div(batch, ch);
    const int64_t ld = d * batch;
#pragma omp parallel num_threads(nt)
    {
      cpu::serial_blas_in_region();
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < a * d * nch; ++it) {
        const int64_t g = it / nch, i = g / d, j = g % d, t0 = (it % nch) * ch;
        const int64_t n = std::min(ch, batch - t0);
        gemm(false, false, b, n, c, T(1), wp + g * bc, c, x + (i * c * d + j) * batch + t0, ld,
             T(0), y + (i * b * d + j) * batch + t0, ld);
      }
    }
    return;
  }

  if (d == 1) {
    // Block i: y[:, i·b:(i+1)·b] = x[:, i·c:(i+1)·c] · w[i]ᵀ, read in place (lda = N).
    const int64_t ch = pick_chunk(batch, a, b + c, 16, np), nch = ceil_div(batch, ch);
#pragma omp parallel num_threads(nt)
    {
      cpu::serial_blas_in_region();
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < a * nch; ++it) {
        const int64_t i = it / nch, t0 = (it % nch) * ch, n = std::min(ch, batch - t0);
        gemm(false, true, n, b, c, T(1), x + t0 * N + i * c, N, wp + i * bc, c, T(0),
             y + t0 * M + i * b, M);
      }
    }
    return;
  }

  // d > 1, batch first: gather a chunk of rows into X (rows, d, c), d GEMMs into Y (rows, d, b),
  // scatter Y back to the strided output columns.
  const int64_t per_row = d * (b + c);
  const int64_t ch = pick_chunk(batch, a, per_row, 1, np), nch = ceil_div(batch, ch);
  // Tiles are allocated before the region: an exception may not leave an OpenMP region.
  std::vector<T> tiles(size_t(nt) * size_t(ch * per_row));
#pragma omp parallel num_threads(nt)
  {
    cpu::serial_blas_in_region();
    T* X = tiles.data() + int64_t(cpu::thread_index()) * ch * per_row;
    T* Y = X + ch * d * c;
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < a * nch; ++it) {
      const int64_t i = it / nch, t0 = (it % nch) * ch, n = std::min(ch, batch - t0);
      for (int64_t r = 0; r < n; ++r) gather_row(x + (t0 + r) * N + i * c * d, X + r * d * c, c, d);
      for (int64_t j = 0; j < d; ++j)
        gemm(false, true, n, b, c, T(1), X + j * c, d * c, wp + (i * d + j) * bc, c, T(0),
             Y + j * b, d * b);
      for (int64_t r = 0; r < n; ++r) scatter_row(Y + r * d * b, y + (t0 + r) * M + i * b * d, b, d);
    }
  }
}

template <class T>
void KSPlan<T>::backward(const T* dy, const T* x, const T* w, T* dx, T* dw, int64_t batch) const {
  check_call(p_, batch);
  check_ptrs({{dy, "dy"}, {x, "x"}, {w, "w"}});
  if (!dx && !dw) return;
  if (tiles_) return cpu::ks::tiles_backward<T>({p_}, layout_, dy, x, &w, dx, &dw, batch);
  const int64_t a = p_.a, b = p_.b, c = p_.c, d = p_.d, bc = b * c, nnz = p_.nnz();
  const int64_t M = p_.rows(), N = p_.cols();
  static cpu::TeamTuner tuner;  // adapts the default thread count to a shared machine (threads.hpp)
  const cpu::Team team(tuner);
  const int nt = cpu::num_threads();
  const int np = cpu::partition_threads();  // cuts the work; the team (nt) only runs it
  std::vector<T> wbuf;
  const T* wp = dx ? pack_weights(p_, w, wbuf, nt) : nullptr;

  // Work items and their chunk size, per layout (as in forward).
  const bool bsl = layout_ == KSLayout::BatchLast;
  const int64_t groups = bsl ? a * d : a;
  const int64_t per_row = bsl ? b + c : (d == 1 ? b + c : d * (b + c));
  const int64_t ch = pick_chunk(batch, groups, per_row, (bsl ? 64 : d == 1 ? 16 : 1), np);
  const int64_t nch = ceil_div(batch, ch), items = groups * nch;

  // dw: one accumulator per part in the packed layout, each summing a fixed contiguous run of
  // work items in order, reduced at the end: the same sums whichever thread runs a part, so dw
  // is deterministic for a given setting even when the team adapts (threads.hpp).
  const int64_t nparts = std::min<int64_t>(np, items);
  std::vector<T> acc(dw ? size_t(nparts * nnz) : 0, T(0));
  const int nrun = int(std::min<int64_t>(nt, nparts));
  const int64_t tile_len = bsl || d == 1 ? 0 : ch * per_row;
  std::vector<T> tiles(size_t(nrun) * size_t(tile_len));  // before the region, as in forward

#pragma omp parallel num_threads(nrun)
  {
    cpu::serial_blas_in_region();
    T* tile = tiles.data() + int64_t(cpu::thread_index()) * tile_len;
#pragma omp for schedule(dynamic)
    for (int64_t part = 0; part < nparts; ++part) {
      T* A = dw ? acc.data() + part * nnz : nullptr;
      for (int64_t it = part * items / nparts; it < (part + 1) * items / nparts; ++it) {
        const int64_t g = it / nch, t0 = (it % nch) * ch, n = std::min(ch, batch - t0);
        if (bsl) {
          // dW_ij += dY_ij · X_ijᵀ, dX_ij = W_ijᵀ · dY_ij (strided row sets, ld = d·batch).
          const int64_t i = g / d, j = g % d, ld = d * batch;
          const T* gy = dy + (i * b * d + j) * batch + t0;
          if (A) gemm(false, true, b, c, n, T(1), gy, ld, x + (i * c * d + j) * batch + t0, ld, T(1),
                      A + g * bc, c);
          if (dx) gemm(true, false, c, n, b, T(1), wp + g * bc, c, gy, ld, T(0),
                       dx + (i * c * d + j) * batch + t0, ld);
        } else if (d == 1) {
          const int64_t i = g;
          const T* gy = dy + t0 * M + i * b;
          if (A) gemm(true, false, b, c, n, T(1), gy, M, x + t0 * N + i * c, N, T(1), A + i * bc, c);
          if (dx) gemm(false, false, n, c, b, T(1), gy, M, wp + i * bc, c, T(0), dx + t0 * N + i * c, N);
        } else {
          // Gather dY (rows, d, b) and X (rows, d, c); dX reuses X's tile once dW has read it.
          const int64_t i = g;
          T* G = tile;
          T* X = G + ch * d * b;
          for (int64_t r = 0; r < n; ++r) gather_row(dy + (t0 + r) * M + i * b * d, G + r * d * b, b, d);
          if (A)
            for (int64_t r = 0; r < n; ++r) gather_row(x + (t0 + r) * N + i * c * d, X + r * d * c, c, d);
          for (int64_t j = 0; j < d; ++j) {
            if (A) gemm(true, false, b, c, n, T(1), G + j * b, d * b, X + j * c, d * c, T(1),
                        A + (i * d + j) * bc, c);
            if (dx) gemm(false, false, n, c, b, T(1), G + j * b, d * b, wp + (i * d + j) * bc, c, T(0),
                         X + j * c, d * c);
          }
          if (dx)
            for (int64_t r = 0; r < n; ++r) scatter_row(X + r * d * c, dx + (t0 + r) * N + i * c * d, c, d);
        }
      }
    }
  }
  if (dw) reduce_weights(p_, acc.data(), nparts, dw, nt);
}

template class KSPlan<float>;
template class KSPlan<double>;

}  // namespace strux
