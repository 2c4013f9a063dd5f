// strux::dist: the block Toeplitz operator on an r × c grid of MPI ranks (DESIGN.md "toeplitz,
// distributed"); built only when MPI is found (CMake STRUX_MPI), linked as strux::strux_dist.
//
//   MPI_Init(...);
//   strux::dist::BlockToeplitzProblem p{{Nt, Nd, Nm}};      // + R, layout, dtype, device; grid, vectors
//   strux::dist::BlockToeplitz F(MPI_COMM_WORLD, p);         // collective: every rank calls it
//   F.set_blocks(strux::View(local_blocks, {Nt, F.rows().size(), F.cols().size()}));
//   F.forward({strux::View(m_j, ...), strux::View(d_i, ...)});  // collective
//
// Grid: P = r·c ranks, rank p at (i, j) = (p / c, p % c). The Nd rows split into r contiguous
// blocks and the Nm columns into c (block q of n over k parts: [q·n/k, (q+1)·n/k)); rank (i, j)
// owns F̂ of rows block i and columns block j: a local strux::op::BlockToeplitz of
// (Nt, nd_i, nm_j), made with the options given here (solver and any local option pass through).
// Grid {0, 0} (default) chooses (r, c) by the cost model of choose_grid(). Any (r, c) with
// r·c = P works, also r > Nd or c > Nm: a rank whose block is empty (nd_i = 0 or nm_j = 0) holds
// no local operator, contributes zeros to the sums, takes part in every collective call and
// passes and receives parts with no entries (empty views are accepted for them).
//
// matvec (forward): broadcast m_j along grid column j (Vectors::Distributed only), local FFT →
// product → IFFT, sum along grid row i. rmatvec (backward): broadcast d_i along grid row i
// (Distributed only), local adjoint, sum along grid column j. Vectors:
//   Replicated (the contract): every rank of grid column j passes m_j = m[:, cols_j] (time-major;
//     space-major m[cols_j, :]) and every rank of grid row i receives d_i = d[:, rows_i]
//     (an all-reduce); rmatvec the reverse. No broadcast is needed: the input is there.
//   Distributed (FFTMatvec's): m_j lives on rank (0, j) only and d_i on rank (i, 0) only. matvec
//     broadcasts m_j from (0, j) down column j and reduces d_i to (i, 0); rmatvec broadcasts d_i
//     from (i, 0) along row i and reduces m_j to (0, j). Other ranks pass empty views.
//
// Overlap: the local rows split into `chunks` sub-operators; matvec reduces chunk k while chunk
// k+1 computes, rmatvec broadcasts chunk k+1 while chunk k computes. matvec transforms m once
// for all chunks where the local operator runs its product in steps (CUDA). On CUDA the communication
// runs on a stream of the operator's own, ordered with the caller's by events; on the CPU every
// MPI call blocks, so chunks run one after the other (the same code path, no overlap).
//
// Communication: NCCL for CUDA devices (bootstrapped over MPI: each group's unique id is
// broadcast with MPI), MPI for CPU buffers. Every collective step starts with a check that all
// ranks' arguments are valid (a small MPI all-reduce; DistOptions::check_ranks): a bad argument on one
// rank raises the same error on every rank instead of leaving the others waiting.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strux/api/toeplitz.hpp"

