// strux::dist::BlockToeplitz against the serial operator, run under mpirun with 1, 2 or 4 ranks
// (ctest: dist_toeplitz_np*): every grid of the ranks and the cost model's, both layouts, one and
// several right-hand sides, odd sizes, float32 and float64, replicated and distributed vectors,
// one and several row chunks; grids that leave some ranks an empty block (r > Nd or c > Nm); then
// bad arguments, which must raise the same error on every rank
// (a rank that hangs fails the test by its timeout). Prints "N passed, M failed" on rank 0.
// `--cuda` (a build with CUDA and NCCL): the same cases with every rank's arrays on GPU
// rank % device count, communication through NCCL.
#include <mpi.h>
#ifdef STRUX_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "strux/dist.hpp"
#include "strux/toeplitz.hpp"

namespace {

using strux::ToeplitzLayout;
using strux::dist::BlockToeplitz;
using strux::dist::Range;
using strux::dist::Vectors;

int rank_ = 0, size_ = 1, passed = 0, failed = 0;
strux::Device device_{};  // where the operator and its arrays live

// Host vector -> an array on device_ (freed by its owner); the host pointer on the CPU. Not
// copyable: a copy would free the device array twice (once with the temporary it came from).
struct OnDevice {
  void* p = nullptr;
  size_t bytes = 0;
  void* host = nullptr;
  strux::Device dev{};
  OnDevice(void* h, size_t b) : bytes(b), host(h), dev(device_) {
#ifdef STRUX_HAVE_CUDA
    if (dev.kind == strux::DeviceKind::CUDA) {
      cudaSetDevice(dev.index);  // memory on the rank's GPU (a group has several)
      cudaMalloc(&p, b ? b : 1);
      cudaMemcpy(p, h, b, cudaMemcpyHostToDevice);
      return;
    }
#endif
    p = h;
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
  void back() {  // device -> host, after everything queued on the array's device
#ifdef STRUX_HAVE_CUDA
    if (p != host) {
      cudaSetDevice(dev.index);
      cudaDeviceSynchronize();
      cudaMemcpy(host, p, bytes, cudaMemcpyDeviceToHost);
    }
#endif
  }
  ~OnDevice() {
#ifdef STRUX_HAVE_CUDA
    if (p != host) cudaFree(p);
#endif
  }
};
template <class T>
std::unique_ptr<OnDevice> on_device(std::vector<T>& v) {
  return std::make_unique<OnDevice>(v.data(), v.size() * sizeof(T));
}

void report(bool ok, const std::string& what) {
  int all = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!ok) std::printf("rank %d: FAILED %s\n", rank_, what.c_str());
  if (all) ++passed; else ++failed;
}

std::vector<double> random_vec(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// Rows [r.begin, r.end) of a vector with n space entries (Nt steps, R right-hand sides).
template <class T>
std::vector<T> part(const std::vector<double>& full, int64_t n, Range r, int64_t Nt, int64_t R, bool tm) {
  std::vector<T> out;
  for (int64_t a = 0; a < (tm ? Nt : r.size()); ++a)
    for (int64_t b = 0; b < (tm ? r.size() : Nt); ++b)
      for (int64_t k = 0; k < R; ++k) {
        const int64_t t = tm ? a : b, s = tm ? b + r.begin : a + r.begin;
        out.push_back(T(full[size_t(((tm ? t * n + s : s * Nt + t)) * R + k)]));
      }
  return out;
}

strux::View view(void* p, strux::DType t, int64_t n, int64_t Nt, int64_t R, bool tm) {
  const int64_t a = tm ? Nt : n, b = tm ? n : Nt;
  return R == 1 ? strux::View(p, t, {a, b}, device_) : strux::View(p, t, {a, b, R}, device_);
}

template <class T>
double rel_err(const std::vector<T>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) num += std::pow(double(got[i]) - want[i], 2), den += want[i] * want[i];
  return std::sqrt(num / (den > 0 ? den : 1));
}

template <class T>
void check_case(int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, bool tm, strux::dist::Grid grid, Vectors vec,
                int chunks, bool comm32 = false) {
  const auto layout = tm ? ToeplitzLayout::TimeMajor : ToeplitzLayout::SpaceMajor;
  const auto blocks = random_vec(size_t(Nt * Nd * Nm), 1);
  const auto m = random_vec(size_t(Nt * Nm * R), 2), d = random_vec(size_t(Nt * Nd * R), 3);
  // The serial reference in float64.
  strux::BlockToeplitzPlan<double> serial(blocks.data(), Nt, Nd, Nm);
  std::vector<double> d_ref(d.size()), m_ref(m.size());
  serial.matvec(m.data(), d_ref.data(), R, layout);
  serial.rmatvec(d.data(), m_ref.data(), R, layout);

  strux::dist::BlockToeplitzProblem p{{Nt, Nd, Nm, R, layout, strux::dtype_of<T>::value, device_}, grid, vec};
  strux::dist::DistOptions o;
  o.chunks = chunks;
  o.timing = true;
  o.broadcast_single = o.reduce_single = comm32;  // float64 sent as float32
  BlockToeplitz F(MPI_COMM_WORLD, p, o);
  const Range rows = F.rows(), cols = F.cols();
  const auto [gi, gj] = F.grid_pos();
  std::vector<T> local;
  for (int64_t t = 0; t < Nt; ++t)
    for (int64_t i = rows.begin; i < rows.end; ++i)
      for (int64_t j = cols.begin; j < cols.end; ++j) local.push_back(T(blocks[size_t((t * Nd + i) * Nm + j)]));
  auto local_dev = on_device(local);
  F.set_blocks(strux::View(local_dev->p, strux::dtype_of<T>::value, {Nt, rows.size(), cols.size()}, device_));

  const bool dist = vec == Vectors::Distributed;
  const auto dt = strux::dtype_of<T>::value;
  auto m_j = part<T>(m, Nm, cols, Nt, R, tm), d_i = part<T>(d, Nd, rows, Nt, R, tm);
  std::vector<T> d_out(d_i.size(), T(7)), m_out(m_j.size(), T(7));
  const bool has_m = !dist || gi == 0, has_d = !dist || gj == 0;
  auto m_jd = on_device(m_j), d_id = on_device(d_i), d_outd = on_device(d_out), m_outd = on_device(m_out);
  F.forward({has_m ? view(m_jd->p, dt, cols.size(), Nt, R, tm) : strux::View(),
             has_d ? view(d_outd->p, dt, rows.size(), Nt, R, tm) : strux::View()});
  strux::op::BlockToeplitzBackward b;
  if (has_d) b.dd = view(d_id->p, dt, rows.size(), Nt, R, tm);
  if (has_m) b.dm = view(m_outd->p, dt, cols.size(), Nt, R, tm);
  F.backward(b);
  d_outd->back();
  m_outd->back();
  const double tol = sizeof(T) == 4 || comm32 ? 2e-5 : 1e-12;
  const double e1 = has_d ? rel_err(d_out, part<double>(d_ref, Nd, rows, Nt, R, tm)) : 0.0;
  const double e2 = has_m ? rel_err(m_out, part<double>(m_ref, Nm, cols, Nt, R, tm)) : 0.0;
  const auto g = F.problem().grid;
  char what[256];
  std::snprintf(what, sizeof(what), "%s Nt=%lld Nd=%lld Nm=%lld R=%lld %s grid %dx%d %s chunks %d: errors %.3g %.3g",
                sizeof(T) == 4 ? "float32" : comm32 ? "float64 (float32 communication)" : "float64", (long long)Nt, (long long)Nd, (long long)Nm, (long long)R,
                tm ? "time-major" : "space-major", g.rows, g.cols, dist ? "distributed" : "replicated", F.chunks(), e1,
                e2);
  report(e1 < tol && e2 < tol && F.timings().total >= 0, what);
}

// One process driving P devices (BlockToeplitzGroup): the same cases, every rank's part at once.
template <class T>
void check_group(int P, int64_t Nt, int64_t Nd, int64_t Nm, int64_t R, bool tm, strux::dist::Grid grid, Vectors vec,
                 int chunks) {
  const auto layout = tm ? ToeplitzLayout::TimeMajor : ToeplitzLayout::SpaceMajor;
  const auto dt = strux::dtype_of<T>::value;
  const auto blocks = random_vec(size_t(Nt * Nd * Nm), 4);
  const auto m = random_vec(size_t(Nt * Nm * R), 5), d = random_vec(size_t(Nt * Nd * R), 6);
  strux::BlockToeplitzPlan<double> serial(blocks.data(), Nt, Nd, Nm);
  std::vector<double> d_ref(d.size()), m_ref(m.size());
  serial.matvec(m.data(), d_ref.data(), R, layout);
  serial.rmatvec(d.data(), m_ref.data(), R, layout);
  std::vector<strux::Device> devices;
  int count = 1;
#ifdef STRUX_HAVE_CUDA
  if (device_.kind == strux::DeviceKind::CUDA) cudaGetDeviceCount(&count);
#endif
  for (int q = 0; q < P; ++q)
    devices.push_back(device_.kind == strux::DeviceKind::CUDA ? strux::Device::cuda(q % count) : strux::Device::cpu());
  strux::dist::DistOptions o;
  o.chunks = chunks;
  strux::dist::BlockToeplitzGroup G({{Nt, Nd, Nm, R, layout, dt, {}}, grid, vec}, devices, o);
  std::vector<std::vector<T>> local(static_cast<size_t>(P)), mj(static_cast<size_t>(P)), di(static_cast<size_t>(P)), dout(static_cast<size_t>(P)), mout(static_cast<size_t>(P));
  std::vector<std::unique_ptr<OnDevice>> hold;
  std::vector<strux::View> bv;
  std::vector<strux::op::BlockToeplitzForward> fa(static_cast<size_t>(P));
  std::vector<strux::op::BlockToeplitzBackward> ba(static_cast<size_t>(P));
  std::vector<OnDevice*> outs;
  const bool dist = vec == Vectors::Distributed;
  for (int q = 0; q < P; ++q) {
    const auto& F = G.rank(q);
    const Range rows = F.rows(), cols = F.cols();
    const auto [gi, gj] = F.grid_pos();
    device_ = devices[size_t(q)];
    for (int64_t t = 0; t < Nt; ++t)
      for (int64_t i = rows.begin; i < rows.end; ++i)
        for (int64_t j = cols.begin; j < cols.end; ++j) local[q].push_back(T(blocks[size_t((t * Nd + i) * Nm + j)]));
    mj[q] = part<T>(m, Nm, cols, Nt, R, tm), di[q] = part<T>(d, Nd, rows, Nt, R, tm);
    dout[q].assign(di[q].size(), T(7)), mout[q].assign(mj[q].size(), T(7));
    for (auto* v : {&local[q], &mj[q], &di[q], &dout[q], &mout[q]}) hold.push_back(on_device(*v));
    const size_t h = hold.size();
    bv.push_back(strux::View(hold[h - 5]->p, dt, {Nt, rows.size(), cols.size()}, device_));
    const bool has_m = !dist || gi == 0, has_d = !dist || gj == 0;
    if (has_m) fa[q].m = view(hold[h - 4]->p, dt, cols.size(), Nt, R, tm), ba[q].dm = view(hold[h - 1]->p, dt, cols.size(), Nt, R, tm);
    if (has_d) fa[q].d = view(hold[h - 2]->p, dt, rows.size(), Nt, R, tm), ba[q].dd = view(hold[h - 3]->p, dt, rows.size(), Nt, R, tm);
  }
  G.set_blocks(bv);
  G.forward(fa);
  G.backward(ba);
  double worst = 0;
  for (int q = 0; q < P; ++q) {
    const size_t h = size_t(5 * q);
    hold[h + 3]->back(), hold[h + 4]->back();
    const auto [gi, gj] = G.rank(q).grid_pos();
    if (!dist || gj == 0) worst = std::max(worst, rel_err(dout[q], part<double>(d_ref, Nd, G.rank(q).rows(), Nt, R, tm)));
    if (!dist || gi == 0) worst = std::max(worst, rel_err(mout[q], part<double>(m_ref, Nm, G.rank(q).cols(), Nt, R, tm)));
  }
  const auto g = G.rank(0).problem().grid;
  char what[200];
  std::snprintf(what, sizeof(what), "group of %d (%s) grid %dx%d %s %s R=%lld: error %.3g", P,
                devices[0].kind == strux::DeviceKind::CUDA ? "cuda" : "threads", g.rows, g.cols,
                tm ? "time-major" : "space-major", dist ? "distributed" : "replicated", (long long)R, worst);
  report(worst < (sizeof(T) == 4 ? 2e-5 : 1e-12), what);
}

// Runs f, which must throw E on every rank with `needle` in the message.
template <class E, class F>
void expect_error(const char* name, const std::string& needle, F&& f) {
  std::string got = "no exception";
  bool ok = false;
  try {
    f();
  } catch (const E& e) {
    got = e.what();
    ok = got.find(needle) != std::string::npos;
  } catch (const std::exception& e) {
    got = std::string("other exception: ") + e.what();
  }
  report(ok, std::string(name) + ": " + got);
}

void bad_inputs() {
  using strux::dist::BlockToeplitzProblem;
  if (device_.kind == strux::DeviceKind::CUDA) return;  // host arrays below
  // A grid that does not multiply to the number of ranks.
  expect_error<strux::ValueError>("grid", "r·c", [] {
    BlockToeplitzProblem p{{4, 5, 6}};
    p.grid = {size_ + 1, 1};
    BlockToeplitz F(MPI_COMM_WORLD, p);
  });
  // Ranks that disagree on the problem (rank 0 has one more row).
  if (size_ > 1)
    expect_error<strux::ValueError>("mismatch", "problem.Nd", [] {
    BlockToeplitzProblem p{{4, rank_ == 0 ? 6 : 5, 6}};
    BlockToeplitz F(MPI_COMM_WORLD, p);
  });
  // One rank's bad size.
  expect_error<strux::ValueError>("one bad rank", "problem.Nt", [] {
    BlockToeplitzProblem p{{rank_ == size_ - 1 ? 0 : 4, 5, 6}};
    BlockToeplitz F(MPI_COMM_WORLD, p);
  });
  // A wrong vector shape on the last rank only: every rank raises, none waits.
  expect_error<strux::ValueError>("vector shape", "argument 'm'", [] {
    BlockToeplitzProblem p{{4, 5, 6, 1, ToeplitzLayout::TimeMajor, strux::DType::f64}};
    BlockToeplitz F(MPI_COMM_WORLD, p);
    std::vector<double> blocks(size_t(4 * F.rows().size() * F.cols().size()), 1.0);
    F.set_blocks(strux::View(blocks.data(), {4, F.rows().size(), F.cols().size()}));
    const int64_t nm = F.cols().size() + (rank_ == size_ - 1 ? 1 : 0);
    std::vector<double> m(size_t(4 * nm)), d(size_t(4 * F.rows().size()));
    F.forward({strux::View(m.data(), {4, nm}), strux::View(d.data(), {4, F.rows().size()})});
  });
  // A wrong dtype of the blocks on rank 0.
  expect_error<strux::TypeError>("blocks dtype", "blocks", [] {
    BlockToeplitzProblem p{{4, 5, 6, 1, ToeplitzLayout::TimeMajor, strux::DType::f64}};
    BlockToeplitz F(MPI_COMM_WORLD, p);
    std::vector<double> blocks(size_t(4 * F.rows().size() * F.cols().size()), 1.0);
    const auto t = rank_ == 0 ? strux::DType::f32 : strux::DType::f64;
    F.set_blocks(strux::View(blocks.data(), t, {4, F.rows().size(), F.cols().size()}));
  });
  // A CUDA device in a build without NCCL (or a CPU build): a clear error, everywhere.
#ifndef STRUX_HAVE_CUDA
  expect_error<strux::ValueError>("cuda device", "cuda", [] {
    BlockToeplitzProblem p{{4, 5, 6}};
    p.device = strux::Device::cuda(0);
    BlockToeplitz F(MPI_COMM_WORLD, p);
  });
#endif
}

// The cost model (arithmetic only, no device needed): at the measured 2-GPU shape (NVLink
// constants) it picks 2 x 1 with one chunk, the fastest measured (bench/NOTES-dist.md); over a
// slow link the grid row's traffic outweighs the chunks' cost and the chunks overlap it; the CPU
// never chunks.
void cost_model() {
  strux::dist::BlockToeplitzProblem p;
  p.Nt = 1000, p.Nd = 2499, p.Nm = 2499, p.R = 1, p.dtype = strux::DType::f32;
  p.vectors = Vectors::Distributed;
  p.device = strux::Device::cuda(0);
  const strux::dist::Grid g = strux::dist::choose_grid(2, p);
  report(g.rows == 2 && g.cols == 1, "cost model: grid 2x1 on 2 GPUs, got " + std::to_string(g.rows) + "x" +
                                         std::to_string(g.cols));
  p.grid = {1, 2};
  report(strux::dist::auto_chunks(p) == 1, "cost model: one chunk over NVLink");
  strux::dist::CostModel slow;
  slow.link_bw = 5e9;
  report(strux::dist::auto_chunks(p, strux::dist::CommKind::Auto, slow) > 1, "cost model: chunks over a slow link");
  const double t1 = strux::dist::modelled_seconds(p.grid, p, strux::dist::CommKind::Auto, {}, 1);
  const double t4 = strux::dist::modelled_seconds(p.grid, p, strux::dist::CommKind::Auto, {}, 4);
  report(t1 < t4, "cost model: 4 chunks slower than 1 over NVLink");
  p.device = strux::Device::cpu();
  report(strux::dist::auto_chunks(p) == 1, "cost model: one chunk on the CPU");
  // More ranks than Nd·Nm allows to give work: a grid of them all, no error; where a grid gives
  // every rank work, one of those.
  p.Nd = p.Nm = 1;
  const strux::dist::Grid e = strux::dist::choose_grid(4, p);
  report(e.rows * e.cols == 4, "cost model: some grid of 4 ranks for Nd = Nm = 1, got " + std::to_string(e.rows) +
                                   "x" + std::to_string(e.cols));
  p.Nm = 100;
  const strux::dist::Grid w = strux::dist::choose_grid(4, p);
  report(w.rows == 1 && w.cols == 4, "cost model: 1x4 for Nd = 1, Nm = 100, got " + std::to_string(w.rows) + "x" +
                                         std::to_string(w.cols));
}

// Runs one case; an exception (a CUDA error, say) counts as its failure and the run goes on,
// so one bad case does not end the program and lose the other results. (A rank that throws
// while the others communicate can still leave them waiting: the ctest timeout catches that.)
template <class F>
void guarded(const std::string& what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    report(false, what + ": " + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  for (int a = 1; a < argc; ++a)
    if (std::string(argv[a]) == "--cuda") {
#ifdef STRUX_HAVE_CUDA
      int count = 0;
      cudaGetDeviceCount(&count);
      device_ = strux::Device::cuda(count > 0 ? rank_ % count : 0);
      cudaSetDevice(device_.index);
#else
      std::printf("--cuda: this build has no CUDA\n");
      MPI_Abort(MPI_COMM_WORLD, 2);
#endif
    }
  std::vector<strux::dist::Grid> grids{{0, 0}};
  for (int r = 1; r <= size_; ++r)
    if (size_ % r == 0) grids.push_back({r, size_ / r});
  for (auto grid : grids)
    for (bool tm : {true, false})
      for (Vectors vec : {Vectors::Replicated, Vectors::Distributed}) {
        const std::string at = std::string("case grid ") + std::to_string(grid.rows) + "x" +
                               std::to_string(grid.cols) + (tm ? " time-major" : " space-major") +
                               (vec == Vectors::Distributed ? " distributed" : " replicated");
        guarded(at + " float64", [&] { check_case<double>(7, 5, 6, 1, tm, grid, vec, 1); });
        guarded(at + " float32", [&] { check_case<float>(9, 7, 5, 3, tm, grid, vec, 2); });
        guarded(at + " float64 R=2", [&] { check_case<double>(5, 9, 4, 2, tm, grid, vec, 3); });
        guarded(at + " float64 (float32 communication)", [&] { check_case<double>(6, 7, 5, 2, tm, grid, vec, 2, true); });
      }
  // Grids that leave some ranks an empty block (r > Nd or c > Nm): they hold no F̂, pass empty
  // views or arrays of no entries, and take part in every call; grid {0, 0} where no grid gives
  // every rank work (Nd = Nm = 1) is the model's choice among all grids.
  if (size_ > 1) {
    struct Empty {
      int64_t Nd, Nm;
      strux::dist::Grid grid;
    };
    std::vector<Empty> empty{{1, 5, {size_, 1}}, {4, 1, {1, size_}}, {1, 1, {0, 0}}};
    if (size_ == 4) empty.insert(empty.end(), {{1, 1, {2, 2}}, {3, 6, {4, 1}}, {3, 1, {2, 2}}});
    for (const Empty& e : empty)
      for (bool tm : {true, false})
        for (Vectors vec : {Vectors::Replicated, Vectors::Distributed}) {
          const std::string at = "empty blocks Nd=" + std::to_string(e.Nd) + " Nm=" + std::to_string(e.Nm) +
                                 " grid " + std::to_string(e.grid.rows) + "x" + std::to_string(e.grid.cols) +
                                 (tm ? " time-major" : " space-major") +
                                 (vec == Vectors::Distributed ? " distributed" : " replicated");
          guarded(at + " float64 R=2", [&] { check_case<double>(6, e.Nd, e.Nm, 2, tm, e.grid, vec, 2); });
          guarded(at + " float32", [&] { check_case<float>(7, e.Nd, e.Nm, 1, tm, e.grid, vec, 1); });
        }
  }
  guarded("cost model", [] { cost_model(); });
  guarded("bad inputs", [] { bad_inputs(); });
  // One process, several devices: threads on the CPU (every process on its own), or every GPU
  // of the machine with --cuda when this program runs alone.
  const strux::Device dev = device_;
  int most = 4;  // NCCL takes one rank per GPU
#ifdef STRUX_HAVE_CUDA
  if (dev.kind == strux::DeviceKind::CUDA) cudaGetDeviceCount(&most);
#endif
  if (dev.kind == strux::DeviceKind::CPU || size_ == 1)
    for (int P = 2; P <= std::min(most, 4); ++P)
      for (bool tm : {true, false})
        for (Vectors vec : {Vectors::Replicated, Vectors::Distributed}) {
          const std::string at = "group of " + std::to_string(P) + (tm ? " time-major" : " space-major") +
                                 (vec == Vectors::Distributed ? " distributed" : " replicated");
          device_ = dev;
          guarded(at + " float64 grid chosen", [&] { check_group<double>(P, 7, 5, 6, 1, tm, {}, vec, 1); });
          device_ = dev;
          guarded(at + " float32 grid Px1", [&] { check_group<float>(P, 9, 7, 5, 3, tm, {P, 1}, vec, 2); });
          device_ = dev;  // a grid row of P ranks in 3 chunks: the sums on the side stream (CUDA)
          guarded(at + " float64 grid 1xP", [&] { check_group<double>(P, 5, 9, 4, 2, tm, {1, P}, vec, 3); });
          device_ = dev;  // empty blocks: one row over P grid rows, one column over P grid columns
          guarded(at + " float64 grid Px1 Nd=1", [&] { check_group<double>(P, 6, 1, 4, 2, tm, {P, 1}, vec, 2); });
          device_ = dev;
          guarded(at + " float64 grid 1xP Nm=1", [&] { check_group<double>(P, 6, 5, 1, 1, tm, {1, P}, vec, 2); });
          device_ = dev;
          guarded(at + " float64 grid chosen Nd=Nm=1", [&] { check_group<double>(P, 6, 1, 1, 2, tm, {}, vec, 1); });
        }
  device_ = dev;
  if (rank_ == 0) std::printf("%d passed, %d failed\n", passed, failed);
  MPI_Finalize();
  return failed ? 1 : 0;
}
