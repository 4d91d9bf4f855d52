// Host-side: staging layouts (pinned host buffer size, copy ranges, in-place aliasing), derived by
// hand from the buffer layouts in communicator.hpp.
#include <gtest/gtest.h>

#include "device/staging_plan.hpp"
#include "mcr/errors.hpp"
#include "plan_args.hpp"

namespace mcr::detail::device {
namespace {

void expect_copy(const StagedCopy& c, std::size_t device, std::size_t host, std::size_t bytes) {
  EXPECT_EQ(c.device_offset, device);
  EXPECT_EQ(c.host_offset, host);
  EXPECT_EQ(c.bytes, bytes);
}

using mcr_test::device_args;
using mcr_test::g_out;

TEST(StagingPlan, OutOfPlaceSplitsTheHostBufferAtAnAlignedOffset) {
  // all_gather, 10 f32 per rank, 3 ranks: 40 bytes in, 120 out; out starts at 256.
  const StagingPlan p = plan_staging(device_args(OpType::all_gather, DType::f32, 10), 1, 3);
  EXPECT_FALSE(p.in_place);
  EXPECT_EQ(p.host_in_offset, 0u);
  EXPECT_EQ(p.host_out_offset, 256u);
  EXPECT_EQ(p.host_bytes, 256u + 120u);
  expect_copy(p.copy_in, 0, 0, 40);
  expect_copy(p.copy_out, 0, 256, 120);
}

TEST(StagingPlan, InPlaceAllGatherMirrorsTheSlotInsideTheOutput) {
  std::vector<float> buf(30);
  auto a = device_args(OpType::all_gather, DType::f32, 10);
  a.in_place = true;
  a.out = buf.data();
  a.in = buf.data() + 10;  // rank 1's slot
  StagingPlan p = plan_staging(a, 1, 3);
  EXPECT_TRUE(p.in_place);
  EXPECT_EQ(p.host_bytes, 120u);
  EXPECT_EQ(p.host_in_offset, 40u);
  EXPECT_EQ(p.host_out_offset, 0u);
  expect_copy(p.copy_in, 0, 40, 40);  // relative to `in`
  expect_copy(p.copy_out, 0, 0, 120);
  // The same layout when the input is given only as the slot (no pointer).
  a.in = nullptr;
  p = plan_staging(a, 1, 3);
  expect_copy(p.copy_in, 40, 40, 40);  // relative to `out`
}

TEST(StagingPlan, InPlaceReduceScatterReturnsOnlyTheCallersSlot) {
  // rank 2 of 4, 3 f64 per rank: input 96 bytes, slot at 2 * 3 * 8 = 48.
  auto a = device_args(OpType::reduce_scatter, DType::f64, 3);
  a.in_place = true;
  a.out = nullptr;
  const StagingPlan p = plan_staging(a, 2, 4);
  EXPECT_EQ(p.host_bytes, 96u);
  EXPECT_EQ(p.host_in_offset, 0u);
  EXPECT_EQ(p.host_out_offset, 48u);
  expect_copy(p.copy_in, 0, 0, 96);
  expect_copy(p.copy_out, 48, 48, 24);  // relative to `in`
}

TEST(StagingPlan, BroadcastSendsFromRootAndReturnsElsewhere) {
  auto a = device_args(OpType::broadcast, DType::i32, 7);
  a.root = 1;
  StagingPlan p = plan_staging(a, 1, 2);
  EXPECT_EQ(p.host_bytes, 28u);
  expect_copy(p.copy_in, 0, 0, 28);
  EXPECT_EQ(p.copy_out.bytes, 0u);
  p = plan_staging(a, 0, 2);
  EXPECT_EQ(p.copy_in.bytes, 0u);
  expect_copy(p.copy_out, 0, 0, 28);
}

TEST(StagingPlan, RootedOpsMoveDataOnlyWhereItExists) {
  auto g = device_args(OpType::gather, DType::u8, 5);
  g.root = 0;
  g.out = nullptr;
  EXPECT_EQ(plan_staging(g, 1, 4).copy_out.bytes, 0u);
  EXPECT_EQ(staged_extents(g, 0, 4).out, 20u);
  auto s = device_args(OpType::scatter, DType::u8, 5);
  s.root = 0;
  EXPECT_EQ(staged_extents(s, 1, 4).in, 0u);
  EXPECT_EQ(staged_extents(s, 0, 4).in, 20u);
  auto r = device_args(OpType::reduce, DType::f32, 6);
  r.in_place = true;
  r.out = nullptr;  // non-root in-place reduce: no output at all
  const StagingPlan p = plan_staging(r, 1, 2);
  EXPECT_EQ(p.host_bytes, 24u);
  expect_copy(p.copy_in, 0, 0, 24);
  EXPECT_EQ(p.copy_out.bytes, 0u);
}

TEST(StagingPlan, SingleBufferReduceOffTheRootStagesOnlyTheInput) {
  // reduce(tensor, op, root): in == out on every rank, flagged in place; rank 1 is not the root.
  std::vector<float> buf(6);
  auto r = device_args(OpType::reduce, DType::f32, 6);
  r.root = 0;
  r.in_place = true;
  r.in = buf.data();
  r.out = buf.data();
  const StagingPlan p = plan_staging(r, 1, 2);
  EXPECT_EQ(p.host_bytes, 24u);
  expect_copy(p.copy_in, 0, 0, 24);
  EXPECT_EQ(p.copy_out.bytes, 0u);
  const StagingPlan root = plan_staging(r, 0, 2);
  expect_copy(root.copy_in, 0, 0, 24);
  expect_copy(root.copy_out, 0, 0, 24);
}

TEST(StagingPlan, VariableCountExtentsAreSums) {
  const std::size_t sc[] = {1, 2, 3};
  const std::size_t rc[] = {4, 5, 6};
  auto a = device_args(OpType::all_to_all_v, DType::f32, 0);
  a.send_counts = sc;
  a.recv_counts = rc;
  EXPECT_EQ(staged_extents(a, 0, 3).in, 6u);
  EXPECT_EQ(staged_extents(a, 0, 3).out, 15u);
  auto v = device_args(OpType::all_gather_v, DType::f32, 0);
  v.send_counts = sc;
  EXPECT_EQ(staged_extents(v, 1, 3).in, 2u);
  EXPECT_EQ(staged_extents(v, 1, 3).out, 6u);
}

TEST(StagingPlan, InPlaceInputOutsideTheOutputIsRejected) {
  std::vector<float> buf(40);
  auto a = device_args(OpType::all_gather, DType::f32, 10);
  a.in_place = true;
  a.out = buf.data();
  a.in = buf.data() + 25;  // 10 elements from 25 run past the 30-element output
  EXPECT_THROW((void)plan_staging(a, 1, 3), InvalidArgument);
}

}  // namespace
}  // namespace mcr::detail::device
