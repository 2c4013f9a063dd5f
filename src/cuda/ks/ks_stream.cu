// Tile choice and launch of the streaming ks kernel (ks_stream.cuh); the kernels themselves are
// compiled in ks_stream_v<16-byte copies>_m<m16 tiles per warp item>.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/ks/ks_stream.cuh"
#include "cuda/ks/ks_stream.hpp"

namespace strux::cuda::ks {

template <int TN, int STAGES, bool VEC, int MT>
void launch_stream(const stream::Args&, cudaStream_t);

namespace {
int64_t cdiv64(int64_t x, int64_t y) { return (x + y - 1) / y; }

int device() {
  int dev = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  return dev;
}

// Per-device attributes, read once per (thread, device).
struct DevInfo {
  int dev, sms, smem_optin;
};
const DevInfo& dev_info() {
  thread_local std::vector<DevInfo> cache;
  const int dev = device();
  for (const DevInfo& d : cache)
    if (d.dev == dev) return d;
  DevInfo d{dev, 0, 0};
  STRUX_CUDA(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  cache.push_back(d);
  return cache.back();
}

int mtiles_of(int64_t b, int mt) { return int(cdiv64(cdiv64(b, 16), mt) * mt); }
}  // namespace

namespace stream {
int64_t resident_blocks(const void* fn, int smem) {
  struct Entry {
    int dev;
    const void* fn;
    int smem;
    int64_t blocks;
  };
  thread_local std::vector<Entry> cache;
  const DevInfo& di = dev_info();
  for (const Entry& e : cache)
    if (e.dev == di.dev && e.fn == fn && e.smem == smem) return e.blocks;
  STRUX_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, di.smem_optin));
  int per_sm = 0;
  STRUX_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, NTHR, size_t(smem)));
  check_arg(per_sm > 0, "pattern", "ks stream kernel does not fit on this device");
  cache.push_back(Entry{di.dev, fn, smem, int64_t(per_sm) * di.sms});
  return cache.back().blocks;
}
}  // namespace stream

// The kernel is latency-bound (few warps per SM issue a third of the slots), so what counts is
// busy warps: MT = 2 unless its warp items leave more of the 8 warps idle in the last round than
// MT = 1 (b = 96: 12 items vs 24). tn = 128 with 2 stages beat 64 and 32 in every measured case
// (at b = c = 64 it fits twice per SM: 16 warps); the rest of the order serves larger W.
// measured: bench/NOTES-gpu-ks-scan.md#ks-stream-tiles
StreamCfg stream_pick(int64_t b, int64_t c, int tn_force, int mt_force) {
  // (also bounds b, c far below the kernel's int indexing)
  if (b > (int64_t(1) << 14) || c > (int64_t(1) << 14)) return {};
  auto busy = [&](int mt) {  // share of warp slots used over the rounds of one 128-wide stage
    const int64_t items = cdiv64(cdiv64(b, 16), mt) * 4;
    return double(items) / double(cdiv64(items, stream::NWARP) * stream::NWARP);
  };
  const int mt = mt_force ? mt_force : (busy(2) >= busy(1) ? 2 : 1);
  const int mtiles = mtiles_of(b, mt), ks = int(cdiv64(c, 8));
  const int64_t limit = dev_info().smem_optin;
  const StreamCfg order[] = {{128, 2, mt}, {128, 3, mt}, {64, 4, mt}, {64, 3, mt}, {64, 2, mt},
                             {32, 4, mt}, {32, 3, mt}, {32, 2, mt}};
  for (const StreamCfg& o : order)
    if ((tn_force == 0 || o.tn == tn_force) &&
        stream::smem_bytes(o.tn, o.stages, mtiles, ks) <= limit)
      return o;
  return {};
}

namespace {
template <bool VEC, int MT>
void launch_vec(const stream::Args& ar, StreamCfg cfg, cudaStream_t s) {
  switch (cfg.tn * 10 + cfg.stages) {
    case 1283: return launch_stream<128, 3, VEC, MT>(ar, s);
    case 1282: return launch_stream<128, 2, VEC, MT>(ar, s);
    case 644: return launch_stream<64, 4, VEC, MT>(ar, s);
    case 643: return launch_stream<64, 3, VEC, MT>(ar, s);
    case 642: return launch_stream<64, 2, VEC, MT>(ar, s);
    case 324: return launch_stream<32, 4, VEC, MT>(ar, s);
    case 323: return launch_stream<32, 3, VEC, MT>(ar, s);
    case 322: return launch_stream<32, 2, VEC, MT>(ar, s);
    default: check_arg(false, "plan", "ks stream tile ", cfg.tn, " x ", cfg.stages, " not built");
  }
}
}  // namespace

void stream_prod(const float* x, const float* w, float* y, int64_t a, int64_t b, int64_t c,
                 int64_t d, int64_t batch, int64_t si, int64_t sk, int64_t sl, int64_t sj,
                 StreamCfg cfg, cudaStream_t s) {
  stream::Args ar{x, w, y, b, c, d, batch, si, sk, sl, sj, mtiles_of(b, cfg.mt),
                  int(cdiv64(c, 8)), 0, 0, 0};
  ar.tiles = cdiv64(batch, cfg.tn);
  ar.items = a * d * ar.tiles;
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = batch % 4 == 0 && al(x) && al(y);
  if (cfg.mt == 1)
    return vec ? launch_vec<true, 1>(ar, cfg, s) : launch_vec<false, 1>(ar, cfg, s);
  return vec ? launch_vec<true, 2>(ar, cfg, s) : launch_vec<false, 2>(ar, cfg, s);
}

}  // namespace strux::cuda::ks
