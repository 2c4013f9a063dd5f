// The dense fftconv kernel: y = k * v as products of 32×32 Toeplitz blocks on tensor cores.
//
// With t = 32·i + p and s = 32·j + q (p, q < 32), y[t] = Σ_d Σ_q v[32·(i − d) + q] · k[32·d + p − q]
// over the tap blocks d < D (k is zero outside [0, m)). For a CTA (one h, R batch rows) that is
// one matrix product per tap block: rows m = (i, r) (i-major: m = i·R + r), A_d[m][q] =
// v_r[32·(i − d) + q] (a row of 32 samples of row r, read with ldmatrix), B_d[q][p] =
// k[32·d + p − q] (the Toeplitz block, the same for every row of the CTA), accumulated in float32
// by mma.sync m16n8k16. Causal: blocks i − d < 0 read a zero block and a tile of rows stops at
// d = its largest i; circular (L a multiple of 32): i − d wraps.
//
// Exactness: the products of two 16-bit values are exact in float32, so the error is the float32
// sums' and the output rounding. With a pregate, v = u ⊙ pregate is split as hi + lo·2^-s (both in
// the 16-bit type, lo scaled so it stays normal) with the lo products in a second accumulator.
// A row's outputs read only its own samples (NaN stays in its row, as in the FFT kernels).
//
// Shared memory: v as R rows of S blocks (S odd) of 32 samples (64 bytes, four 16-byte units),
// unit c of block X stored at unit c ^ ((X >> 1) & 3): ldmatrix's 8 rows (8 consecutive X, or 8
// rows r at one x) then hit 8 distinct 16-byte bank groups. The filter reversed, twice (kE: pairs
// (kr[2w], kr[2w+1]), kO: (kr[2w+1], kr[2w+2]), kr[z] = k[32·D − z]), so that every B fragment
// register is one aligned 32-bit load; kO starts 16 banks after kE (conflict-free).
#pragma once

#include <cstdint>

#include "cuda/elem.cuh"
#include "cuda/fftconv/dense.hpp"
#include "cuda/fftconv/dense_taps.cuh"
#include "cuda/mma16.cuh"

