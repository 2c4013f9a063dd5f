// The tensor-core fftconv kernels: real FFTs of size nfft = 256 … 16384 as complex FFTs of size
// M = nfft/2 = r·16^P (r in {1, 2, 4, 8}, P in {1, 2, 3}): a radix-r pass on CUDA cores and P
// radix-16 passes, each a complex 16×16 DFT matrix times the data, done as real mma.sync
// m16n8k16 products with float32 accumulation.
//
// Layout. One real row v of length nfft is one complex sequence z[n] = v[2n] + i·v[2n+1],
// n < M (as the fused kernels pack it), so rows never mix: a NaN stays in its own row. A CTA
// holds `seqs` sequences of M float2 in shared memory. The forward transform is decimation in
// frequency in place (natural order in, digit-reversed order out: position p = k·Q + digrev(f'),
// frequency f = k + r·f', Q = 16^P), and the inverse (decimation in time, the passes in reverse
// with conjugate matrices and twiddles) brings natural order back. Between the innermost forward
// and inverse passes each element becomes Z'[f] = α_f·Z[f] + β_f·conj(Z[M − f]): the real-FFT
// untangle, the product with the filter's spectrum and the re-tangle as one 2×2 map (middle()),
// with (α, β) per position from the filter (spectrum_kernel), computed by the same transform.
//
// Precision. Each mma operand is split into hi + lo halves of the 16-bit type (lo scaled by
// 2^11 for f16 / 2^8 for bf16 so it stays normal, accumulated separately and scaled back):
// D = A_hi·B_hi + (A_hi·B_lo + A_lo·B_hi)·2^-s, three mma per product, error ~1e-7 relative per
// stage (the dropped A_lo·B_lo term), so the conv error is the output rounding alone. Each
// forward radix-16 pass scales by 1/16 (exact) so intermediates never grow past max|v|, which
// keeps f16 operands in range.
//
// Shared memory is swizzled (swz) so that the mma fragment loads and stores of every pass hit
// 16 distinct 8-byte bank pairs per half warp.
#pragma once

#include <cstdint>

#include "cuda/elem.cuh"
#include "cuda/mma16.cuh"
#include "cuda/fftconv/fused.cuh"

namespace strux::cuda::tensor {

// ---- sizes -------------------------------------------------------------------------------------
// Template parameter N below: the complex length M = nfft/2 (128 … 8192).
__host__ __device__ constexpr int passes16(int N) { return N >= 4096 ? 3 : N >= 256 ? 2 : 1; }
__host__ __device__ constexpr int pow16(int p) { return p == 0 ? 1 : 16 * pow16(p - 1); }
__host__ __device__ constexpr int radix_r(int N) { return N / pow16(passes16(N)); }
// Threads per CTA and sequences per CTA (seqs·N = 8192 points, 64 KB).
__host__ __device__ constexpr int threads_for(int) { return 256; }
__host__ __device__ constexpr int seqs_for(int N) { return 8192 / N; }
// The spectrum kernel's sequences per CTA: an eighth of the forward's (at least 1), so that its
// tiles still fill the 8 warps (seqs·N/128 >= 8) while H filters make H / spec_seqs_for(N) CTAs
// (with the forward's count, nfft 256 and H = 768 gave 12 CTAs on 132 SMs: 15–24 us).
__host__ __device__ constexpr int spec_seqs_for(int N) { return seqs_for(N) / 8 > 1 ? seqs_for(N) / 8 : 1; }
// Resident CTAs per SM the register budget is set for (64 KB of shared memory per CTA: three
// fit in the H100's 228 KB, two in the A100's 164 KB).
// TB: tiles per warp in flight in each radix-16 pass (1, or 2 with the register budget of one
// resident CTA less; measured no faster than 1, which every launch now uses).
// FT (pass16): factored twiddle lookups, plan algo 7. SC, RX: plan algos 5 and 6 (below).
__host__ __device__ constexpr int blocks_for(int, int TB = 1) { return 4 - TB; }

// ---- shared-memory swizzle --------------------------------------------------------------------
// Bit 0 ^= parity of bits 4, 8, 12, …; bit 3 ^= parity of bits 5, 9, 13, …; bit 2 ^= parity of
// bits 6, 10, 14, … (an involution that permutes each aligned group of 16 float2). XOR-linear:
// swz(a ^ b) = swz(a) ^ swz(b). With it every half warp's fragment loads and stores of every
// radix-16 pass touch 16 distinct 8-byte bank pairs (checked for all passes offline).
__device__ __forceinline__ int swz(int a) {
  return a ^ (__popc(a & 0x11111110) & 1) ^ ((__popc(a & 0x22222220) & 1) << 3) ^
         ((__popc(a & 0x44444440) & 1) << 2);
}

// ---- 16-bit operand types: cuda/mma16.cuh -------------------------------------------------------
template <class E>
using Op = Mma16<E>;

// hi/lo halves of a pair (a, b), each packed as one 32-bit operand register (lo() on demand,
// so the one-product probe does not compute it).
template <class E>
struct Split2 {
  float a, b, ah, bh;
  uint32_t hi;
  __device__ __forceinline__ Split2(float a_, float b_) : a(a_), b(b_) {
    ah = Op<E>::round(a), bh = Op<E>::round(b);
    hi = Op<E>::pack(ah, bh);
  }
  __device__ __forceinline__ uint32_t lo() const { return Op<E>::pack((a - ah) * Op<E>::kLo, (b - bh) * Op<E>::kLo); }
};

// A-operand fragments (16×16, row-major) of the DFT-16 matrix F[k][n] = exp(−2πi·kn/16):
// real part Fr, imaginary part Fi and −Fi, each as hi and lo. Thread (g = lane/4, q = lane%4)
// holds rows g, g + 8 and columns 2q, 2q + 1, 2q + 8, 2q + 9 (PTX m16n8k16 A layout).
// split: three products per real product (hi/lo); false: one (A_hi·B_hi), the benchmark probe
// of what the splits cost (error ≈ 5–6e-4 for float16 out).
template <class E>
struct Dft16 {
  uint32_t fr_hi[4], fr_lo[4], fi_hi[4], fi_lo[4], nfi_hi[4], nfi_lo[4];
  bool split;
  __device__ __forceinline__ Dft16(int lane, bool split_) : split(split_) {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const int row = g + 8 * (reg & 1), col = 2 * q + 8 * (reg >> 1);
      float c[2], s[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) sincospif(float((row * (col + e)) & 15) / 8.f, &s[e], &c[e]);
      const Split2<E> r(c[0], c[1]), i(-s[0], -s[1]), ni(s[0], s[1]);
      fr_hi[reg] = r.hi, fr_lo[reg] = r.lo();
      fi_hi[reg] = i.hi, fi_lo[reg] = i.lo();
      nfi_hi[reg] = ni.hi, nfi_lo[reg] = ni.lo();
    }
  }
};

