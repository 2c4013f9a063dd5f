// Chains K_1 ⋯ K_P of KS factors: radix-2 chains on rows in L1 (cpu/ks/pairs.hpp) or fused on
// tiles in cache (cpu/ks/tiles.hpp) where the solver table says so, else factor by factor
// through a plan-owned workspace.
//
// Workspace (all (width × batch) blocks, row-major in the plan's layout):
//   [input of factor 0 … input of factor P-2] [gradient ping] [gradient pong]
// Factor p's input is factor p+1's output; factor P-1 reads x. Forward writes those inputs in
// place, so backward (which runs forward first) finds every factor's input without recomputing.
#include <algorithm>
#include <utility>

#include "core/checked_size.hpp"
#include "cpu/ks/pairs.hpp"
#include "cpu/ks/tiles.hpp"
#include "strux/ks.hpp"

namespace strux {

namespace {
// The arrays every call needs: forward x and y, backward dy and x (dx and dw are optional), and
// the weight pointers.
template <class T>
void check_chain_ptrs(const void* a, const char* a_name, const T* const* w, const void* b, const char* b_name,
                      size_t factors) {
  check_arg(a != nullptr, a_name, "expected a data pointer, got null");
  check_arg(b != nullptr, b_name, "expected a data pointer, got null");
  check_arg(w != nullptr, "w", "expected an array of ", factors, " weight pointers, got null");
  for (size_t p = 0; p < factors; ++p)
    check_arg(w[p] != nullptr, "w", "entry ", p, ": expected a data pointer, got null");
}
}  // namespace

template <class T>
KSChainPlan<T>::KSChainPlan(std::vector<KSPattern> patterns, KSLayout layout, int64_t max_batch, KSSolver solver)
    : patterns_(patterns), layout_(layout) {
  check_arg(!patterns.empty(), "patterns", "expected at least one pattern, got none");
  for (size_t p = 0; p < patterns.size(); ++p) {
    const KSPattern& q = patterns[p];
    check_arg(q.a >= 1 && q.b >= 1 && q.c >= 1 && q.d >= 1, "patterns", "entry ", p,
              ": expected (a, b, c, d) with every entry >= 1, got (", q.a, ", ", q.b, ", ", q.c,
              ", ", q.d, ")");
    checked_count("patterns", {q.a, q.b, q.c, q.d});
    if (p + 1 < patterns.size())
      check_arg(q.cols() == patterns[p + 1].rows(), "patterns", "entries ", p, " and ", p + 1,
                " are not compatible: a·c·d of entry ", p, " is ", q.cols(), " but a·b·d of entry ",
                p + 1, " is ", patterns[p + 1].rows());
    plans_.emplace_back(q, layout, solver == KSSolver::Gemm ? KSSolver::Gemm : KSSolver::Automatic);
    max_width_ = std::max({max_width_, q.rows(), q.cols()});
  }
  act_off_.assign(patterns.size(), 0);
  for (size_t p = 0; p + 1 < patterns.size(); ++p) {
    act_off_[p] = act_total_;
    act_total_ += patterns[p].cols();
  }
  const bool pairs_ok = cpu::ks::pairs_suit(patterns_, layout_, int64_t(sizeof(T)));
  check_arg(solver != KSSolver::Pairs || pairs_ok, "solver",
            "'pairs' needs a chain of factors (a, 2, 2, d) with d a power of two (batch-first: and a "
            "width that is a multiple of ", 64 / sizeof(T), "), got another chain");
  // The pair kernels wherever they apply: faster than the tile kernel in both layouts
  // (bench/NOTES-cpu.md "ks pairs").
  pairs_ = solver == KSSolver::Pairs || (solver == KSSolver::Automatic && pairs_ok);
  fused_ = !pairs_ && (solver == KSSolver::Fused || solver == KSSolver::Tiles ||
                       (solver == KSSolver::Automatic && cpu::ks::tiles_suit(patterns_, int64_t(sizeof(T)))));
  if (max_batch > 0 && !fused_ && !pairs_) reserve(max_batch);
}

template <class T>
void KSChainPlan<T>::reserve(int64_t batch) {
  check_positive(batch, "batch");
  if (batch <= batch_cap_) return;
  // Offsets are in units of the batch capacity, so growing re-lays the whole buffer (it holds
  // nothing that outlives a call).
  const int64_t n = checked_bytes("batch", {act_total_ + 2 * max_width_, batch}, sizeof(T)) / int64_t(sizeof(T));
  ws_.assign(size_t(n), T(0));
  batch_cap_ = batch;
}

template <class T>
void KSChainPlan<T>::forward(const T* x, const T* const* w, T* y, int64_t batch) {
  check_chain_ptrs(x, "x", w, y, "y", plans_.size());
  if (pairs_) {
    check_positive(batch, "batch");
    return cpu::ks::pairs_forward(patterns_, layout_, x, w, y, batch);
  }
  if (fused_) {
    check_positive(batch, "batch");
    return cpu::ks::tiles_forward(patterns_, layout_, x, w, y, batch);
  }
  reserve(batch);
  const size_t P = plans_.size();
  const T* in = x;
  for (size_t q = P; q-- > 0;) {
    T* out = q == 0 ? y : act(q - 1);
    plans_[q].forward(in, w[q], out, batch);
    in = out;
  }
}

template <class T>
void KSChainPlan<T>::backward(const T* dy, const T* x, const T* const* w, T* dx, T* const* dw,
                              int64_t batch) {
  check_chain_ptrs(dy, "dy", w, x, "x", plans_.size());
  if (pairs_ && layout_ == KSLayout::BatchFirst) {
    check_positive(batch, "batch");
    return cpu::ks::pairs_backward(patterns_, dy, x, w, dx, dw, batch);
  }
  if (fused_ || pairs_) {  // the pair kernels' batch-last backward is the tile kernel's
    check_positive(batch, "batch");
    return cpu::ks::tiles_backward(patterns_, layout_, dy, x, w, dx, dw, batch);
  }
  reserve(batch);
  const size_t P = plans_.size();
  // Inputs of factors 0..P-2 into the workspace (factor 0's output itself is not needed).
  const T* in = x;
  for (size_t q = P; q-- > 1;) {
    plans_[q].forward(in, w[q], act(q - 1), batch);
    in = act(q - 1);
  }
  T* ping = ws_.data() + act_total_ * batch_cap_;
  T* pong = ping + max_width_ * batch_cap_;
  const T* g = dy;
  for (size_t q = 0; q < P; ++q) {
    const T* xin = q + 1 == P ? x : act(q);
    T* gout = q + 1 == P ? dx : ping;
    plans_[q].backward(g, xin, w[q], gout, dw ? dw[q] : nullptr, batch);
    g = gout;
    std::swap(ping, pong);
  }
}

template class KSChainPlan<float>;
template class KSChainPlan<double>;

}  // namespace strux