namespace strux::cuda::dense {

// y = post ⊙ (k * v + skip ⊙ v), v = u ⊙ pre; where y2 is given also y2 = post2 ⊙ (k * v + skip ⊙ v)
// (the backward's du and dpre from one pass).
template <class T>
struct Params {
  const T *k, *u, *pre, *post, *skip;
  T* y;
  T* y2;
  const T* post2;
  int64_t B, H, L;
  int m, NI, S, D, R, nchunk, kwords;
  bool circular;
};

// The row chunk of a CTA: its h, its first batch row.
struct Cta {
  int h, chunk;
  int64_t b0;
  __device__ __forceinline__ Cta(int nchunk, int R)
      : h(int(blockIdx.x / unsigned(nchunk))), chunk(int(blockIdx.x % unsigned(nchunk))), b0(int64_t(chunk) * R) {}
};

// Byte offset of 16-byte unit c of block X in a v buffer.
__device__ __forceinline__ uint32_t unit_offset(int X, int c) { return uint32_t(X) * 64u + (uint32_t(c ^ ((X >> 1) & 3)) << 4); }

// Reverses the 8 samples of a 16-byte unit.
__device__ __forceinline__ uint4 reverse8(uint4 w) {
  const auto sw = [](uint32_t x) { return __byte_perm(x, 0, 0x1032); };
  return make_uint4(sw(w.w), sw(w.z), sw(w.y), sw(w.x));
}

// Stage one 16-byte unit (samples t0 … t0 + 7 of the staged row, zero past L) of v = src ⊙ gate
// into the hi (and lo) buffers. REV: staged sample t is src[L − 1 − t] (the backward's reversed rows).
template <class T, bool SPLIT, bool VEC, bool REV>
__device__ __forceinline__ void stage_unit(const T* src, const T* gate, int64_t L, int64_t row, bool live, int64_t t0,
                                           unsigned char* hi, unsigned char* lo) {
  using Op = Mma16<T>;
  const int64_t v0 = REV ? L - 8 - t0 : t0;  // the unit's first source index (VEC: L % 8 == 0)
  if constexpr (!SPLIT && VEC) {  // a raw copy of 8 samples
    uint4 w = make_uint4(0, 0, 0, 0);
    if (live && t0 < L) w = __ldg(reinterpret_cast<const uint4*>(src + row + v0));
    *reinterpret_cast<uint4*>(hi) = REV ? reverse8(w) : w;
    return;
  }
  float v[8];
  if (VEC && live && t0 < L) {
    uint4 w = __ldg(reinterpret_cast<const uint4*>(src + row + v0));
    if (REV) w = reverse8(w);
    const T* e = reinterpret_cast<const T*>(&w);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = to_c(e[i]);
    if (SPLIT) {
      uint4 wp = __ldg(reinterpret_cast<const uint4*>(gate + row + v0));
      if (REV) wp = reverse8(wp);
      const T* ep = reinterpret_cast<const T*>(&wp);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] *= to_c(ep[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const bool in = live && t0 + i < L;
      const int64_t at = row + (REV ? L - 1 - (t0 + i) : t0 + i);
      v[i] = in ? to_c(src[at]) : 0.f;
      if (SPLIT && in) v[i] *= to_c(gate[at]);
    }
  }
  uint4 wh, wl;
  uint32_t* h = reinterpret_cast<uint32_t*>(&wh);
  uint32_t* l = reinterpret_cast<uint32_t*>(&wl);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float a = Op::round(v[2 * i]), b = Op::round(v[2 * i + 1]);
    h[i] = Op::pack(a, b);
    if (SPLIT) l[i] = Op::pack((v[2 * i] - a) * Op::kLo, (v[2 * i + 1] - b) * Op::kLo);
  }
  *reinterpret_cast<uint4*>(hi) = wh;
  if (SPLIT) *reinterpret_cast<uint4*>(lo) = wl;
}

// Stage a CTA's R rows (rows past B are zero) of src ⊙ gate, every unit of NI blocks.
template <class T, bool SPLIT, bool VEC, bool REV>
__device__ __forceinline__ void stage_rows(const T* src, const T* gate, int64_t B, int64_t H, int64_t L, const Cta& cta,
                                           int R, int S, int NI, unsigned char* hi, unsigned char* lo) {
  const int U = NI * 4;
  for (int idx = threadIdx.x; idx < R * U; idx += kThreads) {
    const int r = idx / U, un = idx - r * U, x = un >> 2, c = un & 3;
    const int64_t b = cta.b0 + r;
    const bool live = b < B;
    const int64_t row = live ? (b * H + cta.h) * L : 0;
    const uint32_t off = unit_offset(r * S + x, c);
    stage_unit<T, SPLIT, VEC, REV>(src, gate, L, row, live, int64_t(kPb) * x + 8 * c, hi + off, lo + off);
  }
}

// NT: tiles of 16 rows m per warp in flight (they share each B fragment).
// SPLIT: a pregate is given (v as hi + lo). VEC: L % 8 == 0 and every row pointer 16-byte aligned
// (16-byte staging loads, 4-byte epilogue accesses); otherwise one sample at a time. REV: rows read
// and written back to front (the adjoint: correlation with k, for the backward's du).
template <class T, int NT, bool SPLIT, bool VEC, bool REV>
__global__ void __launch_bounds__(kThreads) forward_kernel(Params<T> p) {
  using Op = Mma16<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int NI = p.NI, S = p.S, R = p.R, D = p.D;
  const Cta cta(p.nchunk, R);
  const int h = cta.h;
  const int64_t b0 = cta.b0;
  const size_t vbytes = size_t(R) * S * 64;
  unsigned char* vhi = smem;
  unsigned char* vlo = smem + vbytes;  // SPLIT only
  unsigned char* zero = smem + (SPLIT ? 2 : 1) * vbytes;
  uint32_t* kE = reinterpret_cast<uint32_t*>(zero + 64);
  uint32_t* kO = kE + p.kwords;
  const int Z0 = kPb * D;

  // ---- stage: the filter reversed (two copies), a zero block, the rows' samples ----------------
  {
    stage_reversed_taps(p.k, int64_t(h) * p.m, p.m, Z0, p.kwords, kE, kO, kThreads);
    if (threadIdx.x < 16) reinterpret_cast<uint32_t*>(zero)[threadIdx.x] = 0u;
    stage_rows<T, SPLIT, VEC, REV>(p.u, p.pre, p.B, p.H, p.L, cta, R, S, NI, vhi, vlo);
  }
  __syncthreads();

  // ---- products: warp w takes groups of 16·NT rows m = w, w + 4, … ---------------------------
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const int M = R * NI, G = (M + 16 * NT - 1) / (16 * NT);
  const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8, lunit = lane >> 4;
  const uint32_t s_vhi = static_cast<uint32_t>(__cvta_generic_to_shared(vhi));
  const uint32_t s_zero = static_cast<uint32_t>(__cvta_generic_to_shared(zero));
  const uint32_t lo_delta = uint32_t(vbytes);
  // This lane's B registers: b0 = (k[x], k[x − 1]), x = 32·d + 8·j + g − 16·kk − 2·c; b1 at x − 8.
  const uint32_t* kp = ((g & 1) ? kO : kE) + (Z0 - g + 2 * c - (g & 1)) / 2;
  const float sk = p.skip ? to_c(p.skip[h]) : 0.f;

  for (int grp = warp; grp < G; grp += kThreads / 32) {
    const int mbase = grp * 16 * NT;
    float acc[NT][4][4], accl[NT][4][4];
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[t][j][e] = 0.f, accl[t][j][e] = 0.f;
    int ii[NT], rx[NT];
    bool ok[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int m = mbase + 16 * t + lrow;
      ok[t] = m < M;
      ii[t] = ok[t] ? m / R : 0;
      rx[t] = ok[t] ? (m - ii[t] * R) * S : 0;
    }
    int dmax = D - 1;
    if (!p.circular) dmax = min(dmax, (min(mbase + 16 * NT, M) - 1) / R);
    for (int d = 0; d <= dmax; ++d) {
      uint32_t abase[NT], asw[NT];  // a row's block, and its unit swizzle (0 for the zero block)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        int x = ii[t] - d;
        if (p.circular && x < 0) x += NI;
        const int X = rx[t] + x;
        const bool live = ok[t] && x >= 0;
        abase[t] = live ? s_vhi + uint32_t(X) * 64u : s_zero;
        asw[t] = live ? uint32_t((X >> 1) & 3) << 4 : 0u;
      }
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        uint32_t bf[4][2];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          bf[j][0] = kp[-16 * d - 4 * j + 8 * kk];
          bf[j][1] = kp[-16 * d - 4 * j + 8 * kk + 4];
        }
        const uint32_t un = uint32_t(2 * kk + lunit) << 4;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const uint32_t addr = abase[t] + (un ^ asw[t]);
          uint32_t a[4];
          ldmatrix_x4(a, addr);
#pragma unroll
          for (int j = 0; j < 4; ++j) Op::mma(acc[t][j], a, bf[j][0], bf[j][1]);
          if constexpr (SPLIT) {  // the lo buffer sits lo_delta after hi; the zero block serves both
            uint32_t al[4];
            ldmatrix_x4(al, abase[t] == s_zero ? addr : addr + lo_delta);
#pragma unroll
            for (int j = 0; j < 4; ++j) Op::mma(accl[t][j], al, bf[j][0], bf[j][1]);
          }
        }
      }
    }

    // ---- epilogue: rows g and g + 8 of each tile, columns 8·j + 2·c, +1 -------------------------
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int m = mbase + 16 * t + g + 8 * hh;
        if (m >= M) continue;
        const int i = m / R, r = m - i * R;
        const int64_t b = b0 + r;
        if (b >= p.B) continue;
        const int64_t row = (b * p.H + h) * p.L;
        const int X = r * S + i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t t0 = int64_t(kPb) * i + 8 * j + 2 * c;
          if (t0 >= p.L) continue;
          float z[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) z[e] = acc[t][j][2 * hh + e] + (SPLIT ? accl[t][j][2 * hh + e] / Op::kLo : 0.f);
          if (p.skip) {
            const uint32_t off = unit_offset(X, j) + 4u * c;
            const T* vh = reinterpret_cast<const T*>(vhi + off);
            const T* vl = reinterpret_cast<const T*>(vlo + off);
#pragma unroll
            for (int e = 0; e < 2; ++e) z[e] += sk * (to_c(vh[e]) + (SPLIT ? to_c(vl[e]) / Op::kLo : 0.f));
          }
          // staged samples t0, t0 + 1 are row positions t0, t0 + 1, or (REV) L − 1 − t0, L − 2 − t0
          if (VEC) {  // L even: the pair is in range and 4-byte aligned
            const int64_t at = row + (REV ? p.L - 2 - t0 : t0);
            const int lo = REV ? 1 : 0;  // which of z is the pair's first
            const auto put = [&](T* out, const T* gate) {
              float a = z[lo], b = z[1 - lo];
              if (gate) a *= to_c(gate[at]), b *= to_c(gate[at + 1]);
              *reinterpret_cast<uint32_t*>(out + at) = Op::pack(a, b);
            };
            put(p.y, p.post);
            if (p.y2) put(p.y2, p.post2);
          } else {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              if (t0 + e >= p.L) break;
              const int64_t at = row + (REV ? p.L - 1 - (t0 + e) : t0 + e);
              p.y[at] = From<T>::of(p.post ? z[e] * to_c(p.post[at]) : z[e]);
              if (p.y2) p.y2[at] = From<T>::of(p.post2 ? z[e] * to_c(p.post2[at]) : z[e]);
            }
          }
        }
      }
  }
}