// One 16×8 complex tile: Y = M·X for M = F (Inverse = false) or conj(F). x[e][h]: the thread's
// inputs at rows 2q + e + 8h, column g. Returns y[e][h] at rows g + 8h, column 2q + e.
// Per real product: A_hi·B_hi into the main accumulator, and when F.split, A_hi·B_lo + A_lo·B_hi
// into a second one (both lo halves scaled by kLo), added back scaled by 1/kLo.
// SC (short chains, plan algos 5 and 6): each lo accumulator split in two, so no accumulator
// chain is longer than two dependent mma (four otherwise): the tile's latency falls by about two
// mma latencies; the float32 sums of the lo terms come in another order (≈ 1e-7·2^-11).
template <class E, bool Inverse, bool SC = false>
__device__ __forceinline__ void tile_dft(const Dft16<E>& F, const float2 (&x)[2][2], float2 (&y)[2][2]) {
  const Split2<E> r0(x[0][0].x, x[1][0].x), r1(x[0][1].x, x[1][1].x);  // Xr: rows 2q,2q+1 | 2q+8,2q+9
  const Split2<E> i0(x[0][0].y, x[1][0].y), i1(x[0][1].y, x[1][1].y);  // Xi
  // lo halves now (their inputs die here: fewer live registers across the products)
  uint32_t r0l = 0, r1l = 0, i0l = 0, i1l = 0;
  if (F.split) r0l = r0.lo(), r1l = r1.lo(), i0l = i0.lo(), i1l = i1.lo();
  float yr[4] = {0.f, 0.f, 0.f, 0.f}, yrl[4] = {0.f, 0.f, 0.f, 0.f};
  float yi[4] = {0.f, 0.f, 0.f, 0.f}, yil[4] = {0.f, 0.f, 0.f, 0.f};
  [[maybe_unused]] float yrl2[4] = {0.f, 0.f, 0.f, 0.f}, yil2[4] = {0.f, 0.f, 0.f, 0.f};
  float(&yrm)[4] = SC ? yrl2 : yrl;  // the A_lo·B_hi terms
  float(&yim)[4] = SC ? yil2 : yil;
  // F: Yr = Fr·Xr − Fi·Xi, Yi = Fi·Xr + Fr·Xi;  conj(F): Yr = Fr·Xr + Fi·Xi, Yi = −Fi·Xr + Fr·Xi.
  const uint32_t(&ri_hi)[4] = Inverse ? F.fi_hi : F.nfi_hi;  // multiplies Xi in Yr
  const uint32_t(&ri_lo)[4] = Inverse ? F.fi_lo : F.nfi_lo;
  const uint32_t(&ir_hi)[4] = Inverse ? F.nfi_hi : F.fi_hi;  // multiplies Xr in Yi
  const uint32_t(&ir_lo)[4] = Inverse ? F.nfi_lo : F.fi_lo;
  Op<E>::mma(yr, F.fr_hi, r0.hi, r1.hi);
  Op<E>::mma(yr, ri_hi, i0.hi, i1.hi);
  Op<E>::mma(yi, ir_hi, r0.hi, r1.hi);
  Op<E>::mma(yi, F.fr_hi, i0.hi, i1.hi);
  if (F.split) {
    Op<E>::mma(yrl, F.fr_hi, r0l, r1l);
    Op<E>::mma(yrm, F.fr_lo, r0.hi, r1.hi);
    Op<E>::mma(yrl, ri_hi, i0l, i1l);
    Op<E>::mma(yrm, ri_lo, i0.hi, i1.hi);
    Op<E>::mma(yil, ir_hi, r0l, r1l);
    Op<E>::mma(yim, ir_lo, r0.hi, r1.hi);
    Op<E>::mma(yil, F.fr_hi, i0l, i1l);
    Op<E>::mma(yim, F.fr_lo, i0.hi, i1.hi);
    if constexpr (SC)
#pragma unroll
      for (int i = 0; i < 4; ++i) yrl[i] += yrl2[i], yil[i] += yil2[i];
  }
  constexpr float s = 1.f / Op<E>::kLo;
  // accumulator d[2h + e]: row g + 8h, column 2q + e
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int e = 0; e < 2; ++e) y[e][h] = {yr[2 * h + e] + s * yrl[2 * h + e], yi[2 * h + e] + s * yil[2 * h + e]};
}

