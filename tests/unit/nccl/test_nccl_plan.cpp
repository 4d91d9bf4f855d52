// Host-side: group rank mapping for ncclCommSplit and the stream/event plan of every operation.
// Expected steps are derived by hand from the layouts documented in communicator.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "backends/nccl/nccl_ops.hpp"
#include "mcr/errors.hpp"
#include "plan_args.hpp"

namespace mcr::detail::nccl {
namespace {

// ---- groups
// ---------------------------------------------------------------------------------------

TEST(NcclSplit, StridedGroupRanksAreIndicesInMembers) {
  const std::vector<int> odd = {1, 3, 5, 7};  // a strided (DP-like) group of a world of 8
  for (int r = 0; r < 8; ++r) {
    const SplitArgs s = split_args(odd, r, 8);
    if (r % 2 == 1) {
      EXPECT_EQ(s.color, 1) << r;          // the first member
      EXPECT_EQ(s.key, (r - 1) / 2) << r;  // 1->0, 3->1, 5->2, 7->3
      EXPECT_EQ(group_rank(odd, r), (r - 1) / 2);
    } else {
      EXPECT_EQ(s.color, -1) << r;
      EXPECT_FALSE(group_rank(odd, r).has_value());
    }
  }
}

// split(rank % 2) of a world of 8 forms two groups in one ncclCommSplit: each rank passes its own
// group's members, and the groups must get different colors, or NCCL makes one group of all 8.
TEST(NcclSplit, DisjointGroupsOfOneSplitGetDifferentColors) {
  const std::vector<int> even = {0, 2, 4, 6};
  const std::vector<int> odd = {1, 3, 5, 7};
  for (int r = 0; r < 8; ++r) {
    const SplitArgs s = split_args(r % 2 == 0 ? even : odd, r, 8);
    EXPECT_EQ(s.color, r % 2 == 0 ? 0 : 1) << r;
    EXPECT_EQ(s.key, r / 2) << r;
  }
  // Groups listed in another order: the color follows the first member listed, on every member.
  const std::vector<int> low = {3, 0};
  const std::vector<int> high = {1, 2};
  EXPECT_EQ(split_args(low, 0, 4).color, split_args(low, 3, 4).color);
  EXPECT_EQ(split_args(high, 1, 4).color, split_args(high, 2, 4).color);
  EXPECT_NE(split_args(low, 0, 4).color, split_args(high, 1, 4).color);
}

TEST(NcclSplit, PermutedMembersKeepTheCallersOrder) {
  const std::vector<int> members = {6, 2, 4};
  EXPECT_EQ(split_args(members, 6, 8).key, 0);
  EXPECT_EQ(split_args(members, 2, 8).key, 1);
  EXPECT_EQ(split_args(members, 4, 8).key, 2);
}

TEST(NcclSplit, BadMembersAreRejectedWithTheValue) {
  try {
    (void)split_args(std::vector<int>{0, 8}, 0, 8);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("member rank 8 is outside the parent group [0, 8)"),
              std::string::npos);
  }
  EXPECT_THROW((void)split_args(std::vector<int>{2, 2}, 0, 4), InvalidArgument);
  EXPECT_THROW((void)split_args(std::vector<int>{-1}, 0, 4), InvalidArgument);
}

// ---- plans
// ----------------------------------------------------------------------------------------

constexpr Step order{StepKind::order_after_caller};
constexpr Step gstart{StepKind::group_start};
constexpr Step gend{StepKind::group_end};
constexpr Step done{StepKind::record_completion};

Step copy(Buffer sb, std::size_t so, Buffer db, std::size_t dof, std::size_t bytes) {
  return {StepKind::copy, {sb, so}, {db, dof}, bytes};
}
Step send(Buffer b, std::size_t off, std::size_t n, int peer) {
  return {StepKind::send, {b, off}, {}, n, peer};
}
Step recv(Buffer b, std::size_t off, std::size_t n, int peer) {
  return {StepKind::recv, {}, {b, off}, n, peer};
}
Step coll(BufferRef src, BufferRef dst, std::size_t n, int root = -1) {
  return {StepKind::collective, src, dst, n, root};
}

using mcr_test::device_args;
using mcr_test::g_out;

void expect_steps(const Plan& plan, const std::vector<Step>& expected) {
  ASSERT_EQ(plan.steps.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Step& a = plan.steps[i];
    const Step& e = expected[i];
    EXPECT_TRUE(a == e) << "step " << i << ": kind " << int(a.kind) << " vs " << int(e.kind)
                        << ", src " << int(a.src.buffer) << "@" << a.src.offset << " vs "
                        << int(e.src.buffer) << "@" << e.src.offset << ", dst " << int(a.dst.buffer)
                        << "@" << a.dst.offset << " vs " << int(e.dst.buffer) << "@" << e.dst.offset
                        << ", count " << a.count << " vs " << e.count << ", peer " << a.peer
                        << " vs " << e.peer;
  }
}

constexpr auto I = Buffer::input;
constexpr auto O = Buffer::output;
constexpr auto S = Buffer::scratch;

TEST(NcclPlan, NativeCollectivesAreOneCallBetweenTheEvents) {
  auto a = device_args(OpType::all_reduce, DType::f32, 10);
  expect_steps(plan_operation(a, 0, 4), {order, coll({I, 0}, {O, 0}, 10), done});
  a = device_args(OpType::broadcast, DType::i64, 3);
  a.root = 2;
  expect_steps(plan_operation(a, 1, 4), {order, coll({I, 0}, {O, 0}, 3, 2), done});
}

TEST(NcclPlan, InPlaceAllGatherReadsTheCallersSlot) {
  // rank 1, 4 f32 per rank: the slot starts at 1 * 4 * 4 = 16 bytes.
  auto a = device_args(OpType::all_gather, DType::f32, 4);
  a.in_place = true;
  a.in = nullptr;
  expect_steps(plan_operation(a, 1, 3), {order, coll({O, 16}, {O, 0}, 4), done});
}

TEST(NcclPlan, ReduceOffTheRootPassesTheSendBufferAsIgnoredRecvBuffer) {
  auto a = device_args(OpType::reduce, DType::f32, 5);
  a.root = 0;
  a.out = nullptr;
  expect_steps(plan_operation(a, 1, 2), {order, coll({I, 0}, {I, 0}, 5, 0), done});
}

TEST(NcclPlan, AllToAllVUsesDisplacementsAndCopiesTheOwnChunkLocally) {
  // rank 1 of 3, f32: send {2,1,3} -> displacements {0,2,3}; recv {1,1,2} -> {0,1,2}.
  const std::size_t sc[] = {2, 1, 3};
  const std::size_t rc[] = {1, 1, 2};
  auto a = device_args(OpType::all_to_all_v, DType::f32, 0);
  a.send_counts = sc;
  a.recv_counts = rc;
  expect_steps(plan_operation(a, 1, 3),
               {order, copy(I, 8, O, 4, 4), gstart, send(I, 0, 2, 0), recv(O, 0, 1, 0),
                send(I, 12, 3, 2), recv(O, 8, 2, 2), gend, done});
}

TEST(NcclPlan, InPlaceAllToAllSendsFromAStreamOrderedScratchCopy) {
  // rank 0 of 2, 3 f64 per peer: 6 * 8 = 48 bytes stashed; the peer's chunk is at 24.
  auto a = device_args(OpType::all_to_all, DType::f64, 3);
  a.in_place = true;
  a.in = a.out;
  const Plan p = plan_operation(a, 0, 2);
  EXPECT_EQ(p.scratch_bytes, 48u);
  expect_steps(p, {order,
                   {StepKind::alloc_scratch},
                   copy(O, 0, S, 0, 48),
                   gstart,
                   send(S, 24, 3, 1),
                   recv(O, 24, 3, 1),
                   gend,
                   {StepKind::free_scratch},
                   done});
}

TEST(NcclPlan, GatherOnRootReceivesEveryOtherSlot) {
  // root 2 of 3, 4 i32 per rank (16 bytes): own slot at 32.
  auto a = device_args(OpType::gather, DType::i32, 4);
  a.root = 2;
  expect_steps(plan_operation(a, 2, 3), {order, copy(I, 0, O, 32, 16), gstart, recv(O, 0, 4, 0),
                                         recv(O, 16, 4, 1), gend, done});
  a.out = nullptr;
  expect_steps(plan_operation(a, 0, 3), {order, gstart, send(I, 0, 4, 2), gend, done});
  a.out = g_out;
  a.in_place = true;  // the root's input already is its slot
  expect_steps(plan_operation(a, 2, 3),
               {order, gstart, recv(O, 0, 4, 0), recv(O, 16, 4, 1), gend, done});
}

TEST(NcclPlan, ScatterFromRootSendsEveryOtherSlot) {
  auto a = device_args(OpType::scatter, DType::u8, 5);
  a.root = 0;
  expect_steps(plan_operation(a, 0, 2),
               {order, copy(I, 0, O, 0, 5), gstart, send(I, 5, 5, 1), gend, done});
  expect_steps(plan_operation(a, 1, 2), {order, gstart, recv(O, 0, 5, 0), gend, done});
}

TEST(NcclPlan, AllGatherVExchangesWithEveryPeer) {
  // rank 2 of 3, counts {1,2,3}, bf16 (2 bytes): displacements {0,1,3} -> own slot at 6 bytes.
  const std::size_t counts[] = {1, 2, 3};
  auto a = device_args(OpType::all_gather_v, DType::bf16, 0);
  a.send_counts = counts;
  expect_steps(plan_operation(a, 2, 3),
               {order, copy(I, 0, O, 6, 6), gstart, send(I, 0, 3, 0), recv(O, 0, 1, 0),
                send(I, 0, 3, 1), recv(O, 2, 2, 1), gend, done});
  a.in_place = true;
  a.in = nullptr;
  expect_steps(plan_operation(a, 2, 3), {order, gstart, send(O, 6, 3, 0), recv(O, 0, 1, 0),
                                         send(O, 6, 3, 1), recv(O, 2, 2, 1), gend, done});
}

TEST(NcclPlan, PointToPointRefusesTags) {
  auto a = device_args(OpType::send, DType::f32, 8);
  a.root = 1;
  expect_steps(plan_operation(a, 0, 2), {order, send(I, 0, 8, 1), done});
  a.tag = 5;
  a.op_name = "send";
  try {
    (void)plan_operation(a, 0, 2);
    FAIL();
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL send with tag 5"), std::string::npos) << e.what();
  }
}

// NCCL fails the unmatched half of an exchange with itself and that aborts the communicator, so the
// plan refuses it before any NCCL call; the same send to another rank still plans.
TEST(NcclPlan, PointToPointWithItselfIsRefusedBeforeNccl) {
  for (OpType op : {OpType::send, OpType::recv}) {
    auto a = device_args(op, DType::f32, 8);
    a.op_name = to_string(op);
    a.root = 0;
    try {
      (void)plan_operation(a, 0, 1);
      FAIL() << a.op_name;
    } catch (const UnsupportedError& e) {
      EXPECT_NE(std::string(e.what()).find(
                    fmt::format("NCCL {} with itself (peer 0 is this rank)", a.op_name)),
                std::string::npos)
          << e.what();
    }
    a.root = 2;
    EXPECT_NO_THROW((void)plan_operation(a, 1, 3)) << a.op_name;
  }
}

TEST(NcclPlan, BarrierIsAOneElementAllReduceOnTheCell) {
  OpArgs a;
  a.op = OpType::barrier;
  expect_steps(plan_operation(a, 0, 3),
               {order, coll({Buffer::barrier_cell, 0}, {Buffer::barrier_cell, 0}, 1), done});
}

// Property: for random all_to_all_v layouts every plan is framed by the ordering events, sends each
// peer exactly its count from the right displacement, and receives into disjoint in-bounds ranges.
TEST(NcclPlan, RandomAllToAllVPlansAreConsistent) {
  const unsigned seed = 20240611u;
  std::mt19937 rng(seed);
  std::cout << "seed " << seed << "\n";
  for (int trial = 0; trial < 200; ++trial) {
    const int size = 1 + static_cast<int>(rng() % 8);
    const int rank = static_cast<int>(rng() % static_cast<unsigned>(size));
    std::vector<std::size_t> sc(size), rc(size);
    for (auto& c : sc)
      c = rng() % 5;
    for (auto& c : rc)
      c = rng() % 5;
    rc[rank] = sc[rank];  // the own chunk has one size
    auto a = device_args(OpType::all_to_all_v, DType::i32, 0);
    a.send_counts = sc.data();
    a.recv_counts = rc.data();
    a.in_place = (rng() % 2) == 1 && sc == rc;
    if (a.in_place) a.in = a.out;
    const Plan p = plan_operation(a, rank, size);
    ASSERT_EQ(p.steps.front().kind, StepKind::order_after_caller) << "trial " << trial;
    ASSERT_EQ(p.steps.back().kind, StepKind::record_completion) << "trial " << trial;
    const auto sd = displacements(sc.data(), size);
    const auto rd = displacements(rc.data(), size);
    std::vector<int> written(std::accumulate(rc.begin(), rc.end(), std::size_t{0}), 0);
    for (const Step& s : p.steps) {
      if (s.kind == StepKind::send) {
        EXPECT_EQ(s.count, sc[s.peer]);
        EXPECT_EQ(s.src.offset, sd[s.peer] * 4);
        EXPECT_EQ(s.src.buffer, a.in_place ? Buffer::scratch : Buffer::input);
      } else if (s.kind == StepKind::recv) {
        EXPECT_EQ(s.count, rc[s.peer]);
        EXPECT_EQ(s.dst.offset, rd[s.peer] * 4);
        for (std::size_t i = 0; i < s.count; ++i)
          ++written[s.dst.offset / 4 + i];
      } else if (s.kind == StepKind::copy && s.dst.buffer == Buffer::output) {
        for (std::size_t i = 0; i < s.count / 4; ++i)
          ++written[s.dst.offset / 4 + i];
      }
    }
    // Every output element is written exactly once (in place, the own chunk stays where it is).
    for (std::size_t i = 0; i < written.size(); ++i) {
      const bool own = i >= rd[rank] && i < rd[rank] + rc[rank];
      EXPECT_EQ(written[i], a.in_place && own ? 0 : 1) << "trial " << trial << " element " << i;
    }
  }
}

}  // namespace
}  // namespace mcr::detail::nccl
