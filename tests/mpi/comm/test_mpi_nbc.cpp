// MPI's nonblocking all_reduce through mcr with the algorithm mcr asks Open MPI's libnbc for, call
// by call (src/comm/backends/mpi/mpi_nbc.hpp): results against a reference computed here, at sizes
// on both sides of the 64 KiB threshold, in place and not, float and double; the value of the
// variable libnbc reads at the moment of each MPI_Iallreduce (this program interposes on it through
// MPI's profiling interface) and after it (the library's own choice again). Run without
// OMPI_MCA_coll_libnbc_iallreduce_algorithm (mcr chooses: Rabenseifner in place from 64 KiB at 2
// and 4 ranks, libnbc's own choice otherwise) and with it set to 2 by the ctest entry (the user's
// value stays, whatever the size).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "harness.hpp"

namespace mcr::test {
namespace {

// The value libnbc would read now, or -1 where this MPI has no such variable. The tools interface
// stays initialized to the end (MPI_T_finalize would only count the initializations down).
int libnbc_algorithm() {
  static const MPI_T_cvar_handle handle = [] {
    int provided = 0, index = -1, count = 0;
    MPI_T_cvar_handle h = MPI_T_CVAR_HANDLE_NULL;
    if (MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return h;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS) return h;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &h, &count) != MPI_SUCCESS)
      h = MPI_T_CVAR_HANDLE_NULL;
    return h;
  }();
  int value = -1;
  if (handle == MPI_T_CVAR_HANDLE_NULL || MPI_T_cvar_read(handle, &value) != MPI_SUCCESS) return -1;
  return value;
}

// The variable's value at each MPI_Iallreduce of this process, in order (mcr's communication
// thread records, the test thread reads after the operation's wait).
struct Seen {
  std::mutex mutex;
  std::vector<int> values;
};
Seen& seen() {
  static Seen s;
  return s;
}
int last_seen(std::size_t* calls) {
  std::lock_guard lock(seen().mutex);
  *calls = seen().values.size();
  return seen().values.empty() ? -1 : seen().values.back();
}

}  // namespace
}  // namespace mcr::test

// MPI's profiling interface: this definition takes the place of the library's for every caller in
// this program, mcr's backend included, and hands the call on to PMPI_Iallreduce.
extern "C" int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                              MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  const int value = mcr::test::libnbc_algorithm();
  {
    std::lock_guard lock(mcr::test::seen().mutex);
    mcr::test::seen().values.push_back(value);
  }
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