// ---- the filter's gradient ------------------------------------------------------------------
// dk[x] = Σ_b Σ_t dz[t]·v[t − x] (dz = dy ⊙ post, v = u ⊙ pre; causal t − x >= 0, circular mod L),
// dskip = Σ_b Σ_t dz[t]·v[t]. With x = 32·d + p − q: G_d[q][p] = Σ_m A_d[m][q]·DZ[m][p] over the
// CTA's rows m = (i, r) (A_d as in the forward, DZ[m][p] = dz_r[32·i + p]), a 32×32 product per tap
// block on tensor cores (both operands by ldmatrix.trans from the row buffers), then dk[32·d + δ]
// += the sum of G_d's diagonal p − q = δ (per warp, through a warp-private tile: earlier versions
// with block barriers per d, then with shared float atomics, ran 3–17× the forward's time,
// NOTES-gpu-fftconv-dense.md round 3). Per CTA partial sums part[chunk][h][x], part_s[chunk][h],
// summed over the chunks in a fixed order by reduce_kernel (the same bits run after run).
template <class T>
struct GradParams {
  const T *u, *pre, *dy, *post;
  float *part, *part_s;
  int64_t B, H, L;
  int m, NI, S, D, R, nchunk;
  bool circular;
};

// Shared-memory floats of the kernel past its row buffers and zero block: per warp a 32×kGStride
// tile of G_d, the edges of the warps' tap-block ranges (2 × 4 × 32) and four warp sums.
constexpr int kGStride = 40;  // float2 stores of a fragment row: 16 lanes on 16 distinct bank pairs
__host__ __device__ constexpr int grad_floats() { return 4 * 32 * kGStride + 2 * 4 * 32 + 4; }

