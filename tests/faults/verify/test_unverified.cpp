// Ranks that disagree on an all_reduce's count, without MCR_VERIFY. MPI must raise BackendError on
// the op where it notices (the rank whose buffer is too small), never end the process; Gloo's I/O
// thread ends the job, which the GlooEndsJob case shows (run by its own ctest, which checks the
// message). Each case runs on a fresh split: a disagreement leaves the communicator out of step.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness.hpp"

namespace mcr::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Communicator fresh_with(std::string_view backend) {
  Communicator c = world().split(0, world().rank());
  const auto have = c.backends();
  if (std::find(have.begin(), have.end(), backend) == have.end()) return {};
  return c;
}

// Rank 0 reduces 4 elements, the others 5.
void mismatched_all_reduce(Communicator& c, std::string_view backend) {
  const std::size_t n = c.rank() == 0 ? 4 : 5;
  std::vector<float> data(n, 1.0f);
  CallOptions o;
  o.backend = backend;
  c.all_reduce(Tensor(data.data(), n, DType::f32), ReduceOp::sum, o);
}

// Rank 0 receives more than it posted: MPI_ERR_TRUNCATE, raised as BackendError on that op. The
// others' larger buffers take the shorter message without complaint (MCR_VERIFY catches that).
TEST(Unverified, MpiCountMismatchIsBackendErrorOnTheSmallerRank) {
  Communicator c = fresh_with("mpi");
  if (!c.valid()) GTEST_SKIP() << "no mpi";
  const auto t0 = Clock::now();
  try {
    mismatched_all_reduce(c, "mpi");
    EXPECT_NE(c.rank(), 0) << "rank 0 received 5 elements into 4 without an error";
  } catch (const BackendError& e) {
    EXPECT_EQ(c.rank(), 0) << e.what();
    const std::string m = e.what();
    for (const char* w :
         {"MPI_Allreduce", "mpi_ops.cpp:", "(rank 0)", "MPI error ", "MPI_ERR_TRUNCATE"})
      EXPECT_NE(m.find(w), std::string::npos) << "missing '" << w << "': " << m;
  }
  EXPECT_LT(Clock::now() - t0, 5s);
}

// Ends the job (see tests/faults/verify/CMakeLists.txt); never run by the np2 test.
TEST(GlooEndsJob, CountMismatch) {
  Communicator c = fresh_with("gloo");
  if (!c.valid()) GTEST_SKIP() << "no gloo";
  try {
    mismatched_all_reduce(c, "gloo");
    mismatched_all_reduce(c, "gloo");
  } catch (const Error& e) {
    fmt::print(stderr, "[{}] {}\n", rank_tag(), e.what());
  }
}

}  // namespace
}  // namespace mcr::test
