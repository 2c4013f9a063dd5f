// Private to the toeplitz CPU backend: the product with a precision per phase
// (ToeplitzPrecision of <strux/toeplitz.hpp>). BlockToeplitzPlan<T> keeps its plain path for the
// plain precision and hands every other one to a MixedProduct.
#pragma once

#include <cstdint>
#include <memory>

#include "strux/toeplitz.hpp"

namespace strux::cpu::toeplitz {

class MixedProduct {
 public:
  // blocks (nt, nd, nm) of the vectors' type T; q resolved (no Auto).
  template <class T>
  MixedProduct(const T* blocks, int64_t nt, int64_t nd, int64_t nm, const ToeplitzPrecision& q);
  ~MixedProduct();

  // y = F x (adjoint: Fᵀ x), x and y of type T in `layout` with R right-hand sides.
  template <class T>
  void apply(const T* x, T* y, int64_t R, ToeplitzLayout layout, bool adjoint) const;

  int64_t nfft() const;
  int64_t nfreq() const;
  int64_t spectrum_bytes() const;
  // F̂ as complex<T> when stored so, else null.
  template <class T>
  const std::complex<T>* spectrum() const;

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace strux::cpu::toeplitz
