// MPI's part in bring-up and teardown (backend.hpp's LaunchSupport): MPI_Init when mpirun or srun
// formed the world, a world exchange over MPI, MPI_Finalize, MPI_Abort.
#pragma once

#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "core/backend.hpp"

namespace mcr::detail {

class MpiLaunch final : public LaunchSupport {
 public:
  std::unique_ptr<Exchange> world_exchange(const LaunchInfo& launch) override;
  void shutdown() noexcept override;
  bool may_shut_down_after_failure() const noexcept override;
  void abort_job(int code) noexcept override;
  bool any_thread_may_call() const noexcept override;
};

/// The process's one MpiLaunch.
LaunchSupport* mpi_launch_support();
/// Whether MPI is initialised and not yet finalized.
bool mpi_usable() noexcept;

}  // namespace mcr::detail
