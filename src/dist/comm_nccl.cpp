// The NCCL communicator: CUDA buffers, calls queued on the caller's stream. Bootstrapped over
// MPI: rank 0 of the group makes the unique id and MPI broadcasts it (so any launcher that
// gives MPI ranks works: mpirun, srun).
#include "dist/comm.hpp"

#ifdef STRUX_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda/check.hpp"

namespace strux::dist {
namespace {

void check_nccl(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return;
  throw BackendError(msg(call, " failed: ", ncclGetErrorString(r),
                         r == ncclSystemError || r == ncclRemoteError ? " (see NCCL_DEBUG=WARN output)" : ""));
}
#define STRUX_NCCL(call) check_nccl((call), #call)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case DType::bf16: return ncclBfloat16;
#endif
    default: break;
  }
  throw TypeError(msg("argument 'dtype': the NCCL communicator takes real float16, bfloat16, float32 or float64 "
                      "buffers (complex ones as twice as many reals), got ", dtype_name(t)));
}

// Complex buffers travel as twice as many reals (a sum of complex numbers is the sum of parts).
void real_view(size_t& count, DType& t) {
  if (t == DType::c64) count *= 2, t = DType::f32;
  if (t == DType::c128) count *= 2, t = DType::f64;
}

class DeviceGuard {
 public:
  explicit DeviceGuard(int d) {
    STRUX_CUDA(cudaGetDevice(&prev_));
    if (prev_ != d) STRUX_CUDA(cudaSetDevice(d));
  }
  ~DeviceGuard() { cudaSetDevice(prev_); }

 private:
  int prev_ = 0;
};

class NcclComm final : public Communicator {
 public:
  // An already initialised communicator (ncclCommInitAll), owned from here on.
  NcclComm(ncclComm_t c, int device, int rank, int size) : device_(device), rank_(rank), size_(size), comm_(c) {}
  NcclComm(MPI_Comm comm, int device) : device_(device) {
    STRUX_MPI(MPI_Comm_rank(comm, &rank_));
    STRUX_MPI(MPI_Comm_size(comm, &size_));
    ncclUniqueId id;
    if (rank_ == 0) STRUX_NCCL(ncclGetUniqueId(&id));
    STRUX_MPI(MPI_Bcast(&id, int(sizeof(id)), MPI_BYTE, 0, comm));
    DeviceGuard g(device_);
    STRUX_NCCL(ncclCommInitRank(&comm_, size_, id, rank_));
  }
  ~NcclComm() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "NCCL"; }
  void broadcast(void* buf, size_t count, DType t, int root, Stream s) override {
    real_view(count, t);
    DeviceGuard g(device_);
    STRUX_NCCL(ncclBroadcast(buf, buf, count, nccl_type(t), root, comm_, stream(s)));
  }
  void allreduce_sum(void* buf, size_t count, DType t, Stream s) override {
    real_view(count, t);
    DeviceGuard g(device_);
    STRUX_NCCL(ncclAllReduce(buf, buf, count, nccl_type(t), ncclSum, comm_, stream(s)));
  }
  void reduce_sum(void* buf, size_t count, DType t, int root, Stream s) override {
    real_view(count, t);
    DeviceGuard g(device_);
    STRUX_NCCL(ncclReduce(buf, buf, count, nccl_type(t), ncclSum, root, comm_, stream(s)));
  }

 private:
  static cudaStream_t stream(Stream s) { return static_cast<cudaStream_t>(s.handle); }
  int device_ = 0, rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool have_nccl() { return true; }
std::unique_ptr<Communicator> make_nccl_comm(MPI_Comm comm, int device) {
  return std::make_unique<NcclComm>(comm, device);
}

std::vector<std::unique_ptr<Communicator>> make_nccl_comms(const std::vector<int>& devices) {
  const int n = int(devices.size());
  std::vector<ncclComm_t> c(size_t(n), nullptr);
  STRUX_NCCL(ncclCommInitAll(c.data(), n, devices.data()));
  std::vector<std::unique_ptr<Communicator>> out;
  for (int q = 0; q < n; ++q) out.push_back(std::make_unique<NcclComm>(c[size_t(q)], devices[size_t(q)], q, n));
  return out;
}

}  // namespace strux::dist

#else  // no NCCL in this build

namespace strux::dist {
bool have_nccl() { return false; }
std::unique_ptr<Communicator> make_nccl_comm(MPI_Comm, int) {
  throw BackendError("strux was built without NCCL (CMake STRUX_NCCL / NCCL_ROOT): no communicator for CUDA buffers");
}
std::vector<std::unique_ptr<Communicator>> make_nccl_comms(const std::vector<int>&) {
  throw BackendError("strux was built without NCCL (CMake STRUX_NCCL / NCCL_ROOT): no communicator for CUDA buffers");
}
}  // namespace strux::dist

#endif
