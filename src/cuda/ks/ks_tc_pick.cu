// Which tensor-core ks kernel runs: the out tile from b, the variant from the table (or the
// STRUX_KS_TC_VAR knob); the kernels themselves are compiled in ks_tc_<layout>_<vec><V>.cu.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

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

// STRUX_KS_TC_VAR=v (read once) forces variant v (0 or 1, ks_tc_launch.cuh) of every row where
// 16-byte X copies apply: a knob for the bench (python -m strux.bench.gpu_ks_perf); unset = the
// table's pick.
int tc_var() {
  static const int v = [] {
    const char* e = std::getenv("STRUX_KS_TC_VAR");
    return e && e[0] >= '0' && e[0] <= '1' ? e[0] - '0' : -1;
  }();
  return v;
}

// The table's pick (measured, ks_tc_launch.cuh): BK 32 only for batch-first d = 1, TQ = 128.
int default_var(int tq, bool bl, bool vec) { return !bl && vec && tq == 128 ? 1 : 0; }
}  // namespace

template <bool BL, bool VEC>
void launch_tc_any(const tc::Args& ar, cudaStream_t s) {
  const int tq = pick_tq(ar.b);
  const int v = tc_var() >= 0 ? tc_var() : default_var(tq, BL, VEC);
  if constexpr (!VEC) {  // (4-byte X copies: one variant compiled)
    return launch_tc_var<BL, VEC, 0>(ar, tq, s);
  } else {
    if (v == 1) return launch_tc_var<BL, VEC, 1>(ar, tq, s);
    return launch_tc_var<BL, VEC, 0>(ar, tq, s);
  }
}

template void launch_tc_any<true, true>(const tc::Args&, cudaStream_t);
template void launch_tc_any<true, false>(const tc::Args&, cudaStream_t);
template void launch_tc_any<false, true>(const tc::Args&, cudaStream_t);
template void launch_tc_any<false, false>(const tc::Args&, cudaStream_t);

}  // namespace strux::cuda::ks
