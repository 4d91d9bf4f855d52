// MPI launch support: initialise MPI when an MPI launcher formed the world, exchange bytes over it,
// finalize, abort. Reaches the core as the MPI factory's LaunchSupport.
#include <fmt/format.h>

#include "backends/mpi/mpi_launch.hpp"
#include "backends/mpi/mpi_ops.hpp"
#include "bootstrap/bootstrap.hpp"
#include "core/log.hpp"
#include "mcr/errors.hpp"
#include "mpi_check.hpp"
#include "mpi_types.hpp"

namespace mcr::detail {
namespace {

bool g_we_initialized = false;

class MpiExchange final : public Exchange {
 public:
  MpiExchange() { MCR_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_)); }
  ~MpiExchange() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&comm_);
  }
  std::vector<Bytes> all_gather(const Bytes& mine) override {
    int size = 0;
    MCR_MPI_CHECK(MPI_Comm_size(comm_, &size));
    std::vector<int> lens(static_cast<std::size_t>(size));
    int my_len = static_cast<int>(mine.size());
    MCR_MPI_CHECK(MPI_Allgather(&my_len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_));
    std::vector<int> displs(lens.size());
    int total = 0;
    for (std::size_t i = 0; i < lens.size(); ++i) {
      displs[i] = total;
      total += lens[i];
    }
    Bytes all(static_cast<std::size_t>(total));
    MCR_MPI_CHECK(MPI_Allgatherv(mine.data(), my_len, MPI_BYTE, all.data(), lens.data(),
                                 displs.data(), MPI_BYTE, comm_));
    std::vector<Bytes> out;
    for (std::size_t i = 0; i < lens.size(); ++i) {
      out.emplace_back(all.begin() + displs[i], all.begin() + displs[i] + lens[i]);
    }
    return out;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

std::unique_ptr<Exchange> MpiLaunch::world_exchange(const LaunchInfo& launch) {
  // Only an MPI launcher's world is the job's. Under torchrun-style variables (or srun without
  // PMI) MPI_Init would form a world of one, and MPI the application brought up itself (mpi4py
  // imported under torchrun) is one already: checked first, as that case is initialized too.
  if (!launch.mpi_world && launch.launcher != Launcher::single) return nullptr;
  int init = 0;
  int fin = 0;
  MCR_MPI_CHECK(MPI_Initialized(&init));
  MCR_MPI_CHECK(MPI_Finalized(&fin));
  if (fin) {
    // init() after finalize(): MPI cannot be initialized twice, and any other MPI call now ends
    // the job. A process started alone forms its world of one without it (the MPI backend then
    // says it is unusable); a launched world has no way left to find its peers through MPI.
    if (launch.launcher == Launcher::single) return nullptr;
    throw Error(fmt::format(
        "MPI was finalized in this process (by mcr::finalize() or the application), and under {} "
        "mcr forms its world through MPI, which cannot be initialized twice: call mcr::init() once "
        "per process",
        to_string(launch.launcher)));
  }
  if (!init) {
    int provided = 0;
    // One thread at a time enters MPI, not always the same one: a binding may run an operation on
    // the thread that asked for it while its communication thread is idle (src/torch). Gloo and
    // NCCL progress on their own threads and never call MPI; the watchdog's MPI_Abort is the one
    // exception, and Open MPI allows it from any thread. Where MPI provides less (or the
    // application initialised it lower), any_thread_may_call() says so and bindings keep to one
    // thread.
    MCR_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
    g_we_initialized = true;
  }
  MCR_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rank = 0, size = 0;
  MCR_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MCR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (launch.launcher == Launcher::single && size > 1) {
    // A launcher whose variables mcr does not read (MPICH's or Intel MPI's Hydra): every process
    // took itself for rank 0 of 1, started a store of its own and connected to rank 0's as rank
    // 0. Every process sees the same and raises alike.
    throw InvalidArgument(fmt::format(
        "MPI formed a world of {} ranks, but none of the launcher variables mcr reads is set "
        "(Open MPI's OMPI_COMM_WORLD_RANK/SIZE, srun's SLURM_PROCID/SLURM_NTASKS, or RANK/"
        "WORLD_SIZE): start the job with Open MPI's mpirun or srun, or set RANK, WORLD_SIZE, "
        "MASTER_ADDR and MASTER_PORT",
        size));
  }
  if ((launch.launcher != Launcher::single && (rank != launch.rank || size != launch.size))) {
    throw MismatchError(
        fmt::format("MPI world (rank {} of {}) disagrees with the launcher environment ({}: rank "
                    "{} of {})",
                    rank, size, to_string(launch.launcher), launch.rank, launch.size));
  }
  return std::make_unique<MpiExchange>();
}

bool mpi_usable() noexcept {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

void MpiLaunch::shutdown() noexcept {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) free_mpi_user_ops();
  if (g_we_initialized && init && !fin) {
    // Nothing to raise to at shutdown, but said: a failed MPI_Finalize was silent.
    if (const int rc = MPI_Finalize(); rc != MPI_SUCCESS) {
      try {
        log_line(mpi_error_message("MPI_Finalize", __FILE__, __LINE__, rc));
      } catch (...) {  // NOLINT(bugprone-empty-catch): shutdown must not throw
      }
    }
  }
  g_we_initialized = false;
}

bool MpiLaunch::may_shut_down_after_failure() const noexcept {
  return !mpi_request_abandoned();
}

bool MpiLaunch::any_thread_may_call() const noexcept {
  if (!mpi_usable()) return true;
  int level = MPI_THREAD_SINGLE;
  if (MPI_Query_thread(&level) != MPI_SUCCESS) return false;
  return level >= MPI_THREAD_SERIALIZED;
}

void MpiLaunch::abort_job(int code) noexcept {
  if (mpi_usable()) MPI_Abort(MPI_COMM_WORLD, code);
}

LaunchSupport* mpi_launch_support() {
  static MpiLaunch launch;
  return &launch;
}

}  // namespace mcr::detail
