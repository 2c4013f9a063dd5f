// Kernel choice and launch for one element type (private to src/cuda/ks). The plan calls these;
// ks_<type>.cu instantiates them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "cuda/check.hpp"
#include "cuda/ks/ks_kernels.cuh"
#include "cuda/ks/ks_tc.cuh"

namespace strux::cuda::ks {

inline int64_t cdiv(int64_t x, int64_t y) { return (x + y - 1) / y; }

// Output-tile width 16*TN along b: the widest tile that wastes at most 15% of its columns
// (wider tiles reuse each staged input more often: fewer shared-memory reads per FMA).
inline int pick_tn(int64_t b) {
  const int cands[] = {8, 6, 4, 2, 1};
  int best = 1;
  double best_eff = 0;
  for (int tn : cands) {
    const double eff = double(b) / double(cdiv(b, 16 * tn) * 16 * tn);
    if (eff >= 0.85) return tn;
    if (eff > best_eff) best_eff = eff, best = tn;
  }
  return best;
}

template <int TN, bool BL, class T>
void launch_tile_prod(const ProdProblem<T, BL>& pr, int64_t groups, cudaStream_t s) {
  constexpr int TM = 8, BK = 8;
  const int64_t p_tiles = cdiv(pr.batch, 16 * TM), q_tiles = cdiv(pr.b, 16 * TN);
  dim3 grid(unsigned(p_tiles * q_tiles), unsigned(std::min<int64_t>(groups, 65535)), 1);
  // Batch-last: the batch index is contiguous, so lanes run along it (coalesced loads and
  // stores). Batch-first: lanes run along the output index k, the input staging along l.
  tile_kernel<TM, TN, BK, BL, !BL, true><<<grid, 256, 0, s>>>(pr, p_tiles, groups, pr.c);
  STRUX_LAUNCH("ks tile_kernel");
}

// float32 on tensor cores (3xTF32): tile table and variants in ks_tc_launch.cuh, compiled in
// ks_tc_<layout>_<vec>.cu (one file per set: they compile in parallel).
// var: the kernel variant (-1: ks_tc_pick.cu's table; KsOptions::tc_variant).
template <bool BL, bool VEC>
void launch_tc_any(const tc::Args& ar, int var, cudaStream_t s);

template <bool BL>
void launch_tc(const ProdProblem<float, BL>& pr, int var, cudaStream_t s) {
  auto al = [](const void* p, int n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  tc::Args ar{pr.x, pr.w, pr.y, pr.a, pr.b, pr.c, pr.d, pr.batch, pr.si, pr.sk, pr.sl, pr.sj,
              0, 0, pr.sl == 1, false, false};
  ar.w_vec = pr.sl == 1 && pr.c % 4 == 0 && pr.sk % 4 == 0 && pr.si % 4 == 0 &&
             (pr.d == 1 || pr.sj % 4 == 0) && al(pr.w, 16);
  bool vec;
  if (BL) {
    vec = pr.batch % 4 == 0 && al(pr.x, 16);
    ar.y2 = pr.batch % 2 == 0 && al(pr.y, 8);
  } else {
    vec = pr.d == 1 && pr.c % 4 == 0 && al(pr.x, 16);
    ar.y2 = pr.d == 1 && pr.b % 2 == 0 && al(pr.y, 8);
  }
  if (vec)
    launch_tc_any<BL, true>(ar, var, s);
  else
    launch_tc_any<BL, false>(ar, var, s);
}

template <bool BL, class T>
void launch_prod_layout(const ProdProblem<T, BL>& pr, int tc_var, cudaStream_t s) {
  const int64_t groups = pr.a * pr.d, M = pr.a * pr.b * pr.d;
  if constexpr (std::is_same_v<T, float>) {
    // (the tile count goes to gridDim.x: the old kernels loop over groups past 2^31 blocks)
    // Any sum length c: each k8 step is accumulated afresh and added with rounding FADDs, so
    // the mma's truncation does not build up along c (ks_tc.cuh; tests up to c = 768).
    if (pr.c > 8 && pr.b > 4 && cdiv(pr.batch, 128) * cdiv(pr.b, 32) * groups < (int64_t(1) << 31))
      return launch_tc(pr, tc_var, s);
  }
  if (pr.c <= 8 || pr.b <= 4) {
    const int64_t inner = BL ? pr.batch : M, outer = BL ? M : pr.batch;
    dim3 grid(unsigned(cdiv(inner, 256)), unsigned(std::min<int64_t>(outer, 65535)), 1);
    direct_kernel<T, BL><<<grid, 256, 0, s>>>(pr);
    STRUX_LAUNCH("ks direct_kernel");
    return;
  }
  switch (pick_tn(pr.b)) {
    case 8: return launch_tile_prod<8>(pr, groups, s);
    case 6: return launch_tile_prod<6>(pr, groups, s);
    case 4: return launch_tile_prod<4>(pr, groups, s);
    case 2: return launch_tile_prod<2>(pr, groups, s);
    default: return launch_tile_prod<1>(pr, groups, s);
  }
}

// y = x K'^T or K' x for pattern (a, b, c, d) and weight strides (si, sk, sl, sj); tc_var: the
// float32 tensor-core variant (-1: the table's).
template <class T>
void launch_prod(const T* x, const T* w, T* y, int64_t a, int64_t b, int64_t c, int64_t d,
                 int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj, bool bl,
                 int tc_var, cudaStream_t s) {
  if (bl)
    launch_prod_layout(ProdProblem<T, true>{x, w, y, a, b, c, d, batch, si, sk, sl, sj}, tc_var, s);
  else
    launch_prod_layout(ProdProblem<T, false>{x, w, y, a, b, c, d, batch, si, sk, sl, sj}, tc_var, s);
}

template <int T_M, int BK, bool BL, class T>
void launch_gradw_cfg(const GradWProblem<T, BL>& pr, cudaStream_t s) {
  const int64_t groups = pr.a * pr.d;
  const int64_t p_tiles = cdiv(pr.b, 16 * T_M), q_tiles = cdiv(pr.c, 16 * T_M);
  const int64_t gy = std::min<int64_t>(groups, 65535);
  // Split the batch sum over enough blocks to fill the chip (about 2048 blocks), each split
  // a multiple of BK long; the partial sums meet in dw through float atomics.
  int64_t splits = std::max<int64_t>(1, cdiv(2048, p_tiles * q_tiles * gy));
  splits = std::min<int64_t>({splits, cdiv(pr.batch, BK), 65535});
  const int64_t r_split = cdiv(cdiv(pr.batch, splits), BK) * BK;
  splits = cdiv(pr.batch, r_split);
  dim3 grid(unsigned(p_tiles * q_tiles), unsigned(gy), unsigned(splits));
  // Batch-last: the batch (the sum index r) is contiguous for both dy and x.
  tile_kernel<T_M, T_M, BK, false, BL, BL><<<grid, 256, 0, s>>>(pr, p_tiles, groups, r_split);
  STRUX_LAUNCH("ks grad-w tile_kernel");
}

template <bool BL, class T>
void launch_gradw_layout(const GradWProblem<T, BL>& pr, cudaStream_t s) {
  if (pr.b <= 16 && pr.c <= 16)
    launch_gradw_cfg<1, 32>(pr, s);
  else
    launch_gradw_cfg<4, 16>(pr, s);
}

template <class T>
void launch_gradw(const T* x, const T* dy, float* dw, int64_t a, int64_t b, int64_t c, int64_t d,
                  int64_t batch, bool bl, cudaStream_t s) {
  if (bl)
    launch_gradw_layout(GradWProblem<T, true>{x, dy, dw, a, b, c, d, batch}, s);
  else
    launch_gradw_layout(GradWProblem<T, false>{x, dy, dw, a, b, c, d, batch}, s);
}

}  // namespace strux::cuda::ks
