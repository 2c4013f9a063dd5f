// Communicators of threads in one process over host memory (BlockToeplitzGroup on the CPU):
// each rank posts its buffer's address, a barrier, then every rank reads the others' buffers
// directly; a sum is split so that rank q adds up slice q of every buffer.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "dist/comm.hpp"

namespace strux::dist {
namespace {

struct Shared {
  explicit Shared(int n) : n(n), bufs(size_t(n), nullptr) {}
  const int n;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  long generation = 0;
  std::vector<void*> bufs;

  void barrier() {
    std::unique_lock<std::mutex> lock(mu);
    const long g = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != g; });
    }
  }
};

template <class T>
void sum_slice(Shared& sh, size_t count, int rank, int root) {
  const size_t n = size_t(sh.n), a = count * size_t(rank) / n, b = count * size_t(rank + 1) / n;
  std::vector<T> acc(b - a, T(0));
  for (void* p : sh.bufs)
    for (size_t i = a; i < b; ++i) acc[i - a] += static_cast<const T*>(p)[i];
  sh.barrier();  // every slice is read before any is written
  for (int q = 0; q < sh.n; ++q)
    if (root < 0 || q == root) std::copy(acc.begin(), acc.end(), static_cast<T*>(sh.bufs[size_t(q)]) + a);
}

class ThreadComm final : public Communicator {
 public:
  ThreadComm(std::shared_ptr<Shared> sh, int rank) : sh_(std::move(sh)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return sh_->n; }
  const char* name() const override { return "threads"; }
  void broadcast(void* buf, size_t count, DType t, int root, Stream) override {
    post(buf);
    if (rank_ != root) std::memcpy(buf, sh_->bufs[size_t(root)], count * dtype_size(t));
    sh_->barrier();
  }
  void allreduce_sum(void* buf, size_t count, DType t, Stream) override { sum(buf, count, t, -1); }
  void reduce_sum(void* buf, size_t count, DType t, int root, Stream) override { sum(buf, count, t, root); }

 private:
  void post(void* buf) {
    sh_->bufs[size_t(rank_)] = buf;
    sh_->barrier();
  }
  void sum(void* buf, size_t count, DType t, int root) {
    post(buf);
    switch (t) {
      case DType::f32: sum_slice<float>(*sh_, count, rank_, root); break;
      case DType::f64: sum_slice<double>(*sh_, count, rank_, root); break;
      case DType::c64: sum_slice<float>(*sh_, 2 * count, rank_, root); break;
      case DType::c128: sum_slice<double>(*sh_, 2 * count, rank_, root); break;
      default:
        throw TypeError(msg("argument 'dtype': the thread communicator sums float32, float64, complex64 and "
                            "complex128, got ", dtype_name(t)));
    }
    sh_->barrier();  // every write is done before any rank reuses its buffer
  }
  std::shared_ptr<Shared> sh_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_comms(int n) {
  auto sh = std::make_shared<Shared>(n);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int q = 0; q < n; ++q) out.push_back(std::make_unique<ThreadComm>(sh, q));
  return out;
}

}  // namespace strux::dist
