// Launchers of the fused circulant scan forward (circulant_fused.cuh) for CirculantScanPlan.
#include <cuda_runtime.h>

#include "cuda/check.hpp"
#include "cuda/scan/circulant_fused.cuh"
#include "cuda/scan/circulant_fused.hpp"
#include "cuda/scan/circulant_onepass.cuh"
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

// The single-pass kernel's virtual steps per chunk (circulant_onepass.cuh): even, and few enough
// that two blocks' chunks fit an SM's shared memory (about 100 KB each at n >= 512; registers
// allow two blocks per SM at every n), while small n take more steps so a block's fixed costs
// (look-back, barriers) are spread over more data.
int64_t onepass_steps(int64_t n) { return n == 64 ? 64 : n == 128 ? 32 : 24 / (n == 1024 ? 2 : 1); }

int64_t onepass_part(int64_t B, int64_t n, const CircFusedShape& sh) {
  return (B * sh.C * (n / 2) * int64_t(sizeof(float2)) + 255) / 256 * 256;
}
int64_t onepass_flags(int64_t B, const CircFusedShape& sh) { return 256 + (B * sh.C * 4 + 255) / 256 * 256; }

// Twiddles, S steps' spectra and, in the Fourier form, S steps' â (Q per step).
template <int N, bool FOURIER>
int64_t onepass_smem(int64_t S) {
  return (N + S * scan::OnePass<N>::ZS + (FOURIER ? S * scan::OnePass<N>::Q : 0)) * int64_t(sizeof(float2));
}

template <int N, bool FOURIER>
int64_t onepass_grid(int64_t S, int64_t sms) {
  const int64_t smem = onepass_smem<N, FOURIER>(S);
  STRUX_CUDA(cudaFuncSetAttribute(scan::circ_onepass<N, FOURIER>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(smem)));
  int per_sm = 0;
  STRUX_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scan::circ_onepass<N, FOURIER>,
                                                           scan::OP_THREADS, size_t(smem)));
  return (per_sm < 1 ? 1 : per_sm) * sms;
}

template <bool FOURIER>
int64_t onepass_grid_n(int64_t n, int64_t S, int64_t sms) {
  switch (n) {
    case 64: return onepass_grid<64, FOURIER>(S, sms);
    case 128: return onepass_grid<128, FOURIER>(S, sms);
    case 256: return onepass_grid<256, FOURIER>(S, sms);
    case 512: return onepass_grid<512, FOURIER>(S, sms);
    case 1024: return onepass_grid<1024, FOURIER>(S, sms);
    default: check_arg(false, "n", "the fused circulant scan takes n = 64, 128, 256, 512 or 1024, got ", n);
  }
  return 0;
}

template <int N, bool FOURIER>
void onepass_launch(const scan::OnePassArgs& g, unsigned grid, int64_t S, cudaStream_t s) {
  scan::circ_onepass<N, FOURIER><<<grid, scan::OP_THREADS, onepass_smem<N, FOURIER>(S), s>>>(g);
}

template <bool FOURIER>
void onepass_run(int64_t B, int64_t T, int64_t n, const CircFusedShape& sh, const float* a, const float2* ah,
                 const float* u, const float* h0, float* h, void* ws, cudaStream_t s) {
  char* w = static_cast<char*>(ws);
  const int64_t flags = onepass_flags(B, sh), part = onepass_part(B, n, sh);
  // The ticket counter and the flags start at 0 on every call (the workspace is the caller's).
  STRUX_CUDA(cudaMemsetAsync(w, 0, size_t(flags), s));
  scan::OnePassArgs g{a, ah, u, h0, h, reinterpret_cast<unsigned int*>(w), reinterpret_cast<unsigned int*>(w + 256),
                      reinterpret_cast<float2*>(w + flags), reinterpret_cast<float2*>(w + flags + part),
                      reinterpret_cast<float2*>(w + flags + 2 * part), B, T, int(sh.L), int(sh.C)};
  const unsigned grid = unsigned(sh.grid);
  switch (n) {
    case 64: onepass_launch<64, FOURIER>(g, grid, sh.L, s); break;
    case 128: onepass_launch<128, FOURIER>(g, grid, sh.L, s); break;
    case 256: onepass_launch<256, FOURIER>(g, grid, sh.L, s); break;
    case 512: onepass_launch<512, FOURIER>(g, grid, sh.L, s); break;
    case 1024: onepass_launch<1024, FOURIER>(g, grid, sh.L, s); break;
    default: check_arg(false, "n", "the fused circulant scan takes n = 64, 128, 256, 512 or 1024, got ", n);
  }
  STRUX_LAUNCH("circ_onepass");
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

CircFusedShape circulant_onepass_shape(int64_t B, int64_t T, int64_t n, int64_t sms, bool fourier) {
  const int64_t S = onepass_steps(n), C = (T + 1 + S - 1) / S;
  const int64_t grid = fourier ? onepass_grid_n<true>(n, S, sms) : onepass_grid_n<false>(n, S, sms);
  return {S, C, grid < B * C ? grid : B * C};
}

int64_t circulant_onepass_workspace(int64_t B, int64_t n, const CircFusedShape& sh) {
  return onepass_flags(B, sh) + 3 * onepass_part(B, n, sh);
}

void circulant_onepass_forward(int64_t B, int64_t T, int64_t n, const CircFusedShape& sh, const float* a,
                               const float* u, const float* h0, float* h, void* ws, cudaStream_t s) {
  onepass_run<false>(B, T, n, sh, a, nullptr, u, h0, h, ws, s);
}

void circulant_onepass_forward_fourier(int64_t B, int64_t T, int64_t n, const CircFusedShape& sh, const void* a_hat,
                                       const float* u, const float* h0, float* h, void* ws, cudaStream_t s) {
  onepass_run<true>(B, T, n, sh, nullptr, static_cast<const float2*>(a_hat), u, h0, h, ws, s);
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
