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

TEST(BuildEntries, SeveralNumbersInFlightGoToTheBackendThatLosesLeast) {
  // 16 MiB all_reduce on 2 x 2 hosts, async form, timed with 4 and with 16 in flight (the shape of
  // a cluster's tune): hier is 4% faster with 4 in flight, MPI 19% faster with 16. Each alone
  // names its own winner; both together name MPI, whose worst slowdown (1.04) is smaller than
  // hier's (1.19).
  auto at = [](int depth, double mpi, double hier) {
    return std::vector<TuningSample>{
        {OpType::all_reduce, "float", 4, 1 << 24, "mpi", mpi, 2, 2, "async", depth},
        {OpType::all_reduce, "float", 4, 1 << 24, "hier", hier, 2, 2, "async", depth}};
  };
  const auto four = at(4, 164.0, 157.6);
  const auto sixteen = at(16, 219.0, 261.0);
  const HostShape shape{2, 2};
  auto winner = [&](const std::vector<TuningSample>& s) {
    TuningTable t;
    t.entries = build_entries(s, 0.03);
    EXPECT_EQ(t.entries.size(), 1u);  // one entry per form, whatever the numbers in flight
    EXPECT_TRUE(t.validate(backend_names()).empty());
    return *t.lookup(OpType::all_reduce, DType::f32, 4, shape, 1 << 24, CallForm::async);
  };
  EXPECT_EQ(winner(four), "hier");
  EXPECT_EQ(winner(sixteen), "mpi");
  auto both = four;
  both.insert(both.end(), sixteen.begin(), sixteen.end());
  EXPECT_EQ(winner(both), "mpi");
}

TEST(BuildEntries, SeveralNumbersInFlightKeepTheMarginAndTheSamples) {
  // 1 MiB: MPI fastest at both numbers. 16 MiB: hier 2% and 1% faster, within the 3% margin, so
  // MPI keeps it; at 10% faster at both hier would take it.
  auto sample = [](std::size_t bytes, int depth, const char* backend, double us) {
    return TuningSample{OpType::all_reduce, "float", 4, bytes, backend, us, 2, 2, "async", depth};
  };
  std::vector<TuningSample> s{sample(1 << 20, 4, "mpi", 10),   sample(1 << 20, 4, "hier", 20),
                              sample(1 << 20, 16, "mpi", 10),  sample(1 << 20, 16, "hier", 20),
                              sample(1 << 24, 4, "mpi", 102),  sample(1 << 24, 4, "hier", 100),
                              sample(1 << 24, 16, "mpi", 101), sample(1 << 24, 16, "hier", 100)};
  auto e = build_entries(s, 0.03);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].ranges, (std::vector<TuningRange>{{0, kMaxBytes, "mpi"}}));
  s[4].time_us = s[6].time_us = 111;
  e = build_entries(s, 0.03);
  ASSERT_EQ(e.size(), 1u);
  ASSERT_EQ(e[0].ranges.size(), 2u);
  EXPECT_EQ(e[0].ranges[1].backend, "hier");
  // The numbers in flight survive the file; a bad one is refused, naming the sample.
  TuningTable t;
  t.samples = s;
  t.entries = e;
  const auto back = TuningTable::parse_json(t.to_json());
  EXPECT_EQ(back.samples, t.samples);
  EXPECT_EQ(back.samples[7].in_flight, 16);
  std::string text = t.to_json();
  const auto at = text.find("\"in_flight\": 16");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("\"in_flight\": 16").size(), "\"in_flight\": 0");
  const auto problems = validate_table_text(text);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems.front().find("\"in_flight\" must be a whole number of operations >= 1, not 0"),
            std::string::npos)
      << problems.front();
}

// A backend that computed wrong values at one size (here gloo at 64 bytes, with the blocking form)
// is left out of that op, class, group and form at every size: it would otherwise win 256 bytes
// and the range around it. Its samples of another op or form stay.
TEST(BuildEntries, ABackendThatComputedWrongValuesIsLeftOutOfItsOpAndForm) {
  auto s = series(OpType::all_reduce, {{4, 1, 9}, {256, 9, 1}});
  for (auto& x : s)
    x.form = "sync";
  auto other_form = series(OpType::all_reduce, {{4, 9, 1}});
  for (auto& x : other_form)
    x.form = "async";
  auto other_op = series(OpType::broadcast, {{4, 9, 1}});
  s.insert(s.end(), other_form.begin(), other_form.end());
  s.insert(s.end(), other_op.begin(), other_op.end());
  TuningSample erred{OpType::all_reduce, "float", 2, 64, "gloo", 0};
  erred.form = "sync";
  const auto kept = without_wrong_backends(s, {erred});
  EXPECT_EQ(kept.size(), s.size() - 2);
  const auto entries = build_entries(kept, 0.03);
  ASSERT_EQ(entries.size(), 3u);  // all_reduce sync and async, and the other op
  for (const auto& e : entries) {
    ASSERT_EQ(e.ranges.size(), 1u) << to_string(e.op) << " " << e.form;
    EXPECT_EQ(e.ranges[0].backend, e.op == OpType::all_reduce && e.form == "sync" ? "mpi" : "gloo")
        << to_string(e.op) << " " << e.form;
  }
}
