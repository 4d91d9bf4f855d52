// The all_to_all_v bound shared by the MPI backend and the verification: each kind of entry past
// the limit is found at the right peer with the right value, sends before receives, and an
// exchange that fits (the limit itself included) passes. And the verification's comparison of the
// v-ops' count tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/v_counts.hpp"
#include "observe/verify.hpp"

using mcr::detail::first_count_past_limit;

namespace {

using Counts = std::vector<std::size_t>;

std::string describe(const Counts& send, const Counts& recv, std::uint64_t limit) {
  const auto past = first_count_past_limit<std::size_t>(send, recv, limit);
  if (!past) return "fits";
  return std::string(past->what) + "[" + std::to_string(past->peer) +
         "]=" + std::to_string(past->value);
}

}  // namespace

TEST(VCountsPastLimit, ExactlyTheLimitFits) {
  EXPECT_EQ(describe({10, 0, 0}, {0, 10, 0}, 10), "fits");
  // Displacements reach the limit only: 5 + 5 = 10 is the third peer's displacement.
  EXPECT_EQ(describe({5, 5, 1}, {5, 5, 1}, 10), "fits");
}

TEST(VCountsPastLimit, EachKindAtItsPeer) {
  EXPECT_EQ(describe({1, 11, 0}, {0, 0, 0}, 10), "send_counts[1]=11");
  EXPECT_EQ(describe({6, 5, 0}, {0, 0, 0}, 10), "send displacement[2]=11");
  EXPECT_EQ(describe({0, 0, 0}, {0, 0, 12}, 10), "recv_counts[2]=12");
  EXPECT_EQ(describe({0, 0, 0}, {7, 7, 0}, 10), "recv displacement[2]=14");
}

TEST(VCountsPastLimit, SendsAreNamedBeforeReceivesAtTheSamePeer) {
  EXPECT_EQ(describe({0, 20}, {0, 30}, 10), "send_counts[1]=20");
  // An earlier peer wins over a later send.
  EXPECT_EQ(describe({0, 20}, {30, 0}, 10), "recv_counts[0]=30");
}

TEST(VCountsPastLimit, OneTableForAllGatherV) {
  EXPECT_EQ(describe({4, 4, 4}, {}, 8), "fits");
  EXPECT_EQ(describe({4, 5, 4}, {}, 8), "send displacement[2]=9");
}

TEST(VCountsPastLimit, SixtyFourBitCountsAtMpisIntLimit) {
  constexpr std::uint64_t kInt = 2147483647;
  const std::vector<std::uint64_t> send{kInt, 1, 0};
  const std::vector<std::uint64_t> recv{0, 0, 0};
  const auto past = first_count_past_limit<std::uint64_t>(send, recv, kInt);
  ASSERT_TRUE(past.has_value());
  EXPECT_STREQ(past->what, "send displacement");
  EXPECT_EQ(past->peer, 2U);
  EXPECT_EQ(past->value, kInt + 1);
}

// MCR_VERIFY's comparison of all_gather_v's counts decides on every rank's whole array: shown in
// part, counts that differed past the eighth rank compared equal, and 16 ranks ran mismatched.
TEST(VerifyVCounts, AllGatherVCountsDifferingPastTheEighthRankAreFound) {
  constexpr std::size_t n = 16;
  std::vector<std::vector<std::uint64_t>> all(n, std::vector<std::uint64_t>(2 * n, 0));
  for (auto& t : all)
    std::fill(t.begin(), t.begin() + n, 2);
  EXPECT_EQ(mcr::detail::compare_v_counts(mcr::OpType::all_gather_v, all), "");
  all[5][12] = 3;  // rank 5 thinks rank 12's block holds 3
  EXPECT_EQ(mcr::detail::compare_v_counts(mcr::OpType::all_gather_v, all),
            "counts differ: counts[12] (rank 12's block): ranks 0-4, 6-15 have 2, ranks 5 have 3");
}

TEST(VerifyVCounts, AllToAllVSendsAreMatchedToTheReceivers) {
  constexpr std::size_t n = 3;
  std::vector<std::vector<std::uint64_t>> all(n, std::vector<std::uint64_t>(2 * n, 1));
  EXPECT_EQ(mcr::detail::compare_v_counts(mcr::OpType::all_to_all_v, all), "");
  all[0][n + 1] = 2;  // rank 0 expects 2 from rank 1, which sends 1
  EXPECT_EQ(mcr::detail::compare_v_counts(mcr::OpType::all_to_all_v, all),
            "counts differ: rank 1 sends 1 to rank 0, which expects 2");
}