// ---- radix-16 passes over the CTA's buffer ------------------------------------------------------
// Pass at digit j on blocks of Q = 16^P points: sub-blocks of S = 16^(j+1), Lw = 16^j. Element
// (row k, column c) of a block, c < Q/16: (c / Lw)·S + k·Lw + c % Lw. A tile is 16 rows × 8
// consecutive columns; tile bases and in-tile offsets occupy disjoint bits, so
// swz(base + off) = swz(base) ^ swz(off). At j = 0 a tile is 128 consecutive points (8 columns of
// 16), also when Q = 16 (its columns are then 8 blocks).
template <int Q, int J>
struct Pass16 {
  static constexpr int Lw = pow16(J), S = 16 * Lw, kTiles = Q / 128;
  static __device__ __forceinline__ int addr(int k, int c) { return (c / Lw) * S + k * Lw + (c & (Lw - 1)); }
  // Unswizzled base of tile t and its first column's index within its sub-block (twiddles).
  static __device__ __forceinline__ void tile(int t, int& base, int& low0) {
    if constexpr (J == 0) {
      base = 128 * t, low0 = 0;
    } else {
      const int blk = t / kTiles, c0 = 8 * (t % kTiles);
      base = blk * Q + addr(0, c0), low0 = c0 & (Lw - 1);
    }
  }
};

// Pass J. Forward (decimation in frequency): y = F·x per column, then y *= W_S^(low·k)/16.
// Inverse (decimation in time): x *= conj W_S^(low·k), then y = conj(F)·x, unscaled.
// tw: W_Q^m = exp(−2πi m/Q), m < Q. Tiles ntile = seqs·N/128 over the CTA's warps.
// W_S^m = tw[(m mod S)·(Q/S)] for S | Q.
template <int Q, int S>
__device__ __forceinline__ float2 tw_at(const float2* __restrict__ tw, int m) {
  return __ldg(tw + (m & (S - 1)) * (Q / S));
}

// FT (factored twiddles): W_S^((low0 + j)·k) = W_S^(low0·k) · W_S^(j·k) with j, k < 16: the
// second factor is the lane's own for the whole pass (looked up once), the first has at most 8
// (forward, two loads per tile) or 4 (inverse) distinct addresses per warp load, where the direct
// lookup has up to 32 distinct cache lines per load (each one L1 wavefront); one more complex
// product per element.
// SC: short mma chains (tile_dft) and, forward, the tile's twiddles loaded before its products.
template <class E, int Q, int J, bool Inverse, int TB, bool FT, bool SC = false>
__device__ __forceinline__ void pass16(float2* __restrict__ buf, int ntile, const Dft16<E>& F,
                                       const float2* __restrict__ tw) {
  using P = Pass16<Q, J>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  int in_off[2][2], out_off[2][2];
  [[maybe_unused]] float2 wl[2][2];  // FT: the lane's W_S^(j·k) for its (e, h)
#pragma unroll
  for (int e = 0; e < 2; ++e)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      in_off[e][h] = swz(P::addr(2 * q + e + 8 * h, g));
      out_off[e][h] = swz(P::addr(g + 8 * h, 2 * q + e));
      if constexpr (FT && J > 0)
        wl[e][h] = tw_at<Q, P::S>(tw, Inverse ? g * (2 * q + e + 8 * h) : (2 * q + e) * (g + 8 * h));
    }
  // TB tiles t0 + b·nwarp per iteration (ntile a multiple of TB·nwarp: forward_kernel asserts it)
  for (int t0 = warp; t0 < ntile; t0 += TB * nwarp) {
    float2 x[TB][2][2], y[TB][2][2];
    int sb[TB], low0[TB];
#pragma unroll
    for (int b = 0; b < TB; ++b) {
      int base;
      P::tile(t0 + b * nwarp, base, low0[b]);
      sb[b] = swz(base);
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float2 v = buf[sb[b] ^ in_off[e][h]];
          if constexpr (Inverse && J > 0) {  // conj twiddle of input row k, column low0 + g
            const int k = 2 * q + e + 8 * h;
            float2 w;
            if constexpr (FT) w = fused::mulf2(tw_at<Q, P::S>(tw, low0[b] * k), wl[e][h]);
            else w = tw_at<Q, P::S>(tw, (low0[b] + g) * k);
            v = {v.x * w.x + v.y * w.y, v.y * w.x - v.x * w.y};
          }
          x[b][e][h] = v;
        }
    }
    [[maybe_unused]] float2 wpre[TB][2][2];  // SC, forward, direct twiddles
    if constexpr (SC && !FT && !Inverse && J > 0)
