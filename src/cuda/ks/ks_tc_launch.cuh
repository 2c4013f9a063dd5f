// Tile table of the float32 tensor-core ks kernel (private to src/cuda/ks): which block tile,
// stage depth and split mode runs for a given out size b. ks_tc_<layout>_<vec>.cu instantiate it.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/check.hpp"
#include "cuda/ks/ks_tc.cuh"

namespace strux::cuda::ks {

inline int64_t tc_cdiv(int64_t x, int64_t y) { return (x + y - 1) / y; }

template <int TP_, int TQ_, int WP_, int WQ_, int MINB_, int BK_, int STAGES_>
struct TcCfg {
  static constexpr int TP = TP_, TQ = TQ_, WP = WP_, WQ = WQ_, MINB = MINB_, BK = BK_,
                       STAGES = STAGES_;
};

// Row TQ (out tile), variant V: 0 = BK 16, 1 = BK 32 (one barrier per 4 k8 steps), both with
// 3 cp.async stages and 2 blocks per SM (registers capped at 128). BK 16 wins everywhere but
// batch-first d = 1 with TQ = 128; pre-split tiles, 2-stage BK 32 and the small-batch-tile
// alternatives lost. measured: bench/NOTES-gpu-ks-scan.md#ks-tc-variants
// The batch tile TP grows as TQ shrinks so that every block does about the same work per
// staged byte.
template <int TQ, int V>
struct TcRow;
#define STRUX_TC_ROW(TQv, TPv, WPv, WQv)                                 \
  template <>                                                            \
  struct TcRow<TQv, 0> : TcCfg<TPv, TQv, WPv, WQv, 2, 16, 3> {};        \
  template <>                                                            \
  struct TcRow<TQv, 1> : TcCfg<TPv, TQv, WPv, WQv, 2, 32, 3> {};
STRUX_TC_ROW(128, 128, 4, 2)
STRUX_TC_ROW(96, 128, 4, 2)
STRUX_TC_ROW(64, 256, 4, 2)
STRUX_TC_ROW(48, 256, 8, 1)
STRUX_TC_ROW(32, 256, 8, 1)
#undef STRUX_TC_ROW

template <class C, bool BL, bool VEC>
void launch_tc_cfg(const tc::Args& ar, cudaStream_t s) {
  constexpr int smem = tc::Shape<C::TP, C::TQ, BL, C::BK, C::STAGES>::SMEM_BYTES;
  auto kern = tc::tf32x3_kernel<C::TP, C::TQ, C::WP, C::WQ, BL, VEC, C::MINB, C::BK, C::STAGES>;
  // The shared-memory limit is an attribute of the kernel on a device: set once per device (a
  // driver call on every launch was host time on every small product). Bit dev of `set`.
  static std::atomic<uint64_t> set{0};
  int dev = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (!(set.load(std::memory_order_acquire) & bit)) {
    STRUX_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    set.fetch_or(bit, std::memory_order_release);
  }
  tc::Args a = ar;
  a.p_tiles = tc_cdiv(ar.batch, C::TP);
  a.q_tiles = tc_cdiv(ar.b, C::TQ);
  const int64_t blocks = a.p_tiles * a.q_tiles * ar.a * ar.d;
  kern<<<dim3(unsigned(blocks)), tc::NTHR, smem, s>>>(a);
  STRUX_LAUNCH("ks tf32x3_kernel");
}

template <bool BL, bool VEC, int V>
void launch_tc_var(const tc::Args& ar, int tq, cudaStream_t s) {
  switch (tq) {
    case 128: return launch_tc_cfg<TcRow<128, V>, BL, VEC>(ar, s);
    case 96: return launch_tc_cfg<TcRow<96, V>, BL, VEC>(ar, s);
    case 64: return launch_tc_cfg<TcRow<64, V>, BL, VEC>(ar, s);
    case 48: return launch_tc_cfg<TcRow<48, V>, BL, VEC>(ar, s);
    default: return launch_tc_cfg<TcRow<32, V>, BL, VEC>(ar, s);
  }
}

}  // namespace strux::cuda::ks
