// Layout rules: every impossible layout is rejected with a message that names the fields
// (layout.<field>, model.<term>), their values and the rule; `mcr plan` shows them as its flags.
#include <gtest/gtest.h>

#include <limits>
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

// Products of the layout's factors are bounded before they are formed: cp = pp = 65536 wrapped
// tp·cp·pp to 0 and the division by it ended the process, and micro_batch·dp wrapped to 0 likewise.
TEST(PlanLayout, FactorsPastTheSystemAreRefusedNotWrapped) {
  Layout l;
  l.cp = 65536;
  l.pp = 65536;
  auto e = error_of(l, gpt(), round_system(4, 8));
  EXPECT_NE(e.find("layout.tp 1 x layout.cp 65536 x layout.pp 65536 needs more than the 32 GPUs"),
            std::string::npos)
      << e;
  l = {};
  l.gpus = 32;
  l.dp = 32;
  l.micro_batch = std::int64_t{1} << 59;
  l.global_batch = 64;
  e = error_of(l, gpt(), round_system(4, 8));
  EXPECT_NE(e.find("layout.micro_batch 576460752303423488 x layout.dp 32 exceeds "
                   "layout.global_batch 64"),
            std::string::npos)
      << e;
  l.global_batch = 0;  // the default, micro_batch x dp, does not fit
  e = error_of(l, gpt(), round_system(4, 8));
  EXPECT_NE(e.find("the default global batch, does not fit in 64 bits"), std::string::npos) << e;
  l = {};
  l.pp = 65536;  // layout_error alone, as the search calls it
  l.gpus = 32;
  l.dp = 1;
  l.global_batch = 1;
  EXPECT_NE(layout_error(l, gpt(), round_system(4, 8)).find("layout.pp 65536 exceeds system"),
            std::string::npos);
}

// Megatron splits each sequence into tp shards under sequence parallelism and asserts the split
// is even; the layout was accepted and priced with fractional shards.
TEST(PlanLayout, SequenceParallelismNeedsTheSequenceToSplitOverTp) {
  Layout l;
  l.gpus = 8;
  l.tp = 8;
  l.sequence_parallel = true;
  auto m = gpt();
  m.s = 4100;
  auto e = error_of(l, m, round_system());
  EXPECT_NE(e.find("layout.sequence_parallel with layout.tp 8: the sequence s = 4100 must split "
                   "into tp equal shards"),
            std::string::npos)
      << e;
  m.s = 4096;
  EXPECT_EQ(error_of(l, m, round_system()), "");
  l.sequence_parallel = false;
  m.s = 4100;
  EXPECT_EQ(error_of(l, m, round_system()), "");  // without it, the sequence is not split
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
  l = {};
  l.capacity_factor = std::numeric_limits<double>::infinity();  // its token count overflowed
  e = error_of(l, gpt(), round_system());
  EXPECT_NE(e.find("layout.capacity_factor inf must be finite and >= 0"), std::string::npos) << e;
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