#pragma unroll
      for (int b = 0; b < TB; ++b)
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
          for (int h = 0; h < 2; ++h) wpre[b][e][h] = tw_at<Q, P::S>(tw, (low0[b] + 2 * q + e) * (g + 8 * h));
#pragma unroll
    for (int b = 0; b < TB; ++b) tile_dft<E, Inverse, SC>(F, x[b], y[b]);
    __syncwarp();  // every lane's loads of these tiles precede any store into them
#pragma unroll
    for (int b = 0; b < TB; ++b) {
      [[maybe_unused]] float2 wt[2];  // FT: W_S^(low0·k) for k = g + 8h
      if constexpr (FT && !Inverse && J > 0)
#pragma unroll
        for (int h = 0; h < 2; ++h) wt[h] = tw_at<Q, P::S>(tw, low0[b] * (g + 8 * h));
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float2 v = y[b][e][h];
          if constexpr (!Inverse) {
            v = {v.x * (1.f / 16.f), v.y * (1.f / 16.f)};
            if constexpr (J > 0) {  // twiddle of output row g + 8h, column low0 + 2q + e
              float2 w;
              if constexpr (FT) w = fused::mulf2(wt[h], wl[e][h]);
              else if constexpr (SC) w = wpre[b][e][h];
              else w = tw_at<Q, P::S>(tw, (low0[b] + 2 * q + e) * (g + 8 * h));
              v = fused::mulf2(v, w);
            }
          }
          buf[sb[b] ^ out_off[e][h]] = v;
        }
    }
  }
}

// Forward passes J = Jhi … Jlo (descending), a barrier after each.
template <class E, int Q, int J, int Jlo, int TB, bool FT, bool SC = false>
__device__ __forceinline__ void forward_from(float2* buf, int ntile, const Dft16<E>& F, const float2* tw) {
  if constexpr (J >= Jlo) {
    pass16<E, Q, J, false, TB, FT, SC>(buf, ntile, F, tw);
    __syncthreads();
    forward_from<E, Q, J - 1, Jlo, TB, FT, SC>(buf, ntile, F, tw);
  }
}
// Inverse passes J = Jlo … Jhi (ascending), a barrier after each.
template <class E, int Q, int J, int Jhi, int TB, bool FT, bool SC = false>
__device__ __forceinline__ void inverse_to(float2* buf, int ntile, const Dft16<E>& F, const float2* tw) {
  if constexpr (J <= Jhi) {
    pass16<E, Q, J, true, TB, FT, SC>(buf, ntile, F, tw);
    __syncthreads();
    inverse_to<E, Q, J + 1, Jhi, TB, FT, SC>(buf, ntile, F, tw);
  }
}

// ---- the middle: innermost passes with the real-FFT untangle and the filter between them ------
// The middle's work goes by pairs of J = 0 tiles such that the partner M − f of every frequency
// f in the pair lies in the pair too (bench/fftconv_tensor_model.py pair_tiles, check_pairs). Per
// sequence (T = Q/128 tiles per block of Q, r blocks): block 0's tiles 0 and 1 (kind 1: its
// frequencies R·f' pair with R·(−f' mod Q)), block 0's tiles j + 1 and T − j, block r/2's tiles c
// and T − 1 − c, block k's tile c and block r − k's tile T − 1 − c (kind 0: the partner of the
// pair's offset o, 0 … 255 over tile A then tile B, is 255 − o). M = 128 (one tile per
// sequence): two sequences, each closed (kind 2).
struct PairTiles {
  int a, b, kind;  // unswizzled bases of tiles A and B in the CTA buffer
};
template <int N>
__device__ __forceinline__ PairTiles pair_tiles(int pi) {
  if constexpr (N == 128) {
    return {256 * pi, 256 * pi + 128, 2};
  } else {
    constexpr int Q = pow16(passes16(N)), R = N / Q, T = Q / 128;
    const int s = pi / (N / 256), j = pi % (N / 256), s0 = s * N;
    if (j < T / 2) return j == 0 ? PairTiles{s0, s0 + 128, 1} : PairTiles{s0 + 128 * (j + 1), s0 + 128 * (T - j), 0};
    if (j < T) return {s0 + (R / 2) * Q + 128 * (j - T / 2), s0 + (R / 2) * Q + 128 * (T - 1 - (j - T / 2)), 0};
    const int k = 1 + (j - T) / T, c = (j - T) % T;
    return {s0 + k * Q + 128 * c, s0 + (R - k) * Q + 128 * (T - 1 - c), 0};
  }
}
// Work item i (0 … 127) of a pair: the pair offsets x, y (0 … 255 over tile A then tile B) it
// updates, each the other's partner, or (self: frequencies 0 and M/2) both their own partners.
// The items cover the pair's 256 points once, so items need no ordering among themselves.
// Kind 0: (i, 255 − i); kinds 1 and 2: closed spans of 2·half points (half = 128, 64).
__device__ __forceinline__ bool item_of(int i, int kind, int& x, int& y) {
  if (kind == 0) {
    x = i, y = 255 - i;
    return false;
  }
  const int half = kind == 1 ? 128 : 64, base = i >= half ? 2 * half : 0, ii = i & (half - 1);
  if (ii == 0) x = 0, y = 8;
  else if (ii < 8) x = ii, y = 16 - ii;
  else if (ii < 16) x = half - 8 + ii, y = half + 23 - ii;
  else x = ii, y = 2 * half + 15 - ii;
  x += base, y += base;
  return ii == 0;
}

