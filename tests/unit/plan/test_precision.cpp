// FP8 as Transformer Engine runs it, Megatron's distributed optimizer, and the throughput outputs,
// against quantities worked out here: which GEMMs change dtype, the bytes the casts move, the
// distributed optimizer's 6 + 12/d bytes per parameter (Megatron-LM docs, bf16 parameters with fp32
// gradients), tokens per second per GPU and the FLOPs causal masking saves.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "mcr/codesign/device.hpp"
#include "mcr/errors.hpp"
#include "mcr/plan/planner.hpp"
#include "test_helpers.hpp"

namespace mcr::plan {
namespace {

using test::gpt;
using test::round_system;

const codesign::DeviceSpec& h100() {
  static const auto d = codesign::device_from_catalog("h100-sxm");
  return d;
}

codesign::ModelShape bf16_gpt() {
  auto m = gpt(1024, 16, 24, 51200, 4096);
  m.dtype = codesign::DType::bf16;
  m.attention = codesign::AttentionImpl::flash;
  return m;
}

Layout one_gpu(std::int64_t gbs = 1) {
  Layout l;
  l.gpus = 1;
  l.global_batch = gbs;
  return l;
}

TEST(PlanFp8, LinearLayersOnlyRunInFp8) {
  const auto m = bf16_gpt();
  const SystemSpec sys = round_system();
  const CommModel comm(sys);
  Layout l = resolve_layout(one_gpu(), m, sys);
  const auto bf16 = plan_step(m, h100(), comm, l);
  l.fp8 = Fp8::delayed;
  const auto fp8 = plan_step(m, h100(), comm, l);
  // The logits stay in bf16; the layers' GEMMs get faster; casts appear.
  EXPECT_DOUBLE_EQ(fp8.logits_gemm_s, bf16.logits_gemm_s);
  EXPECT_LT(fp8.breakdown.forward_gemm, bf16.breakdown.forward_gemm);
  EXPECT_GT(fp8.breakdown.fp8_casts, 0.0);
  EXPECT_EQ(bf16.breakdown.fp8_casts, 0.0);
  // The same FLOPs are counted; utilisation is stated against the FP8 peak.
  EXPECT_DOUBLE_EQ(fp8.model_flops, bf16.model_flops);
  EXPECT_DOUBLE_EQ(fp8.peak_tflops, 1978.9);
  EXPECT_DOUBLE_EQ(bf16.peak_tflops, 989.4);
}

TEST(PlanFp8, CastsMoveTheBytesOfInputsGradientsAndWeights) {
  // One GPT layer, T = 4096 tokens, h = 1024, e = 2 (bf16), one microbatch per step, delayed
  // scaling. Forward: the QKV and MLP-up inputs come from norm kernels (FP8 + transposed copy,
  // 2 bytes each), the projection input (h wide) and the MLP-down input (4h wide) are read and
  // written (2 + 2). Backward: every output gradient, read and written twice (2 + 2): 3h, h, 4h,
  // h. Weights: 12 h^2, read and written twice, once per step.
  const double T = 4096, h = 1024, e = 2;
  const double forward = T * h * 2 + T * h * (e + 2) + T * h * 2 + T * 4 * h * (e + 2);
  const double backward = T * (3 * h + h + 4 * h + h) * (e + 2);
  const double weights = 12 * h * h * (e + 2);
  const auto m = bf16_gpt();
  SystemSpec sys = round_system();
  sys.stream_efficiency = 1.0;
  Layout l = resolve_layout(one_gpu(), m, sys);
  l.fp8 = Fp8::delayed;
  const auto r = plan_step(m, h100(), CommModel(sys), l);
  const double bw = h100().memory_bandwidth_gbs * 1e9;
  const double launch = h100().efficiency.launch_overhead_s;
  const double expected = 24 * ((forward + weights) / bw + 4 * launch + backward / bw + 4 * launch);
  EXPECT_NEAR(r.breakdown.fp8_casts / expected, 1.0, 1e-9);
  // FP8 weights need no cast.
  l.fp8_params = true;
  const auto p = plan_step(m, h100(), CommModel(sys), l);
  EXPECT_NEAR(p.breakdown.fp8_casts / (expected - 24 * weights / bw), 1.0, 1e-9);
}

TEST(PlanFp8, DtypeFp8MeansTransformerEngineStyle) {
  auto m = bf16_gpt();
  m.dtype = codesign::DType::fp8;
  const SystemSpec sys = round_system();
  const auto r = plan_step(m, h100(), CommModel(sys), resolve_layout(one_gpu(), m, sys));
  EXPECT_EQ(r.model.dtype, codesign::DType::bf16);
  EXPECT_EQ(r.layout.fp8, Fp8::delayed);
  EXPECT_NE(r.notes.front().find("FP8 linear layers"), std::string::npos);
}

// MXFP8 runs on Blackwell's block-scaled tensor cores only (Transformer Engine refuses it before
// sm100): a Hopper device is refused, naming the recipe, the device and its arch (written "sm90"
// or "sm_90"); a Blackwell one is planned (before, Hopper was priced as if it ran MXFP8).
TEST(PlanFp8, MxFp8NeedsBlackwell) {
  const auto m = bf16_gpt();
  const SystemSpec sys = round_system();
  Layout l = resolve_layout(one_gpu(), m, sys);
  l.fp8 = Fp8::mxfp8;
  try {
    (void)plan_step(m, h100(), CommModel(sys), l);
    ADD_FAILURE() << "mxfp8 accepted on " << h100().name;
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    for (const char* part : {"layout.fp8 mxfp8", "h100-sxm", "hopper sm90", "sm100"}) {
      EXPECT_NE(what.find(part), std::string::npos) << part << " not in: " << what;
    }
  }
  auto file_device = h100();
  file_device.arch = "NVIDIA H100, sm_90";
  EXPECT_THROW((void)plan_step(m, file_device, CommModel(sys), l), InvalidArgument)
      << "arch '" << file_device.arch << "' read as Blackwell or unknown";
  const auto b200 = codesign::device_from_catalog("b200");
  EXPECT_GT(plan_step(m, b200, CommModel(sys), l).step_time_s, 0);
  l.fp8 = Fp8::blockwise;  // Hopper runs the other recipes
  EXPECT_GT(plan_step(m, h100(), CommModel(sys), l).step_time_s, 0);
}

// dtype fp8 implies the delayed recipe, so FP8 weights need no recipe of their own (the layout
// rules ran before the recipe was implied and refused every such layout).
TEST(PlanFp8, DtypeFp8AcceptsFp8Params) {
  auto m = bf16_gpt();
  m.dtype = codesign::DType::fp8;
  const SystemSpec sys = round_system();
  Layout l = one_gpu();
  l.fp8_params = true;
  const auto r = plan_step(m, h100(), CommModel(sys), resolve_layout(l, m, sys));
  EXPECT_EQ(r.layout.fp8, Fp8::delayed);
  EXPECT_TRUE(r.layout.fp8_params);
  m.dtype = codesign::DType::bf16;  // a bf16 model still needs a recipe
  EXPECT_EQ(layout_error(resolve_layout(one_gpu(), m, sys), m, sys), "");
  Layout bf16 = resolve_layout(one_gpu(), m, sys);
  bf16.fp8_params = true;
  EXPECT_NE(layout_error(bf16, m, sys).find("layout.fp8_params needs an FP8 recipe"),
            std::string::npos);
}

TEST(PlanDistributedOptimizer, SixPlusTwelveOverDBytesPerParameter) {
  // Megatron-LM's distributed optimizer with bf16 parameters and fp32 gradients: 6 + 12/d bytes per
  // parameter (its docs' table), d the data-parallel size.
  const auto m = bf16_gpt();
  const SystemSpec sys = round_system();
  Layout l = one_gpu(8);
  l.gpus = 8;
  l.distributed_optimizer = true;
  PlanOptions o;
  o.grad_bytes_per_param = 4;
  const auto r = plan_memory(m, h100(), resolve_layout(l, m, sys), o);
  const double params = r.weights / 2;
  EXPECT_NEAR((r.weights + r.gradients + r.optimizer) / params, 6 + 12.0 / 8, 1e-9);
}

TEST(PlanGradients, TiedEmbeddingsAreReducedInTheGradientsWidth) {
  // pp 2, dp 1: the only reduction is the tied embedding's gradient between the first and the last
  // stage, v h / t elements in the gradients' width (--grad-dtype): fp32 moves twice bf16's bytes.
  const auto m = bf16_gpt();
  const SystemSpec sys = round_system();
  Layout l = one_gpu(8);
  l.gpus = 2;
  l.pp = 2;
  l = resolve_layout(l, m, sys);
  PlanOptions bf16, fp32;
  bf16.grad_bytes_per_param = 2;
  fp32.grad_bytes_per_param = 4;
  const auto half = plan_step(m, h100(), CommModel(sys), l, bf16);
  const auto full = plan_step(m, h100(), CommModel(sys), l, fp32);
  EXPECT_GT(half.breakdown.dp_comm, 0);
  EXPECT_NEAR(full.breakdown.dp_comm, 2 * half.breakdown.dp_comm, 1e-12);
}

// The gradients' reduction is looked up in a table and its rules under --grad-dtype's element type
// (before, 2-byte gradients of an fp32 model were looked up as f32, fp16 ones of a bf16 model as
// bf16). A rule for that dtype alone picks mpi; the table's range would pick gloo.
TEST(PlanGradients, TheReductionIsLookedUpUnderTheGradientsDtype) {
  const SystemSpec sys = round_system(1, 2);
  TuningTable table;
  TuningEntry e;
  e.op = OpType::all_reduce;
  e.dtype_class = "float";
  e.group_size = 2;
  e.ranges = {{0, kMaxBytes, "gloo"}};
  table.entries.push_back(e);
  for (std::size_t bytes : {16u, 1024u, 4096u}) {
    table.samples.push_back({OpType::all_reduce, "float", 2, bytes, "mpi", 1.0 + bytes / 100.0});
    table.samples.push_back({OpType::all_reduce, "float", 2, bytes, "gloo", 5.0 + bytes / 1000.0});
  }
  const auto dp_note = [&](codesign::DType model, codesign::DType grad, const char* rule) {
    auto m = bf16_gpt();
    m.dtype = model;
    Layout l = one_gpu(2);
    l.gpus = 2;
    l = resolve_layout(l, m, sys);
    CommModel comm(sys, false);
    comm.add_table(Tier::any, table);
    comm.set_rules(RuleSet::parse(rule));
    PlanOptions o;
    o.grad_dtype = grad;
    o.grad_bytes_per_param = codesign::dtype_bytes(grad);
    for (const auto& n : plan_step(m, h100(), comm, l, o).notes)
      if (n.rfind("dp reduction:", 0) == 0) return n;
    return std::string();
  };
  for (const auto& [model, grad, rule] :
       {std::tuple{codesign::DType::fp32, codesign::DType::bf16, "all_reduce/bf16:*=mpi"},
        std::tuple{codesign::DType::bf16, codesign::DType::fp16, "all_reduce/f16:*=mpi"}}) {
    const std::string note = dp_note(model, grad, rule);
    EXPECT_NE(note.find("mpi"), std::string::npos) << rule << ": " << note;
    EXPECT_NE(note.find("(rule)"), std::string::npos) << rule << ": " << note;
  }
}

TEST(PlanDistributedOptimizer, OverlapsItsGatherThatZeroOneExposes) {
  const auto m = bf16_gpt();
  const SystemSpec sys = round_system();
  Layout l = one_gpu(64);
  l.gpus = 16;  // dp 16 over two nodes
  l = resolve_layout(l, m, sys);
  l.zero = 1;
  const auto zero1 = plan_step(m, h100(), CommModel(sys), l);
  l.zero = 0;
  l.distributed_optimizer = true;
  const auto dist = plan_step(m, h100(), CommModel(sys), l);
  EXPECT_LT(dist.breakdown.dp_comm, zero1.breakdown.dp_comm);
  EXPECT_DOUBLE_EQ(dist.memory.optimizer, zero1.memory.optimizer);
}

// The note says whether the distributed optimizer's collectives were overlapped, as priced: with
// dp_overlap off (--no-dp-overlap) both are exposed (before, the note said overlapped all the
// same).
TEST(PlanDistributedOptimizer, TheNoteSaysWhetherItsCollectivesAreOverlapped) {
  const auto m = bf16_gpt();
  const SystemSpec sys = round_system();
  Layout l = one_gpu(64);
  l.gpus = 16;
  l.distributed_optimizer = true;
  l = resolve_layout(l, m, sys);
  const auto dp_note = [&](const Layout& layout) {
    for (const auto& n : plan_step(m, h100(), CommModel(sys), layout).notes)
      if (n.rfind("dp reduction:", 0) == 0) return n;
    return std::string();
  };
  EXPECT_NE(dp_note(l).find("reduce-scatter and all-gather overlapped"), std::string::npos)
      << dp_note(l);
  l.dp_overlap = false;
  const std::string off = dp_note(l);
  EXPECT_EQ(off.find("all-gather overlapped"), std::string::npos) << off;
  EXPECT_NE(off.find("not overlapped"), std::string::npos) << off;
}

TEST(PlanOutput, TokensPerGpuAndTheCausalConvention) {
  // Causal flash attention computes the tiles on and below the diagonal: (n + 1) / (2n) of the
  // n x n tiles of 128, n = s / 128 = 32. model_flops counts all s x s scores (4 b s^2 h per layer
  // forward, Megatron's convention); model_flops_causal leaves out the skipped share.
  const auto m = bf16_gpt();
  const SystemSpec sys = round_system();
  const auto r = plan_step(m, h100(), CommModel(sys), resolve_layout(one_gpu(2), m, sys));
  const double s = 4096, h = 1024, L = 24, B = 2;
  EXPECT_NEAR(r.tokens_per_s_per_gpu, B * s / r.step_time_s, 1e-6);
  const double n = s / 128;
  const double skipped = 3 * L * B * 4 * s * s * h * (1 - (n + 1) / (2 * n));
  EXPECT_NEAR((r.model_flops - r.model_flops_causal) / skipped, 1.0, 1e-9);
  EXPECT_LT(r.mfu_causal, r.mfu);
}

}  // namespace
}  // namespace mcr::plan
