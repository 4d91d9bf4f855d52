// The world formed through a store given to init() (InitOptions::store), run with
// MCR_TEST_GIVEN_STORE set: under torchrun-style variables (the world exchange goes through the
// store) and under mpirun (MPI forms the world, the store serves the backends' rendezvous).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "file_store.hpp"
#include "harness.hpp"
#include "mcr/comm/info.hpp"

namespace mcr::test {
namespace {

// Every element of rank r's input is r + 1; the sum over `members` (world ranks) is checked
// against the value computed here.
void check_all_reduce(Communicator& c, const std::vector<int>& members, std::string_view backend) {
  std::vector<float> v(1000, static_cast<float>(world().rank() + 1));
  CallOptions o;
  o.backend = backend;
  c.all_reduce(Tensor(v), ReduceOp::sum, o);
  float want = 0;
  for (int m : members)
    want += static_cast<float>(m + 1);
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [&](float x) { return x == want; }))
      << rank_tag() << " backend '" << backend << "': got " << v.front() << ", want " << want;
}

std::vector<std::string> usable_flat_backends() {
  std::vector<std::string> out{""};  // "": mcr's own selection
  for (const auto& b : runtime_info().backends)
    if (b.usable && b.name != "hier") out.push_back(b.name);
  return out;
}

TEST(GivenStore, IsTheRendezvous) {
  ASSERT_NE(given_store(), nullptr) << "run with MCR_TEST_GIVEN_STORE=<dir>";
  const RuntimeInfo info = runtime_info();
  EXPECT_EQ(info.rendezvous, "file store");
  EXPECT_EQ(info.store_host, "") << "no TCP store was started";
  const bool mpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  EXPECT_EQ(info.world_exchange, mpi ? "mpi" : "store");
}

TEST(GivenStore, KeysAreUnderMcr) {
  ASSERT_NE(given_store(), nullptr);
  const auto keys = given_store()->keys();
  for (const auto& k : keys)
    EXPECT_TRUE(k.starts_with("mcr/")) << k;
  const std::string generation = fmt::format("mcr/generation/{}", world().rank());
  EXPECT_NE(std::find(keys.begin(), keys.end(), generation), keys.end()) << generation;
  EXPECT_TRUE(std::any_of(keys.begin(), keys.end(), [](const auto& k) {
    return k.starts_with("mcr/1/");
  })) << "the runtime's keys of this (first) init";
}

TEST(GivenStore, WorldAndGroupsWork) {
  const int size = world().size();
  std::vector<int> all(static_cast<std::size_t>(size));
  std::iota(all.begin(), all.end(), 0);
  for (const auto& backend : usable_flat_backends())
    check_all_reduce(world(), all, backend);

  // Group formation goes through the store (non-members do not take part).
  std::vector<int> reversed(all.rbegin(), all.rend());
  Communicator group = world().new_group(reversed);
  ASSERT_TRUE(group.valid());
  EXPECT_EQ(group.rank(), size - 1 - world().rank());
  check_all_reduce(group, all, "");

  Communicator alone = world().split(world().rank(), 0);
  ASSERT_TRUE(alone.valid());
  EXPECT_EQ(alone.size(), 1);
  check_all_reduce(alone, {world().rank()}, "");
}

}  // namespace
}  // namespace mcr::test
