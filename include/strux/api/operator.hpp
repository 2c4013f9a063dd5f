// The part of the plan contract every operator shares (see <strux/strux.hpp>).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "strux/api/types.hpp"

namespace strux::op {
namespace detail {

// One backend's implementation of a family: made by the operator from its device.
template <class Fwd, class Bwd>
struct Backend {
  virtual ~Backend() = default;
  virtual size_t workspace_bytes() const = 0;
  virtual std::string describe() const = 0;
  // Views are already checked against the problem; ws is null or holds workspace_bytes().
  virtual void forward(const Fwd& args, void* ws, Stream s) = 0;
  virtual void backward(const Bwd& args, void* ws, Stream s) = 0;
};

template <class P, class Fwd, class Bwd>
class Operator {
 public:
  using Problem = P;
  using Forward = Fwd;
  using Backward = Bwd;

  const Problem& problem() const { return problem_; }
  // Bytes of scratch one forward or backward call may take from the caller (on the operator's
  // device); 0 when the plan needs none or owns all it needs.
  size_t workspace_bytes() const { return impl_->workspace_bytes(); }
  // What the plan chose, in words: backend, device, dtype, sizes, FFT lengths, kernel path,
  // the workspace it owns.
  std::string describe() const { return impl_->describe(); }

 protected:
  explicit Operator(const P& p) : problem_(p) {}
  Problem problem_;
  std::unique_ptr<Backend<Fwd, Bwd>> impl_;
};

}  // namespace detail
}  // namespace strux::op
