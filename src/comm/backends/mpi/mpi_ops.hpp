// The MPI backend's operations: each OpArgs mapped onto MPI's blocking or nonblocking call, with
// the bookkeeping a nonblocking request needs until it completes (mpi_backend.cpp owns the
// communicator and decides which form to use).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "backend.hpp"
#include "backends/mpi/mpi_check.hpp"

namespace mcr::detail {

/// The communicator an operation runs on, with the facts about it the operations need.
struct MpiGroup {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int tag_ub = 32767;  ///< MPI_TAG_UB of the communicator
};

/// A request plus what must happen after it completes (avg scaling, copies out of scratch) and the
/// memory it must keep alive (count arrays, scratch buffers).
class MpiPending final : public PendingOp {
 public:
  MPI_Request request = MPI_REQUEST_NULL;
  std::function<void()> finish;
  std::vector<int> ints;
  std::vector<std::byte> scratch;
  bool cancellable = false;  ///< a receive: MPI_Cancel can withdraw it

  bool test() override {
    int flag = 0;
    MCR_MPI_CHECK(MPI_Test(&request, &flag, MPI_STATUS_IGNORE));
    if (flag && finish) {
      finish();
      finish = nullptr;
    }
    return flag != 0;
  }
  /// A receive is cancelled. A send or a nonblocking collective cannot be, and MPI may still
  /// write into the memory this object owns whenever it progresses (any later MPI call of the
  /// process, MPI_Finalize): that memory is kept for the life of the process, and MPI is not
  /// finalized after a failure (mpi_request_abandoned()).
  void abandon() noexcept override;
};

/// Whether this process abandoned an MPI request (a timed-out nonblocking operation): MPI may
/// still progress it, so MPI_Finalize is unsafe and may wait for peers that never come.
bool mpi_request_abandoned() noexcept;

/// Runs `a` on `g`: to completion when `blocking` (then returns nullptr), else returns the pending
/// request. Counts were checked against INT_MAX by selection (max_count()).
std::unique_ptr<PendingOp> run_op(const MpiGroup& g, const OpArgs& a, bool blocking);

}  // namespace mcr::detail
