// Step-time model: FLOP counts against the Megatron formulas, the bubble fraction, the number and
// size of the tensor-parallel collectives, the data-parallel reduction, and the composition of the
// breakdown.
#include <gtest/gtest.h>

#include <algorithm>
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

Layout layout(int gpus, int tp, int pp, std::int64_t mb, std::int64_t gbs, Recompute rc,
              const codesign::ModelShape& m, const SystemSpec& s) {
  Layout l;
  l.gpus = gpus;
  l.tp = tp;
  l.pp = pp;
  l.micro_batch = mb;
  l.global_batch = gbs;
  l.recompute = rc;
  return resolve_layout(l, m, s);
}

TEST(PlanStep, BubbleFraction) {
  EXPECT_DOUBLE_EQ(bubble_fraction(8, 64, 1), 7.0 / 64);
  EXPECT_DOUBLE_EQ(bubble_fraction(8, 64, 3), 7.0 / 192);
  EXPECT_DOUBLE_EQ(bubble_fraction(1, 64, 1), 0.0);
}

TEST(PlanStep, EveryBreakdownTermReachesTheTotalAndTheJson) {
  // Each term set to a distinct power of two: the total is their exact sum, and the JSON carries
  // each under its own key, so a term missing from either shows up as a wrong bit.
  Breakdown b;
  double expected = 0, bit = 1;
  for (const BreakdownTerm& t : breakdown_terms()) {
    b.*t.field = bit;
    expected += bit;
    bit *= 2;
  }
  EXPECT_EQ(b.total(), expected);
  const auto m = gpt();
  const SystemSpec sys = round_system();
  PlanResult r =
      plan_step(m, a100(), CommModel(sys), layout(8, 2, 2, 1, 16, Recompute::full, m, sys));
  r.breakdown = b;
  const auto j = to_json(r)["breakdown"];
  EXPECT_EQ(j.size(), breakdown_terms().size());
  for (const BreakdownTerm& t : breakdown_terms()) {
    EXPECT_EQ(j.at(std::string(t.key) + "_s").get<double>(), b.*t.field) << t.key;
  }
}

TEST(PlanStep, HardwareFlopsMatchMegatronFormulaWithFullRecompute) {
  // Narayanan et al. 2021, eq. 3: F = 96 B s L h^2 (1 + s / (6h) + V / (16 L h)).
  const double B = 16, s = 2048, L = 24, h = 1024, V = 51200;
  const auto m = gpt();
  const SystemSpec sys = round_system();
  const auto r =
      plan_step(m, a100(), CommModel(sys), layout(8, 2, 2, 1, 16, Recompute::full, m, sys));
  const double expected = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  EXPECT_NEAR(r.hardware_flops / expected, 1.0, 1e-12);
  // Without recomputation: 72 B s L h^2 (1 + s / (6h) + V / (12 L h)).
  const double model = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  EXPECT_NEAR(r.model_flops / model, 1.0, 1e-12);
  EXPECT_NEAR(r.tflops_per_gpu, r.hardware_flops / r.step_time_s / 8 / 1e12, 1e-9);
  EXPECT_NEAR(r.mfu, r.model_tflops_per_gpu / 312.0, 1e-12);
}

TEST(PlanStep, SelectiveRecomputeRepeatsOnlyTheAttentionCore) {
  // Attention score and softmax-times-V BMMs: 4 b s^2 h FLOPs per layer forward.
  const double B = 8, s = 2048, L = 24, h = 1024;
  const auto m = gpt();
  const SystemSpec sys = round_system();
  const auto r =
      plan_step(m, a100(), CommModel(sys), layout(8, 8, 1, 1, 8, Recompute::selective, m, sys));
  EXPECT_NEAR(r.hardware_flops - r.model_flops, 4 * B * s * s * h * L, 1.0);
}

