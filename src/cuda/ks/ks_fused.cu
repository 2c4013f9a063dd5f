// Host side of the fused KS pair (ks_fused.cuh): applicability, block shape, launch.
#include "cuda/ks/ks_fused.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/ks/ks_fused.cuh"
#include "cuda/ks/ks_fused_mon.cuh"
#include "strux/core.hpp"

namespace strux::cuda::ks {
namespace {

// Shared-memory layout of one block (see ks_fused.cuh): two buffers of rows of LD0 / LD1
// elements (LD1 = 0: none) with a one-word pad after every 2^sh elements; a scratch per warp
// when a factor is square. Buffer 0 holds x, then whatever a square factor writes over it;
// a non-square factor writes into the other buffer.
struct Layout {
  int es = 4, epw = 1, sh = 5, LD0 = 0, LD1 = 0;
  int sq_b = 0;  // widest square factor's b (0: none)
  int64_t scr_elems(int tb) const { return sq_b ? int64_t(tb) * (sq_b + (es == 4 ? 4 : 8)) : 0; }
  int64_t smem(int tb) const { return es * (int64_t(tb) * (LD0 + LD1) + fused::NWARP * scr_elems(tb)); }
};

int log2_ceil(int64_t v) {
  int s = 0;
  while ((int64_t(1) << s) < v) ++s;
  return s;
}

Layout layout(KsPattern p1, KsPattern p2, DType t) {
  Layout L;
  L.es = t == DType::f32 ? 4 : 2;
  L.epw = 4 / L.es;
  // Pad period: the stride 2^sh covers one quad step of the widest group stride (a quad's lanes
  // t = 0..3 read columns t*d (float32) or 2t*d (halves) apart); at least 32 words.
  const int64_t dmax = std::max(p1.d, p2.d);
  L.sh = std::max(log2_ceil(L.epw * std::max<int64_t>(dmax, 32 / L.epw)), 5);
  const int64_t N = p2.a * p2.c * p2.d, R = p2.a * p2.b * p2.d, M = p1.a * p1.b * p1.d;
  const bool z1 = p2.b != p2.c, y1 = z1 == (p1.b == p1.c);  // z, y in buffer 1 (the kernel's rule)
  const int64_t W0 = std::max({N, z1 ? 0 : R, y1 ? 0 : M}), W1 = std::max(z1 ? R : 0, y1 ? M : 0);
  auto ld = [&](int64_t W) -> int {
    if (!W) return 0;
    int64_t words = (W + L.epw * (W >> L.sh) + L.epw - 1) / L.epw;
    words += (4 - words % 32 + 32) % 32;  // rows 4 words apart mod 32: the 8 rows of a fragment
    return int(std::min<int64_t>(words * L.epw, int64_t(1) << 30));
  };
  L.LD0 = ld(W0);
  L.LD1 = ld(W1);
  if (p1.b == p1.c) L.sq_b = int(p1.b);
  if (p2.b == p2.c) L.sq_b = std::max(L.sq_b, int(p2.b));
  return L;
}

int smem_optin() { return current_smem_optin(); }
int sm_count() { return current_sm_count(); }

std::string pat(KsPattern p) {
  return "(" + std::to_string(p.a) + ", " + std::to_string(p.b) + ", " + std::to_string(p.c) + ", " +
         std::to_string(p.d) + ")";
}

template <class T, int TB>
void launch_tb(const fused::Args<T>& a, int64_t smem, cudaStream_t s) {
  auto kern = fused::pair_kernel<T, TB>;
  static std::atomic<uint64_t> set{0};  // the shared-memory attribute, once per device
  int dev = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (!(set.load(std::memory_order_acquire) & bit)) {
    STRUX_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin()));
    set.fetch_or(bit, std::memory_order_release);
  }
  const int64_t blocks = (a.batch + TB - 1) / TB;
  kern<<<dim3(unsigned(blocks)), fused::NTHR, size_t(smem), s>>>(a);
  STRUX_LAUNCH("ks fused pair_kernel");
}

