// A verification exchange given up at its timeout, with the peer arriving afterwards (docs/
// reliability.md, "Cross-rank verification"). The exchange is an all-gather on the verification
// channel that the library cannot recall: when the late peer arrives it completes, and its output
// (and input) buffers must still be the exchange's, never memory freed and handed out again.
//
// 2 ranks under mpiexec (the channel is an MPI communicator): rank 0 issues an all_reduce whose
// verification times out after 500 ms; rank 1 issues it 2 s late. Rank 0 then allocates canaries
// of the exchange's output size, so that one of them most likely takes the freed output block
// (glibc hands a freed small block out again to the next request of its size), and waits in an
// MPI barrier while rank 1's exchange completes against its own still posted one.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "mcr/comm.hpp"
#include "mcr/errors.hpp"

namespace mcr::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kDescriptorBytes = 48;  // the descriptor's size on the wire
constexpr std::size_t kCanaries = 256;
constexpr std::byte kCanary{0xA5};

TEST(VerifyLate, ExchangeGivenUpNeverWritesFreedMemory) {
  ASSERT_EQ(world().size(), 2) << "needs 2 ranks";
  ASSERT_TRUE(world().verifying()) << "run with MCR_VERIFY unset or first";
  const std::size_t out_bytes = kDescriptorBytes * 2;
  std::vector<std::unique_ptr<std::byte[]>> canaries;
  canaries.reserve(kCanaries);  // no allocation of the vector's own between the timeout and them
  std::vector<float> data(16, 1.0f);  // the caller's buffer outlives the test's waits
  {
    // A group of its own, so that the world stays usable for the barrier and the verdict.
    Communicator c = world().split(0, world().rank());
    ASSERT_TRUE(c.verifying());
    CallOptions o;
    o.backend = "mpi";
    o.timeout = c.rank() == 0 ? 500ms : 1000ms;
    if (c.rank() == 1) std::this_thread::sleep_for(2s);
    try {
      // Asynchronous: rank 1's operation, once verified, must time out, not block in MPI.
      c.iall_reduce(Tensor(data), ReduceOp::sum, o).wait();
      ADD_FAILURE() << "the all_reduce completed though rank 0 gave it up";
    } catch (const TimeoutError& e) {
      if (c.rank() == 0) {
        for (std::size_t i = 0; i < kCanaries; ++i) {
          canaries.push_back(std::make_unique_for_overwrite<std::byte[]>(out_bytes));
          std::fill_n(canaries.back().get(), out_bytes, kCanary);
        }
        EXPECT_EQ(std::string(e.backend()), "verify") << e.what();
      }
      std::printf("[%s] timed out as expected: %.160s\n", rank_tag().c_str(), e.what());
    } catch (const Error& e) {
      // Rank 1 may read a descriptor that differs (rank 0 no longer verifies this call).
      std::printf("[%s] failed: %.160s\n", rank_tag().c_str(), e.what());
      EXPECT_EQ(c.rank(), 1) << e.what();
    }
  }
  // Rank 1's exchange completes against rank 0's posted one while both wait here.
  CallOptions slow;
  slow.backend = "mpi";  // MPI's own wait progresses the abandoned exchange
  slow.timeout = 30s;
  world().barrier(slow);
  std::size_t changed = 0;
  for (const auto& canary : canaries) {
    changed += static_cast<std::size_t>(std::count_if(canary.get(), canary.get() + out_bytes,
                                                      [](std::byte b) { return b != kCanary; }));
  }
  EXPECT_EQ(changed, 0u) << "the late exchange wrote into memory that verification had freed ("
                         << changed << " bytes of the canaries changed)";
}

}  // namespace
}  // namespace mcr::test
