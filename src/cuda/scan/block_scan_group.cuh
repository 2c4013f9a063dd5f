// Group kernels of BlockCirculantScanPlan for p = 8 and 16: the same three passes over chunks of
// time as chunk_*<P> (block_scan_kernels.cuh: summary, carry, apply; the adjoint backward), but a
// (batch, chunk, frequency) chain is run by a group of P lanes of one warp instead of one thread,
// so the p x p matrices never sit whole in one thread's registers.
//
// Lane i of a group owns component i of the state vectors and, forward, row i of A_t (P loads per
// step, f innermost: the groups of a warp are consecutive frequencies) and of the chunk product
// M; the other components come by warp shuffles within the group (P per step). M_c = A ... A
// needs all of M at every lane: the group's rows pass through a P x P tile in shared memory
// (one tile per group, rows read as 16-byte pairs, the same address at every lane of the group).
// Backward, lane j owns column j of A_t (the adjoint e_j = sum_i conj(A_ij) g_i), column j of
// X_t = G_t conj(H_{t-1})^T and of M_c in the carry pass.
//
// Why not one thread per chain, as for p <= 4: 2 P^2 complex values per thread (a step's A and
// the next one's, P = 16: 1024 registers); and not the seq kernels: their B * kf threads walk
// the whole sequence one dependent memory round trip per step (p = 8 at (16, 2048, 8, 8, 32):
// 272 threads, ~10 us per step).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/scan/block_scan_kernels.cuh"

namespace strux::cuda::bscan {

// Chain and lane of a group-kernel thread: blockIdx.y = b, the flat index over (C, kf, P).
template <int P>
struct GroupThread {
  int64_t b, c, f, t0, t1;
  int i;           // lane in the group: the component owned
  unsigned mask;   // the group's lanes (shuffles and __syncwarp stay inside the group)
  __device__ bool init(int64_t T, int64_t L, int64_t C, int64_t kf) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t chain = idx / P;
    i = int(threadIdx.x % P);
    const unsigned lane0 = threadIdx.x % 32u - unsigned(i);
    mask = P == 32 ? 0xffffffffu : ((1u << P) - 1u) << lane0;
    if (chain >= C * kf) return false;  // the whole group together
    b = blockIdx.y;
    c = chain / kf;
    f = chain - c * kf;
    t0 = c * L;
    t1 = t0 + L < T ? t0 + L : T;
    return true;
  }
  __device__ float2 from(float2 v, int lane) const {
    return make_float2(__shfl_sync(mask, v.x, lane, P), __shfl_sync(mask, v.y, lane, P));
  }
};

// Row r of a P x P matrix at `base` (element (r, q) at base[(r * P + q) * kf]).
template <int P>
__device__ __forceinline__ void load_row(float2 (&v)[P], const float2* base, int r, int64_t kf) {
#pragma unroll
  for (int q = 0; q < P; ++q) v[q] = base[(int64_t(r) * P + q) * kf];
}
template <int P>
__device__ __forceinline__ void load_col(float2 (&v)[P], const float2* base, int q, int64_t kf) {
#pragma unroll
  for (int r = 0; r < P; ++r) v[r] = base[(int64_t(r) * P + q) * kf];
}
template <int P>
__device__ __forceinline__ void copy(float2 (&d)[P], const float2 (&s)[P]) {
#pragma unroll
  for (int q = 0; q < P; ++q) d[q] = s[q];
}
// Lane i: sum_j row[j] x_j + y, x_j from lane j.
template <int P>
__device__ __forceinline__ float2 row_times(const GroupThread<P>& th, const float2 (&row)[P], float2 x, float2 y) {
#pragma unroll
  for (int j = 0; j < P; ++j) y = cfma(row[j], th.from(x, j), y);
  return y;
}
// Lane j: sum_i conj(col[i]) g_i, g_i from lane i.
template <int P>
__device__ __forceinline__ float2 col_adjoint(const GroupThread<P>& th, const float2 (&col)[P], float2 g, float2 y) {
#pragma unroll
  for (int i = 0; i < P; ++i) y = cfma_conj(col[i], th.from(g, i), y);
  return y;
}

