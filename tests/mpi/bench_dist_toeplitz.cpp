// strux::dist::BlockToeplitz timed from C++ (no Python, no mpi4py): matvec and rmatvec, median
// wall time between barriers (device synchronized) and median of each phase the operator
// records, the maximum over ranks. Prints one JSON object on rank 0.
//   mpirun -np P strux_dist_bench NT ND NM [--cuda] [--f64] [--rhs R] [--grid r c]
//          [--vectors replicated|distributed] [--chunks k] [--reps n] [--time-major] [--compare]
//          [--solver blas|kernels|...]   (the local operator's product; default automatic)
// --compare: the same problem side by side in one run, one JSON object per line: the grid and
// chunks asked for (default: the cost model's grid, automatic chunks), every other grid r × c of
// P ranks, and on the first one's grid chunks = 1 (no overlap), or 4 where it ran with 1. Each line
// carries the model's time for its grid and chunks ("modelled_s").
// The blocks are a constant pattern (the timing does not depend on the values).
#include <mpi.h>
#ifdef STRUX_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "strux/dist.hpp"

namespace {

bool cuda = false;

void* alloc(size_t bytes) {
  void* p = nullptr;
#ifdef STRUX_HAVE_CUDA
  if (cuda) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      std::fprintf(stderr, "cudaMalloc of %zu bytes failed\n", bytes);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    cudaMemset(p, 0x3c, bytes);  // floats of about 0.0115, doubles of about 1.6e-17
    return p;
  }
#endif
  p = std::malloc(bytes);
  std::memset(p, 0x3c, bytes);
  return p;
}

void release(void* p) {
#ifdef STRUX_HAVE_CUDA
  if (cuda) {
    cudaFree(p);
    return;
  }
#endif
  std::free(p);
}

