// A composed (hier) operation that times out with sub-operations in flight, at 4 ranks on 2
// simulated hosts (docs/reliability.md, "Lifetimes"). Its scratch buffers must outlive the
// sub-operations that still write into them when a late peer arrives, after the caller has
// dropped the handle; the memory freed with the handle must never be written.
//
// Ranks 0-2 issue an 8 MiB all_reduce on hier with a 1 s timeout; rank 3 issues it 2 s late. Rank
// 1's between-hosts step with rank 3 is in flight when rank 1 gives up; once rank 3 arrives, that
// step completes into the scratch of rank 1's composed operation. The runtime keeps freed memory
// on the heap for reuse (MCR_MALLOC_RETAIN), so freed scratch is handed out again: a late write
// into it changes a canary allocated after the timeout, or corrupts the heap (a crash).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "mcr/comm.hpp"
#include "mcr/errors.hpp"

namespace mcr::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kCount = std::size_t{2} << 20;  // 8 MiB of f32: two pieces of 4 MiB
constexpr std::byte kCanary{0xA5};

TEST(HierTimeout, LateStepsNeverWriteFreedScratch) {
  ASSERT_EQ(world().size(), 4) << "needs 4 ranks (2 simulated hosts of 2)";
  // The caller's buffer stays allocated throughout: a late step may write into it (a timed-out
  // operation's buffers are the library's until the process exits), and only the scratch is
  // under test.
  std::vector<float> data(kCount, static_cast<float>(world().rank() + 1));
  {
    // A group of its own, dropped after the timeout as an application drops a failed group: the
    // world stays usable for the barrier and the verdict.
    Communicator c = world().split(0, world().rank());
    const auto have = c.backends();
    ASSERT_NE(std::find(have.begin(), have.end(), "hier"), have.end())
        << "hier is not composed: run with MCR_HIER=...;simulate_ranks_per_host=2";
    const int rank = c.rank();
    CallOptions o;
    o.backend = "hier";
    o.timeout = rank == 3 ? 3000ms : 1000ms;
    if (rank == 3) std::this_thread::sleep_for(2s);
    try {
      c.iall_reduce(Tensor(data), ReduceOp::sum, o).wait();
      ADD_FAILURE() << "the all_reduce completed though rank 2 abandoned its part";
    } catch (const Error& e) {
      std::printf("[%s] all_reduce failed as expected: %.200s\n", rank_tag().c_str(), e.what());
    }
  }
  // Allocated right after the group, its composed operation and so its scratch were released.
  const std::size_t share_bytes = kCount / 2 * sizeof(float);
  auto canary = std::make_unique_for_overwrite<std::byte[]>(share_bytes);
  std::fill_n(canary.get(), share_bytes, kCanary);
  // Rank 3 arrives, its steps complete against the ranks' sub-operations still in flight, and it
  // times out in turn; the barrier's waits progress MPI meanwhile on every rank.
  CallOptions slow;
  slow.backend = "mpi";  // MPI's own wait progresses the sub-operations in flight; Gloo's would not
  slow.timeout = 30s;
  world().barrier(slow);
  const std::size_t changed = static_cast<std::size_t>(std::count_if(
      canary.get(), canary.get() + share_bytes, [](std::byte b) { return b != kCanary; }));
  EXPECT_EQ(changed, 0u) << "a late sub-operation wrote into memory the composed operation had "
                            "freed ("
                         << changed << " bytes of the canary changed)";
}

}  // namespace
}  // namespace mcr::test
