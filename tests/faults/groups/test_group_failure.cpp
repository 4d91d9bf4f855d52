// A group that one rank's library fails to form (docs/reliability.md, "Forming groups"). With
// several backends the ranks form the group library by library; a library that failed on one rank
// must make every rank raise, never send the others into the next library's formation, which
// (MPI_Comm_split, MPI_Comm_create_group, ncclCommSplit) waits for every rank without a bound.
//
// The failure is a real one: rank 0 runs out of file descriptors (RLIMIT_NOFILE lowered to what it
// has open), so Gloo cannot open the new group's connections there.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "harness.hpp"
#include "mcr/comm.hpp"
#include "mcr/errors.hpp"

namespace mcr::test {
namespace {

// The descriptor the next open() would get: the lowest one not in use.
int lowest_free_descriptor() {
  const int fd = ::dup(0);
  if (fd >= 0) ::close(fd);
  return fd;
}

// Lowers this process's descriptor limit until the scope ends, so that no new descriptor can be
// opened: a new one takes the lowest free number, which must be below the limit.
class NoNewDescriptors {
 public:
  NoNewDescriptors() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit tight = saved_;
    tight.rlim_cur = static_cast<rlim_t>(lowest_free_descriptor());
    if (::setrlimit(RLIMIT_NOFILE, &tight) != 0) std::perror("setrlimit");
  }
  ~NoNewDescriptors() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  NoNewDescriptors(const NoNewDescriptors&) = delete;
  NoNewDescriptors& operator=(const NoNewDescriptors&) = delete;

 private:
  rlimit saved_{};
};

// The ranks raise as soon as one has failed; a rank may still be inside Gloo's rendezvous for a
// while (it waits up to 5 timeouts for a connection), so the next call waits for it that long.
void resynchronize() {
  CallOptions o;
  o.timeout = std::chrono::seconds(60);
  world().barrier(o);
}

TEST(GroupFailure, SplitRaisesOnEveryRank) {
  ASSERT_EQ(world().size(), 3);
  const auto have = world().backends();
  ASSERT_EQ(have.size(), 2u) << "run with MCR_BACKENDS=gloo,mpi";
  ASSERT_EQ(have[0], "gloo");
  const int rank = world().rank();
  std::string error;
  try {
    std::optional<NoNewDescriptors> limit;
    if (rank == 0) limit.emplace();
    // Ranks 0 and 1 form a group; rank 2 takes part in the split as a non-member.
    Communicator c = world().split(rank < 2 ? 0 : Communicator::kUndefinedColor, rank);
  } catch (const Error& e) {
    error = e.what();
  }
  std::printf("[%s] split: %s\n", rank_tag().c_str(), error.empty() ? "formed" : error.c_str());
  EXPECT_FALSE(error.empty()) << "the split went on although Gloo failed on rank 0";
  // The world is still usable, on every rank, and so is splitting it.
  resynchronize();
  std::vector<int> v{rank};
  world().all_reduce(Tensor(v), ReduceOp::sum);
  EXPECT_EQ(v[0], 3);
  Communicator pair = world().split(rank < 2 ? 0 : 1, rank);
  ASSERT_EQ(pair.backends().size(), 2u);
  std::vector<int> w{rank + 1};
  pair.all_reduce(Tensor(w), ReduceOp::sum);
  EXPECT_EQ(w[0], 3);  // ranks 0 and 1: 1 + 2; rank 2 alone: 3
}

TEST(GroupFailure, MemberGroupRaisesOnEveryMember) {
  const int rank = world().rank();
  const std::vector<int> members{0, 1, 2};
  std::string error;
  try {
    std::optional<NoNewDescriptors> limit;
    if (rank == 1) limit.emplace();
    Communicator c = world().member_group(members, "all");
  } catch (const Error& e) {
    error = e.what();
  }
  std::printf("[%s] member_group: %s\n", rank_tag().c_str(),
              error.empty() ? "formed" : error.c_str());
  EXPECT_FALSE(error.empty()) << "member_group formed although Gloo failed on rank 1";
  resynchronize();
  Communicator again = world().member_group(members, "again");
  std::vector<int> v{rank};
  again.all_reduce(Tensor(v), ReduceOp::sum);
  EXPECT_EQ(v[0], 3);
}

}  // namespace
}  // namespace mcr::test
