// The mixture-of-experts block's own kernels against quantities worked out here by hand: the
// experts' GEMMs as Transformer Engine issues them (four at a time), the tokens each dispatcher
// permutes and moves, the experts' output biases, a clamped GLU and the FP8 padding copy. Each test
// compares two plans that differ in one respect, so that the rest of the step cancels.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mcr/codesign/device.hpp"
#include "mcr/codesign/gemm_model.hpp"
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

const codesign::DeviceSpec& h100() {
  static const auto d = codesign::device_from_catalog("h100-sxm");
  return d;
}

/// 8 experts of the GPT's 4h MLP, top 2, flash attention, fp16, linear biases.
codesign::ModelShape moe(std::int64_t experts = 8, std::int64_t top_k = 2) {
  auto m = gpt();
  m.attention = codesign::AttentionImpl::flash;
  m.experts = experts;
  m.top_k = top_k;
  return m;
}

/// ep ranks in one node, tp 1, one microbatch of one sequence per rank.
Layout moe_layout(const codesign::ModelShape& m, int ep, Dispatcher d = Dispatcher::alltoall) {
  Layout l;
  l.gpus = ep;
  l.ep = ep;
  l.global_batch = ep;
  l.moe_dispatcher = d;
  return resolve_layout(l, m, round_system());
}

PlanResult plan(const codesign::ModelShape& m, const Layout& l, const PlanOptions& o = {},
                const codesign::DeviceSpec& dev = a100()) {
  return plan_step(m, dev, CommModel(round_system()), l, o);
}

// Per layer and microbatch with ep = 2 of 8 experts, top 2: the rank's 2048 tokens make 4096
// routed copies; each of its 4 experts takes 4096 x 2 / 8 = 1024 rows, 4096 in all.
constexpr double kLayers = 24, kOwn = 2048, kCopies = 4096, kRows = 4096;
constexpr double kRow = 1024 * 2.0;              // one token's hidden state in fp16
constexpr double kBandwidth = 2039e9 * 0.8;      // a100-80gb, memory_efficiency
constexpr double kH100Bandwidth = 3350e9 * 0.8;  // h100-sxm
constexpr double kLaunch = 2e-6;                 // both devices' launch_overhead_s
constexpr double kDelivered = kOwn * 2 * (1 - 4.0 / 8 * 3.0 / 7);  // ranks with one of 2 experts

// ZeRO shards each part of the model states over the ranks that hold a copy of it: the experts'
// over their own data-parallel ranks, as the optimizer state already was (docs/planner.md,
// "Memory"). With ep = 8 of 8 experts on 8 GPUs each rank holds the only copy of its expert, so
// ZeRO 2 and 3 cannot shard the experts' gradients and weights; before, they were divided by the 8
// dense replicas, a 2.7B-parameter expert state counted as an eighth.
TEST(PlanMoe, ZeroShardsTheExpertsOverTheirOwnReplicas) {
  const auto m = moe();
  Layout l = moe_layout(m, 8);
  l.zero = 1;
  const double sharded = plan_memory(m, a100(), l).optimizer / 12;  // parameters per rank
  // The rank's expert: 24 layers of one 4h MLP, 8 h^2 weights each (biases aside).
  const double expert = kLayers * 8 * 1024.0 * 1024.0;
  EXPECT_GT(sharded, expert);
  l.zero = 2;
  EXPECT_NEAR(plan_memory(m, a100(), l).gradients, 2 * sharded, 1e-6 * sharded);
  l.zero = 3;
  const auto z3 = plan_memory(m, a100(), l);
  EXPECT_NEAR(z3.weights, 2 * sharded, 1e-6 * sharded);
  EXPECT_NEAR(z3.gradients, 2 * sharded, 1e-6 * sharded);
}

// An expert's biases live with its weights: on its expert-parallel rank, not replicated on every
// rank as the dense parameters are. With ep = 8 of 8 experts each rank holds one expert, so a
// model with biases holds, per layer, the dense biases (Q, K, V, O: 4h; the router's 8) and one
// expert's (up and down: 4h + h) more than the same model without; before, every expert's biases
// were counted as dense, 8 x 5h per layer, and reduced over the data-parallel ranks with them.
TEST(PlanMoe, ExpertBiasesLiveOnTheirExpertsRanks) {
  for (const auto mlp : {codesign::MlpType::gelu, codesign::MlpType::swiglu}) {
    SCOPED_TRACE(codesign::to_string(mlp));
    auto with = moe();
    with.mlp = mlp;
    with.linear_bias = true;
    auto without = with;
    without.linear_bias = false;
    const Layout l = moe_layout(with, 8);
    const double extra =
        plan_memory(with, a100(), l).weights - plan_memory(without, a100(), l).weights;
    const double dense_biases = kLayers * (4 * 1024.0 + 8);
    // One expert per rank: ff + h (GeLU), or 2 ff + h (gate and up, then down; SwiGLU).
    const double expert_biases = kLayers * (with.gated_mlp() ? 9 : 5) * 1024.0;
    EXPECT_NEAR(extra, 2 * (dense_biases + expert_biases), 1e-3);
    // The dense gradients reduced over the 8 data-parallel ranks carry the dense biases only.
    const auto dense_bytes = [&](const codesign::ModelShape& m) {
      for (const auto& red : plan(m, l).dp_reductions)
        if (red.gradients == "dense") return red.bytes;
      return 0.0;
    };
    EXPECT_NEAR(dense_bytes(with) - dense_bytes(without), 2 * dense_biases, 1e-3);
  }
}