namespace mcr::test {
namespace {

// The value the user set, or -1 (mcr chooses).
int users_value() {
  const char* v = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
  return v == nullptr ? -1 : std::atoi(v);
}

// Element i of rank r: a small whole number, so that sums are exact in float.
template <class T>
T element(std::size_t i, int rank) {
  return static_cast<T>((i * 3 + static_cast<std::size_t>(rank) * 5) % 7 + 1);
}

template <class T>
void check_iall_reduce(std::size_t count, bool in_place) {
  Communicator& w = world();
  std::vector<T> in(count), out(count, T(-1));
  for (std::size_t i = 0; i < count; ++i)
    in[i] = element<T>(i, w.rank());
  CallOptions o;
  o.backend = "mpi";
  std::size_t calls_before = 0, calls = 0;
  last_seen(&calls_before);
  if (in_place) {
    w.iall_reduce(Tensor(in), ReduceOp::sum, o).wait();
  } else {
    w.iall_reduce(Tensor(in), Tensor(out), ReduceOp::sum, o).wait();
  }
  const std::vector<T>& got = in_place ? in : out;
  std::size_t wrong = 0, first = count;
  for (std::size_t i = 0; i < count; ++i) {
    T want = 0;
    for (int r = 0; r < w.size(); ++r)
      want += element<T>(i, r);
    if (got[i] != want) {
      if (wrong++ == 0) first = i;
    }
  }
  const std::size_t bytes = count * sizeof(T);
  EXPECT_EQ(wrong, 0u) << rank_tag() << " " << bytes << " bytes, " << (in_place ? "in" : "out of")
                       << " place: " << wrong << " wrong elements, the first at " << first;
  const int user = users_value();
  const std::string users = user >= 0 ? " (the user set " + std::to_string(user) + ")" : "";
  const int at_call = last_seen(&calls);
  ASSERT_EQ(calls, calls_before + 1) << rank_tag() << " MPI_Iallreduce calls for one operation";
  const bool power_of_two = (w.size() & (w.size() - 1)) == 0;
  EXPECT_EQ(at_call, user >= 0 ? user : (in_place && power_of_two && bytes >= 64 * 1024 ? 3 : 0))
      << rank_tag() << " libnbc's variable at MPI_Iallreduce of " << bytes << " bytes" << users;
  EXPECT_EQ(libnbc_algorithm(), user >= 0 ? user : 0)
      << rank_tag() << " libnbc's variable after a nonblocking all_reduce of " << bytes << " bytes"
      << users;
}

TEST(MpiNbc, LibnbcVariableExists) {
  // Open MPI is the MPI this project builds with; without the variable the rest proves nothing.
  ASSERT_GE(libnbc_algorithm(), 0) << "this MPI has no coll_libnbc_iallreduce_algorithm";
}

TEST(MpiNbc, FloatAcrossTheThreshold) {
  for (bool in_place : {true, false}) {
    for (std::size_t count : {1u, 16383u, 16384u, 16385u, 262147u, 4194305u, 5u})
      check_iall_reduce<float>(count, in_place);
  }
}

TEST(MpiNbc, DoubleAcrossTheThreshold) {
  for (bool in_place : {true, false}) {
    for (std::size_t count : {8191u, 8192u, 131075u, 3u})
      check_iall_reduce<double>(count, in_place);
  }
}

// A large nonblocking all_reduce on a group that only some ranks belong to, then what other code
// does on the whole world: a split (Open MPI agrees on the new communicator's id with libnbc's
// iallreduce on the parent) and the application's own MPI_Iallreduce on MPI_COMM_WORLD. Both
// read libnbc's variable, so they hang or go wrong unless it holds the same value on every rank,
// i.e. unless mcr's choice ends with the call it was made for.
TEST(MpiNbc, OtherCallersSeeTheLibrarysChoice) {
  Communicator& w = world();
  const int n = w.size();
  // Two ranks (a power of two, so mcr asks for its algorithm) where there are more than two.
  std::vector<int> members(static_cast<std::size_t>(n == 2 ? 1 : 2));
  for (std::size_t i = 0; i < members.size(); ++i)
    members[i] = static_cast<int>(i);
  Communicator g = w.new_group(members);
  if (g.valid()) {
    std::vector<float> big(1 << 18, 1.0f);  // 1 MiB: mcr asks for Rabenseifner's algorithm
    CallOptions o;
    o.backend = "mpi";
    g.iall_reduce(Tensor(big), ReduceOp::sum, o).wait();
    EXPECT_EQ(big[12345], static_cast<float>(members.size())) << rank_tag();
  }
  const int user = users_value();
  EXPECT_EQ(libnbc_algorithm(), user >= 0 ? user : 0)
      << rank_tag() << " after a group's 1 MiB nonblocking all_reduce"
      << (g.valid() ? " (a member)" : " (not a member)");

  Communicator halves = w.split(w.rank() % 2, w.rank());
  ASSERT_TRUE(halves.valid()) << rank_tag();
  EXPECT_EQ(halves.size(), (n + 1 - w.rank() % 2) / 2) << rank_tag();

  std::vector<float> mine(1 << 18);  // the application's own call, 1 MiB, not through mcr
  for (std::size_t i = 0; i < mine.size(); ++i)
    mine[i] = element<float>(i, w.rank());
  MPI_Request request = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Iallreduce(MPI_IN_PLACE, mine.data(), static_cast<int>(mine.size()), MPI_FLOAT,
                           MPI_SUM, MPI_COMM_WORLD, &request),
            MPI_SUCCESS);
  ASSERT_EQ(MPI_Wait(&request, MPI_STATUS_IGNORE), MPI_SUCCESS);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r)
      want += element<float>(i, r);
    if (mine[i] != want) ++wrong;
  }
  EXPECT_EQ(wrong, 0u) << rank_tag() << " the application's MPI_Iallreduce";
}

}  // namespace
}  // namespace mcr::test
