// Context and expert parallelism against quantities worked out here by hand: the tokens each rank
// holds (activations of Korthikanti et al. 2022 over s/cp), the ring's K/V transfers, the
// all_to_all volume of the routed tokens and the expert parameters each rank holds.
#include <gtest/gtest.h>

#include <string>

#include "mcr/codesign/device.hpp"
#include "mcr/errors.hpp"
#include "mcr/plan/planner.hpp"
#include "test_helpers.hpp"

namespace mcr::plan {
namespace {

using test::gpt;
using test::round_system;

const codesign::DeviceSpec& a100() {
  static const auto d = codesign::device_from_catalog("a100-80gb");
  return d;
}

codesign::ModelShape flash_gpt(std::int64_t s = 8192) {
  auto m = gpt(1024, 16, 24, 51200, s);
  m.attention = codesign::AttentionImpl::flash;
  return m;
}

/// An MoE model: 8 experts of the GPT's 4h MLP, top 2.
codesign::ModelShape moe_gpt() {
  auto m = flash_gpt(2048);
  m.experts = 8;
  m.top_k = 2;
  return m;
}

Layout layout(int gpus, int tp, int cp, std::int64_t gbs, const codesign::ModelShape& m,
              const SystemSpec& sys, int ep = 1) {
  Layout l;
  l.gpus = gpus;
  l.tp = tp;
  l.cp = cp;
  l.ep = ep;
  l.global_batch = gbs;
  return resolve_layout(l, m, sys);
}

TEST(PlanContextParallel, ActivationsFollowTheRanksTokens) {
  // Korthikanti et al. 2022, t = 1, no score term (flash): 34 s b h bytes per layer in fp16; with
  // context parallelism each rank holds s/cp of the tokens. One stage, one microbatch in flight.
  const auto m = flash_gpt();
  const SystemSpec sys = round_system();
  for (int cp : {1, 2, 4}) {
    const auto r = plan_memory(m, a100(), layout(cp, 1, cp, 1, m, sys));
    const double expected = 24 * 34.0 * 8192 * 1024 / cp;
    EXPECT_NEAR(r.activations, expected, 1e-9 * expected) << "cp " << cp;
  }
}

TEST(PlanContextParallel, DataParallelRanksAndContextRanksShareTheOptimizerShards) {
  const auto m = flash_gpt();
  const SystemSpec sys = round_system();
  Layout l = layout(8, 1, 2, 4, m, sys);  // dp 4 x cp 2
  l.zero = 1;
  const auto r = plan_memory(m, a100(), l);
  EXPECT_NEAR(r.optimizer, 12 * r.weights / 2 / 8, 1e-6 * r.optimizer);
}

TEST(PlanContextParallel, RingTransfersAreExposedWhereTheyOutlastTheAttention) {
  // On links so slow that attention is negligible beside them, every step's K/V block is exposed:
  // cp - 1 sends forward, K/V and their gradients (twice) backward. A block is b s/cp tokens of
  // the 16 heads' K and V (2 x 64 dims), 2 bytes each.
  const auto m = flash_gpt();
  SystemSpec sys = round_system();
  sys.intra = {0.001, 0, 1.0, "test"};
  const int cp = 4;
  const auto r = plan_step(m, a100(), CommModel(sys), layout(cp, 1, cp, 1, m, sys));
  const double block = 8192.0 / cp * 16 * (64 + 64) * 2;
  const double send = block / 1e6;
  const double expected = 24 * (cp - 1) * 3 * send;
  EXPECT_NEAR(r.breakdown.cp_comm / expected, 1.0, 0.01);
  // On a ten times faster link the ring hides behind the attention.
  SystemSpec fast = round_system();
  fast.intra = {1000, 0, 1.0, "test"};
  EXPECT_EQ(plan_step(m, a100(), CommModel(fast), layout(cp, 1, cp, 1, m, fast)).breakdown.cp_comm,
            0.0);
}

TEST(PlanContextParallel, RulesNameTheField) {
  const SystemSpec sys = round_system();
  auto unfused = flash_gpt();
  unfused.attention = codesign::AttentionImpl::unfused;
  try {
    layout(2, 1, 2, 1, unfused, sys);
    FAIL() << "unfused attention with cp accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("layout.cp 2 needs flash"), std::string::npos) << e.what();
  }
  auto odd = flash_gpt(8190);
  try {
    layout(2, 1, 2, 1, odd, sys);
    FAIL() << "s = 8190 split over 4 chunks accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("2 x cp = 4 equal chunks"), std::string::npos) << e.what();
  }
  Layout l;
  l.gpus = 8;
  l.tp = 2;
  l.cp = 2;
  l.dp = 3;
  l.global_batch = 3;
  try {
    resolve_layout(l, flash_gpt(), sys);
    FAIL() << "bad product accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tp*cp*pp*dp must equal gpus"), std::string::npos)
        << e.what();
  }
}

