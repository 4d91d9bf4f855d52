// The Open MPI backend. Synchronous collectives call the blocking MPI function (the fastest path,
// guarded by the watchdog); asynchronous ones and all point-to-point use nonblocking MPI requests
// polled by the runtime, so they honour timeouts and progress while the caller waits elsewhere.
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <climits>
#include <cstring>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "backends/factories.hpp"
#include "backends/mpi/mpi_launch.hpp"
#include "bootstrap/bootstrap.hpp"
#include "local_reduce.hpp"
#include "mcr/errors.hpp"
#include "mpi_check.hpp"
#include "mpi_types.hpp"

namespace mcr::detail {
namespace {

bool cuda_aware() noexcept {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

int as_int(std::size_t n) { return static_cast<int>(n); }  // counts are checked against max_count()

/// A request plus what must happen after it completes (avg scaling, copies out of scratch) and the
/// memory it must keep alive (count arrays, scratch buffers).
class MpiPending final : public PendingOp {
 public:
  MPI_Request request = MPI_REQUEST_NULL;
  std::function<void()> finish;
  std::vector<int> ints;
  std::vector<std::byte> scratch;

  bool test() override {
    int flag = 0;
    MCR_MPI_CHECK(MPI_Test(&request, &flag, MPI_STATUS_IGNORE));
    if (flag && finish) {
      finish();
      finish = nullptr;
    }
    return flag != 0;
  }
  void abandon() noexcept override {
    // A nonblocking collective cannot be cancelled; the communicator is aborted after a timeout, so
    // the request is simply left to MPI_Finalize.
    request = MPI_REQUEST_NULL;
  }
};

class MpiBackend final : public Backend {
 public:
  MpiBackend(MPI_Comm comm) : comm_(comm), cuda_aware_(cuda_aware()) {
    MCR_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    MCR_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    MCR_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    int flag = 0;
    int* ub = nullptr;
    MCR_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag));
    tag_ub_ = (flag && ub) ? *ub : 32767;
  }
  ~MpiBackend() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&comm_);
  }

  std::string_view name() const noexcept override { return "mpi"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::size_t max_count() const noexcept override { return INT_MAX; }
  bool needs_host_progress() const noexcept override { return true; }
  bool blocks_device() const noexcept override { return cuda_aware_; }

  Support supports(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) const override {
    if (device == Device::Kind::cuda && !cuda_aware_) {
      return Support::no("this MPI library is not CUDA-aware (MPIX_Query_cuda_support() = 0)");
    }
    if (is_reduction(op) && !reduce_op_valid_for(reduce, dtype)) {
      return Support::no("reduce op not defined for this dtype");
    }
    (void)op;
    if (device == Device::Kind::cuda) return Support::yes("cuda-aware");
    if ((dtype == DType::f16 || dtype == DType::bf16) && is_reduction(op)) {
      return Support::yes("user-defined MPI op (widened to float)");
    }
    return Support::yes("native");
  }

  void progress() override {
    int flag = 0;
    MCR_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE));
  }

  std::unique_ptr<Backend> split(const std::vector<int>& members, std::uint64_t) override {
    int color = MPI_UNDEFINED, key = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (members[i] == rank_) key = static_cast<int>(i);
    }
    if (!members.empty()) color = members.front();  // groups are disjoint: their first members differ
    MPI_Comm child = MPI_COMM_NULL;
    MCR_MPI_CHECK(MPI_Comm_split(comm_, color, key, &child));
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiBackend>(child);
  }

  std::unique_ptr<PendingOp> start(const OpArgs& a) override;

 private:
  std::unique_ptr<PendingOp> run(const OpArgs& a, bool blocking);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  bool cuda_aware_ = false;
};

std::unique_ptr<PendingOp> MpiBackend::start(const OpArgs& a) {
  // Point-to-point is always nonblocking so that a missing peer raises TimeoutError.
  const bool p2p = a.op == OpType::send || a.op == OpType::recv;
  return run(a, !a.async && !p2p);
}