// One innermost pass (J = 0) on the tile at swizzled base sb, inside one warp.
template <class E, bool Inverse, bool SC = false>
__device__ __forceinline__ void tile0(float2* __restrict__ buf, int sb, const int (&in_off)[2][2],
                                      const int (&out_off)[2][2], const Dft16<E>& F) {
  float2 x[2][2], y[2][2];
#pragma unroll
  for (int e = 0; e < 2; ++e)
#pragma unroll
    for (int h = 0; h < 2; ++h) x[e][h] = buf[sb ^ in_off[e][h]];
  tile_dft<E, Inverse, SC>(F, x, y);
  __syncwarp();  // every lane's loads of this tile precede any store into it
#pragma unroll
  for (int e = 0; e < 2; ++e)
#pragma unroll
    for (int h = 0; h < 2; ++h) buf[sb ^ out_off[e][h]] = y[e][h];
}

// Per tile pair, inside one warp (no CTA barrier): forward DFT-16 of both tiles, stored unscaled;
// then per work item Z' = α·Z + β·conj(Z_partner) for both of its points (ab(p): (α, β)/16 at
// buffer position p, the forward pass's 1/16 folded in); then the inverse DFT-16 of both tiles.
template <class E, int N, bool SC, class AB>
__device__ __forceinline__ void middle(float2* __restrict__ buf, const Dft16<E>& F, AB ab) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  int in_off[2][2], out_off[2][2];
#pragma unroll
  for (int e = 0; e < 2; ++e)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      in_off[e][h] = swz(16 * g + 2 * q + e + 8 * h);     // row 2q + e + 8h, column g
      out_off[e][h] = swz(16 * (2 * q + e) + g + 8 * h);  // row g + 8h, column 2q + e
    }
  constexpr int npair = seqs_for(N) * N / 256;
  for (int pi = warp; pi < npair; pi += nwarp) {
    const PairTiles pt = pair_tiles<N>(pi);
    const int sa = swz(pt.a), sb = swz(pt.b);
    tile0<E, false, SC>(buf, sa, in_off, out_off, F);
    tile0<E, false, SC>(buf, sb, in_off, out_off, F);
    __syncwarp();
    // unroll 2: all four items' loads hoisted spill at the 80-register budget
#pragma unroll 2
    for (int j = 0; j < 4; ++j) {
      int x, y;
      const bool self = item_of(lane + 32 * j, pt.kind, x, y);
      const int ax = (x & 128 ? sb : sa) ^ swz(x & 127), ay = (y & 128 ? sb : sa) ^ swz(y & 127);
      const float2 zx = buf[ax], zy = buf[ay];
      const float4 cx = ab((x & 128 ? pt.b : pt.a) + (x & 127)), cy = ab((y & 128 ? pt.b : pt.a) + (y & 127));
      const float2 px = self ? zx : zy, py = self ? zy : zx;  // the partners
      buf[ax] = {cx.x * zx.x - cx.y * zx.y + cx.z * px.x + cx.w * px.y,
                 cx.x * zx.y + cx.y * zx.x + cx.w * px.x - cx.z * px.y};
      buf[ay] = {cy.x * zy.x - cy.y * zy.y + cy.z * py.x + cy.w * py.y,
                 cy.x * zy.y + cy.y * zy.x + cy.w * py.x - cy.z * py.y};
    }
    __syncwarp();
    tile0<E, true, SC>(buf, sa, in_off, out_off, F);
    tile0<E, true, SC>(buf, sb, in_off, out_off, F);
  }
  __syncthreads();
}

template <class E, int N>
__device__ __forceinline__ void forward_passes(float2* buf, int ntile, const Dft16<E>& F, const float2* tw) {
  constexpr int P = passes16(N);
  forward_from<E, pow16(P), P - 1, 0, 1, false>(buf, ntile, F, tw);
}