void sync() {
#ifdef STRUX_HAVE_CUDA
  if (cuda) cudaDeviceSynchronize();
#endif
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double max_over_ranks(double x) {
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return x;
}

// One operator: build it, time matvec and rmatvec, print its JSON line (rank 0); the grid and
// chunks it used.
std::pair<strux::dist::Grid, int> run_one(const strux::dist::BlockToeplitzProblem& p, const strux::dist::DistOptions& o, int reps,
                          int rank, int size) {
  strux::dist::BlockToeplitz F(MPI_COMM_WORLD, p, o);
  const auto& q = F.problem();
  const int64_t nd = F.rows().size(), nm = F.cols().size();
  const size_t es = strux::dtype_size(q.dtype);
  void* blocks = alloc(size_t(q.Nt * nd * nm) * es);
  F.set_blocks(strux::View(blocks, q.dtype, {q.Nt, nd, nm}, q.device));
  sync();
  release(blocks);  // F̂ is built: the blocks are no longer needed
  auto vec = [&](void* d, int64_t n) {
    const int64_t a = q.layout == strux::ToeplitzLayout::TimeMajor ? q.Nt : n;
    const int64_t b = q.layout == strux::ToeplitzLayout::TimeMajor ? n : q.Nt;
    return q.R == 1 ? strux::View(d, q.dtype, {a, b}, q.device) : strux::View(d, q.dtype, {a, b, q.R}, q.device);
  };
  void* m = alloc(size_t(q.Nt * nm * q.R) * es);
  void* d = alloc(size_t(q.Nt * nd * q.R) * es);
  std::string json = "{";
  char buf[512];
  std::snprintf(buf, sizeof(buf), "\"ranks\": %d, \"grid\": [%d, %d], \"shape\": [%lld, %lld, %lld], \"R\": %lld, "
                "\"dtype\": \"%s\", \"device\": \"%s\", \"chunks\": %d, \"fhat_gb_per_rank\": %.4g, "
                "\"modelled_s\": %.6g",
                size, q.grid.rows, q.grid.cols, (long long)q.Nt, (long long)q.Nd, (long long)q.Nm, (long long)q.R,
                strux::dtype_name(q.dtype), cuda ? "cuda" : "cpu", F.chunks(),
                max_over_ranks(double(q.Nt + 1) * nd * nm * 2 * es / 1e9),
                strux::dist::modelled_seconds(q.grid, q, o.comm, o.cost, F.chunks()));
  json += buf;
  for (int adjoint = 0; adjoint < 2; ++adjoint) {
    std::vector<double> wall, bc, loc, red, tot, fft, prod, ifft;
    for (int k = 0; k < reps + 3; ++k) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = std::chrono::steady_clock::now();
      if (adjoint) {
        strux::op::BlockToeplitzBackward b;
        b.dd = vec(d, nd), b.dm = vec(m, nm);
        F.backward(b);
      } else {
        F.forward({vec(m, nm), vec(d, nd)});
      }
      sync();
      MPI_Barrier(MPI_COMM_WORLD);
      if (k < 3) continue;
      wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      const auto t = F.timings();
      bc.push_back(t.broadcast), loc.push_back(t.local), red.push_back(t.reduce), tot.push_back(t.total);
      fft.push_back(t.fft), prod.push_back(t.product), ifft.push_back(t.ifft);
    }
    std::snprintf(buf, sizeof(buf), ", \"%s\": {\"wall_s\": %.6g, \"broadcast_s\": %.6g, \"local_s\": %.6g, "
                  "\"reduce_s\": %.6g, \"total_s\": %.6g, \"fft_s\": %.6g, \"product_s\": %.6g, \"ifft_s\": %.6g}",
                  adjoint ? "rmatvec" : "matvec", max_over_ranks(median(wall)), max_over_ranks(median(bc)),
                  max_over_ranks(median(loc)), max_over_ranks(median(red)), max_over_ranks(median(tot)),
                  max_over_ranks(median(fft)), max_over_ranks(median(prod)), max_over_ranks(median(ifft)));
    json += buf;
  }
  release(m);
  release(d);
  if (rank == 0) std::printf("%s, \"describe\": \"%s\"}\n", json.c_str(), F.describe().c_str());
  std::fflush(stdout);
  return {q.grid, F.chunks()};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 4) {
    if (rank == 0) std::fprintf(stderr, "usage: strux_dist_bench NT ND NM [options]\n");
    MPI_Finalize();
    return 2;
  }
  strux::dist::BlockToeplitzProblem p;
  p.Nt = std::atoll(argv[1]), p.Nd = std::atoll(argv[2]), p.Nm = std::atoll(argv[3]);
  p.layout = strux::ToeplitzLayout::SpaceMajor;
  p.vectors = strux::dist::Vectors::Distributed;
  strux::dist::DistOptions o;
  o.timing = true;
  o.check_ranks = false;
  int reps = 20;
  bool compare = false;
  for (int a = 4; a < argc; ++a) {
    const std::string s = argv[a];
    if (s == "--cuda") cuda = true;
    else if (s == "--compare") compare = true;
    else if (s == "--f64") p.dtype = strux::DType::f64;
    else if (s == "--time-major") p.layout = strux::ToeplitzLayout::TimeMajor;
    else if (s == "--rhs" && a + 1 < argc) p.R = std::atoll(argv[++a]);
    else if (s == "--chunks" && a + 1 < argc) o.chunks = std::atoi(argv[++a]);
    else if (s == "--reps" && a + 1 < argc) reps = std::atoi(argv[++a]);
    else if (s == "--vectors" && a + 1 < argc) p.vectors = strux::dist::parse_vectors(argv[++a]);
    else if (s == "--comm-f32") o.broadcast_single = o.reduce_single = true;
    else if (s == "--solver" && a + 1 < argc) o.local.solver = argv[++a];  // the local product: blas, kernels
    else if (s == "--grid" && a + 2 < argc) p.grid = {std::atoi(argv[a + 1]), std::atoi(argv[a + 2])}, a += 2;
  }
#ifdef STRUX_HAVE_CUDA
  if (cuda) {
    int count = 1;
    cudaGetDeviceCount(&count);
    p.device = strux::Device::cuda(rank % count);
    cudaSetDevice(p.device.index);
  }
#endif
  try {
    std::vector<std::pair<strux::dist::Grid, int>> runs{{p.grid, o.chunks}};
    if (compare) {
      const auto [first, first_chunks] = run_one(p, o, reps, rank, size);  // what it resolved to
      runs.clear();
      for (int r = 1; r <= size; ++r)
        if (size % r == 0 && (r != first.rows || size / r != first.cols)) runs.push_back({{r, size / r}, o.chunks});
      runs.push_back({first, first_chunks == 1 ? 4 : 1});
    }
    for (const auto& [g, k] : runs) {
      strux::dist::BlockToeplitzProblem q = p;
      strux::dist::DistOptions qo = o;
      q.grid = g, qo.chunks = k;
      run_one(q, qo, reps, rank, size);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}
