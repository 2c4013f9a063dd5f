// Kernels of BlockCirculantScanPlan: per-frequency p x p complex recurrences on the half spectra
// (frequency f innermost, so a warp reads consecutive frequencies: coalesced).
//
// Spectra layouts: A (B, T, p, p, kf), state-like arrays (B, T, p, kf), per-batch states
// (B, p, kf), chunk summaries (B, C, p, kf) and (B, C, p, p, kf).
//
// Forward:  H_t = A_t H_{t-1} + s U_t, H_{-1} = s_0 H0.
// Backward: G_t = s D_t (+ s DL at t = T-1) + A_{t+1}^H G_{t+1};  X_t[i, j] = G_t[i] conj(H_{t-1}[j])
//           (the da spectrum, written over A_t);  dH0 = A_0^H G_0.
//
// Two families:
// - seq_*: any p, one thread per (batch, frequency) through the whole sequence, its vectors in
//   shared memory (column per thread: conflict-free). Latency-bound when B*kf is small: every
//   step waits for its loads.
// - chunk_*<P> (P <= 4, registers, the next step's loads issued before the current step's math):
//   time is cut into C chunks of L steps. Forward: (1) each chunk's local final state from 0 and
//   its transition product M_c = A_{t1-1} ... A_{t0}; (2) one thread per (batch, frequency)
//   carries the state across chunks, carry_{c+1} = M_c carry_c + S_c; (3) each chunk reruns from
//   its carry and writes H. Backward, the same with the adjoint: the carry into chunk c from the
//   right is E_c = A_{t1}^H G_{t1}, and E_{c-1} = M_c^H E_c + R_c (R_c: the chunk's local
//   A_{t0}^H G_{t0} from E = 0), so the forward's M serves both directions. With C = 1 the apply
//   kernels alone are the plain sequential scan.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strux::cuda::bscan {

constexpr int SEQ_THREADS = 32;     // frequencies per block of the seq kernels (one batch row)
constexpr int CHUNK_THREADS = 128;  // (chunk, frequency) pairs per block of the chunk kernels

__device__ __forceinline__ float2 cfma(float2 a, float2 x, float2 y) {  // y + a x
  return make_float2(fmaf(a.x, x.x, fmaf(-a.y, x.y, y.x)), fmaf(a.x, x.y, fmaf(a.y, x.x, y.y)));
}
__device__ __forceinline__ float2 cfma_conj(float2 a, float2 x, float2 y) {  // y + conj(a) x
  return make_float2(fmaf(a.x, x.x, fmaf(a.y, x.y, y.x)), fmaf(a.x, x.y, fmaf(-a.y, x.x, y.y)));
}
__device__ __forceinline__ float2 mul_conj(float2 g, float2 h) {  // g conj(h)
  return make_float2(fmaf(g.x, h.x, g.y * h.y), fmaf(g.y, h.x, -g.x * h.y));
}
__device__ __forceinline__ float2 scaled(float2 v, float s) { return make_float2(v.x * s, v.y * s); }
__device__ __forceinline__ float2 add(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }

// ---- seq: any p ---------------------------------------------------------------------------------

// Thread (b, f): H_t = A_t H_{t-1} + s U_t in place over U (U_t[:, f] is read before H_t[:, f]
// is written, and no other thread touches column f of batch b).
__global__ void seq_forward(const float2* __restrict__ A, float2* UH, const float2* H0, int64_t T, int64_t p,
                            int64_t kf, float s, float s0) {
  extern __shared__ float2 st[];  // [2][p][SEQ_THREADS]
  const int64_t b = blockIdx.y;
  const int64_t f = int64_t(blockIdx.x) * SEQ_THREADS + threadIdx.x;
  if (f >= kf) return;
  float2* cur = st + threadIdx.x;
  float2* nxt = st + p * SEQ_THREADS + threadIdx.x;
  for (int64_t i = 0; i < p; ++i)
    cur[i * SEQ_THREADS] = H0 ? scaled(H0[(b * p + i) * kf + f], s0) : make_float2(0.f, 0.f);
  for (int64_t t = 0; t < T; ++t) {
    const float2* At = A + ((b * T + t) * p * p) * kf + f;
    float2* Ut = UH + ((b * T + t) * p) * kf + f;
    for (int64_t i = 0; i < p; ++i) {
      float2 acc = scaled(Ut[i * kf], s);
      for (int64_t j = 0; j < p; ++j) acc = cfma(__ldg(At + (i * p + j) * kf), cur[j * SEQ_THREADS], acc);
      nxt[i * SEQ_THREADS] = acc;
      Ut[i * kf] = acc;
    }
    float2* tmp = cur;
    cur = nxt;
    nxt = tmp;
  }
}

