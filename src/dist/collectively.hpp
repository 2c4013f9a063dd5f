// collectively(): run a step on every rank, then agree on its outcome (comm.hpp).
#pragma once

#include <exception>
#include <string>

#include "core/checked_size.hpp"
#include "strux/core.hpp"

namespace strux::dist {

template <class F>
void collectively(MPI_Comm comm, bool check, F&& f) {
  if (!check || comm == MPI_COMM_NULL) {  // (one process: nobody else to agree with)
    f();
    return;
  }
  using detail::ErrKind;
  ErrKind kind = ErrKind::None;
  std::string what;
  try {
    f();
  } catch (const TypeError& e) {
    kind = ErrKind::Type, what = e.what();
  } catch (const ValueError& e) {
    kind = ErrKind::Value, what = e.what();
  } catch (const MemoryError& e) {
    kind = ErrKind::Memory, what = e.what();
  } catch (const BackendError& e) {
    kind = ErrKind::Backend, what = e.what();
  } catch (const std::exception& e) {
    kind = ErrKind::Other, what = e.what();
  }
  detail::agree(comm, kind, what);
}

}  // namespace strux::dist
