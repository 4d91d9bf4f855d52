// Per-component formulas of the step: the data-parallel reduction priced bucket by bucket as the
// step issues it, and memory-bound kernels priced per element where the system gives a measured
// rate (a CPU) and by bytes where it does not (a GPU). Expectations are computed here by hand from
// the model's dimensions, not by calling the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "mcr/codesign/device.hpp"
#include "mcr/errors.hpp"
#include "mcr/plan/comm_model.hpp"
#include "mcr/plan/planner.hpp"
#include "mcr/plan/request.hpp"
#include "test_helpers.hpp"

namespace mcr::plan {
namespace {

using test::gpt;
using test::round_system;

const codesign::DeviceSpec& a100() {
  static const auto d = codesign::device_from_catalog("a100-80gb");
  return d;
}

Layout one_layout(int gpus, const codesign::ModelShape& m, const SystemSpec& s) {
  Layout l;
  l.gpus = gpus;
  l.micro_batch = 1;
  l.global_batch = gpus;
  l.dp_overlap = false;
  return resolve_layout(l, m, s);
}

// Parameters of gpt(): 24 layers of 12h^2 + 13h, the final norm, the tied embedding and the learned
// positions (the same count test_planner.cpp uses).
constexpr double kParams =
    24 * (12.0 * 1024 * 1024 + 13 * 1024) + 2 * 1024 + 51200.0 * 1024 + 2048.0 * 1024;

TEST(PlanBuckets, SplitAsTheStepSplitsItsGradients) {
  // perf/train_step's model: 10,565,632 fp32 gradients = 42,262,528 bytes in 25 MB buckets.
  const auto b = gradient_buckets(42262528, 25e6);
  ASSERT_EQ(b.count(), 2u);
  EXPECT_EQ(b.full, 1u);
  EXPECT_DOUBLE_EQ(b.size, 25e6);
  EXPECT_DOUBLE_EQ(b.last(), 17262528);
  EXPECT_EQ(gradient_buckets(75e6, 25e6).count(), 3u);  // an exact multiple: no empty remainder
  EXPECT_DOUBLE_EQ(gradient_buckets(75e6, 25e6).last(), 25e6);
  ASSERT_EQ(gradient_buckets(1e6, 0).count(), 1u);  // 0: one reduction of everything
  EXPECT_DOUBLE_EQ(gradient_buckets(1e6, 0).last(), 1e6);
  EXPECT_DOUBLE_EQ(gradient_buckets(1e6, 25e6).last(), 1e6);
  EXPECT_EQ(gradient_buckets(0, 25e6).count(), 0u);
}

// One-byte buckets of a few GB of gradients: billions of buckets, counted and priced as one full
// bucket times their count (before, a list of them was built twice and each priced alone: tens of
// GB and minutes). Below a byte, the request is refused.
TEST(PlanBuckets, TinyBucketsArePricedWithoutListingThem) {
  const auto b = gradient_buckets(5.3e9, 1);
  EXPECT_EQ(b.count(), 5'300'000'000u);
  CommModel c(round_system());
  const Placement p{8, 8, 1};
  const auto one = c.cost(Collective::all_reduce, 1, p, DType::f32);
  const auto all = bucketed_cost(c, Collective::all_reduce, 5.3e9, 1, p, DType::f32);
  EXPECT_DOUBLE_EQ(all.time_s, 5.3e9 * one.time_s);
  PlanRequest r;
  r.dp_bucket_mb = 1e-7;
  EXPECT_THROW(to_plan_options(r), InvalidArgument);
  r.dp_bucket_mb = 1e-6;
  EXPECT_DOUBLE_EQ(to_plan_options(r).dp_bucket_bytes, 1.0);
}

TEST(PlanBuckets, EachBucketIsReadOffTheTableAtItsOwnSize) {
  // A table whose time per byte jumps between 16 and 32 MiB (buffers leaving the cache):
  // t = 10 ms (x / 16 MiB)^2 between the samples (log-log), the last slope beyond 32 MiB.
  TuningTable t;
  const double mib16 = 16777216;
  t.samples.push_back({OpType::all_reduce, "float", 2, 16777216, "mpi", 10000});
  t.samples.push_back({OpType::all_reduce, "float", 2, 33554432, "mpi", 40000});
  CommModel c(round_system(1, 2), false);
  c.add_table(Tier::any, t);
  const Placement p{2, 2, 1};
  const double two = bucketed_cost(c, Collective::all_reduce, 42262528, 25e6, p, DType::f32).time_s;
  const double expect_two = 1e-2 * (std::pow(25e6 / mib16, 2) + std::pow(17262528 / mib16, 2));
  EXPECT_NEAR(two, expect_two, 1e-9);
  const double one = bucketed_cost(c, Collective::all_reduce, 42262528, 0, p, DType::f32).time_s;
  const double expect_one = 0.04 + (42262528 - 33554432) * 0.03 / mib16;
  EXPECT_NEAR(one, expect_one, 1e-9);
  EXPECT_LT(two, one);
}

TEST(PlanBuckets, DataParallelReductionPaysOneLatencyPerBucket) {
  // Two ranks in a node, 100 GB/s, 10 us per ring step: an all-reduce of S costs S / B + 2 alpha,
  // so the buckets add their count of 2 alpha to the same bandwidth term.
  const auto m = gpt();
  SystemSpec sys = round_system();
  sys.intra.latency_us = 10;
  const Layout l = one_layout(2, m, sys);
  const double grad = 2 * kParams;  // fp16
  const double buckets = std::ceil(grad / 25e6);
  const auto r = plan_step(m, a100(), CommModel(sys), l);
  EXPECT_NEAR(r.breakdown.dp_comm, grad / 100e9 + buckets * 2 * 10e-6, 1e-9);
  PlanOptions one;
  one.dp_bucket_bytes = 0;
  EXPECT_NEAR(plan_step(m, a100(), CommModel(sys), l, one).breakdown.dp_comm,
              grad / 100e9 + 2 * 10e-6, 1e-9);
}

// The optimizer step moves the gradient, the weights and twice the optimizer state per parameter:
// fp16 gradients and weights with Adam's 12 bytes are 2 + 2 + 24, with 6 bytes of state 2 + 2 + 12
// (the step priced Adam's 24 whatever --optimizer-bytes said, while memory followed it).
TEST(PlanOptimizer, TheStepMovesTheStatesTheOptionGives) {
  const auto m = gpt();
  const SystemSpec sys = round_system();
  const Layout l = one_layout(1, m, sys);
  PlanOptions adam, half;
  half.optimizer_bytes_per_param = 6;
  const double t12 = plan_step(m, a100(), CommModel(sys), l, adam).breakdown.optimizer;
  const double t6 = plan_step(m, a100(), CommModel(sys), l, half).breakdown.optimizer;
  ASSERT_GT(t6, 0);
  EXPECT_NEAR(t12 / t6, 28.0 / 16.0, 0.01);  // less a fixed launch cost
}

TEST(PlanBuckets, ResultSaysWhichBucketsWerePriced) {
  const auto m = gpt();
  const SystemSpec sys = round_system();
  const Layout l = one_layout(2, m, sys);
  const double grad = 2 * kParams;  // fp16
  PlanOptions o;
  o.dp_bucket_bytes = 40e6;
  const auto r = plan_step(m, a100(), CommModel(sys), l, o);
  const double full = std::floor(grad / 40e6);
  EXPECT_EQ(r.dp_bucket_bytes, 40e6);
  EXPECT_EQ(r.dp_buckets, static_cast<std::size_t>(full) + 1);
  ASSERT_EQ(r.dp_reductions.size(), 1u);
  EXPECT_EQ(r.dp_reductions[0].gradients, "dense");
  EXPECT_EQ(r.dp_reductions[0].collective, "all_reduce");
  EXPECT_NEAR(r.dp_reductions[0].last_bucket_bytes, grad - full * 40e6, 1e-3);
  const auto j = to_json(r);
  EXPECT_EQ(j["inputs"]["dp_bucket_mb"].get<double>(), 40.0);
  EXPECT_EQ(j["dp_reduction"]["buckets"].get<std::size_t>(), r.dp_buckets);
  EXPECT_NEAR(j["dp_reduction"]["groups"][0]["last_bucket_bytes"].get<double>(), grad - full * 40e6,
              1e-3);
  EXPECT_NEAR(j["dp_reduction"]["last_bucket_bytes"].get<double>(), grad - full * 40e6, 1e-3);
  bool noted = false;
  for (const auto& n : r.notes)
    noted = noted || n.find("--dp-bucket-mb 40)") != std::string::npos;
  EXPECT_TRUE(noted);
  // Without data parallelism there is nothing to bucket.
  const auto single = plan_step(m, a100(), CommModel(sys), one_layout(1, m, sys), o);
  EXPECT_EQ(single.dp_buckets, 0u);
  // ZeRO-3 is priced as one reduce-scatter of the gradients per microbatch, not in buckets: the
  // result says so (it reported the buckets of the other stages).
  Layout z3 = l;
  z3.zero = 3;
  const auto r3 = plan_step(m, a100(), CommModel(sys), z3, o);
  ASSERT_EQ(r3.dp_reductions.size(), 1u);
  EXPECT_EQ(r3.dp_reductions[0].collective, "reduce_scatter");
  EXPECT_EQ(r3.dp_reductions[0].buckets, 1u);
  EXPECT_NEAR(r3.dp_reductions[0].last_bucket_bytes, grad, 1e-3);
  bool per_microbatch = false;
  for (const auto& n : r3.notes)
    per_microbatch = per_microbatch || n.find("ZeRO-3: per microbatch") != std::string::npos;
  EXPECT_TRUE(per_microbatch);
}

// ZeRO 2 keeps only its shard of the gradients, so it reduce-scatters them after every microbatch,
// as DeepSpeed's stage 2 does at each micro-step: 8 microbatches at dp 2 pay 8 reduce-scatters and
// the weights' all-gather, ZeRO 1 one and one (equal bytes, fp16 gradients and weights; no
// latency, no overlap). Before, ZeRO 2 was priced as ZeRO 1 while its memory assumed this.
TEST(PlanBuckets, ZeroTwoReducesEveryMicrobatch) {
  const auto m = gpt();
  const SystemSpec sys = round_system();
  Layout l;
  l.gpus = 2;
  l.micro_batch = 1;
  l.global_batch = 16;
  l.dp_overlap = false;
  l.zero = 1;
  const Layout z1 = resolve_layout(l, m, sys);
  l.zero = 2;
  const Layout z2 = resolve_layout(l, m, sys);
  ASSERT_EQ(z2.microbatches(), 8);
  const double t1 = plan_step(m, a100(), CommModel(sys), z1).breakdown.dp_comm;
  const double t2 = plan_step(m, a100(), CommModel(sys), z2).breakdown.dp_comm;
  ASSERT_GT(t1, 0);
  EXPECT_NEAR(t2 / t1, (8.0 + 1.0) / (1.0 + 1.0), 1e-9);
  bool said = false;
  for (const auto& n : plan_step(m, a100(), CommModel(sys), z2).notes)
    said = said || n.find("ZeRO-2: these buckets after every microbatch") != std::string::npos;
  EXPECT_TRUE(said);
}

// A mixture of experts reduces two groups of gradients, each on its own ranks and in its own
// buckets: the dense parameters over the 4 dense replicas, the experts over their 2 replicas. The
// result and the note give each group's buckets; before, they summed the counts and kept the last
// group's remainder, and the note read "N buckets (N-1 x 25 MB, last ...)" of one reduction.
TEST(PlanBuckets, EachGroupOfGradientsHasItsOwnBuckets) {
  auto m = gpt();
  m.attention = codesign::AttentionImpl::flash;
  m.experts = 8;
  m.top_k = 2;
  const SystemSpec sys = round_system();
  Layout l;
  l.gpus = 4;
  l.ep = 2;
  l.micro_batch = 1;
  l.global_batch = 4;
  l.dp_overlap = false;
  l = resolve_layout(l, m, sys);
  PlanOptions o;
  o.dp_bucket_bytes = 25e6;
  const auto r = plan_step(m, a100(), CommModel(sys), l, o);
  ASSERT_EQ(r.dp_reductions.size(), 2u);
  const auto& dense = r.dp_reductions[0];
  const auto& expert = r.dp_reductions[1];
  EXPECT_EQ(dense.gradients, "dense");
  EXPECT_EQ(expert.gradients, "expert");
  // The rank's 4 of 8 experts: 24 layers of a 4h MLP, 8h^2 weights and 5h biases each, in fp16.
  const double h = 1024;
  EXPECT_NEAR(expert.bytes, 24 * 4 * (8 * h * h + 5 * h) * 2, 1e-6 * expert.bytes);
  for (const auto* red : {&dense, &expert}) {
    const double full = std::floor(red->bytes / 25e6);
    EXPECT_EQ(red->buckets, static_cast<std::size_t>(full) + 1) << red->gradients;
    EXPECT_NEAR(red->last_bucket_bytes, red->bytes - full * 25e6, 1e-3) << red->gradients;
  }
  EXPECT_EQ(r.dp_buckets, dense.buckets + expert.buckets);
  std::string note;
  for (const auto& n : r.notes)
    if (n.starts_with("dp reduction:")) note = n;
  EXPECT_NE(note.find(fmt::format("dense gradients: {} buckets", dense.buckets)), std::string::npos)
      << note;
  EXPECT_NE(note.find(fmt::format("expert gradients: {} buckets", expert.buckets)),
            std::string::npos)
      << note;
}

SystemSpec with_rates() {
  SystemSpec s = round_system();
  s.elementwise_ns = {{"norm", {1, 2}},       {"residual", {3, 4}},   {"activation", {5, 6}},
                      {"attention", {7, 8}},  {"embedding", {9, 10}}, {"cross_entropy", {11, 0}},
                      {"optimizer", {0.5, 0}}};
  return s;
}

TEST(PlanElementwise, MeasuredRatesPriceEachKernelClassPerElement) {
  const auto m = gpt();  // h 1024, a 16, L 24, s 2048, v 51200, d_ff 4h, unfused attention
  const SystemSpec sys = with_rates();
  const auto r = plan_step(m, a100(), CommModel(sys), one_layout(1, m, sys));
  const double launch = a100().efficiency.launch_overhead_s;
  const double sbh = 2048.0 * 1024, scores = 16.0 * 2048 * 2048, logits = 2048.0 * 51200;
  // Per layer: two norms, two residual adds, GeLU over 4h, softmax + dropout over the scores.
  const double fwd = (2 * sbh * 1 + 2 * sbh * 3 + 4 * sbh * 5 + scores * 7) * 1e-9 + 7 * launch;
  const double bwd = (2 * sbh * 2 + 2 * sbh * 4 + 4 * sbh * 6 + scores * 8) * 1e-9 + 7 * launch;
  EXPECT_NEAR(r.breakdown.memory_bound, 24 * (fwd + bwd), 1e-9);
  EXPECT_NEAR(r.embedding_s, sbh * (9 + 10) * 1e-9 + 2 * launch, 1e-12);
  // Cross entropy per logit, and the final norm before the logits.
  EXPECT_NEAR(r.cross_entropy_s, logits * 11e-9 + 4 * launch + sbh * (1 + 2) * 1e-9 + 2 * launch,
              1e-12);
  EXPECT_NEAR(r.breakdown.optimizer, kParams * 0.5e-9 + 4 * launch, 1e-9);
}

TEST(PlanElementwise, ClassesWithoutARateKeepTheBytesModel) {
  // Only the activation has a rate: every other class is priced as on a GPU, by its bytes.
  const auto m = gpt();
  const SystemSpec gpu = round_system();
  SystemSpec one = gpu;
  one.elementwise_ns = {{"activation", {5, 6}}};
  const Layout l = one_layout(1, m, gpu);
  const auto a = plan_step(m, a100(), CommModel(gpu), l);
  const auto b = plan_step(m, a100(), CommModel(one), l);
  const double e = 2, sbh = 2048.0 * 1024;
  const double bw = a100().memory_bandwidth_gbs * 1e9 * a100().efficiency.memory_efficiency;
  // The GeLU's bytes (2e per element of s*b*4h, twice backward) give way to its elements' time.
  const double gelu_bytes = 2 * e * 4 * sbh * 3;
  EXPECT_NEAR(b.breakdown.memory_bound - a.breakdown.memory_bound,
              24 * (4 * sbh * (5 + 6) * 1e-9 - gelu_bytes / bw), 1e-9);
  EXPECT_DOUBLE_EQ(b.breakdown.optimizer, a.breakdown.optimizer);
  EXPECT_DOUBLE_EQ(b.embedding_s, a.embedding_s);
  EXPECT_DOUBLE_EQ(b.breakdown.forward_gemm, a.breakdown.forward_gemm);
}

TEST(PlanElementwise, RatesAreValidatedAndRoundTrip) {
  SystemSpec s = with_rates();
  EXPECT_NO_THROW(s.validate());
  nlohmann::json j = s;
  const auto back = j.get<SystemSpec>();
  ASSERT_EQ(back.elementwise_ns.size(), 7u);
  EXPECT_DOUBLE_EQ(back.elementwise_ns.at("activation").backward_ns, 6);
  s.elementwise_ns["softmax"] = {1, 1};
  EXPECT_THROW(s.validate(), InvalidArgument);
  s = with_rates();
  s.elementwise_ns["norm"].backward_ns = -1;
  EXPECT_THROW(s.validate(), InvalidArgument);
}

TEST(PlanElementwise, LocalCpuCatalogGivesEveryClass) {
  const SystemSpec s = system_from_catalog("local-cpu");
  for (const auto& cls : elementwise_classes()) {
    ASSERT_TRUE(s.elementwise_ns.count(cls)) << cls;
    EXPECT_GT(s.elementwise_ns.at(cls).forward_ns, 0) << cls;
  }
  EXPECT_TRUE(system_from_catalog("dgx-a100").elementwise_ns.empty());
}

}  // namespace
}  // namespace mcr::plan
