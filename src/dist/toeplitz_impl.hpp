// The state of one rank of the distributed block Toeplitz (strux::dist::BlockToeplitz::Impl),
// shared by the MPI operator (toeplitz.cpp) and the one-process group (group.cpp).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "api/common.hpp"
#include "dist/comm.hpp"
#include "dist/device_ops.hpp"
#include "strux/dist.hpp"

namespace strux::dist {

// A C-contiguous view of this rank's vector with n space entries (layout, R as the problem).
View vec_view(void* data, int64_t n, const BlockToeplitzProblem& p);

// The checks of a problem that need no other rank (ValueError naming the field); P ranks.
void check_problem(const BlockToeplitzProblem& p, const DistOptions& o, int P);

struct MpiCommOwner {
  MPI_Comm c = MPI_COMM_NULL;
  MpiCommOwner() = default;
  MpiCommOwner(const MpiCommOwner&) = delete;
  MpiCommOwner& operator=(const MpiCommOwner&) = delete;
  ~MpiCommOwner() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (c != MPI_COMM_NULL && !finalized) MPI_Comm_free(&c);
  }
};

// A row chunk's local operator, with its backend's staged product (ToeplitzBackend) reachable.
class LocalToeplitz : public op::BlockToeplitz {
 public:
  using op::BlockToeplitz::BlockToeplitz;
  api::ToeplitzBackend& backend() { return static_cast<api::ToeplitzBackend&>(*impl_); }
  const api::ToeplitzBackend& backend() const { return static_cast<const api::ToeplitzBackend&>(*impl_); }
};

// The phases a call records (Timings): communication, the local product as one step, and the
// staged local product's three steps.
enum Phase { kBroadcast, kLocal, kReduce, kFFT, kProduct, kIFFT, kPhases };

struct BlockToeplitz::Impl {
  Problem p;
  DistOptions o;
  MpiCommOwner world, row_mpi, col_mpi;
  int rank = 0, size = 1, gi = 0, gj = 0;
  Range rows, cols;
  std::vector<Range> chunk;  // local row ranges of the sub-operators (also where ops is empty)
  std::vector<LocalToeplitz> ops;  // one per chunk; none where !holds_blocks()
  bool blocks_set = false;
  // The local products in steps (the backends have them: CUDA), and matvec's input transformed
  // once for every chunk (their input spectra agree).
  bool staged = false, shared_input = false;
  std::unique_ptr<Communicator> row, col;  // grid row gi (rank gj of c), grid column gj (rank gi of r)
  std::unique_ptr<SideStream> side;
  Buffer m_in, m_out, m_tmp, d_part, d_pack;
  Buffer comm_buf;  // float32 copies of float64 data for broadcast_single / reduce_single
  // Phase timing: start/end event pairs of broadcast, local and reduce, and the call's ends.
  std::vector<std::unique_ptr<Event>> ev;
  int ev_used = 0;
  std::vector<std::unique_ptr<Event>> sync;  // ordering of the side stream: one per chunk, and one more
  std::vector<std::pair<int, int>> phase[kPhases];
  int ev_begin = -1, ev_end = -1;

  size_t es() const { return dtype_size(p.dtype); }
  int64_t nd() const { return rows.size(); }
  int64_t nm() const { return cols.size(); }
  // A rank whose row or column block is empty (r > Nd or c > Nm) holds no F̂ and makes no local
  // operator; its local products are zeros, and it still joins every broadcast and sum.
  bool holds_blocks() const { return nd() > 0 && nm() > 0; }
  bool dist() const { return p.vectors == Vectors::Distributed; }
  bool time_major() const { return p.layout == ToeplitzLayout::TimeMajor; }
  Stream comm_stream(Stream s) const { return side && side->get().handle ? side->get() : s; }

  // ---- timing (events only with options.timing; the pool grows once) -----------------------
  int mark(Stream s) {
    if (!o.timing) return -1;
    if (ev_used == int(ev.size())) ev.push_back(std::make_unique<Event>(p.device));
    ev[ev_used]->record(s);
    return ev_used++;
  }
  void begin_call(Stream s) {
    ev_used = 0;
    for (auto& v : phase) v.clear();
    ev_begin = mark(s);
  }
  template <class F>
  void timed(int which, Stream s, F&& f) {
    const int a = mark(s);
    f();
    const int b = mark(s);
    if (a >= 0) phase[which].push_back({a, b});
  }

  // ---- the pieces of a vector with n space entries ------------------------------------------
  // Bytes from the start of a layout's vector to chunk [a, b) of its space entries (space-major:
  // contiguous; time-major: in the packed buffer where chunk k is (Nt, b − a, R) after the ones before).
  size_t chunk_offset(const Range& c) const { return size_t(c.begin * p.Nt * p.R) * es(); }
  size_t chunk_count(const Range& c) const { return size_t(c.size() * p.Nt * p.R); }
  // Time-major: chunk c of a vector with n entries, gathered into or scattered from its packed place.
  void pack(void* packed, const void* full, int64_t n, const Range& c, Stream s, bool scatter) {
    const size_t row = size_t(n * p.R) * es(), width = size_t(c.size() * p.R) * es();
    char* pk = static_cast<char*>(packed) + chunk_offset(c);
    char* fl = static_cast<char*>(const_cast<void*>(full)) + size_t(c.begin * p.R) * es();
    if (scatter)
      copy_rows(fl, row, pk, width, width, size_t(p.Nt), p.device, s);
    else
      copy_rows(pk, width, fl, row, width, size_t(p.Nt), p.device, s);
  }
  bool packed() const { return time_major() && chunk.size() > 1; }

  // Rank `rank` of `size` on the resolved grid: its position and blocks.
  void place(int rank, int size);
  // The grid row's and column's communicators, then the chunks' local operators and buffers.
  void build(std::unique_ptr<Communicator> row_comm, std::unique_ptr<Communicator> col_comm);
  // This rank's views against the problem (ValueError / TypeError naming the argument).
  void check_forward(const op::BlockToeplitzForward& a) const;
  void check_backward(const op::BlockToeplitzBackward& a) const;
  // A phase in float32 (options.broadcast_single / reduce_single; float64 problems only).
  bool single(bool option) const { return option && p.dtype == DType::f64; }
  // Broadcast from the group's rank 0 (`root`: this rank is it), and the sum along the group
  // (to its rank 0 with distributed vectors), in the precision the options ask for.
  void broadcast(Communicator& g, void* buf, size_t n, bool root, Stream s);
  void sum(Communicator& g, void* buf, size_t n, bool root, Stream s);
  void matvec(const View& m_arg, const View& d_arg, Stream s);
  void rmatvec(const View& d_arg, const View& m_arg, Stream s);
};


}  // namespace strux::dist
