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
  int* d = nullptr;
  int h = 0;
  STRUX_CUDA(cudaMalloc(&d, sizeof(int)));
  STRUX_CUDA(cudaMemset(d, 0, sizeof(int)));
  probe_kernel<<<1, 1>>>(d);
  const cudaError_t e = cudaGetLastError();  // no loadable image: not this kernel's device
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
// The CTA-product times (ns, H200 round 10, bench/NOTES-gpu-fftconv-dense.md) that weigh the choice
// of rows per CTA: one CTA per SM runs a product in ~400 ns, two CTAs sharing an SM ~680 ns each.
constexpr double kProductNs[2] = {400, 680};

// The tile schedule for R rows per CTA (Geometry's comment).
void schedule(Geometry& g, int R, bool circular) {
  g.R = R;
  const int NR = g.NI * R;
  g.ntile = (NR + kN - 1) / kN;
  double turns[2] = {0, 0}, halves = 0;
  for (int t = 0; t < g.ntile; ++t) {
    // tap blocks of tile t (the kernel's dmax + 1: causal tiles need the blocks whose rows reach them)
    const int blocks = circular ? g.D : std::min(g.D - 1, (std::min((t + 1) * kN, NR) - 1) / R) + 1;
    turns[t % 2] += blocks;
    halves += (blocks + 1) / 2 + 0.5;
  }
  g.split_d = halves < std::max(turns[0], turns[1]);
  g.critical = std::min(halves, std::max(turns[0], turns[1]));
  g.smem = 1024 + size_t(rows_of(NR)) * 128 + size_t(g.kwords) * 8 + size_t(2) * kN * kSt * 2;
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
  // copy of V's first 128 rows needs them), rows past B zeros; among those up to 64 rows that fit,
  // the least predicted time: waves of CTAs (one or two per SM: shared memory; registers allow two)
  // times the critical path. More rows fill the last tile (NI = 17: 136 columns at R = 8) and even
  // out causal tiles, at fewer CTAs per SM.
  const int least = std::max(8, ((kN + g.NI - 1) / g.NI + 7) / 8 * 8);
  double best = -1;
  for (int R = least; R <= std::max(least, 64); R += 8) {
    Geometry c = g;
    schedule(c, R, circular);
    if (c.smem > size_t(optin)) break;
    const int per = c.smem + 1024 <= size_t(per_sm) / 2 ? 2 : 1;
    const double ctas = double(H) * double((B + R - 1) / R);
    const double t = std::ceil(ctas / (sms * per)) * c.critical * kProductNs[per - 1];
    if (best < 0 || t < best) best = t, g = c;
    if (R >= B) break;  // more rows than the batch: dead rows only
  }
  if (best < 0) schedule(g, least, circular);  // nothing fits: `fits` says so
  const int64_t nchunk = (B + g.R - 1) / g.R;
  g.nchunk = int(std::min<int64_t>(nchunk, INT32_MAX));
  g.fits = g.smem <= size_t(optin) && nchunk <= INT32_MAX;
  return g;
}

namespace {
template <class T>
void launch(const Geometry& g, const void* taps, const void* u, void* y, int64_t B, int64_t H, int64_t L, int64_t m,
            bool circular, cudaStream_t s) {
  const Params<T> p{static_cast<const T*>(taps), static_cast<const T*>(u), static_cast<T*>(y), B, H, L, int(m), g.NI,
                    g.D, g.R, g.nchunk, g.kwords, g.ntile, circular, g.split_d};
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
