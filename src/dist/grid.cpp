// The grid: block ranges, names, and the cost model that chooses (r, c) (bench/NOTES-dist.md).
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/fft.hpp"
#include "strux/dist.hpp"

namespace strux::dist {

Range block_range(int64_t n, int64_t parts, int64_t q) {
  check_arg(parts >= 1 && q >= 0 && q < parts, "q", "expected a block index in [0, ", parts, "), got ", q);
  // 128-bit products: q·n stays exact for any int64 sizes.
  const auto at = [&](int64_t k) { return int64_t((__int128)k * n / parts); };
  return {at(q), at(q + 1)};
}

const char* vectors_name(Vectors v) { return v == Vectors::Replicated ? "replicated" : "distributed"; }

Vectors parse_vectors(const std::string& s) {
  if (s == "replicated") return Vectors::Replicated;
  if (s == "distributed") return Vectors::Distributed;
  throw ValueError(msg("argument 'vectors': expected 'replicated' or 'distributed', got '", s, "'"));
}

const char* comm_name(CommKind k) { return k == CommKind::Auto ? "auto" : k == CommKind::MPI ? "mpi" : "nccl"; }

CommKind parse_comm(const std::string& s) {
  if (s == "auto" || s.empty()) return CommKind::Auto;
  if (s == "mpi") return CommKind::MPI;
  if (s == "nccl") return CommKind::NCCL;
  throw ValueError(msg("argument 'comm': expected 'auto', 'mpi' or 'nccl', got '", s, "'"));
}

namespace {
double log2c(int n) { return n > 1 ? std::ceil(std::log2(double(n))) : 0.0; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

double modelled_seconds(const Grid& g, const BlockToeplitzProblem& p, CommKind comm, const CostModel& m,
                        int chunks) {
  const bool gpu = p.device.kind == DeviceKind::CUDA && comm != CommKind::MPI;
  // CUDA constants calibrated on 2 H200s over NVLink (bench/NOTES-dist.md: prediction vs outcome).
  const double mem_bw = m.mem_bw > 0 ? m.mem_bw : gpu ? 4.33e12 : 1e10;
  const double link_bw = m.link_bw > 0 ? m.link_bw : gpu ? 1.5e11 : 5e9;
  const double alpha = m.latency > 0 ? m.latency : gpu ? 2e-5 : 5e-6;
  const double chunk_s = m.chunk_s > 0 ? m.chunk_s : gpu ? 1.3e-4 : 0.0;
  const double s = double(dtype_size(p.dtype)), cs = 2 * s;
  const int r = g.rows, c = g.cols;
  // The slowest rank holds the largest blocks.
  const double nd = double(ceil_div(p.Nd, r)), nm = double(ceil_div(p.Nm, c)), R = double(p.R);
  const double nt = double(p.Nt), nfreq = double(cpu::good_fft_size(std::max<int64_t>(2 * p.Nt - 1, 2)) / 2 + 1);
  BlockToeplitzProblem q = p;
  q.grid = g;
  const int k = chunks > 0 ? int(std::min<double>(chunks, nd)) : auto_chunks(q, comm, m);
  const double ndk = std::ceil(nd / k);
  // Local, per direction: F̂ read once, and each series in and out of its spectrum (about three
  // passes over the spectra of the input and output vectors). On CUDA the per-frequency products
  // stream F̂ less efficiently when they are narrow: fewer columns (nm, the length of each dot
  // product) cost most, fewer rows per chunk a little; each extra chunk costs its own launches,
  // transforms of the chunk's output and additions (chunk_s).
  const double shape = gpu ? 1 + 80 / nm + 8 / ndk : 1.0;
  const double local =
      2 * (nfreq * nd * nm * cs * shape + 3 * (nd + nm) * nfreq * R * cs) / mem_bw + (k - 1) * chunk_s;
  const bool dist = p.vectors == Vectors::Distributed;
  // A broadcast of b bytes over k ranks: pipelined, b / link_bw + log2(k) latencies. A sum: the
  // all-reduce of b bytes over k ranks moves 2(k−1)/k·b (ring), a reduce to one rank b (chain).
  auto bcast = [&](double b, int n) { return n > 1 ? b / link_bw + log2c(n) * alpha : 0.0; };
  auto sum = [&](double b, int n) {
    if (n <= 1) return 0.0;
    return dist ? b / link_bw + log2c(n) * alpha : 2.0 * (n - 1) / n * b / link_bw + 2 * log2c(n) * alpha;
  };
  const double bm = nt * nm * R * s, bd = nt * nd * R * s;
  // Along the grid row: matvec's sum of d, rmatvec's broadcast of d. Down the column: matvec's
  // broadcast of m, rmatvec's sum of m.
  const double row = sum(bd, c) + (dist ? bcast(bd, c) : 0.0);
  const double col = (dist ? bcast(bm, r) : 0.0) + sum(bm, r);
  // With k chunks on a side stream (CUDA) the row's communication of all chunks but the last
  // hides behind the local work.
  const double hidden = gpu && c > 1 && k > 1 ? std::min(row * (k - 1) / k, local) : 0.0;
  return local + row - hidden + col;
}

int auto_chunks(const BlockToeplitzProblem& p, CommKind comm, const CostModel& m) {
  if (p.device.kind != DeviceKind::CUDA || comm == CommKind::MPI || p.grid.cols <= 1) return 1;
  int best = 1;
  double best_t = modelled_seconds(p.grid, p, comm, m, 1);
  for (int k : {2, 4}) {  // only a clearly smaller time replaces fewer chunks
    if (k > ceil_div(p.Nd, p.grid.rows)) break;
    const double t = modelled_seconds(p.grid, p, comm, m, k);
    if (t < best_t * (1 - 1e-9)) best = k, best_t = t;
  }
  return best;
}

Grid choose_grid(int P, const BlockToeplitzProblem& p, CommKind comm, const CostModel& m) {
  check_arg(P >= 1, "P", "expected at least one rank, got ", P);
  // Grids that give every rank a row and a column first (a rank with an empty block idles);
  // when there is none (more ranks than Nd·Nm allows), every grid of P ranks: the ranks with an
  // empty block hold no F̂ and only take part in the communication.
  for (bool every_rank_works : {true, false}) {
    Grid best{};
    double best_t = std::numeric_limits<double>::infinity();
    for (int r = 1; r <= P; ++r) {
      if (P % r) continue;
      const int c = P / r;
      if (every_rank_works && (r > p.Nd || c > p.Nm)) continue;
      const double t = modelled_seconds({r, c}, p, comm, m);
      if (t < best_t * (1 - 1e-12)) best = {r, c}, best_t = t;
    }
    if (best.rows > 0) return best;
  }
  return {1, P};  // (not reached: r = 1 always qualifies in the second pass)
}

}  // namespace strux::dist