// Per group: a P x P tile of float2 plus 16 bytes, so the groups of a warp read other banks.
template <int P>
constexpr int tile_stride() { return P * P + 2; }

// (1) forward summaries: S_c = local final state from 0 (U scaled by s), M_c = A_{t1-1} ... A_{t0}.
template <int P>
__global__ void __launch_bounds__(CHUNK_THREADS) group_summary(const float2* __restrict__ A,
                                                               const float2* __restrict__ U, float2* S, float2* M,
                                                               int64_t T, int64_t L, int64_t C, int64_t kf, float s) {
  __shared__ __align__(16) float2 tiles[(CHUNK_THREADS / P) * tile_stride<P>()];
  GroupThread<P> th;
  if (!th.init(T, L, C, kf)) return;
  float2* tile = tiles + (threadIdx.x / P) * tile_stride<P>();
  const int64_t b = th.b, f = th.f;
  const int i = th.i;
  float2 h = make_float2(0.f, 0.f), m[P], an[P], un;
#pragma unroll
  for (int l = 0; l < P; ++l) m[l] = make_float2(l == i ? 1.f : 0.f, 0.f);
  load_row<P>(an, A + (b * T + th.t0) * P * P * kf + f, i, kf);
  un = U[((b * T + th.t0) * P + i) * kf + f];
  for (int64_t t = th.t0; t < th.t1; ++t) {
    float2 a[P];
    copy<P>(a, an);
    const float2 u = un;
    if (t + 1 < th.t1) {
      load_row<P>(an, A + (b * T + t + 1) * P * P * kf + f, i, kf);
      un = U[((b * T + t + 1) * P + i) * kf + f];
    }
    h = row_times<P>(th, a, h, scaled(u, s));
    // M <- A_t M: row i of the product from row i of A_t and all of M (through the tile).
#pragma unroll
    for (int l = 0; l < P; ++l) tile[i * P + l] = m[l];
    __syncwarp(th.mask);
    float2 o[P];
#pragma unroll
    for (int l = 0; l < P; ++l) o[l] = make_float2(0.f, 0.f);
#pragma unroll
    for (int j = 0; j < P; ++j)
#pragma unroll
      for (int l = 0; l < P; l += 2) {
        const float4 q = *reinterpret_cast<const float4*>(tile + j * P + l);
        o[l] = cfma(a[j], make_float2(q.x, q.y), o[l]);
        o[l + 1] = cfma(a[j], make_float2(q.z, q.w), o[l + 1]);
      }
    __syncwarp(th.mask);  // every lane has read the tile before the next step writes it
    copy<P>(m, o);
  }
  const int64_t bc = b * C + th.c;
  S[(bc * P + i) * kf + f] = h;
#pragma unroll
  for (int l = 0; l < P; ++l) M[(bc * P * P + i * P + l) * kf + f] = m[l];
}

// (2) forward carries, group (b, f): Car_0 = s0 H0 (or 0), Car_{c+1} = M_c Car_c + S_c.
template <int P>
__global__ void __launch_bounds__(CHUNK_THREADS) group_carry(const float2* __restrict__ S,
                                                             const float2* __restrict__ M, const float2* H0,
                                                             float2* Car, int64_t C, int64_t kf, float s0) {
  GroupThread<P> th;
  if (!th.init(1, 1, 1, kf)) return;  // chain = f, one "chunk"
  const int64_t b = th.b, f = th.f;
  const int i = th.i;
  float2 h = H0 ? scaled(H0[(b * P + i) * kf + f], s0) : make_float2(0.f, 0.f);
  Car[(b * C * P + i) * kf + f] = h;
  if (C < 2) return;
  float2 mn[P], sn;
  load_row<P>(mn, M + b * C * P * P * kf + f, i, kf);
  sn = S[(b * C * P + i) * kf + f];
  for (int64_t c = 0; c + 1 < C; ++c) {
    float2 m[P];
    copy<P>(m, mn);
    const float2 sv = sn;
    if (c + 2 < C) {
      load_row<P>(mn, M + (b * C + c + 1) * P * P * kf + f, i, kf);
      sn = S[((b * C + c + 1) * P + i) * kf + f];
    }
    h = row_times<P>(th, m, h, sv);
    Car[((b * C + c + 1) * P + i) * kf + f] = h;
  }
}

