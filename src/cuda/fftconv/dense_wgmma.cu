// Geometry and launch of the dense fftconv forward on wgmma (dense_wgmma.hpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/fftconv/dense_wgmma.cuh"
#include "cuda/fftconv/dense_wgmma.hpp"

namespace strux::cuda::dense::wg {

namespace {
// Whether the device runs this file's sm_90a image: the fatbin also holds sm_90 and compute_90
// images (CMakeLists.txt), where forward_kernel is a trap, and which one the driver loads on a
// 9.0 device is its choice. A one-int probe kernel of the same file answers, once per device.
bool loads_sm90a(int dev) {
  static std::mutex mu;
  static std::map<int, bool> seen;
  std::lock_guard<std::mutex> lock(mu);
  const auto it = seen.find(dev);
  if (it != seen.end()) return it->second;
  // An error of someone else's in the slot: not ours to clear, and the probe's own launch error could
  // not be told from it; answer no for now, without caching, and probe on a later plan.
  if (cudaPeekAtLastError() != cudaSuccess) return false;
  int* d = nullptr;
  int h = 0;
  STRUX_CUDA(cudaMalloc(&d, sizeof(int)));
  STRUX_CUDA(cudaMemset(d, 0, sizeof(int)));
  probe_kernel<<<1, 1>>>(d);
  const cudaError_t e = cudaPeekAtLastError();  // no loadable image: not this kernel's device
  clear_own_error(e);
  if (e == cudaSuccess) STRUX_CUDA(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
  STRUX_CUDA(cudaFree(d));
  return seen[dev] = e == cudaSuccess && h == 1;
}
}  // namespace

bool supported(DType dt, bool circular, int64_t L, int64_t Lk) {
  if (dt != DType::f16 && dt != DType::bf16) return false;
  if (circular && (L % kB != 0 || Lk > L)) return false;
  int dev = 0, major = 0, minor = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major == 9 && minor == 0 && loads_sm90a(dev);  // sm_90a code runs on 9.0 only
}

namespace {
// A CTA's time, fitted on rounds 10–11 (H200; bench/NOTES-gpu-fftconv-dense.md round 11): a product
// of the busier warpgroup 212 ns with one CTA per SM, 493 ns with two sharing it; 3.3 µs per tile of
// that warpgroup (epilogue and accumulator setup); 16.2 ns per column of 64 samples (staging). Within
// ±25% but at causal 1025 and circular 256 / 768 (the fit's spread): it only ranks two choices of R.
constexpr double kProductNs[2] = {212, 493};
constexpr double kTileNs = 3300, kColumnNs = 16.2;

// The tiles of R rows per CTA, by warpgroup in turn (tiles wg, wg + 2, …), and the model's CTA time:
// the busier warpgroup's products and tiles, and the staging.
void schedule(Geometry& g, int R, bool circular, int per_sm_bytes) {
  g.R = R;
  const int NR = g.NI * R;
  g.ntile = (NR + kN - 1) / kN;
  g.smem = 1024 + size_t(rows_of(NR)) * 128 + size_t(g.kwords) * 8 + size_t(2) * kN * kSt * 2;
  g.per_sm = g.smem + 1024 <= size_t(per_sm_bytes) / 2 ? 2 : 1;
  double turns[2] = {0, 0};
  for (int t = 0; t < g.ntile; ++t)  // tap blocks of tile t (the kernel's dmax + 1)
    turns[t % 2] += circular ? g.D : std::min(g.D - 1, (std::min((t + 1) * kN, NR) - 1) / R) + 1;
  const double products = std::max(turns[0], turns[1]), tiles = (g.ntile + 1) / 2;
  g.cta_ns = products * kProductNs[g.per_sm - 1] + tiles * kTileNs + kColumnNs * NR;
}
}  // namespace

Geometry plan(int64_t B, int64_t H, int64_t L, int64_t m, bool circular) {
  Geometry g;
  g.NI = int((L + kB - 1) / kB);
  g.D = int((m + kB - 2) / kB) + 1;
  g.kwords = ((kB * g.D + 66) / 2 + 3) / 4 * 4;  // pairs up to z = 64·D + 64; a multiple of 4 words
  int dev = 0, optin = 0, per_sm = 0;
  STRUX_CUDA(cudaGetDevice(&dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  STRUX_CUDA(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  const double sms = current_sm_count();
  // R: a multiple of 8 (the swizzle atom) with a full tile of columns, NI·R >= 128 (the circular
  // copy of V's first 128 rows needs them), rows past B zeros. The least such R, or where it makes
  // one tile (warpgroup 1 idle) a larger one with two tiles and still two CTAs per SM, whichever
  // the model predicts faster (waves of CTAs × a CTA's time).
  const int least = std::max(8, ((kN + g.NI - 1) / g.NI + 7) / 8 * 8);
  schedule(g, least, circular, per_sm);
  const auto waves_ns = [&](const Geometry& c) {
    return std::ceil(double(H) * double((B + c.R - 1) / c.R) / (sms * c.per_sm)) * c.cta_ns;
  };
  if (g.ntile == 1 && B > least) {
    Geometry c = g;
    schedule(c, std::min(64, (2 * kN + g.NI - 1) / g.NI + 7) / 8 * 8, circular, per_sm);
    if (c.ntile >= 2 && c.per_sm == 2 && waves_ns(c) < waves_ns(g)) g = c;
  }
  const int64_t nchunk = (B + g.R - 1) / g.R;
  g.nchunk = int(std::min<int64_t>(nchunk, INT32_MAX));
  g.smem_fits = g.smem <= size_t(optin);
  g.fits = g.smem_fits && nchunk <= INT32_MAX / H;
  return g;
}

namespace {
template <class T>
void launch(const Geometry& g, const void* taps, const void* u, void* y, int64_t B, int64_t H, int64_t L, int64_t m,
            bool circular, cudaStream_t s) {
  const Params<T> p{static_cast<const T*>(taps), static_cast<const T*>(u), static_cast<T*>(y), B, H, L, int(m), g.NI,
                    g.D, g.R, g.nchunk, g.kwords, g.ntile, circular};
  const bool vec = L % 8 == 0 && reinterpret_cast<uintptr_t>(u) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const auto kernel = vec ? forward_kernel<T, true> : forward_kernel<T, false>;
  STRUX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(g.smem)));
  kernel<<<unsigned(H * g.nchunk), kThreads, g.smem, s>>>(p);
  STRUX_LAUNCH("fftconv dense forward (wgmma)");
}
}  // namespace

void forward(DType dt, const Geometry& g, const void* taps, const void* u, void* y, int64_t B, int64_t H, int64_t L,
             int64_t m, bool circular, cudaStream_t s) {
  if (dt == DType::f16)
    launch<__half>(g, taps, u, y, B, H, L, m, circular, s);
  else
    launch<__nv_bfloat16>(g, taps, u, y, B, H, L, m, circular, s);
}

}  // namespace strux::cuda::dense::wg
