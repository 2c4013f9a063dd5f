// Private to the pair kernels (pairs.cpp, pairs_bsl.cpp): 64-byte GCC vector types, loads and
// stores, and the chain of stages both layouts run. Every function here is always inlined into
// the target_clones functions of those files, so it compiles once per clone (AVX-512, AVX2 + FMA,
// baseline) there.
#pragma once

#include <cstdint>
#include <cstring>

#pragma GCC diagnostic ignored "-Wpsabi"  // 64-byte vectors pass only between inlined functions

namespace strux::cpu::ks {

#define STRUX_INLINE [[gnu::always_inline]] inline

typedef float vf __attribute__((vector_size(64)));
typedef double vd __attribute__((vector_size(64)));
template <class T>
struct VecOf;
template <>
struct VecOf<float> {
  using type = vf;
};
template <>
struct VecOf<double> {
  using type = vd;
};
template <class T>
using Vec = typename VecOf<T>::type;
template <class T>
constexpr int64_t kV = 64 / int64_t(sizeof(T));  // lanes of a vector

template <class T>
STRUX_INLINE Vec<T> ld(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
STRUX_INLINE void st(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof v);
}

// p with a zero bit inserted at bit log2(d) (d a power of two): the q-th p with p & d == 0.
STRUX_INLINE int64_t spread(int64_t q, int64_t d) { return ((q & ~(d - 1)) << 1) | (q & (d - 1)); }

// The chain in application order: stage s is factor P-1-s (K_P first); its weights per
// position at w + 2 s n (wd) and w + (2 s + 1) n (wo); wt + s n: wo[p ^ d] (backward).
template <class T>
struct Stages {
  int64_t P, n;
  const int64_t* d;
  const T* w;
  const T* wt;
};

// The batch-size-last forward of pairs_forward (pairs_bsl.cpp), on nt threads.
template <class T>
void pairs_forward_bsl(const Stages<T>& S, const T* x, T* y, int64_t batch, int nt);

}  // namespace strux::cpu::ks