int64_t region(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// w itself when d == 1, else its group-major copy in wbuf (relayout_kernel) at byte offset *off.
template <class T>
const T* grouped(const void* w, KsPattern p, char* wbuf, int64_t* off, cudaStream_t s) {
  if (p.d == 1) return static_cast<const T*>(w);
  T* wt = reinterpret_cast<T*>(wbuf + *off);
  const int64_t n = p.a * p.b * p.c * p.d;
  *off += region(n * int64_t(sizeof(T)));
  const int blocks = int(std::min<int64_t>((n + 255) / 256, 4096));
  fused::relayout_kernel<T><<<blocks, 256, 0, s>>>(static_cast<const T*>(w), wt, int(p.a), int(p.b), int(p.c),
                                                  int(p.d));
  STRUX_LAUNCH("ks fused relayout_kernel");
  return wt;
}

// ---- the persistent Monarch kernel (ks_fused_mon.cuh) ----

// S of a Monarch pair the kernel takes (K_2 = (S, S, S, 1), K_1 = (1, S, S, S), S = 16 or 32,
// batch-first halves), 0 otherwise. Float32 (3xTF32, 256 KB of weights at S = 32) and S = 64
// (1 MB) do not fit one block's shared memory: pair_kernel runs them.
int mon_s(KsPattern p1, KsPattern p2, DType t, bool bl) {
  if (bl || (t != DType::f16 && t != DType::bf16)) return 0;
  const int64_t S = p2.b;
  const bool shape = p2.a == S && p2.c == S && p2.d == 1 && p1.a == 1 && p1.b == S && p1.c == S && p1.d == S;
  return shape && (S == 16 || S == 32) ? int(S) : 0;
}
// Rows per tile (16 * RT): S = 32 takes RT 1 (232,448 bytes of shared memory, one block per SM),
// S = 16 RT 2 (71,296 bytes, three per SM).
int mon_rt(int S) { return S == 16 ? 2 : 1; }
int64_t mon_smem(int S) {
  return S == 16 ? 4 * int64_t(mon::Geo<16, 2>::WORDS) : 4 * int64_t(mon::Geo<32, 1>::WORDS);
}

template <class T, int S, int RT>
void launch_mon(const mon::Args<T>& a, cudaStream_t s) {
  auto kern = mon::mon_kernel<T, S, RT>;
  const int64_t smem = 4 * int64_t(mon::Geo<S, RT>::WORDS);
  static std::atomic<uint64_t> set{0};  // the shared-memory attribute, once per device
  static std::atomic<int> per_sm[64];   // resident blocks per SM, per device (0: not yet asked)
  int dev = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (!(set.load(std::memory_order_acquire) & bit)) {
    STRUX_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    set.fetch_or(bit, std::memory_order_release);
  }
  int occ = dev < 64 ? per_sm[dev].load(std::memory_order_relaxed) : 0;
  if (!occ) {
    STRUX_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, mon::NTHR, size_t(smem)));
    occ = std::max(occ, 1);
    if (dev < 64) per_sm[dev].store(occ, std::memory_order_relaxed);
  }
  // persistent: one block per resident slot, each looping over tiles (its weights loaded once)
  const int64_t tiles = (a.batch + 16 * RT - 1) / (16 * RT);
  const int64_t blocks = std::min<int64_t>(tiles, int64_t(occ) * sm_count());
  kern<<<dim3(unsigned(blocks)), mon::NTHR, size_t(smem), s>>>(a);
  STRUX_LAUNCH("ks fused mon_kernel");
}

template <class T>
void launch_mon_t(const void* x, const void* w1, const void* w2, void* y, int S, int64_t batch, cudaStream_t s) {
  mon::Args<T> a;
  a.x = static_cast<const T*>(x);
  a.w1 = static_cast<const T*>(w1);
  a.w2 = static_cast<const T*>(w2);
  a.y = static_cast<T*>(y);
  a.batch = batch;
  a.wpair = reinterpret_cast<uintptr_t>(w1) % 4 == 0 && reinterpret_cast<uintptr_t>(w2) % 4 == 0;
  if (S == 16) return launch_mon<T, 16, 2>(a, s);
  return launch_mon<T, 32, 1>(a, s);
}

