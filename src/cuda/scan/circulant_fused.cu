// Launchers of the fused circulant scan forward (circulant_fused.cuh) for CirculantScanPlan.
#include <cuda_runtime.h>

#include "cuda/check.hpp"
#include "cuda/scan/circulant_fused.cuh"
#include "cuda/scan/circulant_fused.hpp"
#include "strux/core.hpp"

namespace strux::cuda {

namespace {
template <int N>
void run(scan::CircFusedArgs g, cudaStream_t s) {
  using F = scan::CircFused<N>;
  const dim3 grid(unsigned(g.C), unsigned(g.B));
  scan::circ_fused_summary<N><<<grid, F::NT, 0, s>>>(g);
  STRUX_LAUNCH("circ_fused_summary");
  const int64_t threads = g.B * F::NF;
  scan::circ_fused_carry<N><<<unsigned((threads + 255) / 256), 256, 0, s>>>(g);
  STRUX_LAUNCH("circ_fused_carry");
  scan::circ_fused_apply<N><<<grid, F::NT, 0, s>>>(g);
  STRUX_LAUNCH("circ_fused_apply");
}
}  // namespace

bool circulant_fused_applies(int64_t n) { return n >= 64 && n <= 1024 && (n & (n - 1)) == 0; }

CircFusedShape circulant_fused_shape(int64_t B, int64_t T, int64_t n, int64_t sms) {
  // About 8 blocks of 256 threads' worth per SM over (chunk, batch row) for the two streaming
  // kernels (small n has small blocks: more of them), while the carry kernel's chain over chunks
  // stays at most 128 long.
  const int64_t nt = n / 2 < 256 ? n / 2 : 256;
  int64_t C = (8 * sms * (256 / nt) + B - 1) / B;
  C = C < 1 ? 1 : C > 128 ? 128 : C;
  C = C > T ? T : C;
  const int64_t L = (T + C - 1) / C;
  return {L, (T + L - 1) / L};
}

int64_t circulant_fused_workspace(int64_t B, int64_t n, const CircFusedShape& sh) {
  return 3 * ((B * sh.C * (n / 2 + 1) * int64_t(sizeof(float2)) + 255) / 256 * 256);
}

void circulant_fused_forward(int64_t B, int64_t T, int64_t n, const CircFusedShape& sh, const float* a,
                             const float* u, const float* h0, float* h, void* ws, cudaStream_t s) {
  const int64_t part = (B * sh.C * (n / 2 + 1) * int64_t(sizeof(float2)) + 255) / 256 * 256;
  char* w = static_cast<char*>(ws);
  scan::CircFusedArgs g{a, u, h0, h, reinterpret_cast<float2*>(w), reinterpret_cast<float2*>(w + part),
                        reinterpret_cast<float2*>(w + 2 * part), B, T, sh.L, sh.C};
  switch (n) {
    case 64: return run<64>(g, s);
    case 128: return run<128>(g, s);
    case 256: return run<256>(g, s);
    case 512: return run<512>(g, s);
    case 1024: return run<1024>(g, s);
    default: break;
  }
  check_arg(false, "n", "the fused circulant scan takes n = 64, 128, 256, 512 or 1024, got ", n);
}

}  // namespace strux::cuda