// Thread (b, f), t = T-1 .. 0, with c = A_{t+1}^H G_{t+1} (0 at T-1): G_t = s (D_t [+ DL]) + c over
// D_t; then c = A_t^H G_t, reading all of A_t[:, :, f] before X_t is written over it (only this
// thread touches those addresses). dH0 = the last c.
__global__ void seq_backward(float2* AX, const float2* __restrict__ H, float2* DG, const float2* H0,
                             const float2* DL, float2* dH0, int64_t T, int64_t p, int64_t kf, float s) {
  extern __shared__ float2 st[];  // [2][p][SEQ_THREADS]: g, c
  const int64_t b = blockIdx.y;
  const int64_t f = int64_t(blockIdx.x) * SEQ_THREADS + threadIdx.x;
  if (f >= kf) return;
  float2* g = st + threadIdx.x;
  float2* c = st + p * SEQ_THREADS + threadIdx.x;
  for (int64_t i = 0; i < p; ++i) c[i * SEQ_THREADS] = make_float2(0.f, 0.f);
  for (int64_t t = T - 1; t >= 0; --t) {
    float2* At = AX + ((b * T + t) * p * p) * kf + f;
    float2* Dt = DG + ((b * T + t) * p) * kf + f;
    for (int64_t i = 0; i < p; ++i) {
      float2 d = Dt[i * kf];
      if (DL && t == T - 1) d = add(d, DL[(b * p + i) * kf + f]);
      const float2 v = add(scaled(d, s), c[i * SEQ_THREADS]);
      g[i * SEQ_THREADS] = v;
      Dt[i * kf] = v;
    }
    for (int64_t j = 0; j < p; ++j) {
      float2 acc = make_float2(0.f, 0.f);
      for (int64_t i = 0; i < p; ++i) acc = cfma_conj(At[(i * p + j) * kf], g[i * SEQ_THREADS], acc);
      c[j * SEQ_THREADS] = acc;
    }
    // h_{-1} = 0 without h0: da_0 is 0 (written as such, so a NaN in g_0 does not leak into it).
    const float2* Hp = t > 0 ? H + ((b * T + t - 1) * p) * kf + f : (H0 ? H0 + b * p * kf + f : nullptr);
    for (int64_t j = 0; j < p; ++j) {
      const float2 hp = Hp ? Hp[j * kf] : make_float2(0.f, 0.f);
      for (int64_t i = 0; i < p; ++i) At[(i * p + j) * kf] = Hp ? mul_conj(g[i * SEQ_THREADS], hp) : hp;
    }
  }
  if (dH0)
    for (int64_t j = 0; j < p; ++j) dH0[(b * p + j) * kf + f] = c[j * SEQ_THREADS];
}

// ---- chunk<P>: P <= 4 ---------------------------------------------------------------------------

// Thread of the chunk kernels: (b, c, f) from blockIdx.y = b and the flat (c, f) index.
struct ChunkThread {
  int64_t b, c, f, t0, t1;
  __device__ bool init(int64_t T, int64_t L, int64_t C, int64_t kf) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= C * kf) return false;
    b = blockIdx.y;
    c = idx / kf;
    f = idx - c * kf;
    t0 = c * L;
    t1 = t0 + L < T ? t0 + L : T;
    return true;
  }
};

