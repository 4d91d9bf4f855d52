// The Open MPI backend. Synchronous collectives call the blocking MPI function (the fastest path,
// guarded by the watchdog); asynchronous ones and all point-to-point use nonblocking MPI requests
// polled by the runtime, so they honour timeouts and progress while the caller waits elsewhere.
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <climits>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "backends/factories.hpp"
#include "backends/mpi/mpi_launch.hpp"
#include "backends/mpi/mpi_nbc.hpp"
#include "bootstrap/bootstrap.hpp"
#include "core/local_reduce.hpp"
#include "mcr/errors.hpp"
#include "mpi_check.hpp"
#include "mpi_ops.hpp"
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

class MpiBackend final : public Backend {
 public:
  MpiBackend(MPI_Comm comm) : cuda_aware_(cuda_aware()) {
    g_.comm = comm;
    MCR_MPI_CHECK(MPI_Comm_set_errhandler(g_.comm, MPI_ERRORS_RETURN));
    MCR_MPI_CHECK(MPI_Comm_rank(g_.comm, &g_.rank));
    MCR_MPI_CHECK(MPI_Comm_size(g_.comm, &g_.size));
    int flag = 0;
    int* ub = nullptr;
    MCR_MPI_CHECK(MPI_Comm_get_attr(g_.comm, MPI_TAG_UB, &ub, &flag));
    g_.tag_ub = (flag && ub) ? *ub : 32767;
  }
  ~MpiBackend() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&g_.comm);
  }

  std::string_view name() const noexcept override { return "mpi"; }
  int rank() const noexcept override { return g_.rank; }
  int size() const noexcept override { return g_.size; }
  std::size_t max_count() const noexcept override { return INT_MAX; }
  bool needs_host_progress() const noexcept override { return true; }
  bool blocks_device() const noexcept override { return false; }  // never given device memory

  Support supports(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) const override {
    // Device memory is never handed to MPI, CUDA-aware or not: the staging layer copies it through
    // pinned host memory on the caller's stream. Handed over directly, avg's division and the
    // in-place reduce_scatter and all_to_all copies ran on the host over device pointers, Open
    // MPI 4.1's nonblocking reductions apply the op on the host, and nothing ordered the call
    // after the caller's stream (NCCL is the direct path on GPUs).
    if (device == Device::Kind::cuda) {
      return Support::no(cuda_aware_ ? "device tensors are staged through host memory (the "
                                       "CUDA-aware path is not used)"
                                     : "this MPI library is not CUDA-aware "
                                       "(MPIX_Query_cuda_support() = 0)");
    }
    if (is_reduction(op) && !reduce_op_valid_for(reduce, dtype)) {
      return Support::no("reduce op not defined for this dtype");
    }
    if ((dtype == DType::f16 || dtype == DType::bf16) && is_reduction(op)) {
      return Support::yes("user-defined MPI op (widened to float)");
    }
    return Support::yes("native");
  }

  void progress() override {
    int flag = 0;
    MCR_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, g_.comm, &flag, MPI_STATUS_IGNORE));
  }

  std::unique_ptr<Backend> split(const std::vector<int>& members, std::uint64_t) override {
    int color = MPI_UNDEFINED, key = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (members[i] == g_.rank) key = static_cast<int>(i);
    }
    if (!members.empty())
      color = members.front();  // groups are disjoint: their first members differ
    MPI_Comm child = MPI_COMM_NULL;
    MCR_MPI_CHECK(MPI_Comm_split(g_.comm, color, key, &child));
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiBackend>(child);
  }

  // MPI_Comm_create_group is collective over the new group's members only. Its tag tells
  // concurrent creations on this communicator apart; group ids differ, and so do their tags
  // unless two ids collide modulo MPI_TAG_UB.
  std::unique_ptr<Backend> split_members(const std::vector<int>& members,
                                         std::uint64_t group_id) override {
    struct Groups {
      MPI_Group parent = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
      ~Groups() {
        if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
        if (parent != MPI_GROUP_NULL) MPI_Group_free(&parent);
      }
    } g;
    MCR_MPI_CHECK(MPI_Comm_group(g_.comm, &g.parent));
    MCR_MPI_CHECK(
        MPI_Group_incl(g.parent, static_cast<int>(members.size()), members.data(), &g.group));
    MPI_Comm child = MPI_COMM_NULL;
    const int tag = static_cast<int>(group_id % static_cast<std::uint64_t>(g_.tag_ub));
    MCR_MPI_CHECK(MPI_Comm_create_group(g_.comm, g.group, tag, &child));
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiBackend>(child);
  }

  std::unique_ptr<PendingOp> start(const OpArgs& a) override;

 private:
  MpiGroup g_;  // the communicator and its facts, handed to run_op as they are
  bool cuda_aware_ = false;
};

std::unique_ptr<PendingOp> MpiBackend::start(const OpArgs& a) {
  // Point-to-point is always nonblocking so that a missing peer raises TimeoutError.
  const bool p2p = a.op == OpType::send || a.op == OpType::recv;
  return run_op(g_, a, !a.async && !p2p);
}

std::string mpi_unusable(const Bootstrap& b) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (fin)
    return "MPI was finalized in this process (init() after finalize()), and cannot be used again";
  if (!init) {
    return fmt::format(
        "no MPI world: launched by {} without an MPI launcher (MPI would form a wrong world)",
        to_string(b.launch().launcher));
  }
  // MPI that the application brought up itself, without an MPI launcher (mpi4py imported under
  // torchrun), has a world of its own process only: every collective on it would return the
  // rank's own input. Only a world that is this job's can carry it.
  int rank = 0, size = 0;
  if (const int rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank); rc != MPI_SUCCESS) {
    return mpi_error_message("MPI_Comm_rank", __FILE__, __LINE__, rc);
  }
  if (const int rc = MPI_Comm_size(MPI_COMM_WORLD, &size); rc != MPI_SUCCESS) {
    return mpi_error_message("MPI_Comm_size", __FILE__, __LINE__, rc);
  }
  if (rank != b.launch().rank || size != b.launch().size) {
    return fmt::format(
        "MPI's world (rank {} of {}) is not this job's (rank {} of {}, launched by {}): the "
        "application initialized MPI without an MPI launcher",
        rank, size, b.launch().rank, b.launch().size, to_string(b.launch().launcher));
  }
  return {};
}

std::unique_ptr<Backend> mpi_create_world(Bootstrap&) {
  MPI_Comm comm = MPI_COMM_NULL;
  MCR_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  setup_libnbc_iallreduce_choice(comm);
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
