// strux::dist::BlockToeplitz: the grid, its communicators, the row chunks of the local operator
// (each a strux::op::BlockToeplitz) and the order of broadcast, local products and sums
// (<strux/dist.hpp> says what each call computes).
#include <algorithm>
#include <memory>
#include <vector>

#include "api/common.hpp"
#include "dist/toeplitz_impl.hpp"

namespace strux::dist {

View vec_view(void* data, int64_t n, const BlockToeplitzProblem& p) {
  View v;
  v.data = data;
  v.dtype = p.dtype;
  v.device = p.device;
  const bool tm = p.layout == ToeplitzLayout::TimeMajor;
  const int64_t dims[3] = {tm ? p.Nt : n, tm ? n : p.Nt, p.R};
  v.ndim = p.R == 1 ? 2 : 3;
  int64_t stride = 1;
  for (int a = v.ndim - 1; a >= 0; --a) v.shape[a] = dims[a], v.strides[a] = stride, stride *= dims[a];
  return v;
}

namespace {

// Element fields every rank must agree on, with their names for the message.
struct Field {
  const char* name;
  int64_t value;
};

void agree_fields(MPI_Comm comm, const std::vector<Field>& f) {
  const int n = int(f.size());
  std::vector<int64_t> lo(n), hi(n);
  for (int i = 0; i < n; ++i) lo[i] = f[i].value, hi[i] = -f[i].value;
  STRUX_MPI(MPI_Allreduce(MPI_IN_PLACE, lo.data(), n, MPI_INT64_T, MPI_MIN, comm));
  STRUX_MPI(MPI_Allreduce(MPI_IN_PLACE, hi.data(), n, MPI_INT64_T, MPI_MIN, comm));
  for (int i = 0; i < n; ++i)
    check_arg(lo[i] == -hi[i], f[i].name, "every rank must pass the same value; the ranks passed values from ",
              lo[i], " to ", -hi[i], " (this rank: ", f[i].value, ")");
}

}  // namespace

void BlockToeplitz::Impl::broadcast(Communicator& g, void* buf, size_t n, bool root, Stream s) {
  if (!single(o.broadcast_single)) return g.broadcast(buf, n, p.dtype, 0, s);
  // float64 values sent as float32: the root's buffer (an input) is only read.
  comm_buf.reserve(n * sizeof(float), p.device);
  if (root) cast(comm_buf.get(), DType::f32, buf, DType::f64, n, p.device, s);
  g.broadcast(comm_buf.get(), n, DType::f32, 0, s);
  if (!root) cast(buf, DType::f64, comm_buf.get(), DType::f32, n, p.device, s);
}

void BlockToeplitz::Impl::sum(Communicator& g, void* buf, size_t n, bool root, Stream s) {
  if (!single(o.reduce_single)) {
    if (dist()) return g.reduce_sum(buf, n, p.dtype, 0, s);
    return g.allreduce_sum(buf, n, p.dtype, s);
  }
  comm_buf.reserve(n * sizeof(float), p.device);
  cast(comm_buf.get(), DType::f32, buf, DType::f64, n, p.device, s);
  if (dist())
    g.reduce_sum(comm_buf.get(), n, DType::f32, 0, s);
  else
    g.allreduce_sum(comm_buf.get(), n, DType::f32, s);
  if (!dist() || root) cast(buf, DType::f64, comm_buf.get(), DType::f32, n, p.device, s);
}

void BlockToeplitz::Impl::matvec(const View& m_arg, const View& d_arg, Stream s) {
  begin_call(s);
  const Stream cs = comm_stream(s);
  // m_j: given, or broadcast from rank (0, j) down the column (every rank of a column has its
  // nm: an empty column block skips the broadcast on all of them).
  void* m = m_arg.data;
  if (dist() && col->size() > 1 && nm() > 0) {
    if (gi != 0) m = m_in.get();
    timed(kBroadcast, s, [&] { broadcast(*col, m, size_t(p.Nt * nm() * p.R), gi == 0, s); });
  }
  // Staged: m's spectra once (chunk 0's plan holds them; its later steps leave them), then each
  // chunk's product from them and its inverse transforms.
  const bool shared = shared_input && blocks_set;
  const void* spectra = nullptr;
  if (shared) timed(kFFT, s, [&] { spectra = ops[0].backend().stage_in(vec_view(m, nm(), p), false, s); });
  // d_i: this rank's sum lands in d_arg (every rank of the row, or rank (i, 0) when distributed).
  const bool keep = !dist() || gj == 0;
  void* d = keep ? d_arg.data : d_part.get();
  void* target = packed() ? d_pack.get() : d;
  const bool summing = row->size() > 1;
  const bool side = summing && cs.handle != s.handle;
  for (size_t k = 0; k < chunk.size(); ++k) {
    const Range& c = chunk[k];
    void* dk = static_cast<char*>(target) + chunk_offset(c);
    if (!holds_blocks()) {  // no columns here: this rank's share of the row's sum is zero
      timed(kLocal, s, [&] { zero(dk, chunk_count(c) * es(), p.device, s); });
    } else if (shared) {
      timed(kProduct, s, [&] { ops[k].backend().stage_product(spectra, false, s); });
      timed(kIFFT, s, [&] { ops[k].backend().stage_out(vec_view(dk, c.size(), p), false, s); });
    } else {
      timed(kLocal, s, [&] { ops[k].forward({vec_view(m, nm(), p), vec_view(dk, c.size(), p)}, {}, s); });
    }
    if (!summing) continue;
    if (side) {  // the sum of chunk k on the side stream, after its product
      sync[k]->record(s);
      sync[k]->wait(cs);
    }
    timed(kReduce, cs, [&] { sum(*row, dk, chunk_count(c), gj == 0, cs); });
  }
  if (side) {
    sync.back()->record(cs);
    sync.back()->wait(s);
  }
  if (packed() && keep)
    for (const Range& c : chunk) pack(d_pack.get(), d, nd(), c, s, true);
  ev_end = mark(s);
}

void BlockToeplitz::Impl::rmatvec(const View& d_arg, const View& m_arg, Stream s) {
  begin_call(s);
  const Stream cs = comm_stream(s);
  // d_i: given on every rank of the row, or broadcast from rank (i, 0) along it, chunk by chunk.
  const bool have = !dist() || gj == 0;
  const bool bcast = dist() && row->size() > 1;
  void* given = have ? d_arg.data : d_pack.get();
  void* src = packed() ? d_pack.get() : given;
  const bool side = bcast && cs.handle != s.handle;
  if (side) {
    sync.back()->record(s);
    sync.back()->wait(cs);
  }
  if (bcast) {
    for (size_t k = 0; k < chunk.size(); ++k) {
      const Range& c = chunk[k];
      if (packed() && have) pack(d_pack.get(), given, nd(), c, cs, false);
      timed(kBroadcast, cs, [&] { broadcast(*row, static_cast<char*>(src) + chunk_offset(c), chunk_count(c), have, cs); });
      if (side) sync[k]->record(cs);
    }
  }
  // m_j: the sum of the chunks' adjoints, then the sum down the column (to rank (0, j) when distributed).
  const bool keep = !dist() || gi == 0;
  void* m = keep ? m_arg.data : m_out.get();
  // No rows here (or no columns): this rank's share of the column's sum is zero.
  if (!holds_blocks()) timed(kLocal, s, [&] { zero(m, size_t(p.Nt * nm() * p.R) * es(), p.device, s); });
  for (size_t k = 0; k < chunk.size(); ++k) {
    const Range& c = chunk[k];
    if (side)
      sync[k]->wait(s);
    else if (packed() && !bcast && holds_blocks())
      pack(d_pack.get(), given, nd(), c, s, false);
    if (!holds_blocks()) continue;
    void* dk = static_cast<char*>(src) + chunk_offset(c);
    void* out = k == 0 ? m : m_tmp.get();
    if (staged && blocks_set) {
      api::ToeplitzBackend& b = ops[k].backend();
      const void* spectra = nullptr;
      timed(kFFT, s, [&] { spectra = b.stage_in(vec_view(dk, c.size(), p), true, s); });
      timed(kProduct, s, [&] { b.stage_product(spectra, true, s); });
      timed(kIFFT, s, [&] { b.stage_out(vec_view(out, nm(), p), true, s); });
    } else {
      timed(kLocal, s, [&] {
        op::BlockToeplitzBackward a;
        a.dd = vec_view(dk, c.size(), p);
        a.dm = vec_view(out, nm(), p);
        ops[k].backward(a, {}, s);
      });
    }
    if (k > 0) timed(kLocal, s, [&] { add_into(m, out, size_t(p.Nt * nm() * p.R), p.dtype, p.device, s); });
  }
  if (col->size() > 1 && nm() > 0)  // (the column's ranks share nm: all skip an empty block)
    timed(kReduce, s, [&] { sum(*col, m, size_t(p.Nt * nm() * p.R), gi == 0, s); });
  ev_end = mark(s);
}

// ---- construction -------------------------------------------------------------------------------

void check_problem(const BlockToeplitzProblem& p, const DistOptions& o, int P) {
  check_positive(p.Nt, "problem.Nt");
  check_positive(p.Nd, "problem.Nd");
  check_positive(p.Nm, "problem.Nm");
  check_positive(p.R, "problem.R");
  check_arg(o.chunks >= 0, "options.chunks", "expected 0 (automatic) or a count >= 1, got ", o.chunks);
  const Grid g = p.grid;
  if (g.rows != 0 || g.cols != 0) {
    check_arg(g.rows >= 1 && g.cols >= 1, "grid", "expected (r, c) with r, c >= 1 (or (0, 0): chosen), got (",
              g.rows, ", ", g.cols, ")");
    check_arg(int64_t(g.rows) * g.cols == P, "grid", "expected r·c = ", P, " (the number of ranks), got (", g.rows,
              ", ", g.cols, ")");
  }
  if (p.device.kind == DeviceKind::CUDA && !have_nccl())
    throw ValueError(msg("argument 'problem.device': ", device_name(p.device),
                         " needs strux built with CUDA and NCCL (CMake STRUX_NCCL, NCCL_ROOT); this build has none"));
  if (p.device.kind == DeviceKind::CUDA && o.comm == CommKind::MPI)
    throw ValueError("argument 'options.comm': the MPI communicator takes host buffers; CUDA devices take 'nccl' "
                     "(or 'auto')");
  if (p.device.kind == DeviceKind::CPU && o.comm == CommKind::NCCL)
    throw ValueError("argument 'options.comm': NCCL takes CUDA buffers; the CPU takes 'mpi' (or 'auto')");
}

void BlockToeplitz::Impl::place(int r, int n) {
  rank = r, size = n;
  gi = rank / p.grid.cols;
  gj = rank % p.grid.cols;
  rows = block_range(p.Nd, p.grid.rows, gi);
  cols = block_range(p.Nm, p.grid.cols, gj);
}

void BlockToeplitz::Impl::build(std::unique_ptr<Communicator> row_comm, std::unique_ptr<Communicator> col_comm) {
  row = std::move(row_comm);
  col = std::move(col_comm);
  if (p.device.kind == DeviceKind::CUDA) side = std::make_unique<SideStream>(p.device);
  // Chunks: overlap needs a side stream (CUDA) and communication along the grid row (matvec's
  // sum, rmatvec's broadcast); the automatic count is the cost model's (auto_chunks). Where the
  // local operators have staged products, matvec transforms m once for every chunk; else each
  // chunk's product transforms it again. The chunks depend only on the grid and nd, which the
  // ranks of a grid row share: they make the same row communication, also where a rank has no
  // columns (no local operators, zeros in the sums). A rank without rows has no chunks.
  int k = o.chunks;
  if (k == 0) k = auto_chunks(p, o.comm, o.cost);
  k = int(std::min<int64_t>(k, nd()));
  for (int q = 0; q < k; ++q) {
    const Range local = block_range(nd(), k, q);
    chunk.push_back(local);
    if (!holds_blocks()) continue;
    op::BlockToeplitzProblem lp = p;  // every field of the local problem, with this chunk's sizes
    lp.Nd = local.size();
    lp.Nm = nm();
    ops.emplace_back(lp, o.local);
  }
  if (!ops.empty()) {
    const std::string key = ops.front().backend().spectra_key();
    staged = !key.empty();
    shared_input = staged;
    for (const LocalToeplitz& op : ops) shared_input = shared_input && op.backend().spectra_key() == key;
  }
  for (size_t q = 0; q <= chunk.size(); ++q) sync.push_back(std::make_unique<Event>(p.device));
  const size_t nt_r = size_t(p.Nt * p.R);
  if (dist() && gi != 0) m_in.reserve(nt_r * nm() * es(), p.device);
  if (dist() && gi != 0) m_out.reserve(nt_r * nm() * es(), p.device);
  if (chunk.size() > 1) m_tmp.reserve(nt_r * nm() * es(), p.device);
  if (dist() && gj != 0) d_part.reserve(nt_r * nd() * es(), p.device);
  if (packed() || (dist() && gj != 0)) d_pack.reserve(nt_r * nd() * es(), p.device);
}

BlockToeplitz::BlockToeplitz(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BlockToeplitz::BlockToeplitz(MPI_Comm comm, const Problem& problem, const DistOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& I = *impl_;
  I.p = problem;
  I.o = options;
  int initialized = 0;
  STRUX_MPI(MPI_Initialized(&initialized));
  check_arg(initialized, "comm", "MPI is not initialized (call MPI_Init, or import mpi4py.MPI, first)");
  check_arg(comm != MPI_COMM_NULL, "comm", "expected a communicator, got MPI_COMM_NULL");
  STRUX_MPI(MPI_Comm_dup(comm, &I.world.c));
  int rank = 0, size = 1;
  STRUX_MPI(MPI_Comm_rank(I.world.c, &rank));
  STRUX_MPI(MPI_Comm_size(I.world.c, &size));
  Problem& p = I.p;
  // Checks of this rank's arguments, then agreement: the same problem on every rank.
  collectively(I.world.c, true, [&] { check_problem(p, I.o, size); });
  collectively(I.world.c, true, [&] {
    agree_fields(I.world.c, {{"problem.Nt", p.Nt},
                             {"problem.Nd", p.Nd},
                             {"problem.Nm", p.Nm},
                             {"problem.R", p.R},
                             {"problem.layout", int64_t(p.layout)},
                             {"problem.dtype", int64_t(p.dtype)},
                             {"problem.device (kind)", int64_t(p.device.kind)},
                             {"grid (rows)", p.grid.rows},
                             {"grid (cols)", p.grid.cols},
                             {"vectors", int64_t(p.vectors)},
                             {"options.comm", int64_t(I.o.comm)}});
    if (p.grid.rows == 0) p.grid = choose_grid(size, p, I.o.comm, I.o.cost);
  });
  I.place(rank, size);
  STRUX_MPI(MPI_Comm_split(I.world.c, I.gi, I.gj, &I.row_mpi.c));
  STRUX_MPI(MPI_Comm_split(I.world.c, I.gj, I.gi, &I.col_mpi.c));
  collectively(I.world.c, true, [&] {
    if (p.device.kind == DeviceKind::CUDA)
      I.build(make_nccl_comm(I.row_mpi.c, p.device.index), make_nccl_comm(I.col_mpi.c, p.device.index));
    else
      I.build(make_mpi_comm(I.row_mpi.c), make_mpi_comm(I.col_mpi.c));
  });
}

BlockToeplitz::~BlockToeplitz() = default;
BlockToeplitz::BlockToeplitz(BlockToeplitz&&) noexcept = default;
BlockToeplitz& BlockToeplitz::operator=(BlockToeplitz&&) noexcept = default;

const BlockToeplitzProblem& BlockToeplitz::problem() const { return impl_->p; }
int BlockToeplitz::rank() const { return impl_->rank; }
int BlockToeplitz::size() const { return impl_->size; }
std::pair<int, int> BlockToeplitz::grid_pos() const { return {impl_->gi, impl_->gj}; }
Range BlockToeplitz::rows() const { return impl_->rows; }
Range BlockToeplitz::cols() const { return impl_->cols; }
int BlockToeplitz::chunks() const { return int(impl_->chunk.size()); }

std::string BlockToeplitz::describe() const {
  const Impl& I = *impl_;
  const Problem& p = I.p;
  return msg("distributed block Toeplitz (Nt, Nd, Nm) = ", api::dims({p.Nt, p.Nd, p.Nm}), ", R = ", p.R, ", ",
             toeplitz_layout_name(p.layout), ", ", dtype_name(p.dtype), ", ", vectors_name(p.vectors),
             " vectors, on a ", p.grid.rows, " x ", p.grid.cols, " grid of ", I.size, " ranks (",
             I.row->name(), "); rank ", I.rank, " at (", I.gi, ", ",
             I.gj, ") holds rows [", I.rows.begin, ", ", I.rows.end, ") and columns [", I.cols.begin, ", ",
             I.cols.end, ") in ", I.chunk.size(), " row chunk(s)",
             I.side ? " (communication on a side stream)" : " (communication blocking, no overlap)",
             I.single(I.o.broadcast_single) ? "; broadcasts in float32" : "",
             I.single(I.o.reduce_single) ? "; sums in float32" : "",
             I.shared_input ? "; matvec transforms m once for every chunk" : "", "; local operator: ",
             I.ops.empty() ? std::string("none (this rank's block is empty)") : I.ops.front().describe());
}

// ---- calls ------------------------------------------------------------------------------------

void BlockToeplitz::set_blocks(const View& blocks, Stream s) {
  Impl& I = *impl_;
  const Problem& p = I.p;
  collectively(I.world.c, true, [&] {
    I.blocks_set = false;
    if (!I.holds_blocks()) {  // an empty block: nothing to keep (an empty view is fine)
      if (!blocks.empty()) api::check_view(blocks, "blocks", p.dtype, p.device, {p.Nt, I.nd(), I.nm()});
      I.blocks_set = true;
      return;
    }
    api::check_view(blocks, "blocks", p.dtype, p.device, {p.Nt, I.nd(), I.nm()});
    if (I.chunk.size() == 1) {
      I.ops[0].set_blocks(blocks, s);
      I.blocks_set = true;
      return;
    }
    Buffer tmp;
    const size_t es = I.es(), row = size_t(I.nd() * I.nm()) * es;
    for (size_t k = 0; k < I.chunk.size(); ++k) {
      const Range& c = I.chunk[k];
      const size_t width = size_t(c.size() * I.nm()) * es;
      tmp.reserve(width * size_t(p.Nt), p.device);
      copy_rows(tmp.get(), width, static_cast<const char*>(blocks.data) + size_t(c.begin * I.nm()) * es, row, width,
                size_t(p.Nt), p.device, s);
      View v = blocks;
      v.data = tmp.get();
      v.shape[1] = c.size();
      v.strides = {c.size() * I.nm(), I.nm(), 1};
      I.ops[k].set_blocks(v, s);
      synchronize(p.device, s);  // tmp is reused by the next chunk
    }
    I.blocks_set = true;
  });
}

namespace {
// A vector argument: required where this rank holds its part, else ignored (may be empty). A
// part with no entries (an empty block) may also come as an empty view: nothing is read or written.
void check_part(const View& v, const char* name, bool required, int64_t n, const BlockToeplitzProblem& p) {
  if (!required || (n == 0 && v.empty())) return;
  const View want = vec_view(nullptr, n, p);
  if (want.ndim == 2)
    api::check_view(v, name, p.dtype, p.device, {want.shape[0], want.shape[1]});
  else
    api::check_view(v, name, p.dtype, p.device, {want.shape[0], want.shape[1], want.shape[2]});
}
}  // namespace

void BlockToeplitz::Impl::check_forward(const Forward& a) const {
  check_part(a.m, "m", !dist() || gi == 0, nm(), p);
  check_part(a.d, "d", !dist() || gj == 0, nd(), p);
}

void BlockToeplitz::Impl::check_backward(const Backward& a) const {
  check_arg(a.dblocks.empty() && a.m.empty(), "dblocks",
            "the distributed operator computes the adjoint only (no gradient for the blocks)");
  check_part(a.dd, "dd", !dist() || gj == 0, nd(), p);
  check_part(a.dm, "dm", !dist() || gi == 0, nm(), p);
}

void BlockToeplitz::forward(const Forward& a, Workspace, Stream s) {
  Impl& I = *impl_;
  collectively(I.world.c, I.o.check_ranks, [&] { I.check_forward(a); });
  I.matvec(a.m, a.d, s);
}

void BlockToeplitz::backward(const Backward& a, Workspace, Stream s) {
  Impl& I = *impl_;
  collectively(I.world.c, I.o.check_ranks, [&] { I.check_backward(a); });
  I.rmatvec(a.dd, a.dm, s);
}

Timings BlockToeplitz::timings() const {
  const Impl& I = *impl_;
  Timings t;
  if (!I.o.timing || I.ev_begin < 0) return t;
  double* out[kPhases] = {&t.broadcast, &t.local, &t.reduce, &t.fft, &t.product, &t.ifft};
  for (int w = 0; w < kPhases; ++w)
    for (auto [a, b] : I.phase[w]) *out[w] += I.ev[b]->seconds_since(*I.ev[a]);
  t.local += t.fft + t.product + t.ifft;
  t.total = I.ev[I.ev_end]->seconds_since(*I.ev[I.ev_begin]);
  return t;
}

}  // namespace strux::dist
