// Memory per GPU against formulas computed here from the papers, not from the planner:
// model states from the ZeRO paper (2 + 2 + 12 bytes per parameter, sharded by stage) and
// activations from Korthikanti et al. 2022, Table 2.
#include <gtest/gtest.h>

#include "mcr/codesign/device.hpp"
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

Layout make(int gpus, int tp, int pp, std::int64_t mb, std::int64_t gbs) {
  Layout l;
  l.gpus = gpus;
  l.tp = tp;
  l.pp = pp;
  l.micro_batch = mb;
  l.global_batch = gbs;
  return resolve_layout(l, gpt(), round_system());
}

// GPT with biases, two LayerNorms per layer, a final LayerNorm, learned positions and tied
// embeddings: P = L (12 h^2 + 13 h) + 2h + v h + s h (Narayanan et al. 2021).
double gpt_params(double h, double L, double v, double s) {
  return L * (12 * h * h + 13 * h) + 2 * h + v * h + s * h;
}

TEST(PlanMemory, ZeroStagesFollowTheZeroPaper) {
  const auto m = gpt();
  const double P = gpt_params(1024, 24, 51200, 2048);
  const double dp = 8;
  for (int stage = 0; stage <= 3; ++stage) {
    Layout l = make(8, 1, 1, 1, 8);
    l.zero = stage;
    const auto r = plan_memory(m, a100(), l);
    const double w = 2 * P / (stage >= 3 ? dp : 1);
    const double g = 2 * P / (stage >= 2 ? dp : 1);
    const double o = 12 * P / (stage >= 1 ? dp : 1);
    EXPECT_NEAR(r.weights, w, 1e-6 * w) << "stage " << stage;
    EXPECT_NEAR(r.gradients, g, 1e-6 * g) << "stage " << stage;
    EXPECT_NEAR(r.optimizer, o, 1e-6 * o) << "stage " << stage;
  }
  // Stage 3: (2 + 2 + 12) P / Nd in total.
  Layout l = make(8, 1, 1, 1, 8);
  l.zero = 3;
  const auto r = plan_memory(m, a100(), l);
  EXPECT_NEAR(r.weights + r.gradients + r.optimizer, 16 * P / dp, 1e-6 * P);
}

TEST(PlanMemory, ActivationsWithTensorParallelism) {
  // Korthikanti et al. 2022 Table 2, tensor parallel, no recomputation, fp16:
  // per layer s b h (10 + 24/t + 5 a s / (h t)).
  const auto m = gpt();
  const double s = 2048, b = 2, h = 1024, a = 16, t = 8, L = 24;
  const auto r = plan_memory(m, a100(), make(8, 8, 1, 2, 2));
  EXPECT_NEAR(r.activations, L * s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), 1.0);
}

TEST(PlanMemory, ActivationsWithSequenceParallelismAndSelectiveRecompute) {
  const auto m = gpt();
  const double s = 2048, b = 1, h = 1024, a = 16, t = 4, L = 24;
  Layout l = make(4, 4, 1, 1, 1);
  l.sequence_parallel = true;
  EXPECT_NEAR(plan_memory(m, a100(), l).activations, L * s * b * h * (34 / t + 5 * a * s / (h * t)),
              1.0);
  l.recompute = Recompute::selective;  // Table 2: s b h 34 / t
  EXPECT_NEAR(plan_memory(m, a100(), l).activations, L * s * b * h * 34 / t, 1.0);
}

TEST(PlanMemory, FullRecomputeKeepsLayerInputsPlusOneLayer) {
  const auto m = gpt();
  const double s = 2048, b = 1, h = 1024, a = 16, t = 2, L = 24;
  Layout l = make(2, 2, 1, 1, 1);
  l.recompute = Recompute::full;
  const double one_layer = s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
  EXPECT_NEAR(plan_memory(m, a100(), l).activations, 2 * s * b * h * L + one_layer, 1.0);
}

TEST(PlanMemory, PipelineFirstStageHoldsPMicrobatchesAndInterleavingAddsItsShare) {
  // 1F1B: the first stage keeps p microbatches of L/p layers = L layers of activations;
  // interleaving multiplies by 1 + (p - 1) / (p v) (Korthikanti et al. 2022, sec. 4.2.3).
  const auto m = gpt(1024, 16, 24, 1024);  // small vocabulary: the first stage is the larger
  const double s = 2048, h = 1024, L = 24, p = 4, v = 2;
  Layout l = make(4, 1, 4, 1, 8);
  l.recompute = Recompute::full;  // small per-layer term, easy to check
  const double layer_full = s * h * (10 + 24 + 5 * 16 * s / h);
  EXPECT_NEAR(plan_memory(m, a100(), l).activations, 2 * s * h * L + layer_full, 1.0);
  l.interleave = 2;
  EXPECT_NEAR(plan_memory(m, a100(), l).activations,
              2 * s * h * L * (1 + (p - 1) / (p * v)) + layer_full, 1.0);
}

TEST(PlanMemory, CapacityIsTheDeviceMemory) {
  const auto r = plan_memory(gpt(), a100(), make(8, 1, 1, 1, 8));
  EXPECT_DOUBLE_EQ(r.capacity, 80.0 * 1024 * 1024 * 1024);
  EXPECT_TRUE(r.fits);
  EXPECT_NEAR(r.total, r.weights + r.gradients + r.optimizer + r.activations + r.buffers, 1.0);
}

TEST(PlanMemory, Gpt3On8GpusDoesNotFit) {
  // 175B parameters x 16 bytes / 8 GPUs = 350 GB per GPU: no A100 holds that.
  auto m = gpt(12288, 96, 96, 51200, 2048);
  SystemSpec sys = round_system();
  Layout l;
  l.gpus = 8;
  l.tp = 8;
  const auto r = plan_memory(m, a100(), resolve_layout(l, m, sys));
  EXPECT_FALSE(r.fits);
  EXPECT_GT(r.weights + r.gradients + r.optimizer, 16 * 174e9 / 8);
}

}  // namespace
}  // namespace mcr::plan
