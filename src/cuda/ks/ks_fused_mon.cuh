// The Monarch pair in one persistent kernel (private to src/cuda/ks; ks_fused.cu launches it):
// y = x (K_1 K_2)^T, batch-first, float16 / bfloat16, K_2 = (S, S, S, 1) (S diagonal blocks R_g)
// and K_1 = (1, S, S, S) (the blocks L_j on the stride-S columns), n = S^2 features, S = 16, 32.
// Why a second kernel beside pair_kernel (ks_fused.cuh): that one reads every weight fragment
// from L2 once per TB rows, latency-bound, and copies each in-place group through a per-warp
// scratch with scalar loads (bench/NOTES-gpu-ks-scan.md, "ks-fused round 3", has the counts).
//
// Per row, with X[g][l] = x[g*S + l]: Z[g][k] = sum_l R_g[k][l] X[g][l] (stage 2), then
// Y[k][j] = sum_l L_j[k][l] Z[l][j] (stage 1), y[k*S + j] = Y[k][j]. On mma.sync m16n8k16 the
// activations are the A operand (16 batch rows x 16 features) and the weights the B operand
// (16 inputs x 8 outputs), float32 accumulation, the intermediate rounded to the input type.
//
// A block is persistent: both factors' weights are copied into shared memory once (2 S^3
// values: 128 KB at S = 32), then it loops over tiles of TB = 16*RT batch rows:
//   fetch the next x tile into the other X buffer (cp.async; in flight for the whole tile) ->
//   wait for this tile's X -> stage 2: X -> Zt -> stage 1: Zt -> Yt in place -> 16-byte stores of y.
// Two X buffers, one Zt: 232,448 bytes at S = 32, exactly the H100/H200 opt-in per block.
// Zt holds the intermediate transposed, Zt[n][j][l] = Z[l][j] of row n (the Monarch permutation
// happens in stage 2's stores), so that stage 1's A fragments are 32-bit loads of (l, l+1)
// pairs; stage 2 packs groups (g, g+1) into one 32-bit store. A warp owns whole groups of
// stage 1 and keeps all their outputs in registers, so it writes Yt[n][j][k] over Zt[n][j][*]
// once its own reads are done (no other warp reads column j). The copy-out gathers 8 j's of
// one k per 16-byte store.
// Weights: group g's rows (outputs k) of S/2 words, the 4-word chunks XOR-swizzled by row
// (swz) so the 32 lanes of a B-fragment load hit 32 banks; groups S*S/2 + 1 words apart so the
// staging stores of K_1 (read along j, stored to groups j) spread over the banks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/ks/ks_fused.cuh"  // fused::mma16, fused::pack2, fused::from_f32

namespace strux::cuda::ks::mon {

constexpr int NWARP = 8, NTHR = 32 * NWARP;

template <class T>
struct Args {
  const T* x;   // (batch, S*S)
  const T* w1;  // K_1 (1, S, S, S): L_j[k][l] = w1[(k*S + l)*S + j]
  const T* w2;  // K_2 (S, S, S, 1): R_g[k][l] = w2[(g*S + k)*S + l]
  T* y;         // (batch, S*S)
  int64_t batch;
  bool wpair;   // w1, w2 4-byte aligned: 32-bit staging loads
};

// Shared-memory geometry in 32-bit words (all compile-time for a given S and RT).
template <int S, int RT>
struct Geo {
  static constexpr int TB = 16 * RT;           // batch rows per tile
  static constexpr int N = S * S;              // features
  static constexpr int RW = S / 2;             // words per weight row
  static constexpr int GSW = S * RW + 1;       // words per weight group
  static constexpr int WW = (2 * S * GSW + 3) / 4 * 4;  // both factors, 16-byte rounded
  // words per j column of Zt: odd, so stage 2's stores (lanes 2t*ZJ apart) are at most 2-way
  // conflicted (1-way is impossible with LDZ == 4 mod 32) and the copy-out's S = 16 gathers free
  static constexpr int ZJ = S / 2 + 1;
  // row strides == 4 mod 32 words: the 8 rows x 4 lanes of an A-fragment load hit 32 banks
  static constexpr int LDX = N / 2 + (36 - (N / 2) % 32) % 32;
  static constexpr int LDZ = S * ZJ + (36 - (S * ZJ) % 32) % 32;
  static constexpr int WORDS = WW + TB * (2 * LDX + LDZ);  // weights, two x tiles, Zt
  static_assert(S % 16 == 0 && LDX % 32 == 4 && LDZ % 32 == 4, "fragment rows must fall 4 banks apart");
};

// Word w of weight row r, swizzled: the 4-word chunk index XOR the row's bank line, so the rows
// g = 0..7 of one fragment load (S/2 words each) do not share banks.
template <int S>
__device__ __forceinline__ int swz(int r, int w) {
  constexpr int RW = S / 2, Q = RW >= 32 ? 1 : 32 / RW, CM = (RW / 4 < 8 ? RW / 4 : 8) - 1;
  return w ^ (((r / Q) & CM) << 2);
}

// This lane's m16n8k16 A fragment of a row-major array of 16-bit pairs: p at (row g8, word t),
// rows ld words apart (rows g8 and g8 + 8, words t and t + 4).
__device__ __forceinline__ void a_frag(uint32_t (&a)[4], const uint32_t* p, int ld) {
  a[0] = p[0];
  a[1] = p[8 * ld];
  a[2] = p[4];
  a[3] = p[8 * ld + 4];
}
// Its B fragment from a group's swizzled weights w (rows rw words apart): row r, words w0, w0 + 4.
template <int S>
__device__ __forceinline__ void b_frag(uint32_t (&b)[2], const uint32_t* w, int r, int w0, int rw) {
  const uint32_t* q = w + r * rw;
  b[0] = q[swz<S>(r, w0)];
  b[1] = q[swz<S>(r, w0 + 4)];
}
__device__ __forceinline__ void cp16(uint32_t* dst, const void* src, bool ok) {
  const unsigned s = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(ok ? 16 : 0));
}

