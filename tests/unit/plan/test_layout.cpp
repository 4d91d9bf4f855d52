// Layout rules: every impossible layout is rejected with a message that names the fields
// (layout.<field>, model.<term>), their values and the rule; `mcr plan` shows them as its flags.
#include <gtest/gtest.h>

#include <string>

#include "mcr/errors.hpp"
#include "mcr/plan/layout.hpp"
#include "test_helpers.hpp"

namespace mcr::plan {
namespace {

using test::gpt;
using test::round_system;

std::string error_of(Layout l, const codesign::ModelShape& m, const SystemSpec& s) {
  try {
    resolve_layout(l, m, s);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(PlanLayout, DerivesDpAndGlobalBatch) {
  Layout l;
  l.gpus = 32;
  l.tp = 4;
  l.pp = 2;
  l.micro_batch = 2;
  const auto r = resolve_layout(l, gpt(), round_system());
  EXPECT_EQ(r.dp, 4);
  EXPECT_EQ(r.global_batch, 8);
  EXPECT_EQ(r.microbatches(), 1);
}

TEST(PlanLayout, WholeSystemWhenNothingGiven) {
  const auto r = resolve_layout(Layout{}, gpt(), round_system(4, 8));
  EXPECT_EQ(r.gpus, 32);
  EXPECT_EQ(r.dp, 32);
}

TEST(PlanLayout, ProductMustEqualGpus) {
  Layout l;
  l.gpus = 32;
  l.tp = 4;
  l.pp = 2;
  l.dp = 3;
  const auto e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("layout.tp 4 x layout.pp 2 x layout.dp 3 = 24"), std::string::npos) << e;
  EXPECT_NE(e.find("layout.gpus is 32"), std::string::npos) << e;
  EXPECT_NE(e.find("tp*pp*dp must equal gpus"), std::string::npos) << e;
}

TEST(PlanLayout, GpusNotDivisibleByTpPp) {
  Layout l;
  l.gpus = 30;
  l.tp = 4;
  const auto e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("layout.gpus 30 is not divisible by layout.tp 4 x layout.pp 1"),
            std::string::npos)
      << e;
}

TEST(PlanLayout, HeadsDivisibleByTp) {
  Layout l;
  l.gpus = 8;
  l.tp = 8;
  const auto e = error_of(l, gpt(960, 12), round_system());
  EXPECT_NE(e.find("model.heads 12 is not divisible by layout.tp 8"), std::string::npos) << e;
}

TEST(PlanLayout, KvHeadsDivisibleByTp) {
  auto m = gpt(1024, 16);
  m.a_kv = 2;
  Layout l;
  l.gpus = 4;
  l.tp = 4;
  const auto e = error_of(l, m, round_system());
  EXPECT_NE(e.find("model.kv_heads 2 is not divisible by layout.tp 4"), std::string::npos) << e;
}

TEST(PlanLayout, LayersDivisibleByStagesTimesChunks) {
  Layout l;
  l.gpus = 32;
  l.pp = 4;
  l.interleave = 4;
  l.global_batch = 64;
  const auto e = error_of(l, gpt(1024, 16, 24), round_system());
  EXPECT_NE(e.find("model.layers 24 is not divisible by layout.pp 4 x layout.interleave 4 = 16"),
            std::string::npos)
      << e;
}

TEST(PlanLayout, GlobalBatchDivisibleByMicroBatchTimesDp) {
  Layout l;
  l.gpus = 8;
  l.micro_batch = 4;
  l.global_batch = 100;
  const auto e = error_of(l, gpt(), round_system());
  EXPECT_NE(
      e.find("layout.global_batch 100 is not divisible by layout.micro_batch 4 x layout.dp 8 = 32"),
      std::string::npos)
      << e;
}

TEST(PlanLayout, TpLargerThanNodeNeedsConsent) {
  Layout l;
  l.gpus = 16;
  l.tp = 16;
  const auto e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("layout.tp 16 is larger than a node"), std::string::npos) << e;
  EXPECT_NE(e.find("layout.allow_tp_across_nodes"), std::string::npos) << e;
  l.allow_tp_across_nodes = true;
  EXPECT_EQ(error_of(l, gpt(), round_system()), "");
}

TEST(PlanLayout, InterleavingNeedsWholePipelineRounds) {
  Layout l;
  l.gpus = 4;
  l.pp = 4;
  l.interleave = 2;
  l.global_batch = 6;  // 6 microbatches, not a multiple of 4 stages
  const auto e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("6 microbatches"), std::string::npos) << e;
  EXPECT_NE(e.find("multiple of layout.pp 4"), std::string::npos) << e;
}

TEST(PlanLayout, ZeroTwoAndThreeRejectPipelines) {
  Layout l;
  l.gpus = 8;
  l.pp = 2;
  l.zero = 3;
  const auto e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("layout.zero 3 with layout.pp 2"), std::string::npos) << e;
}

TEST(PlanLayout, MoreGpusThanTheSystemHas) {
  Layout l;
  l.gpus = 64;
  const auto e = error_of(l, gpt(), round_system(4, 8));
  EXPECT_NE(e.find("layout.gpus 64 exceeds system 'round': 4 nodes x 8 GPUs = 32"),
            std::string::npos)
      << e;
}

// Each message states the rule that was broken: a negative global batch is divisible by the
// replicas' microbatches (it said it was not), and 0 is a valid GPU count or dp (automatic).
TEST(PlanLayout, OutOfRangeValuesNameTheirRule) {
  Layout l;
  l.gpus = 8;
  l.global_batch = -64;
  auto e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("layout.global_batch -64 must be >= 1"), std::string::npos) << e;
  l = {};
  l.gpus = -1;
  e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("layout.gpus -1 must be >= 1, or 0 for"), std::string::npos) << e;
  l = {};
  l.dp = -2;
  e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("layout.dp -2 must be >= 1, or 0 for"), std::string::npos) << e;
}

// Megatron overlaps tensor-parallel communication with the GEMMs only under sequence parallelism
// (the all-gathers and reduce-scatters it pipelines); without it the overlap was priced on plain
// all-reduces for a layout that cannot run.
TEST(PlanLayout, TpCommOverlapNeedsSequenceParallelism) {
  Layout l;
  l.gpus = 8;
  l.tp = 2;
  l.tp_comm_overlap = true;
  const auto e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("layout.tp_comm_overlap with layout.tp 2 needs layout.sequence_parallel"),
            std::string::npos)
      << e;
  l.sequence_parallel = true;
  EXPECT_EQ(error_of(l, gpt(), round_system()), "");
  l = {};
  l.gpus = 8;
  l.tp_comm_overlap = true;  // tp 1: nothing to overlap, nothing wrong
  EXPECT_EQ(error_of(l, gpt(), round_system()), "");
}

TEST(PlanLayout, RecomputeNames) {
  EXPECT_EQ(parse_recompute("selective"), Recompute::selective);
  EXPECT_EQ(to_string(Recompute::full), "full");
  EXPECT_THROW(parse_recompute("partial"), InvalidArgument);
}

}  // namespace
}  // namespace mcr::plan
