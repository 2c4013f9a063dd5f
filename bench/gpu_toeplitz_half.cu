// Side-by-side timing of the one-right-hand-side F̂ product kernels of src/cuda/toeplitz/multi.cu
// (included whole, so its kernels can be launched with explicit template arguments): complex64 F̂
// against bfloat16 / float16 pairs, each with its variants (rows per warp, packs in flight, 16-byte
// x̂ loads; adjoint rows in flight), in one process, with the device-to-device copy bandwidth
// measured in the same run. Each variant's output is compared with the first variant of its family
// (the kernel shape before 2026-11-27); rows split among threads change the summation order only.
// Build (on the GPU machine, from the repository root):
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -Isrc -Iinclude \
//        bench/gpu_toeplitz_half.cu src/cuda/device.cu -o build/gpu_toeplitz_half
//   build/gpu_toeplitz_half [NFREQ ND NM ...]     one JSON line per kernel and shape
// "library" lines run the launch the library makes (launch_one / launch_one_half) for the shape.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/toeplitz/multi.cu"

using namespace strux::cuda::toeplitz_detail;
using strux::cuda::check_cuda;

namespace bench_half {

__global__ void fill(float* p, size_t n, unsigned seed) {  // deterministic values in [-1, 1)
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = float(h & 0xffffff) / float(1 << 23) - 1.0f;
  }
}
__global__ void to_bf16(const float2* a, __nv_bfloat162* b, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    b[i] = __float22bfloat162_rn(a[i]);
}

template <class Launch>
float median_ms(Launch launch, int reps) {
  cudaEvent_t a, b;
  STRUX_CUDA(cudaEventCreate(&a));
  STRUX_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    STRUX_CUDA(cudaEventRecord(a));
    launch();
    STRUX_CUDA(cudaEventRecord(b));
    STRUX_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    STRUX_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double max_rel_diff(const float2* y, const float2* ref, size_t n) {
  std::vector<float2> h(n), r(n);
  STRUX_CUDA(cudaMemcpy(h.data(), y, n * 8, cudaMemcpyDeviceToHost));
  STRUX_CUDA(cudaMemcpy(r.data(), ref, n * 8, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, double(std::abs(h[i].x - r[i].x)) + std::abs(h[i].y - r[i].y));
    den = std::max(den, double(std::abs(r[i].x)) + std::abs(r[i].y));
  }
  return den > 0 ? num / den : num;
}

}  // namespace bench_half

using namespace bench_half;