// Live chunks of 16 block rows at tap block d (causal: the chunks whose last row has i >= d).
__device__ __forceinline__ int live_chunks(int d, int M, int R, int chunks, bool circular) {
  if (circular) return chunks;
  return d * R >= M ? 0 : chunks - d * R / 16;  // the first live chunk: 16·ch + 15 >= d·R
}

// Warp w's tap blocks [lo, hi): contiguous ranges of about equal work (live chunks plus two for the
// flush) over the four warps; a range may be empty when D < 4.
__device__ __forceinline__ void warp_range(int w, int D, int M, int R, int chunks, bool circular, int& lo, int& hi) {
  int64_t total = 0;
  for (int d = 0; d < D; ++d) total += live_chunks(d, M, R, chunks, circular) + 2;
  int64_t acc = 0;
  lo = D, hi = D;
  for (int d = 0; d < D; ++d) {
    if (lo == D && 4 * acc >= w * total) lo = d;
    if (4 * acc >= (w + 1) * total) { hi = d; break; }
    acc += live_chunks(d, M, R, chunks, circular) + 2;
  }
  if (w == 3) hi = D;
  if (hi < lo) hi = lo;
}

template <class T, bool SV, bool SZ, bool VEC>
__global__ void __launch_bounds__(kThreads) filter_grad_kernel(GradParams<T> p) {
  using Op = Mma16<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int NI = p.NI, S = p.S, R = p.R, D = p.D;
  const Cta cta(p.nchunk, R);
  const size_t bytes = size_t(R) * S * 64;
  unsigned char* vhi = smem;
  unsigned char* vlo = vhi + bytes;                    // SV only
  unsigned char* zhi = vhi + (SV ? 2 : 1) * bytes;
  unsigned char* zlo = zhi + bytes;                    // SZ only
  unsigned char* zero = zhi + (SZ ? 2 : 1) * bytes;
  float* Gw = reinterpret_cast<float*>(zero + 64);
  float* first_s1 = Gw + 4 * 32 * kGStride;  // per warp: s1 of its first tap block
  float* last_s2 = first_s1 + 4 * 32;        // per warp: s2 of its last tap block
  float* wsum = last_s2 + 4 * 32;
  if (threadIdx.x < 16) reinterpret_cast<uint32_t*>(zero)[threadIdx.x] = 0u;
  stage_rows<T, SV, VEC, false>(p.u, p.pre, p.B, p.H, p.L, cta, R, S, NI, vhi, vlo);
  stage_rows<T, SZ, VEC, false>(p.dy, p.post, p.B, p.H, p.L, cta, R, S, NI, zhi, zlo);
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  // dskip: the staged products, hi + lo, each thread over its units
  if (p.part_s) {
    float acc = 0.f;
    const int U = NI * 4;
    for (int idx = threadIdx.x; idx < R * U; idx += kThreads) {
      const int r = idx / U, un = idx - r * U;
      const uint32_t off = unit_offset(r * S + (un >> 2), un & 3);
      const T* vh = reinterpret_cast<const T*>(vhi + off);
      const T* vl = reinterpret_cast<const T*>(vlo + off);
      const T* zh = reinterpret_cast<const T*>(zhi + off);
      const T* zl = reinterpret_cast<const T*>(zlo + off);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float v = to_c(vh[e]) + (SV ? to_c(vl[e]) / Op::kLo : 0.f);
        const float z = to_c(zh[e]) + (SZ ? to_c(zl[e]) / Op::kLo : 0.f);
        acc += v * z;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) wsum[warp] = acc;
  }

  const int M = R * NI, chunks = (M + 15) / 16, rshift = __ffs(R) - 1;
  const uint32_t s_v = static_cast<uint32_t>(__cvta_generic_to_shared(vhi));
  const uint32_t s_z = static_cast<uint32_t>(__cvta_generic_to_shared(zhi));
  const uint32_t s_zero = static_cast<uint32_t>(__cvta_generic_to_shared(zero));
  // ldmatrix rows of this lane: A (v, transposed: q × m) rows m0 + (l & 7) + 8·(l >> 4), unit
  // 2·qt + ((l >> 3) & 1); B (dz: m × p) rows m0 + (l & 7) + 8·((l >> 3) & 1), unit 2·pt + (l >> 4).
  const int arow = (lane & 7) + 8 * (lane >> 4), aunit = (lane >> 3) & 1;
  const int brow = (lane & 7) + 8 * ((lane >> 3) & 1), bunit = lane >> 4;
  int dlo, dhi;
  warp_range(warp, D, M, R, chunks, p.circular, dlo, dhi);
  float* part = p.part + (int64_t(cta.chunk) * p.H + cta.h) * p.m;
  float carry = 0.f;  // this lane's δ2 sum of the previous tap block
  for (int d = dlo; d < dhi; ++d) {
    float acc[2][4][4], accl[2][4][4];
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[a][j][e] = 0.f, accl[a][j][e] = 0.f;
    // Block row m = i·R + r sits at X = r·S + i; the A row of (m, d) is block i − d of row r, i.e.
    // the block row m − d·R (wrapped by M when circular, the zero block before the row when causal).
    // R is a power of two (plan_grad), so X takes a mask and a shift, not a division.
    const int dR = d * R;
    for (int ch = p.circular ? 0 : dR / 16; ch < chunks; ++ch) {  // the live chunks (live_chunks)
      const int m0 = ch * 16, mB = m0 + brow;
      int mA = m0 + arow;
      uint32_t abase = s_zero, asw = 0;
      if (mA < M) {
        mA -= dR;
        if (p.circular && mA < 0) mA += M;
        if (mA >= 0) {
          const int X = (mA & (R - 1)) * S + (mA >> rshift);
          abase = s_v + uint32_t(X) * 64u, asw = uint32_t((X >> 1) & 3) << 4;
        }
      }
      uint32_t bbase = s_zero, bsw = 0;
      // causal: a row whose block is before d has the zero block as A; its dz goes to zero too, so
      // a NaN in dz reaches only the lags the formula gives it (0 · NaN would be NaN)
      if (mB < M && (p.circular || (mB >> rshift) >= d)) {
        const int X = (mB & (R - 1)) * S + (mB >> rshift);
        bbase = s_z + uint32_t(X) * 64u, bsw = uint32_t((X >> 1) & 3) << 4;
      }
      uint32_t a[2][4], b[2][4];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        ldmatrix_x4_trans(a[t], abase + ((uint32_t(2 * t + aunit) << 4) ^ asw));
        ldmatrix_x4_trans(b[t], bbase + ((uint32_t(2 * t + bunit) << 4) ^ bsw));
      }
      // b[t]: n8 tiles 2t (regs 0, 1) and 2t + 1 (regs 2, 3)
#pragma unroll
      for (int qt = 0; qt < 2; ++qt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) Op::mma(acc[qt][nt], a[qt], b[nt >> 1][2 * (nt & 1)], b[nt >> 1][2 * (nt & 1) + 1]);
      if constexpr (SV || SZ) {
        const uint32_t lo_v = uint32_t(vlo - vhi), lo_z = uint32_t(zlo - zhi);
        uint32_t al[2][4], bl[2][4];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          if (SV) ldmatrix_x4_trans(al[t], abase == s_zero ? abase : abase + lo_v + ((uint32_t(2 * t + aunit) << 4) ^ asw));
          if (SZ) ldmatrix_x4_trans(bl[t], bbase == s_zero ? bbase : bbase + lo_z + ((uint32_t(2 * t + bunit) << 4) ^ bsw));
        }
#pragma unroll
        for (int qt = 0; qt < 2; ++qt)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            const int bt = nt >> 1, br = 2 * (nt & 1);
            if (SV) Op::mma(accl[qt][nt], al[qt], b[bt][br], b[bt][br + 1]);
            if (SZ) Op::mma(accl[qt][nt], a[qt], bl[bt][br], bl[bt][br + 1]);
          }
      }
    }
    // Flush: element (q, p) of G_d adds to dk[32·d + p − q]. The warp's G_d goes to its own 32×40
    // tile (float2 stores, conflict-free), then lane l sums the diagonals δ1 = l − 31 and δ2 = l + 1:
    // dk position 32·d + δ1 is s1 of d plus s2 of d − 1 (δ2 of d − 1 is δ1 of d, carried in a
    // register), written once, straight to the CTA's partial row; the first d of the warp's range
    // waits for the previous range's carry (the edges below).
    float* Gm = Gw + warp * kGStride * 32;
