// strux::dist::BlockToeplitzGroup: every rank of the grid in one process, one device each; the
// ranks' parts run on their own host threads, communicating through NCCL (ncclCommInitAll) or,
// on the CPU, through shared memory (comm_threads.cpp).
#include <exception>
#include <thread>

#include "dist/toeplitz_impl.hpp"

namespace strux::dist {

namespace {

// Runs f(q) for every rank q on its own thread; rethrows the first rank's exception.
template <class F>
void on_threads(int n, F&& f) {
  std::vector<std::exception_ptr> err(static_cast<size_t>(n));
  std::vector<std::thread> t;
  for (int q = 0; q < n; ++q)
    t.emplace_back([&, q] {
      try {
        f(q);
      } catch (...) {
        err[size_t(q)] = std::current_exception();
      }
    });
  for (auto& x : t) x.join();
  for (auto& e : err)
    if (e) std::rethrow_exception(e);
}

Stream stream_of(const std::vector<Stream>& s, int q, const char* name) {
  if (s.empty()) return {};
  check_arg(q < int(s.size()), name, "expected one stream per rank (", q + 1, " or more), got ", s.size());
  return s[size_t(q)];
}

template <class Args>
void check_count(const std::vector<Args>& a, int n) {
  check_arg(int(a.size()) == n, "args", "expected the arguments of each of the ", n, " ranks, got ", a.size());
}

}  // namespace

BlockToeplitzGroup::BlockToeplitzGroup(const BlockToeplitzProblem& problem, const std::vector<Device>& devices,
                                       const DistOptions& options) {
  const int P = int(devices.size());
  check_arg(P >= 1, "devices", "expected at least one device, got none");
  for (const Device& d : devices)
    check_arg(d.kind == devices[0].kind, "devices", "expected devices of one kind, got ", device_name(devices[0]),
              " and ", device_name(d));
  BlockToeplitzProblem p = problem;
  p.device = devices[0];
  check_problem(p, options, P);
  if (p.device.kind == DeviceKind::CUDA)  // (ncclCommInitAll would fail with "invalid usage")
    for (int q = 0; q < P; ++q)
      for (int k = 0; k < q; ++k)
        check_arg(devices[size_t(q)].index != devices[size_t(k)].index, "devices",
                  "expected distinct CUDA devices (NCCL takes one rank per GPU), got ", device_name(devices[size_t(q)]),
                  " for ranks ", k, " and ", q);
  if (p.grid.rows == 0) p.grid = choose_grid(P, p, options.comm, options.cost);
  const int r = p.grid.rows, c = p.grid.cols;
  // The communicators of every grid row (c ranks) and column (r ranks).
  std::vector<std::vector<std::unique_ptr<Communicator>>> row(static_cast<size_t>(r)), col(static_cast<size_t>(c));
  const bool cuda = p.device.kind == DeviceKind::CUDA;
  for (int i = 0; i < r; ++i) {
    std::vector<int> d;
    for (int j = 0; j < c; ++j) d.push_back(devices[size_t(i * c + j)].index);
    row[size_t(i)] = cuda ? make_nccl_comms(d) : make_thread_comms(c);
  }
  for (int j = 0; j < c; ++j) {
    std::vector<int> d;
    for (int i = 0; i < r; ++i) d.push_back(devices[size_t(i * c + j)].index);
    col[size_t(j)] = cuda ? make_nccl_comms(d) : make_thread_comms(r);
  }
  for (int q = 0; q < P; ++q) {
    auto impl = std::make_unique<BlockToeplitz::Impl>();
    impl->p = p;
    impl->p.device = devices[size_t(q)];
    impl->o = options;
    impl->place(q, P);
    impl->build(std::move(row[size_t(impl->gi)][size_t(impl->gj)]), std::move(col[size_t(impl->gj)][size_t(impl->gi)]));
    ranks_.push_back(BlockToeplitz(std::move(impl)));
  }
}

BlockToeplitzGroup::~BlockToeplitzGroup() = default;
BlockToeplitzGroup::BlockToeplitzGroup(BlockToeplitzGroup&&) noexcept = default;
BlockToeplitzGroup& BlockToeplitzGroup::operator=(BlockToeplitzGroup&&) noexcept = default;

const BlockToeplitz& BlockToeplitzGroup::rank(int q) const {
  check_arg(q >= 0 && q < size(), "q", "expected a rank in [0, ", size(), "), got ", q);
  return ranks_[size_t(q)];
}

void BlockToeplitzGroup::set_blocks(const std::vector<View>& blocks, const std::vector<Stream>& s) {
  check_count(blocks, size());
  for (int q = 0; q < size(); ++q) ranks_[size_t(q)].set_blocks(blocks[size_t(q)], stream_of(s, q, "s"));
}

void BlockToeplitzGroup::forward(const std::vector<BlockToeplitz::Forward>& a, const std::vector<Stream>& s) {
  check_count(a, size());
  for (int q = 0; q < size(); ++q) {  // every rank's arguments before any rank communicates
    ranks_[size_t(q)].impl_->check_forward(a[size_t(q)]);
    stream_of(s, q, "s");
  }
  on_threads(size(), [&](int q) { ranks_[size_t(q)].impl_->matvec(a[size_t(q)].m, a[size_t(q)].d, stream_of(s, q, "s")); });
}

void BlockToeplitzGroup::backward(const std::vector<BlockToeplitz::Backward>& a, const std::vector<Stream>& s) {
  check_count(a, size());
  for (int q = 0; q < size(); ++q) {
    ranks_[size_t(q)].impl_->check_backward(a[size_t(q)]);
    stream_of(s, q, "s");
  }
  on_threads(size(), [&](int q) { ranks_[size_t(q)].impl_->rmatvec(a[size_t(q)].dd, a[size_t(q)].dm, stream_of(s, q, "s")); });
}

}  // namespace strux::dist