template <class T>
void launch(const void* x, const void* w1, const void* w2, void* y, KsPattern p1, KsPattern p2,
            int64_t batch, bool bl, DType t, FusedCfg cfg, void* wbuf, cudaStream_t s) {
  const Layout L = layout(p1, p2, t);
  fused::Args<T> a;
  int64_t off = 0;
  a.x = static_cast<const T*>(x);
  a.w1 = grouped<T>(w1, p1, static_cast<char*>(wbuf), &off, s);
  a.w2 = grouped<T>(w2, p2, static_cast<char*>(wbuf), &off, s);
  a.y = static_cast<T*>(y);
  a.batch = batch;
  a.f1 = {int(p1.a), int(p1.b), int(p1.c), int(p1.d)};
  a.f2 = {int(p2.a), int(p2.b), int(p2.c), int(p2.d)};
  a.N = int(p2.a * p2.c * p2.d);
  a.M = int(p1.a * p1.b * p1.d);
  a.LD0 = L.LD0;
  a.LD1 = L.LD1;
  a.sh = L.sh;
  a.scr = int(L.scr_elems(cfg.tb));
  const int v = 16 / L.es;
  auto al = [](const void* p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  a.bl = bl;
  a.vec = (bl ? batch % v == 0 : a.N % v == 0 && a.M % v == 0) && al(x, 16) && al(y, 16);
  a.wpair = al(a.w1, 4) && al(a.w2, 4);
  switch (cfg.tb) {
    case 8: return launch_tb<T, 8>(a, cfg.smem, s);
    case 16: return launch_tb<T, 16>(a, cfg.smem, s);
    case 32: return launch_tb<T, 32>(a, cfg.smem, s);
    case 64: return launch_tb<T, 64>(a, cfg.smem, s);
    default: check_arg(false, "fused_tb", "expected 8, 16, 32 or 64, got ", cfg.tb);
  }
}

}  // namespace

std::string fused_pair_why_not(KsPattern p1, KsPattern p2, bool batch_last, DType t) {
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16)
    return std::string("the fused pair runs float32, float16 and bfloat16, not ") + dtype_name(t);
  if (p1.a * p1.c * p1.d != p2.a * p2.b * p2.d)
    return "patterns " + pat(p1) + " and " + pat(p2) + " do not chain (a1*c1*d1 != a2*b2*d2)";
  const int64_t kc = t == DType::f32 ? 8 : 16;
  for (KsPattern p : {p1, p2})
    if (p.b % 16 || p.c % kc)
      return "the fused pair needs b a multiple of 16 and c a multiple of " + std::to_string(kc) +
             " in every factor; got " + pat(p);
  const Layout L = layout(p1, p2, t);
  const int64_t lim = int64_t(1) << 30;
  if (int64_t(L.LD0) + L.LD1 >= lim / 64 || p1.a * p1.b * p1.c * p1.d >= lim || p2.a * p2.b * p2.c * p2.d >= lim)
    return "the fused pair's sizes exceed its 32-bit indexing";
  if (L.smem(8) > smem_optin())
    return "8 batch rows of the pair (" + std::to_string(L.smem(8)) +
           " bytes of shared memory) do not fit in one block on this device (" + std::to_string(smem_optin()) +
           " bytes)";
  return "";
}

namespace {
// pair_kernel's block shape (fused_pair_pick without the Monarch kernel)
FusedCfg pick_pair(KsPattern p1, KsPattern p2, DType t, int64_t batch, int tb_force) {
  const Layout L = layout(p1, p2, t);
  const int64_t optin = smem_optin();
  if (tb_force) {
    check_arg(L.smem(tb_force) <= optin, "fused_tb", tb_force, " batch rows need ", L.smem(tb_force),
              " bytes of shared memory, the device allows ", optin, " per block");
    return {tb_force, L.smem(tb_force)};
  }
  // Two blocks per SM let one block's copies overlap the other's mma; within that, more rows
  // per block means fewer weight reads from L2 per row; but a small batch takes fewer rows per
  // block so that it still spreads over the SMs (its blocks are latency-bound).
  const int64_t two = (optin - 2048) / 2;
  int top = 32;
  while (top > 8 && (batch + top - 1) / top < sm_count()) top /= 2;
  for (int tb : {32, 16, 8})
    if (tb <= top && L.smem(tb) <= two) return {tb, L.smem(tb)};
  for (int tb : {32, 16, 8})
    if (tb <= top && L.smem(tb) <= optin) return {tb, L.smem(tb)};
  return {};
}
}  // namespace