#pragma unroll
    for (int qt = 0; qt < 2; ++qt)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {  // q = 16·qt + g + 8·hh, p = 8·nt + 2c (+1)
          float2 v;
          v.x = acc[qt][nt][2 * hh] + ((SV || SZ) ? accl[qt][nt][2 * hh] / Op::kLo : 0.f);
          v.y = acc[qt][nt][2 * hh + 1] + ((SV || SZ) ? accl[qt][nt][2 * hh + 1] / Op::kLo : 0.f);
          *reinterpret_cast<float2*>(&Gm[(16 * qt + g + 8 * hh) * kGStride + 8 * nt + 2 * c]) = v;
        }
    __syncwarp();
    float s1 = 0.f, s2 = 0.f;
#pragma unroll 8
    for (int q = 0; q < 32; ++q) {
      if (q >= 31 - lane) s1 += Gm[q * kGStride + q + lane - 31];
      if (q <= 30 - lane) s2 += Gm[q * kGStride + q + lane + 1];
    }
    __syncwarp();  // the tile is rewritten at the next d
    const int x = 32 * d + lane - 31;
    if (d == dlo)
      first_s1[warp * 32 + lane] = s1;
    else if (x < p.m)
      part[x] = carry + s1;  // x >= 1 here
    carry = s2;
  }
  last_s2[warp * 32 + lane] = carry;
  __syncthreads();
  // The edges: the first position of each non-empty range adds the carry of the range before it
  // (the nearest earlier non-empty warp); the last non-empty range also owns position 32·D + l − 31.
  if (dlo < dhi) {
    float prev = 0.f;
    bool last = true;
    for (int w = 0; w < 4; ++w) {
      int a, b;
      warp_range(w, D, M, R, chunks, p.circular, a, b);
      if (a < b && w < warp) prev = last_s2[w * 32 + lane];
      if (a < b && w > warp) last = false;
    }
    const int x = 32 * dlo + lane - 31;
    if (x >= 0 && x < p.m) part[x] = prev + first_s1[warp * 32 + lane];
    const int xe = 32 * D + lane - 31;
    if (last && xe < p.m) part[xe] = carry;
  }
  if (p.part_s && threadIdx.x == 0)
    p.part_s[int64_t(cta.chunk) * p.H + cta.h] = (wsum[0] + wsum[1]) + (wsum[2] + wsum[3]);
}

// dk[h][x] = Σ_chunk part[chunk][h][x] for x < m, 0 for m <= x < Lk; dskip[h] = Σ_chunk part_s.
template <class T>
__global__ void reduce_kernel(const float* part, const float* part_s, int nchunk, int64_t H, int m, int64_t Lk, T* dk,
                              T* dskip) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < H * Lk) {
    const int64_t h = i / Lk, x = i - h * Lk;
    double s = 0.0;
    if (x < m)
      for (int c = 0; c < nchunk; ++c) s += part[(int64_t(c) * H + h) * m + x];
    dk[i] = From<T>::of(float(s));
  }
  if (dskip && i < H) {
    double s = 0.0;
    for (int c = 0; c < nchunk; ++c) s += part_s[int64_t(c) * H + i];
    dskip[i] = From<T>::of(float(s));
  }
}

}  // namespace strux::cuda::dense