// Forward passes, the middle and the inverse passes: buf goes from the radix-r pass's output to
// the input of the inverse radix-r pass.
template <class E, int N, int TB, bool FT, bool SC, class AB>
__device__ __forceinline__ void convolve_passes(float2* buf, int ntile, const Dft16<E>& F, const float2* tw, AB ab) {
  constexpr int P = passes16(N), Q = pow16(P);
  forward_from<E, Q, P - 1, 1, TB, FT, SC>(buf, ntile, F, tw);
  middle<E, N, SC>(buf, F, ab);
  inverse_to<E, Q, 1, P - 1, TB, FT, SC>(buf, ntile, F, tw);
}

// ---- radix-r pass on CUDA cores (N = r·Q; n = Q·m + c) --------------------------------------------
// x[k] *= exp(Sign·2πi·c·k/N), k = 1 … R−1: one sincospif and running products (R ≤ 8: a few
// ulps, far below the half-precision output rounding).
template <int N, int R, int Sign>
__device__ __forceinline__ void twiddle_r(float2 (&x)[R], int c) {
  float sn, cs;
  sincospif(2.f * float(c) / float(N), &sn, &cs);
  const float2 w1 = {cs, Sign * sn};
  float2 w = w1;
#pragma unroll
  for (int k = 1; k < R; ++k) {
    if (k > 1) w = fused::mulf2(w, w1);
    x[k] = fused::mulf2(x[k], w);
  }
}

// Forward, fused with the load: x[m] = ld(s, n), DFT_r over m, ·W_N^(c·k)/r, stored at k·Q + c.
template <int N, class Load>
__device__ __forceinline__ void load_forward(float2* __restrict__ buf, int seqs, Load ld) {
  constexpr int R = radix_r(N), Q = N / R;
  for (int i = threadIdx.x; i < seqs * Q; i += blockDim.x) {
    const int s = i / Q, c = i % Q;
    float2 x[R];
#pragma unroll
    for (int m = 0; m < R; ++m) x[m] = ld(s, Q * m + c);
    if constexpr (R > 1) {
      fused::dft<R, -1>(x);
      twiddle_r<N, R, -1>(x, c);
    }
#pragma unroll
    for (int k = 0; k < R; ++k) buf[swz(s * N + k * Q + c)] = fused::scale2(x[k], 1.f / float(R));
  }
}

// Inverse, fused with the store: x[k] = buf[k·Q + c]·W_N^(−c·k), IDFT_r, st(s, n, value).
template <int N, class Store>
__device__ __forceinline__ void inverse_store(const float2* __restrict__ buf, int seqs, Store st) {
  constexpr int R = radix_r(N), Q = N / R;
  for (int i = threadIdx.x; i < seqs * Q; i += blockDim.x) {
    const int s = i / Q, c = i % Q;
    float2 x[R];
#pragma unroll
    for (int k = 0; k < R; ++k) x[k] = buf[swz(s * N + k * Q + c)];
    if constexpr (R > 1) {
      twiddle_r<N, R, +1>(x, c);
      fused::dft<R, +1>(x);
    }
#pragma unroll
    for (int m = 0; m < R; ++m) st(s, Q * m + c, x[m]);
  }
}

// RX (plan algo 6): the radix-r passes with every per-item index out of the loop. With 256
// threads and Q ≤ 256, item i = threadIdx.x + 256·it has c = threadIdx.x % Q for every it, so the
// twiddles W_N^(±c·k) are the thread's own (the same running products as twiddle_r, once instead
// of a sincospif per item), and swz(s·N + k·Q + c) = swz(s0·N + c) ^ swz(it·(256/Q)·N + k·Q) (the
// two terms have disjoint bits and swz is XOR-linear): one swizzle per U items, the rest
// constants of the unrolled inner loop, whose U·R ≤ 8 loads the compiler may issue ahead of the
// stores (more spilled at the 80-register budget).
template <int N>
__host__ __device__ constexpr bool rx_ok() {
  return N / radix_r(N) <= 256;
}
template <int N, int R, int Sign>
__device__ __forceinline__ void twiddles_r(float2 (&w)[R], int c) {
  float sn, cs;
  sincospif(2.f * float(c) / float(N), &sn, &cs);
  w[0] = {1.f, 0.f};
  if constexpr (R > 1) w[1] = {cs, Sign * sn};
#pragma unroll
  for (int k = 2; k < R; ++k) w[k] = fused::mulf2(w[k - 1], w[1]);
}