FusedCfg fused_pair_pick(KsPattern p1, KsPattern p2, DType t, int64_t batch, int tb_force, bool batch_last) {
  check_arg(tb_force == 0 || tb_force == 8 || tb_force == 16 || tb_force == 32 || tb_force == 64, "fused_tb",
            "expected 0 (automatic), 8, 16, 32 or 64, got ", tb_force);
  if (const int S = tb_force ? 0 : mon_s(p1, p2, t, batch_last); S && mon_smem(S) <= smem_optin())
    return {16 * mon_rt(S), mon_smem(S), true};
  return pick_pair(p1, p2, t, batch, tb_force);
}

bool fused_pair_preferred(KsPattern p1, KsPattern p2, int64_t batch, DType t, bool batch_last) {
  // The Monarch kernel where it was measured: monarch(1024, 32) halves, batch-first, 2.15x the
  // factor-by-factor chain per call (2.35x back to back) at batch 25088 (H200); a batch of 16 rows per SM at least keeps its
  // persistent blocks busy. pair_kernel (every other pair) measured 0.15-1.27x: forced-only.
  // bench/NOTES-gpu-ks-scan.md#ks-fused.
  return mon_s(p1, p2, t, batch_last) == 32 && mon_smem(32) <= smem_optin() && batch >= 16 * int64_t(sm_count());
}

int64_t fused_pair_workspace_bytes(KsPattern p1, KsPattern p2, DType t) {
  const int64_t es = t == DType::f32 ? 4 : 2;
  int64_t n = 0;
  for (KsPattern p : {p1, p2})
    if (p.d > 1) n += region(p.a * p.b * p.c * p.d * es);
  return n;
}

void fused_pair(const void* x, const void* w1, const void* w2, void* y, KsPattern p1, KsPattern p2,
                int64_t batch, bool batch_last, DType t, FusedCfg cfg, void* wbuf, cudaStream_t s) {
  check_arg(cfg.ok(), "fused_tb", "no block shape for the fused pair ", pat(p1), " ", pat(p2));
  check_arg(wbuf || fused_pair_workspace_bytes(p1, p2, t) == 0, "workspace",
            "the fused pair needs fused_pair_workspace_bytes() of scratch, got none");
  check_arg(batch >= 1 && (batch + cfg.tb - 1) / cfg.tb < (int64_t(1) << 31), "batch", "expected 1 to 2^31 blocks of ",
            cfg.tb, " rows, got batch ", batch);
  if (cfg.mon) {
    // 16-byte x loads and y stores; an unaligned call runs pair_kernel (its scratch is reserved)
    auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const int S = mon_s(p1, p2, t, batch_last);
    check_arg(S > 0, "fused_tb", "the Monarch kernel does not take the pair ", pat(p1), " ", pat(p2));
    if (al(x) && al(y))
      return t == DType::f16 ? launch_mon_t<__half>(x, w1, w2, y, S, batch, s)
                             : launch_mon_t<__nv_bfloat16>(x, w1, w2, y, S, batch, s);
    const FusedCfg old = pick_pair(p1, p2, t, batch, 0);
    return fused_pair(x, w1, w2, y, p1, p2, batch, batch_last, t, old, wbuf, s);
  }
  switch (t) {
    case DType::f32: return launch<float>(x, w1, w2, y, p1, p2, batch, batch_last, t, cfg, wbuf, s);
    case DType::f16: return launch<__half>(x, w1, w2, y, p1, p2, batch, batch_last, t, cfg, wbuf, s);
    case DType::bf16: return launch<__nv_bfloat16>(x, w1, w2, y, p1, p2, batch, batch_last, t, cfg, wbuf, s);
    default: check_arg(false, "dtype", "the fused pair runs float32, float16 and bfloat16, got ", dtype_name(t));
  }
}

}  // namespace strux::cuda::ks
