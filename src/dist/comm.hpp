// The one communicator interface of the distributed operators: a group of ranks (a grid row or
// a grid column) that broadcasts and sums buffers in place, on a stream. Implementations:
// MPI (host buffers; the stream is ignored and calls block) and NCCL (CUDA buffers on the
// group's device; calls are queued on the stream).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "strux/api/types.hpp"

namespace strux::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;  // "MPI", "NCCL"
  // buf (count elements of dtype) from rank `root` to every rank of the group.
  virtual void broadcast(void* buf, size_t count, DType dtype, int root, Stream s) = 0;
  // buf = the sum of every rank's buf, on every rank.
  virtual void allreduce_sum(void* buf, size_t count, DType dtype, Stream s) = 0;
  // buf on `root` = the sum of every rank's buf (other ranks' buf is left undefined).
  virtual void reduce_sum(void* buf, size_t count, DType dtype, int root, Stream s) = 0;
};

// Over the ranks of `comm` (not duplicated here; the caller keeps it alive).
std::unique_ptr<Communicator> make_mpi_comm(MPI_Comm comm);
// A NCCL communicator of the ranks of `comm` on CUDA device `device`, bootstrapped over comm
// (rank 0 makes the unique id, MPI broadcasts it). Collective over comm. BackendError in a build
// without NCCL.
std::unique_ptr<Communicator> make_nccl_comm(MPI_Comm comm, int device);
bool have_nccl();
// One process: n communicators of one group, rank q's on devices[q], made by ncclCommInitAll.
std::vector<std::unique_ptr<Communicator>> make_nccl_comms(const std::vector<int>& devices);
// One process, host buffers: n communicators of one group for n threads (rank q used by one
// thread at a time), through shared memory and a barrier.
std::vector<std::unique_ptr<Communicator>> make_thread_comms(int n);

// MPI return codes: BackendError naming the call and MPI's message.
void check_mpi(int rc, const char* call);
#define STRUX_MPI(call) ::strux::dist::check_mpi((call), #call)

// The MPI datatype of a DType (float16/bfloat16 travel as 2-byte words: MPI_Reduce of them is a
// TypeError).
MPI_Datatype mpi_type(DType t);

// Runs f on every rank of comm and then agrees: when f threw on any rank, every rank throws the
// error of the lowest such rank (its type: ValueError, TypeError, MemoryError or BackendError;
// other ranks' messages say which rank it was). `check` false: f runs without agreement.
template <class F>
void collectively(MPI_Comm comm, bool check, F&& f);

namespace detail {
enum class ErrKind : int { None = 0, Value, Type, Memory, Backend, Other };
// The agreement step: every rank passes its error (kind None: none); returns normally when no
// rank failed, else throws the lowest failing rank's error on every rank.
void agree(MPI_Comm comm, ErrKind kind, const std::string& what);
}  // namespace detail

}  // namespace strux::dist

#include "dist/collectively.hpp"