TEST(PlanExpertParallel, AllToAllOfTheRoutedTokens) {
  // ep = 8 inside a node, no latency: each rank sends (ep - 1)/ep of its b s k h e bytes of routed
  // copies, twice forward (dispatch, combine) and twice backward, per layer and microbatch.
  const auto m = moe_gpt();
  const SystemSpec sys = round_system();
  const auto r = plan_step(m, a100(), CommModel(sys), layout(8, 1, 1, 16, m, sys, 8));
  const double copies = 2048.0 * 2 * 1024 * 2;
  const double a2a = 7.0 / 8 * copies / 100e9;
  const double microbatches = 2;
  EXPECT_NEAR(r.breakdown.ep_comm, microbatches * 24 * 4 * a2a, 1e-9);
}

TEST(PlanExpertParallel, ACapacityFactorSendsItsPaddedCopies) {
  // The all_to_all dispatcher sends the routed copies padded to the capacity: twice as many at a
  // capacity factor of 2 (before, the capacity changed the GEMMs and the memory, not the bytes).
  const auto m = moe_gpt();
  const SystemSpec sys = round_system();
  Layout l = layout(8, 1, 1, 16, m, sys, 8);
  const auto balanced = plan_step(m, a100(), CommModel(sys), l);
  l.capacity_factor = 2;
  const auto padded = plan_step(m, a100(), CommModel(sys), l);
  EXPECT_GT(balanced.breakdown.ep_comm, 0);
  EXPECT_NEAR(padded.breakdown.ep_comm, 2 * balanced.breakdown.ep_comm, 1e-12);
}

TEST(PlanExpertParallel, FlexDispatchSendsATokenOnceToEachRemoteNode) {
  // 16 experts on two nodes of 8: all_to_all sends half of the copies across; the flex
  // dispatcher sends each token to the other node once unless none of its 2 experts is there:
  // 1 - (1/2)^2 = 3/4 of the tokens.
  auto m = moe_gpt();
  m.experts = 16;
  const SystemSpec sys = round_system();
  Layout l = layout(16, 1, 1, 16, m, sys, 16);
  const auto plain = plan_step(m, a100(), CommModel(sys), l);
  l.moe_dispatcher = Dispatcher::flex;
  const auto flex = plan_step(m, a100(), CommModel(sys), l);
  const double token = 1024 * 2.0, tokens = 2048;
  const double across_plain = tokens * 2 * token * 8 / 16 / 10e9;
  const double across_flex = tokens * 0.75 * token / 10e9;
  const double per = 24 * 4 * 1.0;  // layers x (2 forward + 2 backward), one microbatch
  EXPECT_NEAR(plain.breakdown.ep_comm, per * across_plain, 1e-9);
  EXPECT_NEAR(flex.breakdown.ep_comm, per * across_flex, 1e-9);
}

TEST(PlanExpertParallel, EachRankHoldsItsShareOfTheExperts) {
  // Weights in fp16: the dense part whole (attention 4h^2 + 4h biases, the norms 4h, router h E
  // per layer; embeddings, positions, final norm) and 8/ep experts of 8h^2 each (their biases, a
  // quarter of a percent, are left to the dense part).
  const auto m = moe_gpt();
  const SystemSpec sys = round_system();
  const double h = 1024, L = 24, E = 8;
  const double dense = L * (4 * h * h + 4 * h + 4 * h + h * E) + 2 * h + 51200 * h + 2048 * h;
  const double experts = L * E * 8 * h * h;
  for (int ep : {1, 2, 8}) {
    const auto r = plan_memory(m, a100(), layout(8, 1, 1, 8, m, sys, ep));
    const double expected = 2 * (dense + experts / ep);
    EXPECT_NEAR(r.weights / expected, 1.0, 5e-3) << "ep " << ep;
  }
}

TEST(PlanExpertParallel, RulesNameTheField) {
  const SystemSpec sys = round_system();
  try {
    layout(8, 1, 1, 8, flash_gpt(), sys, 2);
    FAIL() << "ep on a dense model accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("needs a mixture-of-experts model"), std::string::npos)
        << e.what();
  }
  try {
    layout(24, 1, 1, 24, moe_gpt(), round_system(4, 8), 3);
    FAIL() << "ep 3 with 8 experts accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("layout.ep 3 must divide the 8 experts"),
              std::string::npos)
        << e.what();
  }
  try {
    layout(8, 2, 1, 4, moe_gpt(), sys, 4);
    FAIL() << "MoE with tp and no sequence parallelism accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("needs layout.sequence_parallel"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mcr::plan