int main(int argc, char** argv) {
  std::vector<int64_t> shapes;
  for (int i = 1; i < argc; ++i) shapes.push_back(std::atoll(argv[i]));
  if (shapes.empty()) shapes = {1001, 100, 5000, 1001, 1024, 1024, 501, 2499, 2499, 1001, 100, 4999};
  const int reps = 15;
  for (size_t s = 0; s + 2 < shapes.size(); s += 3) {
    const int64_t nfreq = shapes[s], Nd = shapes[s + 1], Nm = shapes[s + 2];
    const size_t nF = size_t(nfreq) * Nd * Nm, nX = size_t(nfreq) * std::max(Nd, Nm);
    float2 *F, *X, *Y, *Yref;
    __nv_bfloat162* Fh;
    STRUX_CUDA(cudaMalloc(&F, nF * 8));
    STRUX_CUDA(cudaMalloc(&Fh, nF * 4));
    STRUX_CUDA(cudaMalloc(&X, nX * 8));
    STRUX_CUDA(cudaMalloc(&Y, nX * 8));
    STRUX_CUDA(cudaMalloc(&Yref, nX * 8));
    fill<<<4096, 256>>>(reinterpret_cast<float*>(F), nF * 2, 1u);
    fill<<<4096, 256>>>(reinterpret_cast<float*>(X), nX * 2, 2u);
    to_bf16<<<4096, 256>>>(F, Fh, nF);
    STRUX_CUDA(cudaDeviceSynchronize());
    // Copy bandwidth (bytes read + written) over the complex64 F̂'s bytes.
    float2* tmp;
    STRUX_CUDA(cudaMalloc(&tmp, nF * 4));
    const float copy_ms = median_ms([&] { STRUX_CUDA(cudaMemcpyAsync(tmp, F, nF * 4, cudaMemcpyDeviceToDevice)); }, reps);
    STRUX_CUDA(cudaFree(tmp));
    const double copy_gbs = 2.0 * nF * 4 / copy_ms / 1e6;
    std::printf("{\"shape\": [%lld, %lld, %lld], \"kernel\": \"copy\", \"ms\": %.4f, \"GBps\": %.1f}\n",
                (long long)nfreq, (long long)Nd, (long long)Nm, copy_ms, copy_gbs);
    auto report = [&](const char* name, bool adj, size_t fbytes, float ms, double diff) {
      const double gbs = fbytes / ms / 1e6;
      std::printf("{\"shape\": [%lld, %lld, %lld], \"kernel\": \"%s\", \"adjoint\": %s, \"ms\": %.4f, "
                  "\"GBps\": %.1f, \"of_copy\": %.3f, \"rel_diff\": %.2e}\n",
                  (long long)nfreq, (long long)Nd, (long long)Nm, name, adj ? "true" : "false", ms, gbs,
                  gbs / copy_gbs, diff);
      std::fflush(stdout);
    };
    const unsigned thr = kThreads;
    // matvec: a warp per (frequency, ROWS rows).
    auto mv = [&](auto kernel, int rows, const auto* Fp, const char* name, bool ref, size_t esize) {
      const int64_t warps = nfreq * ((Nd + rows - 1) / rows);
      const unsigned grid = unsigned((warps + kWarps - 1) / kWarps);
      auto go = [&] { kernel<<<grid, thr>>>(Fp, X, ref ? Yref : Y, nfreq, Nd, Nm, int64_t(1), int64_t(0), 1.0f); };
      const float ms = median_ms(go, reps);
      STRUX_LAUNCH("bench matvec");
      report(name, false, nF * esize, ms, ref ? 0.0 : max_rel_diff(Y, Yref, size_t(nfreq) * Nd));
    };
    // adjoint: a thread per K columns, `split` threads per column (row segments summed in order)
    auto av = [&](auto kernel, int K, int split, const auto* Fp, const char* name, bool ref, size_t esize) {
      const int64_t cols = nfreq * (Nm / K), per = thr / split;
      const unsigned grid = unsigned((cols + per - 1) / per);
      auto go = [&] { kernel<<<grid, thr>>>(Fp, X, ref ? Yref : Y, nfreq, Nd, Nm, int64_t(1), int64_t(0), 1.0f); };
      const float ms = median_ms(go, reps);
      STRUX_LAUNCH("bench adjoint");
      report(name, true, nF * esize, ms, ref ? 0.0 : max_rel_diff(Y, Yref, size_t(nfreq) * Nm));
    };
    // adjoint_shift (Nm % K != 0): shift_threads per frequency, CTAs overlapping by one.
    auto sv = [&](auto kernel, int K, const auto* Fp, const char* name, size_t esize) {
      const int64_t threads = nfreq * shift_threads(Nm, K);
      const unsigned grid = unsigned((threads + thr - 2) / (thr - 1));
      auto go = [&] { kernel<<<grid, thr>>>(Fp, X, Y, nfreq, Nd, Nm, int64_t(1), int64_t(0), 1.0f); };
      const float ms = median_ms(go, reps);
      STRUX_LAUNCH("bench adjoint_shift");
      report(name, true, nF * esize, ms, max_rel_diff(Y, Yref, size_t(nfreq) * Nm));
    };
    // The library's choice (launch_one / launch_one_half), against the reference left by the
    // family's last `ref` launch of the same direction.
    auto lib = [&](bool adj, bool half, const char* name) {
      auto go = [&] {
        if (half)
          launch_one_half<float2, float>(Fh, X, Y, nfreq, Nd, Nm, int64_t(1), int64_t(0), adj, 1.0f, nullptr);
        else
          launch_one<float2, float>(F, X, Y, nfreq, Nd, Nm, int64_t(1), int64_t(0), adj, 1.0f, nullptr);
      };
      const float ms = median_ms(go, reps);
      report(name, adj, nF * (half ? 4 : 8), ms, max_rel_diff(Y, Yref, size_t(nfreq) * (adj ? Nm : Nd)));
    };
    using B = __nv_bfloat162;
    if (Nm % 4 == 0 && Nm <= 512) {  // short rows: lanes per row 32, 16, 8
      mv(matvec_one<float2, float, 4, B, 2, 4, true>, 2, Fh, "bf16 r2 u4 xv g32", true, 4);
      mv(matvec_one<float2, float, 4, B, 2, 4, true, 16>, 4, Fh, "bf16 r2 u4 xv g16", false, 4);
      mv(matvec_one<float2, float, 4, B, 2, 4, true, 8>, 8, Fh, "bf16 r2 u4 xv g8", false, 4);
      mv(matvec_one<float2, float, 4, B, 4, 2, true, 8>, 16, Fh, "bf16 r4 u2 xv g8", false, 4);
      mv(matvec_one<float2, float, 4, B, 2, 2, true, 8>, 8, Fh, "bf16 r2 u2 xv g8", false, 4);
      mv(matvec_one<float2, float, 4, B, 4, 1, true, 8>, 16, Fh, "bf16 r4 u1 xv g8", false, 4);
      lib(false, true, "bf16 matvec library");
      mv(matvec_one<float2, float, 2, float2, 4, 2, true>, 4, F, "c64 r4 u2 xv g32", true, 8);
      mv(matvec_one<float2, float, 2, float2, 4, 2, true, 16>, 8, F, "c64 r4 u2 xv g16", false, 8);
      mv(matvec_one<float2, float, 2, float2, 4, 2, true, 8>, 16, F, "c64 r4 u2 xv g8", false, 8);
      lib(false, false, "c64 matvec library");
      av(adjoint_one<float2, float, 4, B, 16>, 4, 1, Fh, "bf16 ud16", true, 4);
      lib(true, true, "bf16 adjoint library");
    } else if (Nm % 4 == 0) {
      mv(matvec_one<float2, float, 2, float2, 2, 4, false>, 2, F, "c64 r2 u4", true, 8);
      mv(matvec_one<float2, float, 2, float2, 2, 4, true>, 2, F, "c64 r2 u4 xv", false, 8);
      mv(matvec_one<float2, float, 2, float2, 4, 2, true>, 4, F, "c64 r4 u2 xv", false, 8);
      mv(matvec_one<float2, float, 2, float2, 4, 4, true>, 4, F, "c64 r4 u4 xv", false, 8);
      mv(matvec_one<float2, float, 4, B, 2, 4, false>, 2, Fh, "bf16 r2 u4", true, 4);
      mv(matvec_one<float2, float, 4, B, 2, 4, true>, 2, Fh, "bf16 r2 u4 xv", false, 4);
      mv(matvec_one<float2, float, 4, B, 4, 2, true>, 4, Fh, "bf16 r4 u2 xv", false, 4);
      mv(matvec_one<float2, float, 4, B, 4, 4, true>, 4, Fh, "bf16 r4 u4 xv", false, 4);
      mv(matvec_one<float2, float, 4, B, 8, 2, true>, 8, Fh, "bf16 r8 u2 xv", false, 4);
      mv(matvec_one<float2, float, 4, B, 8, 1, true>, 8, Fh, "bf16 r8 u1 xv", false, 4);
      av(adjoint_one<float2, float, 2, float2, 8>, 2, 1, F, "c64 ud8", true, 8);
      av(adjoint_one<float2, float, 2, float2, 16>, 2, 1, F, "c64 ud16", false, 8);
      av(adjoint_one<float2, float, 4, B, 8>, 4, 1, Fh, "bf16 ud8", true, 4);
      av(adjoint_one<float2, float, 4, B, 16>, 4, 1, Fh, "bf16 ud16", false, 4);
      av(adjoint_one<float2, float, 4, B, 4>, 4, 1, Fh, "bf16 ud4", false, 4);
      av(adjoint_one<float2, float, 4, B, 16>, 4, 1, Fh, "bf16 ud16 (ref)", true, 4);
      av(adjoint_one<float2, float, 4, B, 16, 2>, 4, 2, Fh, "bf16 ud16 split2", false, 4);
      av(adjoint_one<float2, float, 4, B, 16, 4>, 4, 4, Fh, "bf16 ud16 split4", false, 4);
      av(adjoint_one<float2, float, 4, B, 16, 8>, 4, 8, Fh, "bf16 ud16 split8", false, 4);
      av(adjoint_one<float2, float, 2, float2, 8>, 2, 1, F, "c64 ud8 (ref)", true, 8);
      av(adjoint_one<float2, float, 2, float2, 8, 2>, 2, 2, F, "c64 ud8 split2", false, 8);
      av(adjoint_one<float2, float, 2, float2, 8, 4>, 2, 4, F, "c64 ud8 split4", false, 8);
      av(adjoint_one<float2, float, 2, float2, 8, 8>, 2, 8, F, "c64 ud8 split8", false, 8);
      sv(adjoint_shift<float2, float, 2, float2, 8>, 2, F, "c64 shift2 ud8 (even Nm)", 8);
      lib(true, false, "c64 adjoint library");
    } else if (Nm % 2 == 0) {  // 2 pairs per 8-byte bf16 load
      mv(matvec_one<float2, float, 2, float2, 2, 4, false>, 2, F, "c64 r2 u4", true, 8);
      mv(matvec_one<float2, float, 2, float2, 4, 2, true>, 4, F, "c64 r4 u2 xv", false, 8);
      mv(matvec_one<float2, float, 2, B, 2, 4, false>, 2, Fh, "bf16 k2 r2 u4", true, 4);
      mv(matvec_one<float2, float, 2, B, 4, 4, true>, 4, Fh, "bf16 k2 r4 u4 xv", false, 4);
      mv(matvec_one<float2, float, 2, B, 4, 4, false>, 4, Fh, "bf16 k2 r4 u4", false, 4);
      mv(matvec_one<float2, float, 2, B, 2, 8, true>, 2, Fh, "bf16 k2 r2 u8 xv", false, 4);
      av(adjoint_one<float2, float, 2, float2, 8>, 2, 1, F, "c64 ud8", true, 8);
      sv(adjoint_shift<float2, float, 2, float2, 8>, 2, F, "c64 shift2 ud8 (even Nm)", 8);
      lib(true, false, "c64 adjoint library");
      av(adjoint_one<float2, float, 2, B, 8>, 2, 1, Fh, "bf16 k2 ud8", true, 4);
      av(adjoint_one<float2, float, 2, B, 16>, 2, 1, Fh, "bf16 k2 ud16", false, 4);
      sv(adjoint_shift<float2, float, 4, B, 8>, 4, Fh, "bf16 shift4 ud8", 4);
      sv(adjoint_shift<float2, float, 4, B, 4>, 4, Fh, "bf16 shift4 ud4", 4);
      sv(adjoint_shift<float2, float, 2, B, 16>, 2, Fh, "bf16 shift2 ud16", 4);
      sv(adjoint_shift<float2, float, 2, B, 8>, 2, Fh, "bf16 shift2 ud8", 4);
      lib(true, true, "bf16 adjoint library");
    } else {  // odd Nm: the 1-complex (c64) and 1-pair (bf16) loads
      mv(matvec_one<float2, float, 1, float2, 2, 4, false>, 2, F, "c64 k1 r2 u4", true, 8);
      mv(matvec_one<float2, float, 1, float2, 4, 4, false>, 4, F, "c64 k1 r4 u4", false, 8);
      mv(matvec_one<float2, float, 1, B, 2, 4, false>, 2, Fh, "bf16 k1 r2 u4", true, 4);
      mv(matvec_one<float2, float, 1, B, 4, 4, false>, 4, Fh, "bf16 k1 r4 u4", false, 4);
      mv(matvec_one<float2, float, 1, B, 4, 8, false>, 4, Fh, "bf16 k1 r4 u8", false, 4);
      mv(matvec_one<float2, float, 1, B, 8, 8, false>, 8, Fh, "bf16 k1 r8 u8", false, 4);
      mv(matvec_one<float2, float, 1, B, 4, 16, false>, 4, Fh, "bf16 k1 r4 u16", false, 4);
      av(adjoint_one<float2, float, 1, float2, 8>, 1, 1, F, "c64 k1 ud8", true, 8);
      av(adjoint_one<float2, float, 1, B, 8>, 1, 1, Fh, "bf16 k1 ud8", true, 4);
      av(adjoint_one<float2, float, 1, B, 16>, 1, 1, Fh, "bf16 k1 ud16", false, 4);
      av(adjoint_one<float2, float, 1, B, 32>, 1, 1, Fh, "bf16 k1 ud32", false, 4);
      av(adjoint_one<float2, float, 1, B, 24>, 1, 1, Fh, "bf16 k1 ud24", false, 4);
      av(adjoint_one<float2, float, 1, float2, 8>, 1, 1, F, "c64 k1 ud8 (ref)", true, 8);
      av(adjoint_one<float2, float, 1, float2, 16>, 1, 1, F, "c64 k1 ud16", false, 8);
      av(adjoint_one<float2, float, 1, float2, 8, 2>, 1, 2, F, "c64 k1 ud8 split2", false, 8);
      sv(adjoint_shift<float2, float, 2, float2, 8>, 2, F, "c64 shift2 ud8", 8);
      sv(adjoint_shift<float2, float, 2, float2, 16>, 2, F, "c64 shift2 ud16", 8);
      sv(adjoint_shift<float2, float, 2, float2, 4>, 2, F, "c64 shift2 ud4", 8);
      lib(true, false, "c64 adjoint library");
      av(adjoint_one<float2, float, 1, B, 16>, 1, 1, Fh, "bf16 k1 ud16 (ref)", true, 4);
      sv(adjoint_shift<float2, float, 4, B, 8>, 4, Fh, "bf16 shift4 ud8", 4);
      sv(adjoint_shift<float2, float, 4, B, 4>, 4, Fh, "bf16 shift4 ud4", 4);
      sv(adjoint_shift<float2, float, 2, B, 16>, 2, Fh, "bf16 shift2 ud16", 4);
      sv(adjoint_shift<float2, float, 2, B, 8>, 2, Fh, "bf16 shift2 ud8", 4);
      lib(true, true, "bf16 adjoint library");
    }
    for (void* p : {(void*)F, (void*)Fh, (void*)X, (void*)Y, (void*)Yref}) STRUX_CUDA(cudaFree(p));
  }
  return 0;
}