namespace strux::dist {

// [begin, end) of block q of n items over k parts: [⌊q·n/k⌋, ⌊(q+1)·n/k⌋).
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range block_range(int64_t n, int64_t parts, int64_t q);

struct Grid {
  int rows = 0, cols = 0;  // {0, 0}: chosen by the cost model
};

enum class Vectors { Replicated, Distributed };
const char* vectors_name(Vectors v);  // "replicated" / "distributed"
Vectors parse_vectors(const std::string& s);  // ValueError naming 'vectors'

enum class CommKind { Auto, MPI, NCCL };  // Auto: NCCL for CUDA devices, MPI on the CPU
const char* comm_name(CommKind k);
CommKind parse_comm(const std::string& s);  // "auto", "mpi", "nccl"; ValueError naming 'comm'

// The cost model of the grid choice (bench/NOTES-dist.md): seconds per matvec + rmatvec on a
// grid = local memory traffic / mem_bw + bytes sent / link_bw + latency per message step.
struct CostModel {
  double mem_bw = 0;    // bytes/s of one rank's memory; 0: by device (CPU 1e10, CUDA 4.33e12)
  double link_bw = 0;   // bytes/s between ranks; 0: by device (MPI 5e9, NCCL 1.5e11)
  double latency = 0;   // s per message step; 0: by device (MPI 5e-6, NCCL 2e-5)
  double chunk_s = 0;   // s per extra row chunk, matvec + rmatvec; 0: by device (CPU 0, CUDA 1.3e-4)
};

// The global operator as the single-device problem describes it (Nt, Nd, Nm, R, layout, dtype,
// and this rank's device: each rank its own GPU), plus the grid and the vectors' distribution.
// Every field of the local problem passes through: rank (i, j)'s local operator is this problem
// with Nd, Nm replaced by its block's sizes.
struct BlockToeplitzProblem : op::BlockToeplitzProblem {
  Grid grid{};
  Vectors vectors = Vectors::Replicated;
};

struct DistOptions {
  Options local{};           // passed to every local strux::op::BlockToeplitz (solver, ...)
  int chunks = 0;            // row chunks per rank for overlap; 0: automatic (1 on the CPU)
  CommKind comm = CommKind::Auto;
  bool check_ranks = true;   // agree on valid arguments before each collective call
  bool timing = false;       // record the phase times of each call (timings())
  // Per phase precision of the communication of float64 problems: the broadcast and the sums
  // sent as float32 (half the bytes; the sums then add float32 values). Ignored for float32.
  bool broadcast_single = false;
  bool reduce_single = false;
  CostModel cost{};
};

// The automatic row chunks of grid p.grid (p.grid set): 1, 2 or 4, whichever the cost model
// times least (chunks overlap the grid row's communication, CUDA only, but cost a fixed time
// each and narrower products); 1 on the CPU and where the grid row has one rank.
int auto_chunks(const BlockToeplitzProblem& p, CommKind comm = CommKind::Auto, const CostModel& m = {});

// The grid of P ranks with the least modelled time per matvec + rmatvec (ties: fewer rows),
// among those that give every rank a row and a column (r <= Nd, c <= Nm); among all r·c = P
// where none does.
Grid choose_grid(int P, const BlockToeplitzProblem& p, CommKind comm = CommKind::Auto, const CostModel& m = {});
// The modelled seconds of one matvec + rmatvec on grid g with `chunks` row chunks (0: the
// automatic chunks), what choose_grid minimises.
double modelled_seconds(const Grid& g, const BlockToeplitzProblem& p, CommKind comm, const CostModel& m,
                        int chunks = 0);

// Seconds of the last call's phases (with options.timing; CUDA: device events, read at the
// call to timings(), which synchronizes). With chunks, a phase's time is the sum over chunks;
// phases on the communication stream overlap the local ones, so the sum exceeds `total`.
// fft, product, ifft: the local phase's steps where the local operator runs them one by one
// (CUDA; local includes them); 0 where it runs them as one call (CPU).
struct Timings {
  double broadcast = 0, local = 0, reduce = 0, total = 0;
  double fft = 0, product = 0, ifft = 0;
};

class BlockToeplitz {
 public:
  using Problem = BlockToeplitzProblem;
  using Forward = op::BlockToeplitzForward;    // m, d (dblocks is not supported)
  using Backward = op::BlockToeplitzBackward;  // dd, dm

  // Collective over comm (duplicated inside; comm may be freed after).
  BlockToeplitz(MPI_Comm comm, const Problem& problem, const DistOptions& options = {});
  ~BlockToeplitz();
  BlockToeplitz(BlockToeplitz&&) noexcept;
  BlockToeplitz& operator=(BlockToeplitz&&) noexcept;

  const Problem& problem() const;  // grid resolved
  int rank() const;
  int size() const;
  std::pair<int, int> grid_pos() const;  // (i, j)
  Range rows() const;                    // this rank's block of Nd
  Range cols() const;                    // this rank's block of Nm
  int chunks() const;
  size_t workspace_bytes() const { return 0; }  // the operator owns its buffers
  std::string describe() const;

  // This rank's blocks (Nt, rows().size(), cols().size()) on its device (an empty view where
  // that has no entries). Collective.
  void set_blocks(const View& local_blocks, Stream s = {});
  // Collective. Views per `vectors` (see above); empty views where the rank holds no part.
  void forward(const Forward& args, Workspace ws = {}, Stream s = {});
  void backward(const Backward& args, Workspace ws = {}, Stream s = {});
  Timings timings() const;

  struct Impl;

 private:
  friend class BlockToeplitzGroup;
  explicit BlockToeplitz(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One process driving several devices: rank q of the grid on devices[q] (CUDA GPUs through
// NCCL's ncclCommInitAll, or CPU "devices" through threads sharing memory), without MPI.
// Each call runs every rank's part on its own host thread; argument checks run first, for every
// rank. Views and streams are given per rank, in rank order: rank q's arrays on devices[q] and
// its stream one of devices[q]'s (on CUDA the devices must be distinct: one rank per GPU).
class BlockToeplitzGroup {
 public:
  // problem.device is ignored: rank q is on devices[q] (all of one kind).
  BlockToeplitzGroup(const BlockToeplitzProblem& problem, const std::vector<Device>& devices,
                     const DistOptions& options = {});
  ~BlockToeplitzGroup();
  BlockToeplitzGroup(const BlockToeplitzGroup&) = delete;
  BlockToeplitzGroup& operator=(const BlockToeplitzGroup&) = delete;
  BlockToeplitzGroup(BlockToeplitzGroup&&) noexcept;
  BlockToeplitzGroup& operator=(BlockToeplitzGroup&&) noexcept;
  int size() const { return int(ranks_.size()); }
  const BlockToeplitz& rank(int q) const;  // grid_pos, rows, cols, describe, timings
  void set_blocks(const std::vector<View>& local_blocks, const std::vector<Stream>& s = {});
  void forward(const std::vector<BlockToeplitz::Forward>& args, const std::vector<Stream>& s = {});
  void backward(const std::vector<BlockToeplitz::Backward>& args, const std::vector<Stream>& s = {});

 private:
  std::vector<BlockToeplitz> ranks_;
};

}  // namespace strux::dist
