// Blocks of an LTI system's parameter-to-observable map: blocks[t] = C A^t B (+ D at t = 0).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/checked_size.hpp"
#include "cpu/threads.hpp"
#include "cpu/toeplitz/blas.hpp"
#include "strux/toeplitz.hpp"

namespace strux {

template <class T>
void lti_blocks(const T* A, const T* B, const T* C, const T* D, int64_t ns, int64_t nd, int64_t nm,
                int64_t nt, T* blocks) {
  check_arg(A != nullptr, "A", "expected a data pointer, got null");
  check_arg(B != nullptr, "B", "expected a data pointer, got null");
  check_arg(C != nullptr, "C", "expected a data pointer, got null");
  check_arg(blocks != nullptr, "blocks", "expected a data pointer, got null");
  check_positive(ns, "ns");
  check_positive(nd, "Nd");
  check_positive(nm, "Nm");
  check_positive(nt, "nt");
  checked_bytes("nt", {nt, nd, nm}, sizeof(T));
  checked_bytes("nt", {nt, nd, ns}, sizeof(T));
  checked_bytes("A", {ns, std::max(ns, nm)}, sizeof(T));
  using cpu::toeplitz::gemm_real;
  const cpu::BlasThreads blas_threads;  // BLAS takes set_num_threads, not the OpenMP default
  if (nd <= nm) {
    // Few outputs: Y_t = C A^t (nd x ns) costs nd ns^2 per step instead of ns^2 nm; stacked
    // Y (nt*nd, ns) times B (ns, nm) is exactly blocks (nt, nd, nm) in one GEMM.
    std::vector<T> Y(size_t(nt * nd * ns));
    std::memcpy(Y.data(), C, sizeof(T) * size_t(nd * ns));
    for (int64_t t = 1; t < nt; ++t)
      gemm_real(nd, ns, ns, Y.data() + (t - 1) * nd * ns, ns, A, ns, T(0), Y.data() + t * nd * ns, ns);
    gemm_real(nt * nd, nm, ns, Y.data(), ns, B, nm, T(0), blocks, nm);
  } else {
    // Few inputs: X_t = A^t B (ns x nm), blocks[t] = C X_t.
    std::vector<T> X(size_t(ns * nm)), Xn(size_t(ns * nm));
    std::memcpy(X.data(), B, sizeof(T) * size_t(ns * nm));
    for (int64_t t = 0; t < nt; ++t) {
      if (t > 0) {
        gemm_real(ns, nm, ns, A, ns, X.data(), nm, T(0), Xn.data(), nm);
        std::swap(X, Xn);
      }
      gemm_real(nd, nm, ns, C, ns, X.data(), nm, T(0), blocks + t * nd * nm, nm);
    }
  }
  if (D != nullptr)
    for (int64_t i = 0; i < nd * nm; ++i) blocks[i] += D[i];
}

template void lti_blocks<float>(const float*, const float*, const float*, const float*, int64_t,
                                int64_t, int64_t, int64_t, float*);
template void lti_blocks<double>(const double*, const double*, const double*, const double*,
                                 int64_t, int64_t, int64_t, int64_t, double*);

}  // namespace strux