TEST(PlanStep, FourTensorParallelAllReducesPerLayer) {
  // Megatron: 2 all-reduces of the s*b*h activations forward and 2 backward, per layer. On a
  // 2-GPU ring at 100 GB/s with no latency each costs 2 (n-1)/n S / B = S / B.
  const auto m = gpt();
  const SystemSpec sys = round_system();
  const auto r =
      plan_step(m, a100(), CommModel(sys), layout(2, 2, 1, 1, 4, Recompute::none, m, sys));
  const double S = 2048.0 * 1 * 1024 * 2;  // s * b * h * 2 bytes
  const double microbatches = 4;
  EXPECT_NEAR(r.breakdown.tp_comm, microbatches * 24 * 4 * S / 100e9, 1e-12);
}

TEST(PlanStep, SequenceParallelAddsTheBackwardAllGather) {
  // Sequence parallel: 2 all-gathers + 2 reduce-scatters per pass, each half an all-reduce, plus
  // 2 all-gathers of the layer inputs again in the backward pass: 4 + 4 + 2 = 10 halves per layer
  // (the all-reduce form costs 8).
  const auto m = gpt();
  const SystemSpec sys = round_system();
  Layout l = layout(2, 2, 1, 1, 1, Recompute::none, m, sys);
  l.sequence_parallel = true;
  const auto r = plan_step(m, a100(), CommModel(sys), l);
  const double S = 2048.0 * 1024 * 2;
  const double half = 0.5 * S / 100e9;  // (n-1)/n S / B for n = 2
  EXPECT_NEAR(r.breakdown.tp_comm, 24 * 10 * half, 1e-12);
}

TEST(PlanStep, DataParallelAllReduceOfTheGradients) {
  // dp = 2 inside a node, no overlap: one all-reduce of 2 bytes per parameter.
  const auto m = gpt();
  const SystemSpec sys = round_system();
  Layout l = layout(2, 1, 1, 1, 2, Recompute::none, m, sys);
  l.dp_overlap = false;
  const auto r = plan_step(m, a100(), CommModel(sys), l);
  const double P =
      24 * (12.0 * 1024 * 1024 + 13 * 1024) + 2 * 1024 + 51200.0 * 1024 + 2048.0 * 1024;
  EXPECT_NEAR(r.breakdown.dp_comm, 2 * P / 100e9, 1e-9);
  // Overlapped with the last backward pass, less of it is exposed.
  l.dp_overlap = true;
  EXPECT_LT(plan_step(m, a100(), CommModel(sys), l).breakdown.dp_comm, r.breakdown.dp_comm);
}

TEST(PlanStep, FirstStageHidesItsReductionBehindOneBackwardPassOnly) {
  // pp 8, dp 4 over slow links (one GPU per node, 2 GB/s), not interleaved: the first stage runs
  // the step's last backward pass, so overlap hides at most one microbatch's pass of its reduction;
  // the drain (half of the bubble, 3.5 microbatches' passes here) belongs to the later stages.
  // Before, it hid that too.
  const auto m = gpt();
  SystemSpec sys = round_system(32, 1);
  sys.inter = {2, 0, 1.0, "test"};
  Layout l = layout(32, 1, 8, 1, 32, Recompute::none, m, sys);
  l.dp_overlap = false;
  const auto whole = plan_step(m, a100(), CommModel(sys), l);
  l.dp_overlap = true;
  const auto r = plan_step(m, a100(), CommModel(sys), l);
  const double microbatches = static_cast<double>(l.microbatches());
  const double one_pass = (r.breakdown.forward_gemm + r.breakdown.backward_gemm +
                           r.breakdown.memory_bound + r.breakdown.recompute) /
                          microbatches;
  ASSERT_GT(r.breakdown.bubble / 2, 2 * one_pass);
  // The reduction outlasts the cover either way, so the cover is what the difference measures.
  ASSERT_GT(whole.breakdown.dp_comm, r.breakdown.bubble / 2 + one_pass);
  EXPECT_GT(r.breakdown.dp_comm, 0);
  EXPECT_LE(whole.breakdown.dp_comm - r.breakdown.dp_comm, one_pass * (1 + 1e-9));
}