template <class T, int S, int RT>
__global__ void __launch_bounds__(NTHR, 1) mon_kernel(Args<T> ar) {
  using G = Geo<S, RT>;
  constexpr int TB = G::TB, N = G::N, RW = G::RW, GSW = G::GSW, ZJ = G::ZJ, LDX = G::LDX, LDZ = G::LDZ;
  constexpr int KS = S / 16, NT = S / 8;  // k16 steps and n8 output tiles of one group
  extern __shared__ uint4 smem_u4[];
  uint32_t* w2s = reinterpret_cast<uint32_t*>(smem_u4);  // [g][k][swz(l/2)]
  uint32_t* w1s = w2s + S * GSW;                           // [j][k][swz(l/2)]
  uint32_t* xb = w2s + G::WW;                              // 2 x [n][l/2]   x tiles
  uint32_t* zs = xb + 2 * TB * LDX;                        // [n][j*ZJ + l/2] Zt, then Yt
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g8 = lane >> 2, t = lane & 3;
  const int64_t tiles = (ar.batch + TB - 1) / TB;
  using U = unsigned short;

  auto load_x = [&](int64_t tile, uint32_t* xs) {  // TB rows of x -> xs (rows past the batch: zeros)
    const int64_t row0 = tile * TB;
#pragma unroll 4
    for (int e = tid; e < TB * (N / 8); e += NTHR) {
      const int r = e / (N / 8), c = e - r * (N / 8);
      const bool ok = row0 + r < ar.batch;
      cp16(xs + r * LDX + 4 * c, ar.x + (ok ? (row0 + r) * N + 8 * c : 0), ok);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  if (blockIdx.x < tiles) load_x(blockIdx.x, xb);

  // weights, once per block (overlapping the first tile's load)
  const U* w1u = reinterpret_cast<const U*>(ar.w1);
  const U* w2u = reinterpret_cast<const U*>(ar.w2);
  for (int e = tid; e < S * S * RW; e += NTHR) {  // K_2: word e of w2 is word (k, w) of group g
    const int g = e / (S * RW), k = (e / RW) % S, w = e % RW;
    const uint32_t v = ar.wpair ? __ldg(reinterpret_cast<const uint32_t*>(w2u) + e)
                                : uint32_t(__ldg(w2u + 2 * e)) | uint32_t(__ldg(w2u + 2 * e + 1)) << 16;
    w2s[g * GSW + k * RW + swz<S>(k, w)] = v;
  }
  for (int e = tid; e < S * RW * (S / 2); e += NTHR) {  // K_1: (j, j+1) pairs read along j
    const int jp = e % (S / 2), w = (e / (S / 2)) % RW, k = e / (S / 2 * RW);
    const int o0 = (k * S + 2 * w) * S + 2 * jp, o1 = o0 + S;  // (l = 2w, j = 2jp), (l = 2w + 1, j = 2jp)
    uint32_t lo, hi;
    if (ar.wpair) {
      lo = __ldg(reinterpret_cast<const uint32_t*>(w1u + o0));
      hi = __ldg(reinterpret_cast<const uint32_t*>(w1u + o1));
    } else {
      lo = uint32_t(__ldg(w1u + o0)) | uint32_t(__ldg(w1u + o0 + 1)) << 16;
      hi = uint32_t(__ldg(w1u + o1)) | uint32_t(__ldg(w1u + o1 + 1)) << 16;
    }
    const int q = k * RW + swz<S>(k, w);
    w1s[2 * jp * GSW + q] = (lo & 0xffffu) | (hi << 16);       // group j = 2jp: {L[k][2w], L[k][2w+1]}
    w1s[(2 * jp + 1) * GSW + q] = (lo >> 16) | (hi & 0xffff0000u);  // group j = 2jp + 1
  }

  for (int64_t tile = blockIdx.x, it = 0; tile < tiles; tile += gridDim.x, ++it) {
    const uint32_t* xs = xb + (it & 1) * TB * LDX;
    // the other buffer was last read by the previous tile's stage 2, before its second barrier
    if (tile + gridDim.x < tiles) {
      load_x(tile + gridDim.x, xb + ((it + 1) & 1) * TB * LDX);
      asm volatile("cp.async.wait_group 1;\n" ::);  // this tile's group done, the next in flight
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();  // x tile in xs (every thread's copies); the previous tile's copy-out has read zs
    // stage 2: groups (g, g+1) per warp step; Zt[n][j][g..g+1] = one packed word
    for (int g0 = 2 * warp; g0 < S; g0 += 2 * NWARP) {
      float acc[2][RT][NT][4] = {};
#pragma unroll
      for (int gi = 0; gi < 2; ++gi) {
        const int g = g0 + gi;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          uint32_t a[RT][4];
#pragma unroll
          for (int rt = 0; rt < RT; ++rt) {
            a_frag(a[rt], xs + (rt * 16 + g8) * LDX + (g * S + ks * 16) / 2 + t, LDX);
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            uint32_t b[2];
            b_frag<S>(b, w2s + g * GSW, nt * 8 + g8, ks * 8 + t, RW);
#pragma unroll
            for (int rt = 0; rt < RT; ++rt) fused::mma16(acc[gi][rt][nt], a[rt], b, T{});
          }
        }
      }
#pragma unroll
      for (int rt = 0; rt < RT; ++rt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          // C fragment: (row g8, j 2t), (g8, 2t+1), (g8+8, 2t), (g8+8, 2t+1) of the n8 tile
          uint32_t* p = zs + (rt * 16 + g8) * LDZ + (nt * 8 + 2 * t) * ZJ + g0 / 2;
#pragma unroll
          for (int e = 0; e < 4; ++e)
            p[(e >> 1) * 8 * LDZ + (e & 1) * ZJ] =
                fused::pack2(fused::from_f32<T>(acc[0][rt][nt][e]), fused::from_f32<T>(acc[1][rt][nt][e]));
        }
    }
    __syncthreads();  // Zt complete
    // stage 1: group j per warp step, in place in zs
    for (int j = warp; j < S; j += NWARP) {
      float acc[RT][NT][4] = {};
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        uint32_t a[RT][4];
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) {
          a_frag(a[rt], zs + (rt * 16 + g8) * LDZ + j * ZJ + ks * 8 + t, LDZ);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          uint32_t b[2];
          b_frag<S>(b, w1s + j * GSW, nt * 8 + g8, ks * 8 + t, RW);
#pragma unroll
          for (int rt = 0; rt < RT; ++rt) fused::mma16(acc[rt][nt], a[rt], b, T{});
        }
      }
      __syncwarp();  // every lane has read column j: overwrite it with Yt[n][j][k]
#pragma unroll
      for (int rt = 0; rt < RT; ++rt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          uint32_t* p = zs + (rt * 16 + g8) * LDZ + j * ZJ + nt * 4 + t;
          p[0] = fused::pack2(fused::from_f32<T>(acc[rt][nt][0]), fused::from_f32<T>(acc[rt][nt][1]));
          p[8 * LDZ] = fused::pack2(fused::from_f32<T>(acc[rt][nt][2]), fused::from_f32<T>(acc[rt][nt][3]));
        }
    }
    __syncthreads();  // Yt complete
    // y[n][k*S + 8q .. 8q+7] = Yt[n][8q .. 8q+7][k]: lanes along k (conflict-free 2-byte reads)
    const int64_t row0 = tile * TB;
    const U* yt = reinterpret_cast<const U*>(zs);
#pragma unroll 2
    for (int e = tid; e < TB * S * (S / 8); e += NTHR) {
      const int k = e % S, q = (e / S) % (S / 8), r = e / (S * (S / 8));
      if (row0 + r >= ar.batch) continue;
      const U* p = yt + r * (2 * LDZ) + 8 * q * (2 * ZJ) + k;
      uint32_t v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = uint32_t(p[2 * i * 2 * ZJ]) | uint32_t(p[(2 * i + 1) * 2 * ZJ]) << 16;
      // one 16-byte store (a uint4 assignment can compile to four 4-byte ones: ks_stream.cuh)
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(ar.y + (row0 + r) * N + k * S + 8 * q),
                   "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
    }
  }
  asm volatile("cp.async.wait_all;\n" ::);
}

}  // namespace strux::cuda::ks::mon