// Expert tensor parallelism gathers the routed copies over the etp ranks for the experts' input;
// the unpermute buffer holds the rank's own copies only, after the combine's reduce-scatter. So
// etp 2 against 1 (tp 2 with sequence parallelism) adds one more set of the rank's copies per
// layer: L x (s b / t) x k x h x e bytes (before, the unpermute buffer grew with etp as well).
TEST(PlanMoe, ExpertTensorParallelismGathersTheExpertsInputOnly) {
  const auto m = moe();
  const auto with_etp = [&](int etp) {
    Layout l;
    l.gpus = 4;
    l.tp = 2;
    l.sequence_parallel = true;
    l.ep = 2;
    l.etp = etp;
    l.global_batch = 2;
    return plan_memory(m, a100(), resolve_layout(l, m, round_system())).activations;
  };
  const double own = 2048.0 / 2, k = 2, h = 1024, e = 2;
  EXPECT_NEAR(with_etp(2) - with_etp(1), kLayers * own * k * h * e, 1.0);
}

TEST(PlanMoe, ExpertsRunFourGemmsAtATime) {
  // Transformer Engine issues one GEMM per local expert on 4 streams. 8 experts top 2 and 16
  // experts top 4 on one rank both give each expert 2048 x k / E = 512 rows: twice the experts is
  // two more rounds of four GEMMs, plus the wider router.
  const auto eight = moe(8, 2), sixteen = moe(16, 4);
  const auto a = plan(eight, moe_layout(eight, 1));
  const auto b = plan(sixteen, moe_layout(sixteen, 1));
  const auto time = [](std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch) {
    codesign::Gemm g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.batch = batch;
    g.dtype = codesign::DType::fp16;
    return codesign::predict(g, a100()).time_s;
  };
  const double round = time(512, 4096, 1024, 4) + time(512, 1024, 4096, 4);  // fc1, fc2
  const double router = time(2048, 16, 1024, 1) - time(2048, 8, 1024, 1);
  EXPECT_NEAR(b.breakdown.forward_gemm - a.breakdown.forward_gemm, kLayers * (2 * round + router),
              1e-12);
}

TEST(PlanMoe, ExpertBiasesAreAddedOutsideTheGemm) {
  // Per element of the 4096 x h expert rows, 6 bytes' worth of fp16 forward (probability times
  // bias written; added to the output: two read, one written; concatenated: read, written) and 6
  // backward; 2 kernels per expert and one forward, 4 per expert backward.
  auto plain = moe();
  plain.linear_bias = false;
  const auto with = plan(moe(), moe_layout(moe(), 2));
  const auto without = plan(plain, moe_layout(plain, 2));
  const double bytes = 6 * 2 * kRows * 1024;
  const double expected = kLayers * (2 * bytes / kBandwidth + (9 + 16) * kLaunch);
  EXPECT_NEAR(with.breakdown.memory_bound - without.breakdown.memory_bound, expected, 1e-12);
}

TEST(PlanMoe, AllToAllSortsByLocalExpertAndFlexPermutesWhatItDelivers) {
  // all_to_all: the rank permutes its own tokens into their copies (2048 rows read, 4096 written,
  // and back) and sorts the 4096 received rows by local expert twice, forward and backward. Flex:
  // the rows it delivered, one per token and rank with one of its experts, into the experts' rows.
  auto m = moe();
  m.linear_bias = false;
  const auto a2a = plan(m, moe_layout(m, 2, Dispatcher::alltoall));
  const auto flex = plan(m, moe_layout(m, 2, Dispatcher::flex));
  const double permute_a2a = 4 * (kOwn + kCopies) * kRow;
  const double sort = 2 * 2 * (2 * kRows * kRow);
  const double permute_flex = 4 * (kDelivered + kRows) * kRow;
  const double expected =
      kLayers * ((permute_a2a + sort - permute_flex) / kBandwidth + 4 * kLaunch);
  EXPECT_NEAR(a2a.breakdown.memory_bound - flex.breakdown.memory_bound, expected, 1e-12);
}