TEST(PlanStep, InterleavedChunksGatherTheirParametersOneAfterAnother) {
  // The distributed optimizer, pp 4, 8 microbatches, slow links. ZeRO 1 exposes the whole gather;
  // what the distributed optimizer hides of it is the cover. Without interleaving, the first
  // forward pass: fwd. With 2 chunks per stage, chunk 0's gather is exposed and chunk 1's hides
  // behind min(pp, microbatches) = 4 chunk forward passes (fwd / 2 each): 2 fwd, twice as much.
  // Before, each hid fwd and half its bubble (which halves with 2 chunks): not twice.
  const auto m = gpt();
  SystemSpec sys = round_system(32, 1);
  sys.inter = {2, 0, 1.0, "test"};
  const auto hidden = [&](int chunks) {
    Layout l = layout(32, 1, 4, 1, 64, Recompute::none, m, sys);
    l.interleave = chunks;
    l.zero = 1;
    const auto zero1 = plan_step(m, a100(), CommModel(sys), l);
    l.zero = 0;
    l.distributed_optimizer = true;
    return zero1.breakdown.dp_comm - plan_step(m, a100(), CommModel(sys), l).breakdown.dp_comm;
  };
  const double plain = hidden(1), interleaved = hidden(2);
  ASSERT_GT(plain, 0);
  EXPECT_NEAR(interleaved / plain, 2.0, 1e-9);
}

TEST(PlanStep, InterleavedPipelineReducesEachChunkAfterItsLastBackwardPass) {
  // pp 2, dp 4, 4 microbatches, 3 model chunks per stage. Megatron-Core reduces a chunk's
  // gradients once its last backward pass is done: the chunk that finishes last has its third of
  // the reduction still to run after the stage's last backward pass, whatever the compute; without
  // interleaving the whole reduction overlaps the last microbatch's backward pass bucket by bucket.
  const auto m = gpt();
  const SystemSpec sys = round_system();
  Layout l = layout(8, 1, 2, 1, 16, Recompute::none, m, sys);
  l.interleave = 3;
  l.dp_overlap = false;
  const double reduce = plan_step(m, a100(), CommModel(sys), l).breakdown.dp_comm;
  ASSERT_GT(reduce, 0);
  l.dp_overlap = true;
  const auto r = plan_step(m, a100(), CommModel(sys), l);
  const double interleaved = r.breakdown.dp_comm;
  EXPECT_GE(interleaved, reduce / 3 * (1 - 1e-12));
  EXPECT_LT(interleaved, reduce);
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
    return n.find(
               "interleaved: each model chunk's reduction starts after its last backward "
               "pass") != std::string::npos;
  }));
  l.interleave = 1;
  const double plain = plan_step(m, a100(), CommModel(sys), l).breakdown.dp_comm;
  EXPECT_LT(plain, reduce / 3);
}

TEST(PlanStep, StreamEfficiencyOfTheSystemPricesMemoryBoundKernelsNotGemms) {
  // Adam moves 2e + 24 bytes per parameter; with stream_efficiency the bandwidth is the device's
  // memory_bandwidth_gbs times that fraction instead of times its (GEMM) memory_efficiency.
  const auto m = gpt();
  SystemSpec sys = round_system();
  const Layout l = layout(1, 1, 1, 1, 1, Recompute::none, m, sys);
  const auto base = plan_step(m, a100(), CommModel(sys), l);
  sys.stream_efficiency = 1.0;
  const auto full = plan_step(m, a100(), CommModel(sys), l);
  const double launch = 4 * a100().efficiency.launch_overhead_s;
  const double bw = a100().memory_bandwidth_gbs * 1e9;
  EXPECT_NEAR((full.breakdown.optimizer - launch) * bw,
              (base.breakdown.optimizer - launch) * bw * a100().efficiency.memory_efficiency,
              1e-3 * base.breakdown.optimizer * bw);
  EXPECT_LT(full.breakdown.memory_bound, base.breakdown.memory_bound);
  EXPECT_DOUBLE_EQ(full.breakdown.forward_gemm, base.breakdown.forward_gemm);
  sys.stream_efficiency = 1.5;
  EXPECT_THROW(sys.validate(), InvalidArgument);
}

