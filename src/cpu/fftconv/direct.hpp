// The direct solver of the CPU fftconv plan (fftconv.cpp): short filters summed tap by tap, no
// transform. Per (b, h) row the input is laid out once with m - 1 samples of history in front
// (zeros in causal mode, the row's last m - 1 samples in circular mode), so that both modes are
// one sliding dot product, out[t] = Σ_i w[i] x[t + i], whose inner loop runs over t (contiguous,
// vectorised). m = taps used (causal min(Lk, L), circular Lk <= L).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace strux::cpu {

// x[m - 1 + t] = v[t] = u[t] ⊙ pre[t] for t < L; x[0, m - 1) = the history before t = 0:
// zeros (causal) or v[L - m + 1, L) (circular, m <= L).
template <class T>
inline void load_history(T* x, const T* u, const T* pre, int64_t L, int64_t m, bool circular) {
  T* v = x + (m - 1);
  if (pre) {
    for (int64_t t = 0; t < L; ++t) v[t] = u[t] * pre[t];
  } else {
    std::memcpy(v, u, sizeof(T) * size_t(L));
  }
  if (circular)
    std::memcpy(x, v + (L - (m - 1)), sizeof(T) * size_t(m - 1));
  else
    std::fill(x, x + (m - 1), T(0));
}


// g[t] = dz[t] = dy[t] ⊙ post[t] for t < L; g[L, L + m - 1) = what follows t = L - 1 for the
// correlation: zeros (causal) or dz[0, m - 1) (circular).
template <class T>
inline void load_future(T* g, const T* dy, const T* post, int64_t L, int64_t m, bool circular) {
  if (post) {
    for (int64_t t = 0; t < L; ++t) g[t] = dy[t] * post[t];
  } else {
    std::memcpy(g, dy, sizeof(T) * size_t(L));
  }
  if (circular)
    std::memcpy(g + L, g, sizeof(T) * size_t(m - 1));
  else
    std::fill(g + L, g + L + (m - 1), T(0));
}

// y (rows = B·H rows of L) for taps k (H, m), row-major; null pre / post / skip are absent.
template <class T>
void direct_forward(int64_t rows, int64_t H, int64_t L, int64_t m, bool circular, const T* k, const T* u,
                    const T* pre, const T* post, const T* skip, T* y);

// The vector-Jacobian product for dy (B, H, L): du, dk (H, Lk; taps s >= m get 0) and, where
// given, dpre, dpost, dskip. dk and dskip are summed in double over the batch in a fixed order
// (tasks (h, chunk of b) as rows_backward cuts them, then chunk by chunk), so they do not depend
// on the team that ran the call.
template <class T>
void direct_backward(int64_t B, int64_t H, int64_t L, int64_t m, int64_t Lk, bool circular, const T* k,
                     const T* dy, const T* u, const T* pre, const T* post, const T* skip, T* du, T* dk, T* dpre,
                     T* dpost, T* dskip);

}  // namespace strux::cpu