template <int P>
__device__ __forceinline__ void load_mat(float2 (&m)[P * P], const float2* src, int64_t kf) {
#pragma unroll
  for (int q = 0; q < P * P; ++q) m[q] = src[q * kf];
}
template <int P>
__device__ __forceinline__ void load_vec(float2 (&v)[P], const float2* src, int64_t kf) {
#pragma unroll
  for (int i = 0; i < P; ++i) v[i] = src[i * kf];
}
template <int P>
__device__ __forceinline__ void store_vec(float2* dst, const float2 (&v)[P], int64_t kf) {
#pragma unroll
  for (int i = 0; i < P; ++i) dst[i * kf] = v[i];
}
// h = m h + s u
template <int P>
__device__ __forceinline__ void step_fwd(float2 (&h)[P], const float2 (&m)[P * P], const float2 (&u)[P], float s) {
  float2 o[P];
#pragma unroll
  for (int i = 0; i < P; ++i) {
    o[i] = scaled(u[i], s);
#pragma unroll
    for (int j = 0; j < P; ++j) o[i] = cfma(m[i * P + j], h[j], o[i]);
  }
#pragma unroll
  for (int i = 0; i < P; ++i) h[i] = o[i];
}
// e = m^H g (+ r)
template <int P>
__device__ __forceinline__ void adj(float2 (&e)[P], const float2 (&m)[P * P], const float2 (&g)[P]) {
#pragma unroll
  for (int j = 0; j < P; ++j) {
    float2 acc = make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < P; ++i) acc = cfma_conj(m[i * P + j], g[i], acc);
    e[j] = acc;
  }
}

// (1) forward summaries: S_c = local final state from 0 (U scaled by s), M_c = A_{t1-1} ... A_{t0}.
template <int P>
__global__ void chunk_summary(const float2* __restrict__ A, const float2* __restrict__ U, float2* S, float2* M,
                              int64_t T, int64_t L, int64_t C, int64_t kf, float s) {
  ChunkThread th;
  if (!th.init(T, L, C, kf)) return;
  const int64_t b = th.b, f = th.f;
  float2 h[P], m[P * P], an[P * P], un[P];
#pragma unroll
  for (int i = 0; i < P; ++i) h[i] = make_float2(0.f, 0.f);
#pragma unroll
  for (int q = 0; q < P * P; ++q) m[q] = make_float2(q % (P + 1) == 0 ? 1.f : 0.f, 0.f);
  load_mat<P>(an, A + (b * T + th.t0) * P * P * kf + f, kf);
  load_vec<P>(un, U + (b * T + th.t0) * P * kf + f, kf);
  for (int64_t t = th.t0; t < th.t1; ++t) {
    float2 a[P * P], u[P];
#pragma unroll
    for (int q = 0; q < P * P; ++q) a[q] = an[q];
#pragma unroll
    for (int i = 0; i < P; ++i) u[i] = un[i];
    if (t + 1 < th.t1) {
      load_mat<P>(an, A + (b * T + t + 1) * P * P * kf + f, kf);
      load_vec<P>(un, U + (b * T + t + 1) * P * kf + f, kf);
    }
    step_fwd<P>(h, a, u, s);
    float2 o[P * P];
#pragma unroll
    for (int i = 0; i < P; ++i)
#pragma unroll
      for (int l = 0; l < P; ++l) {
        float2 acc = make_float2(0.f, 0.f);
#pragma unroll
        for (int j = 0; j < P; ++j) acc = cfma(a[i * P + j], m[j * P + l], acc);
        o[i * P + l] = acc;
      }
#pragma unroll
    for (int q = 0; q < P * P; ++q) m[q] = o[q];
  }
  const int64_t bc = b * C + th.c;
  store_vec<P>(S + bc * P * kf + f, h, kf);
#pragma unroll
  for (int q = 0; q < P * P; ++q) M[(bc * P * P + q) * kf + f] = m[q];
}

// (2) forward carries, thread (b, f): Car_0 = s0 H0 (or 0), Car_{c+1} = M_c Car_c + S_c.
template <int P>
__global__ void chunk_carry(const float2* __restrict__ S, const float2* __restrict__ M, const float2* H0, float2* Car,
                            int64_t C, int64_t kf, float s0) {
  const int64_t f = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f >= kf) return;
  const int64_t b = blockIdx.y;
  float2 h[P], mn[P * P], sn[P];
#pragma unroll
  for (int i = 0; i < P; ++i) h[i] = H0 ? scaled(H0[(b * P + i) * kf + f], s0) : make_float2(0.f, 0.f);
  store_vec<P>(Car + b * C * P * kf + f, h, kf);
  if (C < 2) return;
  load_mat<P>(mn, M + b * C * P * P * kf + f, kf);
  load_vec<P>(sn, S + b * C * P * kf + f, kf);
  for (int64_t c = 0; c + 1 < C; ++c) {
    float2 m[P * P], sv[P];
#pragma unroll
    for (int q = 0; q < P * P; ++q) m[q] = mn[q];
#pragma unroll
    for (int i = 0; i < P; ++i) sv[i] = sn[i];
    if (c + 2 < C) {
      load_mat<P>(mn, M + (b * C + c + 1) * P * P * kf + f, kf);
      load_vec<P>(sn, S + (b * C + c + 1) * P * kf + f, kf);
    }
    step_fwd<P>(h, m, sv, 1.f);
    store_vec<P>(Car + (b * C + c + 1) * P * kf + f, h, kf);
  }
}