template <int N, int SEQ, class Load>
__device__ __forceinline__ void load_forward_rx(float2* __restrict__ buf, Load ld) {
  constexpr int R = radix_r(N), Q = N / R, IT = SEQ * Q / 256, U = R >= 8 ? 1 : 8 / R;
  static_assert(rx_ok<N>() && IT * 256 == SEQ * Q && IT % U == 0, "RX: 256 threads, Q <= 256");
  const int c = threadIdx.x % Q, s0 = threadIdx.x / Q, a0 = swz(s0 * N + c);
  [[maybe_unused]] float2 w[R];
  if constexpr (R > 1) twiddles_r<N, R, -1>(w, c);
#pragma unroll 1
  for (int i0 = 0; i0 < IT; i0 += U) {
    const int a1 = a0 ^ swz(i0 * (256 / Q) * N);
#pragma unroll
    for (int it = 0; it < U; ++it) {
      const int s = s0 + (i0 + it) * (256 / Q);
      float2 x[R];
#pragma unroll
      for (int m = 0; m < R; ++m) x[m] = ld(s, Q * m + c);
      if constexpr (R > 1) {
        fused::dft<R, -1>(x);
#pragma unroll
        for (int k = 1; k < R; ++k) x[k] = fused::mulf2(x[k], w[k]);
      }
#pragma unroll
      for (int k = 0; k < R; ++k) buf[a1 ^ swz(it * (256 / Q) * N + k * Q)] = fused::scale2(x[k], 1.f / float(R));
    }
  }
}

template <int N, int SEQ, class Store>
__device__ __forceinline__ void inverse_store_rx(const float2* __restrict__ buf, Store st) {
  constexpr int R = radix_r(N), Q = N / R, IT = SEQ * Q / 256, U = R >= 8 ? 1 : 8 / R;
  static_assert(rx_ok<N>() && IT * 256 == SEQ * Q && IT % U == 0, "RX: 256 threads, Q <= 256");
  const int c = threadIdx.x % Q, s0 = threadIdx.x / Q, a0 = swz(s0 * N + c);
  [[maybe_unused]] float2 w[R];
  if constexpr (R > 1) twiddles_r<N, R, +1>(w, c);
#pragma unroll 1
  for (int i0 = 0; i0 < IT; i0 += U) {
    const int a1 = a0 ^ swz(i0 * (256 / Q) * N);
#pragma unroll
    for (int it = 0; it < U; ++it) {
      const int s = s0 + (i0 + it) * (256 / Q);
      float2 x[R];
#pragma unroll
      for (int k = 0; k < R; ++k) x[k] = buf[a1 ^ swz(it * (256 / Q) * N + k * Q)];
      if constexpr (R > 1) {
#pragma unroll
        for (int k = 1; k < R; ++k) x[k] = fused::mulf2(x[k], w[k]);
        fused::dft<R, +1>(x);
      }
#pragma unroll
      for (int m = 0; m < R; ++m) st(s, Q * m + c, x[m]);
    }
  }
}

// The mma operand type of each element type: f16 for f16, bf16 for bf16 (its range).
template <class T>
struct OpOf;
template <>
struct OpOf<__half> {
  using type = __half;
};
template <>
struct OpOf<__nv_bfloat16> {
  using type = __nv_bfloat16;
};

template <class T>
__device__ __forceinline__ float ldf(const T* __restrict__ p, int64_t i) {
  return float(to_c(p[i]));
}

// ---- filter spectrum ------------------------------------------------------------------------------
// Frequency at position p of a sequence (digit-reversed order) and the position of frequency f.
template <int N>
__device__ __forceinline__ int digrev16(int a) {
  int r = 0;
#pragma unroll
  for (int d = 0; d < passes16(N); ++d) r = 16 * r + (a & 15), a >>= 4;
  return r;
}
template <int N>
__device__ __forceinline__ int freq_of(int p) {
  constexpr int Q = pow16(passes16(N));
  return p / Q + (N / Q) * digrev16<N>(p % Q);
}
template <int N>
__device__ __forceinline__ int pos_of(int f) {
  constexpr int Q = pow16(passes16(N)), R = N / Q;
  return (f % R) * Q + digrev16<N>(f / R);
}

