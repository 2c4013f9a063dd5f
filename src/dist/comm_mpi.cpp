// The MPI communicator (host buffers, blocking calls) and the agreement step of collectively().
#include <algorithm>
#include <cstring>
#include <vector>

#include "dist/comm.hpp"

namespace strux::dist {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof(text), "error %d", rc);
  throw BackendError(msg(call, " failed: ", text));
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::c64: return MPI_C_FLOAT_COMPLEX;
    case DType::c128: return MPI_C_DOUBLE_COMPLEX;
    case DType::f16:
    case DType::bf16: return MPI_UINT16_T;
  }
  throw TypeError("argument 'dtype': no MPI datatype for it");
}

namespace {

class MpiComm final : public Communicator {
 public:
  explicit MpiComm(MPI_Comm c) : comm_(c) {
    STRUX_MPI(MPI_Comm_rank(c, &rank_));
    STRUX_MPI(MPI_Comm_size(c, &size_));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "MPI"; }
  void broadcast(void* buf, size_t count, DType t, int root, Stream) override {
    for_each_piece(buf, count, t, [&](void* p, int n) { STRUX_MPI(MPI_Bcast(p, n, mpi_type(t), root, comm_)); });
  }
  void allreduce_sum(void* buf, size_t count, DType t, Stream) override {
    check_summable(t);
    for_each_piece(buf, count, t, [&](void* p, int n) {
      STRUX_MPI(MPI_Allreduce(MPI_IN_PLACE, p, n, mpi_type(t), MPI_SUM, comm_));
    });
  }
  void reduce_sum(void* buf, size_t count, DType t, int root, Stream) override {
    check_summable(t);
    for_each_piece(buf, count, t, [&](void* p, int n) {
      STRUX_MPI(MPI_Reduce(rank_ == root ? MPI_IN_PLACE : p, rank_ == root ? p : nullptr, n, mpi_type(t), MPI_SUM,
                           root, comm_));
    });
  }

 private:
  static void check_summable(DType t) {
    if (t == DType::f16 || t == DType::bf16)
      throw TypeError(msg("argument 'dtype': the MPI communicator sums float32, float64, complex64 and complex128, "
                          "got ", dtype_name(t)));
  }
  // MPI counts are int: buffers of 2^31 elements or more go in pieces.
  template <class F>
  static void for_each_piece(void* buf, size_t count, DType t, F&& f) {
    constexpr size_t kMax = size_t(1) << 30;
    char* p = static_cast<char*>(buf);
    for (size_t done = 0; done < count; done += kMax) {
      const size_t n = std::min(kMax, count - done);
      f(p + done * dtype_size(t), int(n));
    }
  }
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_comm(MPI_Comm comm) { return std::make_unique<MpiComm>(comm); }

namespace detail {

void agree(MPI_Comm comm, ErrKind kind, const std::string& what) {
  int rank = 0, size = 1;
  STRUX_MPI(MPI_Comm_rank(comm, &rank));
  STRUX_MPI(MPI_Comm_size(comm, &size));
  // The lowest failing rank (size when none failed).
  int mine = kind == ErrKind::None ? size : rank, first = size;
  STRUX_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return;
  // Its kind and message, to every rank.
  constexpr int kLen = 2048;
  std::vector<char> text(kLen + 1, '\0');
  int k = int(kind);
  if (rank == first) std::strncpy(text.data(), what.c_str(), kLen);
  STRUX_MPI(MPI_Bcast(&k, 1, MPI_INT, first, comm));
  STRUX_MPI(MPI_Bcast(text.data(), kLen, MPI_CHAR, first, comm));
  std::string m = rank == first ? what : msg("rank ", first, " of ", size, ": ", text.data());
  switch (ErrKind(k)) {
    case ErrKind::Type: throw TypeError(m);
    case ErrKind::Value: throw ValueError(m);
    case ErrKind::Memory: throw MemoryError(m);
    default: throw BackendError(m);
  }
}

}  // namespace detail
}  // namespace strux::dist
