// Epilogues of the four-step column pass C (fourstep.cuh cols_inverse): what is done with the
// transformed row z' (two samples t, t + 1 per point). row(r) binds one row's pointers once per CTA;
// the returned object's (t, z) handles one point and skips samples past its row's length. Rows
// r = b·H + h of length L for the signal rows, r = h of length Lk for the filter gradient.
#pragma once

#include "cuda/fftconv/fourstep.cuh"

namespace strux::cuda::fourstep {

// y = post ⊙ (z' + skip·v), v = u ⊙ pre: the forward's epilogue; also dpost = dy ⊙ (z + skip·v)
// of the backward, with dy as `post` and z = irfft(K̂·V̂) as z'.
template <class T>
struct EpiForward {
  const T *u, *pre, *post, *skip;
  int64_t H, L;
  bool vec;
  T* y;
  struct Row {
    const T *u, *pre, *post;
    float sk;
    bool skip, vec;
    int64_t L;
    T* y;
    __device__ __forceinline__ void operator()(int64_t t, float2 z) const {
      if (t >= L) return;
      if (skip) {
        float2 v = ld2(u, t, L, vec);
        if (pre) v = mul2(v, ld2(pre, t, L, vec));
        z = {z.x + sk * v.x, z.y + sk * v.y};
      }
      if (post) z = mul2(z, ld2(post, t, L, vec));
      st2(y, t, L, vec, z.x, z.y);
    }
  };
  __device__ __forceinline__ Row row(int64_t r) const {
    const int64_t off = r * L;
    return {u + off,     pre ? pre + off : nullptr, post ? post + off : nullptr,
            skip ? float(to_c(skip[r % H])) : 0.f, skip != nullptr, vec, L, y + off};
  }
};

// The backward's input gradients from the correlation c = irfft(conj(K̂)·Ĝ) as z':
// dv = c + skip·dz (dz = dy ⊙ post), du = dv ⊙ pre, dpre = dv ⊙ u (kernels.cuh epilogue_backward).
template <class T>
struct EpiGrad {
  const T *dy, *u, *pre, *post, *skip;
  int64_t H, L;
  bool vec;
  T *du, *dpre;
  struct Row {
    const T *dy, *u, *pre, *post;
    float sk;
    bool skip, vec;
    int64_t L;
    T *du, *dpre;
    __device__ __forceinline__ void operator()(int64_t t, float2 dv) const {
      if (t >= L) return;
      if (skip) {
        float2 dz = ld2(dy, t, L, vec);
        if (post) dz = mul2(dz, ld2(post, t, L, vec));
        dv = {dv.x + sk * dz.x, dv.y + sk * dz.y};
      }
      if (pre) {
        const float2 p = mul2(dv, ld2(pre, t, L, vec));
        st2(du, t, L, vec, p.x, p.y);
        if (dpre) {
          const float2 q = mul2(dv, ld2(u, t, L, vec));
          st2(dpre, t, L, vec, q.x, q.y);
        }
      } else {
        st2(du, t, L, vec, dv.x, dv.y);
      }
    }
  };
  __device__ __forceinline__ Row row(int64_t r) const {
    const int64_t off = r * L;
    return {dy + off,
            u + off,
            pre ? pre + off : nullptr,
            post ? post + off : nullptr,
            skip ? float(to_c(skip[r % H])) : 0.f,
            skip != nullptr,
            vec,
            L,
            du + off,
            dpre ? dpre + off : nullptr};
  }
};

// The filter gradient from c = irfft(dK̂) of row h as z': dk[h, s] = c[s] for s < Lmin (the rest of
// the row, Lmin <= s < Lk, is zeroed by the host: those taps never reach an output), dskip[h] = c[0].
template <class T>
struct EpiFilter {
  int64_t Lk, Lmin;
  bool vec;  // Lk and Lmin even, dk aligned: pairs (t, t + 1 < Lmin) in one store
  T *dk, *dskip;
  struct Row {
    int64_t Lmin;
    bool vec;
    T *dk, *dskip;
    __device__ __forceinline__ void operator()(int64_t t, float2 c) const {
      if (t >= Lmin) return;
      st2(dk, t, Lmin, vec, c.x, c.y);
      if (dskip && t == 0) *dskip = From<T>::of(c.x);
    }
  };
  __device__ __forceinline__ Row row(int64_t h) const { return {Lmin, vec, dk + h * Lk, dskip ? dskip + h : nullptr}; }
};

}  // namespace strux::cuda::fourstep