TEST(PlanStep, BreakdownAddsUpAndBubbleShrinksWithInterleaving) {
  const auto m = gpt();
  const SystemSpec sys = round_system();
  Layout l = layout(8, 1, 8, 1, 16, Recompute::none, m, sys);
  const auto r1 = plan_step(m, a100(), CommModel(sys), l);
  EXPECT_NEAR(r1.breakdown.total(), r1.step_time_s, 1e-12);
  EXPECT_GT(r1.breakdown.bubble, 0);
  EXPECT_DOUBLE_EQ(r1.bubble_fraction, 7.0 / 16);
  l.interleave = 3;
  const auto r3 = plan_step(m, a100(), CommModel(sys), l);
  EXPECT_DOUBLE_EQ(r3.bubble_fraction, 7.0 / 48);
  EXPECT_LT(r3.breakdown.bubble, r1.breakdown.bubble);
  EXPECT_GT(r3.breakdown.pp_comm, r1.breakdown.pp_comm);  // 3x the transfers
}

TEST(PlanStep, MoreDataParallelReplicasShortenTheStep) {
  const auto m = gpt();
  const SystemSpec sys = round_system();
  const auto r8 =
      plan_step(m, a100(), CommModel(sys), layout(8, 1, 1, 1, 64, Recompute::none, m, sys));
  const auto r16 =
      plan_step(m, a100(), CommModel(sys), layout(16, 1, 1, 1, 64, Recompute::none, m, sys));
  EXPECT_LT(r16.step_time_s, r8.step_time_s);
  EXPECT_GT(r16.step_time_s, r8.step_time_s / 2);  // the reduction crosses nodes now
}

TEST(PlanStep, RejectsAnInvalidLayout) {
  const auto m = gpt();
  Layout l;
  l.gpus = 8;
  l.tp = 3;
  l.pp = 1;
  l.dp = 3;
  l.global_batch = 3;
  EXPECT_THROW(plan_step(m, a100(), CommModel(round_system()), l), InvalidArgument);
}

// FP8 on a device without an FP8 peak names the recipe's field, and where the recipe came from
// when the model's dtype implied it (the message named "layout field fp8", which no flag matches).
TEST(PlanStep, Fp8OnADeviceWithoutFp8NamesWhereTheRecipeCameFrom) {
  Layout l;
  l.gpus = 8;
  auto m = gpt();
  m.dtype = codesign::DType::fp8;
  const auto message = [&](const codesign::ModelShape& model, const Layout& layout) {
    try {
      (void)plan_step(model, a100(), CommModel(round_system()),
                      resolve_layout(layout, model, round_system()));
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto e = message(m, l);
  EXPECT_NE(e.find("layout.fp8 delayed (set by model.dtype fp8): device 'a100-80gb' has no FP8 "
                   "peak"),
            std::string::npos)
      << e;
  l.fp8 = Fp8::current;
  e = message(gpt(), l);
  EXPECT_NE(e.find("layout.fp8 current: device 'a100-80gb' has no FP8 peak"), std::string::npos)
      << e;
}

TEST(PlanStep, JsonHasTheDocumentedFields) {
  const auto m = gpt();
  const SystemSpec sys = round_system();
  const auto j = to_json(
      plan_step(m, a100(), CommModel(sys), layout(8, 2, 2, 1, 8, Recompute::selective, m, sys)));
  for (const char* k :
       {"step_time_s", "tflops_per_gpu", "memory_per_gpu_bytes", "breakdown", "mfu"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_TRUE(j["breakdown"].contains("bubble_s"));
  EXPECT_EQ(j["layout"]["tp"], 2);
}

}  // namespace
}  // namespace mcr::plan