// (3) forward apply: H_t = A_t H_{t-1} + s U_t in place over U, from Init[(b*C + c)] * s0
// (the carries with s0 = 1, or H0 with C = 1; null: zeros). Lane i reads U_t[i] before it writes
// H_t[i]; no other lane touches that address.
template <int P>
__global__ void __launch_bounds__(CHUNK_THREADS) group_apply(const float2* __restrict__ A, float2* UH,
                                                             const float2* Init, int64_t T, int64_t L, int64_t C,
                                                             int64_t kf, float s, float s0) {
  GroupThread<P> th;
  if (!th.init(T, L, C, kf)) return;
  const int64_t b = th.b, f = th.f;
  const int i = th.i;
  float2 h = Init ? scaled(Init[((b * C + th.c) * P + i) * kf + f], s0) : make_float2(0.f, 0.f);
  float2 an[P], un;
  load_row<P>(an, A + (b * T + th.t0) * P * P * kf + f, i, kf);
  un = UH[((b * T + th.t0) * P + i) * kf + f];
  for (int64_t t = th.t0; t < th.t1; ++t) {
    float2 a[P];
    copy<P>(a, an);
    const float2 u = un;
    if (t + 1 < th.t1) {
      load_row<P>(an, A + (b * T + t + 1) * P * P * kf + f, i, kf);
      un = UH[((b * T + t + 1) * P + i) * kf + f];
    }
    h = row_times<P>(th, a, h, scaled(u, s));
    UH[((b * T + t) * P + i) * kf + f] = h;
  }
}

// Backward local pass of chunk c from E = 0 (no writes): R_c = A_{t0}^H G_{t0}, lane j holding
// component j. Chunk 0's R is never used.
template <int P>
__global__ void __launch_bounds__(CHUNK_THREADS) group_summary_bwd(const float2* __restrict__ A,
                                                                   const float2* __restrict__ D, const float2* DL,
                                                                   float2* R, int64_t T, int64_t L, int64_t C,
                                                                   int64_t kf, float s) {
  GroupThread<P> th;
  if (!th.init(T, L, C, kf) || th.c == 0) return;  // the whole group together
  const int64_t b = th.b, f = th.f;
  const int j = th.i;
  float2 e = make_float2(0.f, 0.f), an[P], dn;
  load_col<P>(an, A + (b * T + th.t1 - 1) * P * P * kf + f, j, kf);
  dn = D[((b * T + th.t1 - 1) * P + j) * kf + f];
  for (int64_t t = th.t1 - 1; t >= th.t0; --t) {
    float2 a[P];
    copy<P>(a, an);
    float2 g = dn;
    if (t > th.t0) {
      load_col<P>(an, A + (b * T + t - 1) * P * P * kf + f, j, kf);
      dn = D[((b * T + t - 1) * P + j) * kf + f];
    }
    if (DL && t == T - 1) g = add(g, DL[(b * P + j) * kf + f]);
    g = add(scaled(g, s), e);
    e = col_adjoint<P>(th, a, g, make_float2(0.f, 0.f));
  }
  R[((b * C + th.c) * P + j) * kf + f] = e;
}