// (3) forward apply: H_t = A_t H_{t-1} + s U_t in place over U, from Init[(b*C + c)] * s0
// (the carries with s0 = 1, or H0 with C = 1; null: zeros).
template <int P>
__global__ void chunk_apply(const float2* __restrict__ A, float2* UH, const float2* Init, int64_t T, int64_t L,
                            int64_t C, int64_t kf, float s, float s0) {
  ChunkThread th;
  if (!th.init(T, L, C, kf)) return;
  const int64_t b = th.b, f = th.f;
  float2 h[P], an[P * P], un[P];
#pragma unroll
  for (int i = 0; i < P; ++i)
    h[i] = Init ? scaled(Init[((b * C + th.c) * P + i) * kf + f], s0) : make_float2(0.f, 0.f);
  load_mat<P>(an, A + (b * T + th.t0) * P * P * kf + f, kf);
  load_vec<P>(un, UH + (b * T + th.t0) * P * kf + f, kf);
  for (int64_t t = th.t0; t < th.t1; ++t) {
    float2 a[P * P], u[P];
#pragma unroll
    for (int q = 0; q < P * P; ++q) a[q] = an[q];
#pragma unroll
    for (int i = 0; i < P; ++i) u[i] = un[i];
    if (t + 1 < th.t1) {  // U_{t+1} is read before H_t (another address) is written
      load_mat<P>(an, A + (b * T + t + 1) * P * P * kf + f, kf);
      load_vec<P>(un, UH + (b * T + t + 1) * P * kf + f, kf);
    }
    step_fwd<P>(h, a, u, s);
    store_vec<P>(UH + (b * T + t) * P * kf + f, h, kf);
  }
}

// Backward local pass of chunk c from E = 0 (no writes): R_c = A_{t0}^H G_{t0}. Chunk 0's R is
// never used (its outgoing carry is dH0, made by chunk_apply_bwd).
template <int P>
__global__ void chunk_summary_bwd(const float2* __restrict__ A, const float2* __restrict__ D, const float2* DL,
                                  float2* R, int64_t T, int64_t L, int64_t C, int64_t kf, float s) {
  ChunkThread th;
  if (!th.init(T, L, C, kf) || th.c == 0) return;
  const int64_t b = th.b, f = th.f;
  float2 e[P], an[P * P], dn[P];
#pragma unroll
  for (int i = 0; i < P; ++i) e[i] = make_float2(0.f, 0.f);
  load_mat<P>(an, A + (b * T + th.t1 - 1) * P * P * kf + f, kf);
  load_vec<P>(dn, D + (b * T + th.t1 - 1) * P * kf + f, kf);
  for (int64_t t = th.t1 - 1; t >= th.t0; --t) {
    float2 a[P * P], g[P];
#pragma unroll
    for (int q = 0; q < P * P; ++q) a[q] = an[q];
#pragma unroll
    for (int i = 0; i < P; ++i) g[i] = dn[i];
    if (t > th.t0) {
      load_mat<P>(an, A + (b * T + t - 1) * P * P * kf + f, kf);
      load_vec<P>(dn, D + (b * T + t - 1) * P * kf + f, kf);
    }
    if (DL && t == T - 1)
#pragma unroll
      for (int i = 0; i < P; ++i) g[i] = add(g[i], DL[(b * P + i) * kf + f]);
#pragma unroll
    for (int i = 0; i < P; ++i) g[i] = add(scaled(g[i], s), e[i]);
    adj<P>(e, a, g);
  }
  store_vec<P>(R + (b * C + th.c) * P * kf + f, e, kf);
}

// Backward carries, thread (b, f): E_{C-1} = 0, E_{c-1} = M_c^H E_c + R_c.
template <int P>
__global__ void chunk_carry_bwd(const float2* __restrict__ R, const float2* __restrict__ M, float2* E, int64_t C,
                                int64_t kf) {
  const int64_t f = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f >= kf) return;
  const int64_t b = blockIdx.y;
  float2 e[P], mn[P * P], rn[P];