// ab[h][p] = (α, β)/16 of the middle at position p (tensor.cuh top): from K = rfft(k[h, :Lmin]
// zero-padded to nfft), K[f] and K[M − f] by the fused kernels' split of the packed filter's
// transform (scaled 1/M: times M here), α = (K[f](1 − sin θ) + conj K[M − f](1 + sin θ))/2,
// β = i·cos θ·(K[f] − conj K[M − f])/2, θ = π f/M. One sequence per h.
template <class T, int N>
__global__ void __launch_bounds__(threads_for(N), blocks_for(N)) spectrum_kernel(const T* __restrict__ k, int64_t H, int64_t Lk,
                                                                  int64_t Lmin, const float2* __restrict__ tw,
                                                                  float4* __restrict__ ab) {
  using E = typename OpOf<T>::type;
  constexpr int SEQ = spec_seqs_for(N);
  extern __shared__ float2 buf[];
  const int64_t h0 = int64_t(blockIdx.x) * SEQ;
  const Dft16<E> F(threadIdx.x & 31, true);
  load_forward<N>(buf, SEQ, [&](int s, int n) {
    const int64_t h = h0 + s, t = 2 * int64_t(n);
    if (h >= H) return float2{0.f, 0.f};
    return float2{t < Lmin ? ldf(k, h * Lk + t) : 0.f, t + 1 < Lmin ? ldf(k, h * Lk + t + 1) : 0.f};
  });
  __syncthreads();
  forward_passes<E, N>(buf, SEQ * N / 128, F, tw);
  for (int i = threadIdx.x; i < SEQ * N; i += blockDim.x) {
    const int s = i / N, p = i % N;
    const int64_t h = h0 + s;
    if (h >= H) continue;
    const int f = freq_of<N>(p);
    const fused::Split sp = fused::split<N>(buf[swz(i)], buf[swz(s * N + pos_of<N>((N - f) & (N - 1)))], f);
    const float2 kf = fused::scale2(sp.xf, float(N)), kgc = fused::scale2(fused::conjf2(sp.xg), float(N));
    float sn, cs;
    sincospif(float(f) / float(N), &sn, &cs);
    const float2 d = {(kf.x - kgc.x) * (cs / 32.f), (kf.y - kgc.y) * (cs / 32.f)};  // β = i·d
    ab[h * N + p] = {(kf.x * (1.f - sn) + kgc.x * (1.f + sn)) / 32.f, (kf.y * (1.f - sn) + kgc.y * (1.f + sn)) / 32.f,
                     -d.y, d.x};
  }
}

// ---- forward ---------------------------------------------------------------------------------------
// y = post ⊙ (conv(k, v) + skip·v), v = u ⊙ pre, one row per sequence: seq = blockIdx.x·SEQ + s is
// row (b, h), h = seq / B, b = seq % B (a CTA's rows share h: ab[h] stays in L1/L2). vec: two
// samples per aligned 2-vector load and store (L even, every pointer 4-byte aligned).
// Causal: nfft = 2N ≥ L + Lmin − 1 (zero padding); circular: nfft = L.
// SC, RX: the variants of plan algos 5 and 6 (above); RX applies where rx_ok<N>() (nfft ≤ 4096).
template <class T, int N, int TB, bool FT, bool SC = false, bool RX = false>
__global__ void __launch_bounds__(threads_for(N), blocks_for(N, TB)) forward_kernel(
    const T* __restrict__ u, const T* __restrict__ pre, const T* __restrict__ post, const T* __restrict__ skip,
    const float4* __restrict__ ab, const float2* __restrict__ tw, T* __restrict__ y, int64_t B, int64_t H,
    int64_t L, bool split, bool vec) {
  using E = typename OpOf<T>::type;
  constexpr int SEQ = seqs_for(N);
  static_assert((SEQ * N / 128) % (TB * threads_for(N) / 32) == 0, "every warp takes whole batches of TB tiles");
  extern __shared__ float2 buf[];
  // Per sequence: its row's offset (−1: past the last row), its h and skip value.
  __shared__ int64_t offs[SEQ], hs[SEQ];
  __shared__ float sks[SEQ];
  const int64_t nseq = B * H, seq0 = int64_t(blockIdx.x) * SEQ;
  for (int s = threadIdx.x; s < SEQ; s += blockDim.x) {
    const int64_t seq = seq0 + s;
    const int64_t h = seq < nseq ? seq / B : 0, b = seq % B;
    offs[s] = seq < nseq ? (b * H + h) * L : -1;
    hs[s] = h;
    sks[s] = skip ? ldf(skip, h) : 0.f;
  }
  __syncthreads();
  // (v[2n], v[2n + 1]) of the row at offset o, zero past L
  auto v2 = [&](int64_t o, int n) {
    if (o < 0) return float2{0.f, 0.f};
    const int64_t t = 2 * int64_t(n);
    const float2 x = fused::ld2(u + o, t, L, vec);
    return pre ? fused::mul2(x, fused::ld2(pre + o, t, L, vec)) : x;
  };
  const Dft16<E> F(threadIdx.x & 31, split);
  constexpr bool rx = RX && rx_ok<N>();
  auto load = [&](int s, int n) { return v2(offs[s], n); };
  if constexpr (rx) load_forward_rx<N, SEQ>(buf, load);
  else load_forward<N>(buf, SEQ, load);
  __syncthreads();
  convolve_passes<E, N, TB, FT, SC>(buf, SEQ * N / 128, F, tw,
                                    [&](int p) { return __ldg(ab + hs[p / N] * N + (p & (N - 1))); });
  auto store = [&](int s, int n, float2 z) {
    const int64_t o = offs[s], t = 2 * int64_t(n);
    if (o < 0 || t >= L) return;
    if (skip) {
      const float2 v = v2(o, n);
      z = {z.x + sks[s] * v.x, z.y + sks[s] * v.y};
    }
    if (post) z = fused::mul2(z, fused::ld2(post + o, t, L, vec));
    fused::st2(y + o, t, L, vec, z.x, z.y);
  };
  if constexpr (rx) inverse_store_rx<N, SEQ>(buf, store);
  else inverse_store<N>(buf, SEQ, store);
}

}  // namespace strux::cuda::tensor
