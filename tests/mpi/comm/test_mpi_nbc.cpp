// MPI's nonblocking all_reduce through mcr with the algorithm mcr asks Open MPI's libnbc for, call
// by call (src/comm/backends/mpi/mpi_nbc.hpp): results against a reference computed here, at sizes
// on both sides of the 64 KiB threshold, in place and not, float and double; and the variable
// libnbc reads, read back through the MPI tools interface after each call. Run without
// OMPI_MCA_coll_libnbc_iallreduce_algorithm (mcr chooses: Rabenseifner from 64 KiB, libnbc's own
// choice below) and with it set to 2 by the ctest entry (the user's value stays, whatever the
// size).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "harness.hpp"

namespace mcr::test {
namespace {

// The value libnbc would read now.
int libnbc_algorithm() {
  int provided = 0;
  EXPECT_EQ(MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided), MPI_SUCCESS);
  int index = -1;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS) return -1;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  int count = 0, value = -1;
  EXPECT_EQ(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count), MPI_SUCCESS);
  EXPECT_EQ(MPI_T_cvar_read(handle, &value), MPI_SUCCESS);
  MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  return value;
}

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
  const int want_algorithm = user >= 0 ? user : (bytes >= 64 * 1024 ? 3 : 0);
  EXPECT_EQ(libnbc_algorithm(), want_algorithm)
      << rank_tag() << " after a nonblocking all_reduce of " << bytes << " bytes"
      << (user >= 0 ? " (the user set " + std::to_string(user) + ")" : std::string());
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

}  // namespace
}  // namespace mcr::test