#pragma unroll
  for (int i = 0; i < P; ++i) e[i] = make_float2(0.f, 0.f);
  store_vec<P>(E + (b * C + C - 1) * P * kf + f, e, kf);
  if (C < 2) return;
  load_mat<P>(mn, M + (b * C + C - 1) * P * P * kf + f, kf);
  load_vec<P>(rn, R + (b * C + C - 1) * P * kf + f, kf);
  for (int64_t c = C - 1; c >= 1; --c) {
    float2 m[P * P], r[P];
#pragma unroll
    for (int q = 0; q < P * P; ++q) m[q] = mn[q];
#pragma unroll
    for (int i = 0; i < P; ++i) r[i] = rn[i];
    if (c > 1) {
      load_mat<P>(mn, M + (b * C + c - 1) * P * P * kf + f, kf);
      load_vec<P>(rn, R + (b * C + c - 1) * P * kf + f, kf);
    }
    float2 o[P];
    adj<P>(o, m, e);
#pragma unroll
    for (int i = 0; i < P; ++i) e[i] = add(o[i], r[i]);
    store_vec<P>(E + (b * C + c - 1) * P * kf + f, e, kf);
  }
}

// Backward apply of chunk c from E_c (null: zeros, C = 1): G_t over D_t, X_t over A_t (all of
// A_t is in registers before X_t is written; only this thread touches them), dH0 from chunk 0.
template <int P>
__global__ void chunk_apply_bwd(float2* AX, const float2* __restrict__ H, float2* DG, const float2* H0,
                                const float2* DL, const float2* E, float2* dH0, int64_t T, int64_t L, int64_t C,
                                int64_t kf, float s) {
  ChunkThread th;
  if (!th.init(T, L, C, kf)) return;
  const int64_t b = th.b, f = th.f;
  float2 e[P], an[P * P], dn[P], hn[P];
#pragma unroll
  for (int i = 0; i < P; ++i) e[i] = E ? E[((b * C + th.c) * P + i) * kf + f] : make_float2(0.f, 0.f);
  auto load_h = [&](int64_t t) {  // H_{t-1}, H0 at t = 0, or zeros
    const float2* src = t > 0 ? H + (b * T + t - 1) * P * kf + f : (H0 ? H0 + b * P * kf + f : nullptr);
#pragma unroll
    for (int i = 0; i < P; ++i) hn[i] = src ? src[i * kf] : make_float2(0.f, 0.f);
  };
  load_mat<P>(an, AX + (b * T + th.t1 - 1) * P * P * kf + f, kf);
  load_vec<P>(dn, DG + (b * T + th.t1 - 1) * P * kf + f, kf);
  load_h(th.t1 - 1);
  for (int64_t t = th.t1 - 1; t >= th.t0; --t) {
    float2 a[P * P], g[P], hp[P];
#pragma unroll
    for (int q = 0; q < P * P; ++q) a[q] = an[q];
#pragma unroll
    for (int i = 0; i < P; ++i) g[i] = dn[i], hp[i] = hn[i];
    if (t > th.t0) {
      load_mat<P>(an, AX + (b * T + t - 1) * P * P * kf + f, kf);
      load_vec<P>(dn, DG + (b * T + t - 1) * P * kf + f, kf);
      load_h(t - 1);
    }
    if (DL && t == T - 1)
#pragma unroll
      for (int i = 0; i < P; ++i) g[i] = add(g[i], DL[(b * P + i) * kf + f]);
#pragma unroll
    for (int i = 0; i < P; ++i) g[i] = add(scaled(g[i], s), e[i]);
    store_vec<P>(DG + (b * T + t) * P * kf + f, g, kf);
    adj<P>(e, a, g);
    float2* Xt = AX + (b * T + t) * P * P * kf + f;
    const bool zero = t == 0 && !H0;  // h_{-1} = 0: da_0 = 0 exactly (no NaN * 0)
#pragma unroll
    for (int i = 0; i < P; ++i)
#pragma unroll
      for (int j = 0; j < P; ++j) Xt[(i * P + j) * kf] = zero ? make_float2(0.f, 0.f) : mul_conj(g[i], hp[j]);
  }
  if (dH0 && th.c == 0) store_vec<P>(dH0 + b * P * kf + f, e, kf);
}

}  // namespace strux::cuda::bscan