TEST(PlanMoe, FlexSendsATokenOnceToEachRankHoldingItsExperts) {
  // One node, 100 GB/s, no latency: an all_to_all keeps 1/2 of its buffer; all_to_all sends 2
  // copies per token, flex one per rank holding either expert (2 x (1 - 4/8 x 3/7) ranks).
  auto m = moe();
  const auto flex = plan(m, moe_layout(m, 2, Dispatcher::flex));
  const auto a2a = plan(m, moe_layout(m, 2, Dispatcher::alltoall));
  EXPECT_NEAR(flex.breakdown.ep_comm, kLayers * 4 * 0.5 * kDelivered * kRow / 100e9, 1e-12);
  EXPECT_NEAR(a2a.breakdown.ep_comm, kLayers * 4 * 0.5 * kCopies * kRow / 100e9, 1e-12);
}

TEST(PlanMoe, ClampedGluClampsAndConcatenatesFirst) {
  // SwiGLU experts, d_e = 4096: per element of one half (4096 rows x 4096), two clamps and a
  // concatenation move 8 fp16 bytes forward (3 kernels) and 10 backward (3 kernels); recomputing
  // moe_act repeats the forward part.
  auto m = moe();
  m.mlp = codesign::MlpType::swiglu;
  Layout l;
  l.gpus = 2;
  l.ep = 2;
  l.global_batch = 2;
  l.recompute = Recompute::selective;
  l.recompute_modules = {"moe_act"};
  l = resolve_layout(l, m, round_system());
  PlanOptions clamp;
  clamp.moe_glu_clamp = true;
  const auto a = plan(m, l, clamp);
  const auto b = plan(m, l);
  const double half = kRows * 4096;
  const double fwd = 8 * 2 * half / kBandwidth + 3 * kLaunch;
  const double bwd = 10 * 2 * half / kBandwidth + 3 * kLaunch;
  EXPECT_NEAR(a.breakdown.memory_bound - b.breakdown.memory_bound, kLayers * (fwd + bwd), 1e-12);
  EXPECT_NEAR(a.breakdown.recompute - b.breakdown.recompute, kLayers * fwd, 1e-12);
  EXPECT_TRUE(a.moe_glu_clamp);
}

TEST(PlanMoe, Fp8PadsDroplessExpertTokensWithACopy) {
  // FP8 with all_to_all: dropless routing leaves each expert's count unaligned, so its input is
  // copied into padded rows and its output back (a read and a write each, forward and backward).
  // A capacity of exactly the balanced share, 1024 rows, is a multiple of 16: no copy.
  auto m = moe();
  m.dtype = codesign::DType::bf16;
  m.linear_bias = false;
  Layout l = moe_layout(m, 2);
  l.fp8 = Fp8::delayed;
  Layout capped = l;
  capped.capacity_factor = 1.0;
  const auto dropless = plan(m, l, {}, h100());
  const auto padded = plan(m, capped, {}, h100());
  const double copy = 2 * 2 * kRows * kRow;
  EXPECT_NEAR(dropless.breakdown.memory_bound - padded.breakdown.memory_bound,
              kLayers * 2 * (copy / kH100Bandwidth + 2 * kLaunch), 1e-12);
}

// Tensor-parallel communication overlap hides a TP collective behind the GEMMs next to it: in an
// MoE layer the attention's and the shared experts', not the routed experts', which run between the
// dispatcher's all_to_alls. On a 1 GB/s TP link every collective outlasts its GEMMs, so making the
// routed experts four times wider must leave the exposed TP time as it is (it fell before), while
// a shared expert still hides part of the second half's collectives.
TEST(PlanMoe, RoutedExpertsHideNoTensorParallelCollective) {
  SystemSpec sys = round_system();
  sys.intra = {1, 0, 1.0, "test"};
  const auto tp_comm = [&](const codesign::ModelShape& m, bool overlap) {
    Layout l;
    l.gpus = 2;
    l.tp = 2;
    l.global_batch = 1;
    l.sequence_parallel = true;
    l.tp_comm_overlap = overlap;
    l = resolve_layout(l, m, sys);
    return plan_step(m, a100(), CommModel(sys), l).breakdown.tp_comm;
  };
  const auto narrow = moe();
  auto wide = moe();
  wide.d_ff_expert = 4 * narrow.d_ff;
  EXPECT_LT(tp_comm(narrow, true), tp_comm(narrow, false));
  EXPECT_DOUBLE_EQ(tp_comm(wide, true), tp_comm(narrow, true));
  // A shared expert adds the second half's collectives and the GEMMs that hide part of them.
  auto shared = moe();
  shared.d_ff_shared = narrow.d_ff;
  const double added = tp_comm(shared, false) - tp_comm(narrow, false);
  EXPECT_GT(added, 0);
  EXPECT_LT(tp_comm(shared, true) - tp_comm(narrow, true), added);
}
}  // namespace
}  // namespace mcr::plan
