// Which tensor-core ks kernel runs: the out tile from b, the variant from the table (or forced by
// KsOptions::tc_variant); the kernels themselves are compiled in ks_tc_<layout>_<vec><V>.cu.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/ks/ks_tc.cuh"

namespace strux::cuda::ks {

template <bool BL, bool VEC, int V>
void launch_tc_var(const tc::Args& ar, int tq, cudaStream_t s);

namespace {
int64_t cdiv_(int64_t x, int64_t y) { return (x + y - 1) / y; }

// The out tile TQ follows b (least padding, then the widest).
int pick_tq(int64_t b) {
  const int cands[] = {128, 96, 64, 48, 32};
  int best = 32;
  double best_eff = 0;
  for (int tq : cands) {
    const double eff = double(b) / double(cdiv_(b, tq) * tq);
    if (eff >= 0.95) return tq;
    if (eff > best_eff + 1e-9) best_eff = eff, best = tq;
  }
  return best;
}

// The table's pick (bench/NOTES-gpu-ks-scan.md#ks-tc-variant): BK 32 only for batch-first d = 1,
// TQ = 128.
int default_var(int tq, bool bl, bool vec) { return !bl && vec && tq == 128 ? 1 : 0; }
}  // namespace

template <bool BL, bool VEC>
void launch_tc_any(const tc::Args& ar, int var, cudaStream_t s) {
  const int tq = pick_tq(ar.b);
  const int v = var >= 0 ? var : default_var(tq, BL, VEC);
  if constexpr (!VEC) {  // (4-byte X copies: one variant compiled)
    return launch_tc_var<BL, VEC, 0>(ar, tq, s);
  } else {
    if (v == 1) return launch_tc_var<BL, VEC, 1>(ar, tq, s);
    return launch_tc_var<BL, VEC, 0>(ar, tq, s);
  }
}

template void launch_tc_any<true, true>(const tc::Args&, int, cudaStream_t);
template void launch_tc_any<true, false>(const tc::Args&, int, cudaStream_t);
template void launch_tc_any<false, true>(const tc::Args&, int, cudaStream_t);
template void launch_tc_any<false, false>(const tc::Args&, int, cudaStream_t);

}  // namespace strux::cuda::ks
