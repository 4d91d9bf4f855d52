// The MPI backend's operations: each OpArgs mapped onto MPI's blocking or nonblocking call, with
// the bookkeeping a nonblocking request needs until it completes (mpi_backend.cpp owns the
// communicator and decides which form to use).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "backends/mpi/mpi_check.hpp"
#include "core/backend.hpp"

namespace mcr::detail {

/// The communicator an operation runs on, with the facts about it the operations need.
struct MpiGroup {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int tag_ub = 32767;  ///< MPI_TAG_UB of the communicator
};

/// What must happen once an operation's data has arrived: copy the result out of scratch
/// (in-place reduce_scatter), then divide it by the group size (avg). Plain data rather than a
/// callable, so that a blocking call applies it on the spot without building or allocating one.
struct MpiFinish {
  void* copy_to = nullptr;  ///< non-null: copy copy_bytes from copy_from here
  const void* copy_from = nullptr;
  std::size_t copy_bytes = 0;
  void* divide = nullptr;  ///< non-null: divide divide_count elements of dtype here by divisor
  std::size_t divide_count = 0;
  DType dtype = DType::f32;
  int divisor = 1;

  /// Inline: most operations have nothing to do, and this test is all they pay.
  void run() const noexcept {
    if (copy_to != nullptr || divide != nullptr) apply();
  }

 private:
  void apply() const noexcept;
};

/// Memory an operation reads or writes until it completes: count arrays, scratch.
struct MpiBuffers {
  std::vector<int> ints;
  std::vector<std::byte> scratch;
};

/// A request plus what must happen after it completes and the memory it must keep alive.
class MpiPending final : public PendingOp {
 public:
  MPI_Request request = MPI_REQUEST_NULL;
  MpiFinish finish;
  MpiBuffers buffers;
  bool cancellable = false;  ///< a receive: MPI_Cancel can withdraw it

  bool test() override {
    int flag = 0;
    MCR_MPI_CHECK(MPI_Test(&request, &flag, MPI_STATUS_IGNORE));
    if (flag) {
      finish.run();
      finish = {};
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
/// request. Send and recv run nonblocking whatever `blocking` says (a missing peer must time
/// out). Counts were checked against INT_MAX by selection (max_count()).
std::unique_ptr<PendingOp> run_op(const MpiGroup& g, const OpArgs& a, bool blocking);

}  // namespace mcr::detail
