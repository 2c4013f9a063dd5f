// In-process A/B of two versions of src/cpu/ks/pairs.cpp on the batch-last butterfly(N, 2)
// forward (bench/NOTES-cpu.md "ks bsl ragged"): each compiled into its own namespace (-Dks=ksold,
// -Dks=ksnew), calls alternating old new new old ..., 64 MiB written before each call (x and y
// from memory), x and y 16 bytes past a line by default, THP advised (NOHUGE=1: not), same
// threads for both; prints the medians and checks the outputs are bit-identical.
// Build (OLD, NEW: two source trees; NEW's build/cpu/libstrux.a for threads.cpp):
//   F="-O3 -DNDEBUG -march=x86-64-v2 -std=gnu++17 -fopenmp"
//   g++ $F -Dks=ksold -I$OLD/include -I$OLD/src -c $OLD/src/cpu/ks/pairs.cpp -o old.o
//   g++ $F -Dks=ksnew -I$NEW/include -I$NEW/src -c $NEW/src/cpu/ks/pairs.cpp -o new.o
//   g++ $F -Dks=ksnew -I$NEW/include -I$NEW/src -c $NEW/src/cpu/ks/pairs_bsl.cpp -o new_bsl.o
//   g++ $F -I$NEW/include -I$NEW/src bench/cpu_ks_bsl_ab.cpp old.o new.o new_bsl.o $NEW/build/cpu/libstrux.a \
//       -lfftw3f -lfftw3 -lopenblas -o ks_bsl_ab
// (a tree from before pairs_bsl.cpp: pairs.cpp alone.)
// Run: ks_bsl_ab f32|f64 batch [calls 15] [threads 2] [x offset bytes 16] [y offset 16] [N 1024]
#include <sys/mman.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "strux/ks.hpp"
#include "cpu/threads.hpp"
namespace strux::cpu::ksold {
template <class T>
void pairs_forward(const std::vector<KSPattern>&, KSLayout, const T*, const T* const*, T*, int64_t);
}
namespace strux::cpu::ksnew {
template <class T>
void pairs_forward(const std::vector<KSPattern>&, KSLayout, const T*, const T* const*, T*, int64_t);
}
using namespace strux;
template <class T>
void run(int64_t n, int64_t batch, int reps, int xoff, int yoff) {
  std::vector<KSPattern> ps;
  for (int64_t a = 1; a < n; a *= 2) ps.push_back({a, 2, 2, n / (2 * a)});
  std::mt19937_64 rng(1);
  std::normal_distribution<double> nd;
  std::vector<std::vector<T>> w;
  std::vector<const T*> wp;
  for (auto& p : ps) {
    w.emplace_back(size_t(p.nnz()));
    for (auto& v : w.back()) v = T(nd(rng) * 0.7);
    wp.push_back(w.back().data());
  }
  const size_t e = size_t(n * batch);
  const size_t bytes = (e * sizeof(T) + 256 + (2 << 20)) / (2 << 20) * (2 << 20);
  char* xb = static_cast<char*>(std::aligned_alloc(2 << 20, bytes));
  char* yb = static_cast<char*>(std::aligned_alloc(2 << 20, bytes));
  char* zb = static_cast<char*>(std::aligned_alloc(2 << 20, bytes));
  if (!std::getenv("NOHUGE")) madvise(xb, bytes, MADV_HUGEPAGE), madvise(yb, bytes, MADV_HUGEPAGE), madvise(zb, bytes, MADV_HUGEPAGE);
  T* x = reinterpret_cast<T*>(xb + xoff);
  T* y = reinterpret_cast<T*>(yb + yoff);
  T* z = reinterpret_cast<T*>(zb + yoff);
  for (size_t i = 0; i < e; ++i) x[i] = T(nd(rng)), y[i] = 0, z[i] = 0;
  std::vector<char> junk(64 << 20);
  std::vector<double> t[2];
  for (int r = 0; r < 2 * reps + 4; ++r) {
    std::memset(junk.data(), r, junk.size());
    const int k = (r / 2 + r) % 2;  // old new new old old new ...
    auto t0 = std::chrono::steady_clock::now();
    if (k == 0) cpu::ksold::pairs_forward<T>(ps, KSLayout::BatchLast, x, wp.data(), y, batch);
    else cpu::ksnew::pairs_forward<T>(ps, KSLayout::BatchLast, x, wp.data(), z, batch);
    auto t1 = std::chrono::steady_clock::now();
    if (r >= 4) t[k].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  if (std::memcmp(y, z, e * sizeof(T)) != 0) std::printf("MISMATCH ");
  for (auto& v : t) std::sort(v.begin(), v.end());
  std::printf("%s %lld old %.3f new %.3f ratio %.3f\n", sizeof(T) == 4 ? "f32" : "f64", (long long)batch,
              t[0][t[0].size() / 2], t[1][t[1].size() / 2], t[1][t[1].size() / 2] / t[0][t[0].size() / 2]);
  std::free(xb), std::free(yb), std::free(zb);
}
int main(int argc, char** argv) {
  const std::string dt = argv[1];
  const int64_t batch = std::atoll(argv[2]);
  const int reps = argc > 3 ? std::atoi(argv[3]) : 15;
  const int nt = argc > 4 ? std::atoi(argv[4]) : 2;
  const int xoff = argc > 5 ? std::atoi(argv[5]) : 16, yoff = argc > 6 ? std::atoi(argv[6]) : 16;
  const int64_t n = argc > 7 ? std::atoll(argv[7]) : 1024;
  strux::cpu::set_num_threads(nt);
  if (dt == "f32") run<float>(n, batch, reps, xoff, yoff);
  else run<double>(n, batch, reps, xoff, yoff);
}
