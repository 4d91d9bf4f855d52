// Tuning-table construction: winner per size, hysteresis, merging, boundaries, round trip.
#include <gtest/gtest.h>

#include "mcr/bench.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

using namespace mcr;
using namespace mcr::bench;

namespace {
std::vector<TuningSample> series(OpType op,
                                 const std::vector<std::tuple<std::size_t, double, double>>& pts) {
  std::vector<TuningSample> out;
  for (auto [bytes, mpi, gloo] : pts) {
    out.push_back({op, "float", 2, bytes, "mpi", mpi});
    out.push_back({op, "float", 2, bytes, "gloo", gloo});
  }
  return out;
}
}  // namespace

TEST(BuildEntries, MergesAdjacentSizesWithTheSameWinner) {
  // mpi wins 4..16, gloo wins 64..256 by far: two ranges, boundary at sqrt(16*64) = 32.
  auto s = series(OpType::all_reduce, {{4, 1, 9}, {16, 1, 9}, {64, 9, 1}, {256, 9, 1}});
  auto e = build_entries(s, 0.03);
  ASSERT_EQ(e.size(), 1u);
  ASSERT_EQ(e[0].ranges.size(), 2u);
  EXPECT_EQ(e[0].ranges[0], (TuningRange{0, 31, "mpi"}));
  EXPECT_EQ(e[0].ranges[1], (TuningRange{32, kMaxBytes, "gloo"}));
  EXPECT_EQ(e[0].dtype_class, "float");
  EXPECT_EQ(e[0].group_size, 2);
  TuningTable t;
  t.entries = e;
  EXPECT_TRUE(t.validate(backend_names()).empty());
  EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::f32, 2, 31), "mpi");
  EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::f32, 2, 32), "gloo");
}

TEST(BuildEntries, HysteresisKeepsTheNeighbouringWinnerWithinTheMargin) {
  // At 64 B gloo is 2% faster (inside a 3% margin): mpi keeps it. At 256 B gloo is 10% faster.
  auto s = series(OpType::all_reduce, {{4, 1.00, 2.00}, {64, 1.00, 0.98}, {256, 1.00, 0.90}});
  auto with = build_entries(s, 0.03);
  ASSERT_EQ(with[0].ranges.size(), 2u);
  EXPECT_EQ(with[0].ranges[0].backend, "mpi");
  EXPECT_EQ(with[0].ranges[1].min_bytes, 128u);  // sqrt(64 * 256)
  // Without a margin the 2% win flips the choice already at 64 B.
  auto without = build_entries(s, 0.0);
  ASSERT_EQ(without[0].ranges.size(), 2u);
  EXPECT_EQ(without[0].ranges[1].min_bytes, 16u);  // sqrt(4 * 64)
  EXPECT_THROW(build_entries(s, 1.5), InvalidArgument);
}

TEST(BuildEntries, NoiseDoesNotFlipBackAndForth) {
  auto s = series(OpType::broadcast,
                  {{4, 1.00, 1.01}, {8, 1.00, 0.99}, {16, 1.00, 1.02}, {32, 1.00, 0.985}});
  auto e = build_entries(s, 0.03);
  ASSERT_EQ(e[0].ranges.size(), 1u);
  EXPECT_EQ(e[0].ranges[0], (TuningRange{0, kMaxBytes, "mpi"}));
}

TEST(BuildEntries, SendIsMirroredToRecvAndFailedPointsIgnored) {
  std::vector<TuningSample> s{{OpType::send, "any", 2, 4, "mpi", 1.0},
                              {OpType::send, "any", 2, 4, "gloo", 0.0},  // not measured
                              {OpType::barrier, "any", 2, 0, "gloo", 3.0},
                              {OpType::barrier, "any", 2, 0, "mpi", 2.0}};
  auto e = build_entries(s, 0.03);
  ASSERT_EQ(e.size(), 3u);
  TuningTable t;
  t.entries = e;
  EXPECT_EQ(*t.lookup(OpType::send, DType::f32, 2, 1 << 20), "mpi");
  EXPECT_EQ(*t.lookup(OpType::recv, DType::i64, 2, 4), "mpi");
  EXPECT_EQ(*t.lookup(OpType::barrier, DType::f32, 2, 0), "mpi");
}

TEST(BuildEntries, TableRoundTripsThroughJson) {
  TuningTable t;
  t.provenance = {{"hosts", "h1"}, {"ranks", "2"}, {"command", "mcr tune -o t.json"}};
  t.samples = series(OpType::all_gather, {{8, 2, 1}, {1024, 1, 3}});
  t.entries = build_entries(t.samples, 0.03);
  const auto back = TuningTable::parse_json(t.to_json());
  EXPECT_EQ(back.entries, t.entries);
  EXPECT_EQ(back.samples, t.samples);
  EXPECT_EQ(back.provenance, t.provenance);
  EXPECT_EQ(back.selection_hash(), t.selection_hash());
  EXPECT_TRUE(validate_table_text(t.to_json()).empty());
}

TEST(BuildEntries, OneEntryPerFormWithItsOwnWinners) {
  // The blocking call is faster on gloo at 16 MiB, the asynchronous one on mpi (several in flight
  // progress side by side): two entries, each naming its form.
  std::vector<TuningSample> s;
  for (auto [form, mpi, gloo] : {std::tuple{"sync", 9.0, 1.0}, std::tuple{"async", 1.0, 9.0}}) {
    s.push_back({OpType::all_reduce, "float", 4, 1 << 24, "mpi", mpi, 2, 2, form});
    s.push_back({OpType::all_reduce, "float", 4, 1 << 24, "gloo", gloo, 2, 2, form});
  }
  TuningTable t;
  t.entries = build_entries(s, 0.03);
  ASSERT_EQ(t.entries.size(), 2u);
  EXPECT_TRUE(t.validate(backend_names()).empty());
  const HostShape shape{2, 2};
  EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::f32, 4, shape, 1 << 24, CallForm::sync), "gloo");
  EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::f32, 4, shape, 1 << 24, CallForm::async), "mpi");
}
