// Communication costs: group placement, the α-β formulas, and measured tables with the runtime's
// selection order (rules, tuning table, default priority).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "mcr/errors.hpp"
#include "mcr/plan/comm_model.hpp"
#include "mcr/plan/planner.hpp"
#include "test_helpers.hpp"

namespace mcr::plan {
namespace {

using test::round_system;

TEST(PlanComm, PlacementFollowsMegatronRankOrder) {
  auto p = place_group(8, 1, 8);  // a TP group fills a node
  EXPECT_EQ(p.per_node, 8);
  EXPECT_EQ(p.nodes, 1);
  p = place_group(4, 8, 8);  // DP across nodes when tp = 8
  EXPECT_EQ(p.per_node, 1);
  EXPECT_EQ(p.nodes, 4);
  p = place_group(8, 2, 8);  // tp = 2: four replicas per node, two nodes
  EXPECT_EQ(p.per_node, 4);
  EXPECT_EQ(p.nodes, 2);
}

TEST(PlanComm, RingFormulasInsideANode) {
  SystemSpec s = round_system();
  s.intra.latency_us = 2;
  CommModel c(s);
  const double S = 1e9, B = 100e9;
  const Placement p{8, 8, 1};
  EXPECT_NEAR(c.alpha_beta(Collective::all_reduce, S, p), 2 * 7.0 / 8 * S / B + 2 * 7 * 2e-6,
              1e-12);
  EXPECT_NEAR(c.alpha_beta(Collective::all_gather, S, p), 7.0 / 8 * S / B + 7 * 2e-6, 1e-12);
  EXPECT_NEAR(c.alpha_beta(Collective::p2p, S, Placement{2, 2, 1}), S / B + 2e-6, 1e-12);
  EXPECT_NEAR(c.alpha_beta(Collective::p2p, S, Placement{2, 1, 2}), S / 10e9, 1e-12);
}

TEST(PlanComm, HierarchicalAcrossNodes) {
  // 4 ranks per node on 2 nodes: reduce-scatter and all-gather inside the node on S, the
  // inter-node all-reduce on S / 4 per GPU.
  CommModel c(round_system());
  const double S = 1e9;
  const double expected = 2 * (3.0 / 4 * S / 100e9) + 2 * (1.0 / 2 * (S / 4) / 10e9);
  EXPECT_NEAR(c.alpha_beta(Collective::all_reduce, S, Placement{8, 4, 2}), expected, 1e-12);
}

TuningTable two_backend_table() {
  TuningTable t;
  TuningEntry e;
  e.op = OpType::all_reduce;
  e.dtype_class = "float";
  e.group_size = 2;
  e.ranges = {{0, 1023, "mpi"}, {1024, kMaxBytes, "gloo"}};
  t.entries.push_back(e);
  for (std::size_t bytes : {16u, 1024u, 4096u}) {
    t.samples.push_back({OpType::all_reduce, "float", 2, bytes, "mpi", 1.0 + bytes / 100.0});
    t.samples.push_back({OpType::all_reduce, "float", 2, bytes, "gloo", 5.0 + bytes / 1000.0});
  }
  return t;
}

TEST(PlanComm, TableChoosesTheBackendAndInterpolates) {
  CommModel c(round_system(1, 2), false);
  c.add_table(Tier::any, two_backend_table());
  const Placement p{2, 2, 1};
  auto small = c.cost(Collective::all_reduce, 16, p, DType::f32);
  EXPECT_EQ(small.backend, "mpi");
  EXPECT_NEAR(small.time_s, 1.16e-6, 1e-12);
  auto big = c.cost(Collective::all_reduce, 4096, p, DType::f32);
  EXPECT_EQ(big.backend, "gloo");
  EXPECT_NEAR(big.time_s, (5.0 + 4.096) * 1e-6, 1e-12);
  // Between samples: log-log interpolation between 1024 (6.024 us) and 4096 (9.096 us).
  auto mid = c.cost(Collective::all_reduce, 2048, p, DType::f32);
  const double expected = std::exp(0.5 * (std::log(6.024) + std::log(9.096))) * 1e-6;
  EXPECT_NEAR(mid.time_s, expected, 1e-12);
  // Beyond the largest sample: the slope of the last two samples.
  auto huge = c.cost(Collective::all_reduce, 4096 + 3072, p, DType::f32);
  EXPECT_NEAR(huge.time_s, (9.096 + 3.072) * 1e-6, 1e-12);
  EXPECT_NE(big.source.find("table:intra (tuning)"), std::string::npos) << big.source;
}

TEST(PlanComm, RulesComeBeforeTheTable) {
  CommModel c(round_system(1, 2), false);
  c.add_table(Tier::any, two_backend_table());
  c.set_rules(RuleSet::parse("all_reduce:*=gloo"));
  EXPECT_EQ(c.cost(Collective::all_reduce, 16, Placement{2, 2, 1}, DType::f32).backend, "gloo");
}

TEST(PlanComm, TheCallFormChoosesTheTablesEntryAsInTheRuntime) {
  // Measured per call form, as `mcr tune` records it: mpi wins waited calls, gloo the
  // asynchronous ones that data parallelism issues.
  TuningTable t = two_backend_table();
  t.entries[0].form = "sync";
  TuningEntry async = t.entries[0];
  async.form = "async";
  async.ranges = {{0, kMaxBytes, "gloo"}};
  t.entries.push_back(async);
  CommModel c(round_system(1, 2), false);
  c.add_table(Tier::any, t);
  const Placement p{2, 2, 1};
  EXPECT_EQ(c.cost(Collective::all_reduce, 16, p, DType::f32).backend, "mpi");
  EXPECT_EQ(c.cost(Collective::all_reduce, 16, p, DType::f32, CallForm::async).backend, "gloo");
  EXPECT_EQ(
      bucketed_cost(c, Collective::all_reduce, 64, 16, p, DType::f32, CallForm::async).backend,
      "gloo");
}

// Latencies are interpolated in log space: a sample of 0 µs (or less) would turn every cost
// through it into NaN, and the step time with it. The table is refused, naming the sample; the
// file reader refuses it too (TuningTable::problems).
TEST(PlanComm, ASampleWithoutPositiveTimeIsRefused) {
  for (const double bad : {0.0, -3.0}) {
    TuningTable t = two_backend_table();
    t.samples[2].time_us = bad;  // mpi, 1024 bytes
    CommModel c(round_system(1, 2), false);
    try {
      c.add_table(Tier::any, t);
      ADD_FAILURE() << "time_us " << bad << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("samples[2]"), std::string::npos) << e.what();
    }
    auto text = t.to_json();
    const auto problems = TuningTable::problems(text);
    EXPECT_TRUE(std::any_of(problems.begin(), problems.end(), [](const std::string& p) {
      return p.find("samples[2]: \"time_us\" must be a positive number") != std::string::npos;
    })) << text;
  }
}

TEST(PlanComm, ARuleForABackendWithoutSamplesIsSkipped) {
  // The planner can only price a backend the table measured: a rule naming another one is
  // skipped, as the runtime skips a rule whose backend cannot run the operation.
  CommModel c(round_system(1, 2), false);
  c.add_table(Tier::any, two_backend_table());
  c.set_rules(RuleSet::parse("all_reduce:*=nccl;all_reduce:*=gloo"));
  const auto r = c.cost(Collective::all_reduce, 16, Placement{2, 2, 1}, DType::f32);
  EXPECT_EQ(r.backend, "gloo");
  EXPECT_NE(r.source.find("(rule)"), std::string::npos) << r.source;
}

TEST(PlanComm, OtherGroupSizesScaleByTheBusFactor) {
  CommModel c(round_system(1, 4), false);
  c.add_table(Tier::any, two_backend_table());
  // The table has no entry for 4 ranks, so the runtime's default priority picks the backend (mpi
  // for host buffers), and its 2-rank samples are scaled by the all-reduce bus factor
  // 2*3/4 over 2*1/2 = 1.5.
  const auto r = c.cost(Collective::all_reduce, 4096, Placement{4, 4, 1}, DType::f32);
  EXPECT_EQ(r.backend, "mpi");
  EXPECT_NE(r.source.find("default"), std::string::npos) << r.source;
  EXPECT_NEAR(r.time_s, 1.5 * (1.0 + 40.96) * 1e-6, 1e-12);
  EXPECT_NE(r.source.find("scaled from 2 ranks"), std::string::npos);
}

TEST(PlanComm, MissingOpFallsBackToAlphaBeta) {
  CommModel c(round_system(1, 2), false);
  c.add_table(Tier::intra, two_backend_table());
  const auto r = c.cost(Collective::all_gather, 1e6, Placement{2, 2, 1}, DType::f32);
  EXPECT_EQ(r.backend, "alpha-beta");
  EXPECT_NEAR(r.time_s, 0.5 * 1e6 / 100e9, 1e-15);
}

TEST(PlanComm, SamplesOfOneSizeAreAveraged) {
  // mcr tune measures f32 and f16 into the same "float" class: two samples per size.
  TuningTable t = two_backend_table();
  t.samples.push_back({OpType::all_reduce, "float", 2, 4096, "gloo", 11.096});
  CommModel c(round_system(1, 2), false);
  c.add_table(Tier::any, t);
  const Placement p{2, 2, 1};
  EXPECT_NEAR(c.cost(Collective::all_reduce, 4096, p, DType::f32).time_s, 10.096e-6, 1e-12);
  // Extrapolation from the merged points stays finite: slope (10.096 - 6.024) / 3072 us per byte.
  const double t2 = c.cost(Collective::all_reduce, 4096 + 3072, p, DType::f32).time_s;
  EXPECT_NEAR(t2, (10.096 + 4.072) * 1e-6, 1e-12);
}

TEST(PlanComm, TableArgument) {
  EXPECT_EQ(parse_table_argument("intra=a.json").first, Tier::intra);
  EXPECT_EQ(parse_table_argument("inter=b.json").second, "b.json");
  EXPECT_EQ(parse_table_argument("c.json").first, Tier::any);
  EXPECT_THROW(parse_table_argument(""), InvalidArgument);
}

}  // namespace
}  // namespace mcr::plan
