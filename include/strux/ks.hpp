// Kronecker-sparse (KS) factors and chains of them: butterfly, Monarch, Kaleidoscope layers.
//
// Pattern π = (a, b, c, d). K has M = a·b·d rows and N = a·c·d columns, support
// I_a ⊗ 1_{b×c} ⊗ I_d, and values stored as w of shape (a, b, c, d):
//   K[i·b·d + k·d + j, i·c·d + l·d + j] = w[i, k, l, j]   (every other entry is 0).
// Layouts (row-major):
//   BatchFirst ("bsf"): x (batch, N) -> y = x Kᵀ (batch, M)
//   BatchLast  ("bsl"): x (N, batch) -> y = K x  (M, batch)
// Chain π_1 … π_P with cols(K_p) = rows(K_{p+1}): K = K_1 K_2 ⋯ K_P (K_P applied first).
//
// Algorithm (output-stationary, Gonon et al. 2025): rows {i·b·d + k·d + j : k} of y depend
// only on columns {i·c·d + l·d + j : l} of x, so each group (i, j) is one dense
// (batch × c)·(c × b) product with the c×b block W_ij[l, k] = w[i, k, l, j]. Batch-size-last
// needs no data movement (the group's rows of x and y are strided rows: BLAS leading
// dimension d·batch). Batch-size-first with d > 1 gathers a chunk of batch rows into a
// per-thread tile (one small transpose per row), runs d GEMMs on it and scatters back: the
// permutations of the 3-kernel "bmm" recipe, but cache-resident instead of whole-array passes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strux/core.hpp"

namespace strux {

struct KSPattern {
  int64_t a = 1, b = 1, c = 1, d = 1;
  int64_t rows() const { return a * b * d; }  // M
  int64_t cols() const { return a * c * d; }  // N
  int64_t nnz() const { return a * b * c * d; }
};

enum class KSLayout { BatchFirst, BatchLast };

// "bsf" / "bsl"; anything else is a ValueError naming `arg`.
KSLayout ks_layout(const std::string& s, const char* arg = "layout");

// The CPU solvers (forcing one is for tests and benchmarks; Automatic applies the solver table:
// the tile kernels where every block is at most 8 x 8 and the tiles fit the cache budget,
// per-group GEMMs otherwise; bench/NOTES-cpu.md "ks tiles").
//   factor: Gemm = one BLAS GEMM per (i, j) group; Tiles = the small-block tile kernel.
//   chain:  Fused = every factor on a tile of batch rows in cache (one read of x, one write of
//           y); Factors = factor by factor, each by its own rule; Gemm = factor by factor, GEMMs;
//           Pairs = radix-2 chains (every factor (a, 2, 2, d), d a power of two, batch-first):
//           blocks of batch rows in L1 through every factor, pairs of positions as vector lanes,
//           no transposes (the automatic choice where it applies; bench/NOTES-cpu.md "ks pairs").
enum class KSSolver { Automatic, Gemm, Tiles, Fused, Factors, Pairs };
// "" (Automatic), "gemm", "tiles" for a factor; "", "fused", "factors", "gemm", "pairs" for a chain;
// anything else is a ValueError naming `arg`.
KSSolver ks_solver(const std::string& s, bool chain, const char* arg = "solver");

// ValueError naming `arg` unless every entry is >= 1.
void ks_check_pattern(const KSPattern& p, const char* arg = "pattern");

// One KS factor. Thread-safe: forward/backward keep no state between calls, so one plan
// can be shared. Each call repacks w (a·b·c·d values, when d > 1) and uses per-thread tiles
// of about kTileElems values; backward also holds one dw accumulator per thread.
template <class T>
class KSPlan {
 public:
  // solver: Automatic, Gemm or Tiles (anything else is a ValueError naming 'solver').
  explicit KSPlan(KSPattern p, KSLayout layout = KSLayout::BatchFirst, KSSolver solver = KSSolver::Automatic);

  const KSPattern& pattern() const { return p_; }
  KSLayout layout() const { return layout_; }
  bool tiles() const { return tiles_; }  // whether the tile kernel runs (else per-group GEMMs)

  // y = x Kᵀ (bsf: x (batch, N), y (batch, M)) or y = K x (bsl: x (N, batch), y (M, batch)).
  // w (a, b, c, d). y is overwritten (never read), so it may hold garbage.
  void forward(const T* x, const T* w, T* y, int64_t batch) const;

  // Gradients of L(y) for y = forward(x): dx = dy K (bsf) / Kᵀ dy (bsl), and
  // dw[i,k,l,j] = Σ_t dy[t, i·b·d + k·d + j] x[t, i·c·d + l·d + j] (bsf; bsl transposed).
  // dx or dw may be null to skip it. Both are overwritten.
  void backward(const T* dy, const T* x, const T* w, T* dx, T* dw, int64_t batch) const;

 private:
  KSPattern p_;
  KSLayout layout_;
  bool tiles_ = false;
};

// A product of KS factors K_1 ⋯ K_P. Owns the intermediate activations (grown on demand,
// or sized up front for `max_batch`), so a chain plan must not be used by two threads at once.
template <class T>
class KSChainPlan {
 public:
  // ValueError naming 'patterns' (and the index) unless cols(K_p) == rows(K_{p+1}).
  // solver: Automatic, Fused, Factors, Gemm or Pairs (Tiles is Fused); see KSSolver. Pairs
  // for a chain it cannot run is a ValueError naming 'solver'.
  explicit KSChainPlan(std::vector<KSPattern> patterns, KSLayout layout = KSLayout::BatchFirst,
                       int64_t max_batch = 0, KSSolver solver = KSSolver::Automatic);

  int64_t rows() const { return plans_.front().pattern().rows(); }
  int64_t cols() const { return plans_.back().pattern().cols(); }
  size_t size() const { return plans_.size(); }
  const KSPlan<T>& factor(size_t p) const { return plans_[p]; }
  bool fused() const { return fused_; }  // whether the whole chain runs on tiles in cache
  bool pairs() const { return pairs_; }  // whether it runs the radix-2 pair kernels (Pairs)

  // y = x Kᵀ (bsf) or K x (bsl); w[p] is factor p's (a_p, b_p, c_p, d_p) values.
  void forward(const T* x, const T* const* w, T* y, int64_t batch);

  // Recomputes the forward intermediates (kept in the workspace), then runs the factors'
  // backward from K_1 to K_P. dx (same shape as x) may be null; dw[p] may be null, or dw
  // itself null to skip every weight gradient.
  void backward(const T* dy, const T* x, const T* const* w, T* dx, T* const* dw, int64_t batch);

 private:
  void reserve(int64_t batch);
  // Start of the stored input of factor p (p >= 1; factor P-1's input is x).
  T* act(size_t p) { return ws_.data() + act_off_[p] * batch_cap_; }

  std::vector<KSPlan<T>> plans_;
  std::vector<KSPattern> patterns_;
  KSLayout layout_;
  bool fused_ = false;
  bool pairs_ = false;
  std::vector<int64_t> act_off_;  // per factor, offset (in units of batch) of its stored input
  int64_t act_total_ = 0;         // sum of stored input widths
  int64_t max_width_ = 0;         // widest factor side (for the gradient ping-pong)
  int64_t batch_cap_ = 0;
  std::vector<T> ws_;
};

extern template class KSPlan<float>;
extern template class KSPlan<double>;
extern template class KSChainPlan<float>;
extern template class KSChainPlan<double>;

}  // namespace strux