std::unique_ptr<PendingOp> MpiBackend::run(const OpArgs& a, bool blocking) {
  const MPI_Datatype dt = mpi_datatype(a.dtype);
  const std::size_t es = dtype_size(a.dtype);
  const int n = as_int(a.count);
  // A synchronous call keeps its bookkeeping on the stack: no allocation on the fast path.
  MpiPending local;
  std::unique_ptr<MpiPending> heap;
  MpiPending* p = blocking ? &local : (heap = std::make_unique<MpiPending>()).get();
  MPI_Request* req = &p->request;
  const bool avg = is_reduction(a.op) && a.reduce == ReduceOp::avg;
  const MPI_Op op = is_reduction(a.op) ? mpi_op(a.reduce, a.dtype) : MPI_OP_NULL;
  auto divide = [dt = a.dtype, size = size_](void* data, std::size_t count) {
    divide_in_place(dt, data, count, size);
  };

  switch (a.op) {
    case OpType::send:
      if (a.tag > tag_ub_) throw UnsupportedError(fmt::format("send: tag {} exceeds MPI_TAG_UB {}", a.tag, tag_ub_));
      MCR_MPI_CHECK(MPI_Isend(a.in, n, dt, a.root, a.tag, comm_, req));
      break;
    case OpType::recv:
      if (a.tag > tag_ub_) throw UnsupportedError(fmt::format("recv: tag {} exceeds MPI_TAG_UB {}", a.tag, tag_ub_));
      MCR_MPI_CHECK(MPI_Irecv(a.out, n, dt, a.root, a.tag, comm_, req));
      break;
    case OpType::broadcast:
      if (blocking) MCR_MPI_CHECK(MPI_Bcast(a.out, n, dt, a.root, comm_));
      else MCR_MPI_CHECK(MPI_Ibcast(a.out, n, dt, a.root, comm_, req));
      break;
    case OpType::all_reduce: {
      const void* src = a.in_place ? MPI_IN_PLACE : a.in;
      if (blocking) MCR_MPI_CHECK(MPI_Allreduce(src, a.out, n, dt, op, comm_));
      else MCR_MPI_CHECK(MPI_Iallreduce(src, a.out, n, dt, op, comm_, req));
      if (avg) p->finish = [=] { divide(a.out, a.count); };
      break;
    }
    case OpType::reduce: {
      const bool root = rank_ == a.root;
      const void* src = (root && a.in_place) ? MPI_IN_PLACE : a.in;
      if (blocking) MCR_MPI_CHECK(MPI_Reduce(src, a.out, n, dt, op, a.root, comm_));
      else MCR_MPI_CHECK(MPI_Ireduce(src, a.out, n, dt, op, a.root, comm_, req));
      if (avg && root) p->finish = [=] { divide(a.out, a.count); };
      break;
    }
    case OpType::all_gather: {
      const void* src = a.in_place ? MPI_IN_PLACE : a.in;
      if (blocking) MCR_MPI_CHECK(MPI_Allgather(src, n, dt, a.out, n, dt, comm_));
      else MCR_MPI_CHECK(MPI_Iallgather(src, n, dt, a.out, n, dt, comm_, req));
      break;
    }
    case OpType::all_gather_v: {
      p->ints.resize(2 * static_cast<std::size_t>(size_));
      int* counts = p->ints.data();
      int* displs = counts + size_;
      std::size_t off = 0;
      for (int r = 0; r < size_; ++r) {
        counts[r] = as_int(a.send_counts[r]);
        displs[r] = as_int(off);
        off += a.send_counts[r];
      }
      const void* src = a.in_place ? MPI_IN_PLACE : a.in;
      if (blocking) MCR_MPI_CHECK(MPI_Allgatherv(src, counts[rank_], dt, a.out, counts, displs, dt, comm_));
      else MCR_MPI_CHECK(MPI_Iallgatherv(src, counts[rank_], dt, a.out, counts, displs, dt, comm_, req));
      break;
    }
    case OpType::gather: {
      const bool root = rank_ == a.root;
      const void* src = (root && a.in_place) ? MPI_IN_PLACE : a.in;
      if (blocking) MCR_MPI_CHECK(MPI_Gather(src, n, dt, a.out, n, dt, a.root, comm_));
      else MCR_MPI_CHECK(MPI_Igather(src, n, dt, a.out, n, dt, a.root, comm_, req));
      break;
    }
    case OpType::scatter: {
      const bool root = rank_ == a.root;
      void* dst = (root && a.in_place) ? MPI_IN_PLACE : a.out;
      if (blocking) MCR_MPI_CHECK(MPI_Scatter(a.in, n, dt, dst, n, dt, a.root, comm_));
      else MCR_MPI_CHECK(MPI_Iscatter(a.in, n, dt, dst, n, dt, a.root, comm_, req));
      break;
    }
    case OpType::reduce_scatter: {
      // In place (output = input's slot rank) goes through scratch: MPI's own in-place form leaves
      // the result at the start of the buffer instead.
      void* dst = a.out;
      if (a.in_place) {
        p->scratch.resize(a.count * es);
        dst = p->scratch.data();
      }
      if (blocking) MCR_MPI_CHECK(MPI_Reduce_scatter_block(a.in, dst, n, dt, op, comm_));
      else MCR_MPI_CHECK(MPI_Ireduce_scatter_block(a.in, dst, n, dt, op, comm_, req));
      auto* scratch = p->scratch.data();
      const bool in_place = a.in_place;
      if (in_place || avg) {
        p->finish = [=] {
          if (in_place) std::memcpy(a.out, scratch, a.count * es);
          if (avg) divide(a.out, a.count);
        };
      }
      break;
    }
    case OpType::all_to_all: {
      // Open MPI's nonblocking all-to-all treats sendbuf == recvbuf as in place and schedules it
      // differently; ranks must agree, so equal pointers (even of empty buffers) go through a copy.
      const void* src = a.in;
      if (a.in_place || a.in == a.out) {
        const std::size_t n_bytes = a.count * es * static_cast<std::size_t>(size_);
        p->scratch.assign(static_cast<const std::byte*>(a.in), static_cast<const std::byte*>(a.in) + n_bytes);
        if (p->scratch.empty()) p->scratch.resize(1);
        src = p->scratch.data();
      }
      if (blocking) MCR_MPI_CHECK(MPI_Alltoall(src, n, dt, a.out, n, dt, comm_));
      else MCR_MPI_CHECK(MPI_Ialltoall(src, n, dt, a.out, n, dt, comm_, req));
      break;
    }
    case OpType::all_to_all_v: {
      p->ints.resize(4 * static_cast<std::size_t>(size_));
      int* sc = p->ints.data();
      int* sd = sc + size_;
      int* rc = sd + size_;
      int* rd = rc + size_;
      std::size_t so = 0, ro = 0;
      for (int r = 0; r < size_; ++r) {
        sc[r] = as_int(a.send_counts[r]);
        sd[r] = as_int(so);
        so += a.send_counts[r];
        rc[r] = as_int(a.recv_counts[r]);
        rd[r] = as_int(ro);
        ro += a.recv_counts[r];
      }
      const void* src = a.in;
      if (a.in_place || a.in == a.out) {  // see all_to_all: never hand MPI equal pointers
        p->scratch.assign(static_cast<const std::byte*>(a.in), static_cast<const std::byte*>(a.in) + so * es);
        if (p->scratch.empty()) p->scratch.resize(1);
        src = p->scratch.data();
      }
      if (blocking) MCR_MPI_CHECK(MPI_Alltoallv(src, sc, sd, dt, a.out, rc, rd, dt, comm_));
      else MCR_MPI_CHECK(MPI_Ialltoallv(src, sc, sd, dt, a.out, rc, rd, dt, comm_, req));
      break;
    }
    case OpType::barrier:
      if (blocking) MCR_MPI_CHECK(MPI_Barrier(comm_));
      else MCR_MPI_CHECK(MPI_Ibarrier(comm_, req));
      break;
  }
  if (blocking) {
    if (p->finish) p->finish();
    return nullptr;
  }
  return heap;
}

std::string mpi_unusable(const Bootstrap& b) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin) {
    return fmt::format("no MPI world: launched by {} without an MPI launcher (MPI would form a wrong world)",
                       to_string(b.launch().launcher));
  }
  return {};
}

std::unique_ptr<Backend> mpi_create_world(Bootstrap&) {
  MPI_Comm comm = MPI_COMM_NULL;
  MCR_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  return std::make_unique<MpiBackend>(comm);
}

}  // namespace

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "MPI (version unknown)";
  std::string first(text, static_cast<std::size_t>(std::max(len, 0)));
  return first.substr(0, first.find_first_of(",\n"));  // "Open MPI v4.1.4"
}

BackendFactory mpi_backend_factory() {
  return {"mpi", &mpi_unusable, &mpi_create_world, &mpi_library_version, &mpi_launch_support};
}

}  // namespace mcr::detail