// Backward carries, group (b, f): E_{C-1} = 0, E_{c-1} = M_c^H E_c + R_c (lane j: column j of M_c).
template <int P>
__global__ void __launch_bounds__(CHUNK_THREADS) group_carry_bwd(const float2* __restrict__ R,
                                                                 const float2* __restrict__ M, float2* E, int64_t C,
                                                                 int64_t kf) {
  GroupThread<P> th;
  if (!th.init(1, 1, 1, kf)) return;
  const int64_t b = th.b, f = th.f;
  const int j = th.i;
  float2 e = make_float2(0.f, 0.f);
  E[((b * C + C - 1) * P + j) * kf + f] = e;
  if (C < 2) return;
  float2 mn[P], rn;
  load_col<P>(mn, M + (b * C + C - 1) * P * P * kf + f, j, kf);
  rn = R[((b * C + C - 1) * P + j) * kf + f];
  for (int64_t c = C - 1; c >= 1; --c) {
    float2 m[P];
    copy<P>(m, mn);
    const float2 r = rn;
    if (c > 1) {
      load_col<P>(mn, M + (b * C + c - 1) * P * P * kf + f, j, kf);
      rn = R[((b * C + c - 1) * P + j) * kf + f];
    }
    e = col_adjoint<P>(th, m, e, r);
    E[((b * C + c - 1) * P + j) * kf + f] = e;
  }
}

// Backward apply of chunk c from E_c (null: zeros, C = 1): G_t over D_t, X_t over A_t, dH0 from
// chunk 0. Lane j reads column j of A_t into registers before it writes column j of X_t over it;
// no other lane touches that column.
template <int P>
__global__ void __launch_bounds__(CHUNK_THREADS) group_apply_bwd(float2* AX, const float2* __restrict__ H,
                                                                 float2* DG, const float2* H0, const float2* DL,
                                                                 const float2* E, float2* dH0, int64_t T, int64_t L,
                                                                 int64_t C, int64_t kf, float s) {
  GroupThread<P> th;
  if (!th.init(T, L, C, kf)) return;
  const int64_t b = th.b, f = th.f;
  const int j = th.i;
  float2 e = E ? E[((b * C + th.c) * P + j) * kf + f] : make_float2(0.f, 0.f);
  auto load_h = [&](int64_t t) {  // H_{t-1}[j], H0 at t = 0, or zero
    return t > 0 ? H[((b * T + t - 1) * P + j) * kf + f]
                 : (H0 ? H0[(b * P + j) * kf + f] : make_float2(0.f, 0.f));
  };
  float2 an[P], dn, hn;
  load_col<P>(an, AX + (b * T + th.t1 - 1) * P * P * kf + f, j, kf);
  dn = DG[((b * T + th.t1 - 1) * P + j) * kf + f];
  hn = load_h(th.t1 - 1);
  for (int64_t t = th.t1 - 1; t >= th.t0; --t) {
    float2 a[P];
    copy<P>(a, an);
    float2 g = dn;
    const float2 hp = hn;
    if (t > th.t0) {
      load_col<P>(an, AX + (b * T + t - 1) * P * P * kf + f, j, kf);
      dn = DG[((b * T + t - 1) * P + j) * kf + f];
      hn = load_h(t - 1);
    }
    if (DL && t == T - 1) g = add(g, DL[(b * P + j) * kf + f]);
    g = add(scaled(g, s), e);
    DG[((b * T + t) * P + j) * kf + f] = g;
    float2* Xt = AX + (b * T + t) * P * P * kf + f;
    const bool zero = t == 0 && !H0;  // h_{-1} = 0: da_0 = 0 exactly (no NaN * 0)
    float2 acc = make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const float2 gi = th.from(g, i);
      acc = cfma_conj(a[i], gi, acc);
      Xt[(int64_t(i) * P + j) * kf] = zero ? make_float2(0.f, 0.f) : mul_conj(gi, hp);
    }
    e = acc;
  }
  if (dH0 && th.c == 0) dH0[(b * P + j) * kf + f] = e;
}

}  // namespace strux::cuda::bscan
