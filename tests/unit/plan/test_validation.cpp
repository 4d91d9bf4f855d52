// The published Megatron runs (published_runs.json): the planner stays within the targets of
// docs/planner.md on the runs not used to fit the system's compute efficiency.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "mcr/codesign/device.hpp"
#include "mcr/errors.hpp"
#include "mcr/plan/planner.hpp"
#include "mcr/plan/validation.hpp"
#include "test_helpers.hpp"

namespace mcr::plan {
namespace {

TEST(PlanValidation, PublishedMegatronRuns) {
  const auto rows = validate_runs(load_published_runs(MCR_PLAN_RUNS));
  ASSERT_EQ(rows.size(), 8u);
  double sum = 0, worst = 0;
  int held_out = 0;
  for (const auto& r : rows) {
    if (r.run.name.rfind("22B", 0) == 0) continue;  // the fitting subset
    sum += std::abs(r.error);
    worst = std::max(worst, std::abs(r.error));
    ++held_out;
    EXPECT_TRUE(r.predicted.memory.fits) << r.run.name;
  }
  ASSERT_EQ(held_out, 6);
  EXPECT_LE(sum / held_out, 0.05);
  EXPECT_LE(worst, 0.12);
}

// Narayanan et al. 2021 Table 1 with the micro-batch and interleaving of the paper's launch script,
// on dgx-a100-2021 (compute efficiency fitted on the 1.7B and 3.6B runs): the same targets on the
// eight held-out runs.
TEST(PlanValidation, Narayanan2021TableOne) {
  const auto rows = validate_runs(load_published_runs(MCR_PLAN_RUNS_2021));
  ASSERT_EQ(rows.size(), 10u);
  double sum = 0, worst = 0;
  int held_out = 0;
  for (const auto& r : rows) {
    if (r.run.name.find("(fit)") != std::string::npos) continue;
    sum += std::abs(r.error);
    worst = std::max(worst, std::abs(r.error));
    ++held_out;
    EXPECT_TRUE(r.predicted.memory.fits) << r.run.name;
  }
  ASSERT_EQ(held_out, 8);
  EXPECT_LE(sum / held_out, 0.05);
  EXPECT_LE(worst, 0.12);
}

// Recent runs (published_runs_recent.json: NVIDIA's DGX Cloud benchmarking recipes on H100,
// Megatron-Bridge's and NeMo's performance summaries on H100 and B200), as step-time errors. Every
// run is expressible and fits in memory. On the runs not used to fit a system's compute efficiency
// ("fit" in the name), among the dense and coarse-grained MoE models, the targets of
// docs/performance/planner.md#recent-h100-b200 (mean <= 10 %, worst <= 20 %) hold with the
// margins asserted here. The fine-grained MoE models (64 experts or more) are predicted too fast
// by 18-38 % (docs/performance/planner.md#fine-grained-moe and #moe-profile: time inside the MoE
// layers' kernels, waits included, and FP8 on narrow experts, not fully priced; the GPU's idle
// time a smaller part); they are held to a bound that guards against regressions, and to the sign.
TEST(PlanValidation, RecentRunsOnH100AndB200) {
  const auto rows = validate_runs(load_published_runs(MCR_PLAN_RUNS_RECENT));
  ASSERT_EQ(rows.size(), 28u);
  struct Group {
    double sum = 0, worst = 0;
    int n = 0;
    void add(double err) {
      sum += err;
      worst = std::max(worst, err);
      ++n;
    }
  };
  std::map<std::string, Group> held_out, all;
  for (const auto& r : rows) {
    EXPECT_TRUE(r.predicted.memory.fits) << r.run.name;
    const double err = std::abs(r.step_error);
    const bool fp8 = r.predicted.layout.fp8 != Fp8::none;
    const std::string group = r.predicted.system + (fp8 ? " fp8" : " bf16");
    all[group].add(err);
    if (r.run.name.find("fit)") != std::string::npos) {
      EXPECT_LT(err, 0.001) << r.run.name;  // the fitted run itself
      continue;
    }
    if (r.predicted.model.experts >= 64) {
      EXPECT_LE(err, 0.38) << r.run.name;
      EXPECT_LT(r.step_error, 0) << r.run.name;
      continue;
    }
    held_out[group].add(err);
  }
  struct Bound {
    const char* group;
    double mean, worst;
  };
  // H100 FP8's worst is Nemotron-4 340B at +16.0 % (its TP collectives: docs/performance/
  // planner.md). B200's worst was the same model's exposed reduction (+18.1 %) until interleaved
  // pipelines reduced chunk by chunk (+3.6 %) and gathered chunk by chunk (−3.3 %).
  for (const Bound& b : {Bound{"dgx-h100 bf16", 0.06, 0.12}, Bound{"dgx-h100 fp8", 0.08, 0.17},
                         Bound{"dgx-b200 fp8", 0.06, 0.12}}) {
    const auto& g = held_out[b.group];
    ASSERT_GT(g.n, 0) << b.group;
    EXPECT_LE(g.sum / g.n, b.mean) << b.group;
    EXPECT_LE(g.worst, b.worst) << b.group;
  }
  // With the fine-grained MoE runs: H100 BF16 keeps its mean within 10 % (9.2 % with the profiled
  // Qwen3-30B-A3B run at -20.4 %).
  EXPECT_LE(all["dgx-h100 bf16"].sum / all["dgx-h100 bf16"].n, 0.10);
}

// gpt-oss's clamped GLU is read from the runs' options.
TEST(PlanValidation, RunOptionsReachThePlan) {
  const auto runs = load_published_runs(MCR_PLAN_RUNS_RECENT);
  int clamped = 0;
  for (const auto& r : runs) {
    if (r.options.moe_glu_clamp) {
      ++clamped;
      EXPECT_NE(r.name.find("GPT-OSS"), std::string::npos) << r.name;
    }
  }
  EXPECT_EQ(clamped, 2);
  EXPECT_TRUE(options_from_json({{"moe_glu_clamp", true}}).moe_glu_clamp);
  EXPECT_FALSE(options_from_json(nlohmann::json::object()).moe_glu_clamp);
}

// A run's layout and options are read as strictly as a model: a misspelt key, a fraction where a
// count belongs or a value out of range is named (they were dropped, truncated or used).
TEST(PlanValidation, LayoutAndOptionsAreReadStrictly) {
  const auto error_of = [](const auto& read, const nlohmann::json& j) -> std::string {
    try {
      read(j);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  const auto layout = [](const nlohmann::json& j) { return layout_from_json(j); };
  const auto options = [](const nlohmann::json& j) { return options_from_json(j); };
  EXPECT_NE(error_of(layout, {{"microbatch", 4}}).find("layout: unknown field 'microbatch'"),
            std::string::npos);
  EXPECT_NE(error_of(layout, {{"tp", 8.5}}).find("layout: field 'tp' = 8.5 must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of(layout, {{"tp", true}}).find("field 'tp' = true must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of(options, {{"optimizer_bytes_per_param", -12}})
                .find("options.optimizer_bytes_per_param -12: must be a finite number"),
            std::string::npos);
  EXPECT_NE(error_of(options, {{"dp_bucket_mb", -1}}).find("options.dp_bucket_mb -1: must be"),
            std::string::npos);
  EXPECT_NE(error_of(options, {{"bucket_mb", 25}}).find("options: unknown field 'bucket_mb'"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(options_from_json({{"dp_bucket_mb", 40}}).dp_bucket_bytes, 40e6);
}

// A run's own keys too: "sytem" planned the run on the default dgx-a100 and measured the error
// against the wrong machine; "option" dropped the run's options.
TEST(PlanValidation, RunKeysAreReadStrictly) {
  const std::string path = ::testing::TempDir() + "runs-misspelt.json";
  const auto error_of = [&](const std::string& key, const std::string& published) {
    {
      std::ofstream out(path);
      out << R"({"runs": [{"name": "r", "source": "s", )" << key << R"(, "model": )"
          << R"({"h": 1024, "a": 16, "L": 4, "v": 32000, "s": 2048}, )"
          << R"("layout": {"gpus": 8, "tp": 8, "micro_batch": 1, "global_batch": 8}, )"
          << R"("published": )" << published << "}]}";
    }
    try {
      load_published_runs(path);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of(R"("system": "dgx-h100")", R"({"step_time_s": 1})"), "");
  EXPECT_NE(error_of(R"("sytem": "dgx-h100")", R"({"step_time_s": 1})")
                .find("runs[0]: unknown field 'sytem'"),
            std::string::npos);
  EXPECT_NE(error_of(R"("option": {})", R"({"step_time_s": 1})").find("unknown field 'option'"),
            std::string::npos);
  EXPECT_NE(error_of(R"("system": "dgx-h100")", R"({"step_time_s": 1, "tflops": 100})")
                .find("run 'r': published: unknown field 'tflops'"),
            std::string::npos);
  std::remove(path.c_str());
}

// A plan's JSON layout reads back as the same layout: a dense model's etp is 0 (it was tp, which
// the reader refused as expert TP without experts).
TEST(PlanValidation, APlansLayoutReadsBack) {
  const auto m = test::gpt();
  const auto sys = test::round_system();
  Layout l;
  l.gpus = 8;
  l.tp = 8;
  l.sequence_parallel = true;
  const auto resolved = resolve_layout(l, m, sys);
  const auto plan =
      plan_step(m, codesign::device_from_catalog("a100-80gb"), CommModel(sys), resolved);
  const auto j = to_json(plan)["layout"];
  EXPECT_EQ(j["etp"], 0);
  EXPECT_EQ(resolve_layout(layout_from_json(j), m, sys), resolved);
}

TEST(PlanValidation, LayoutFieldsRoundTrip) {
  const auto l = layout_from_json({{"gpus", 64},
                                   {"tp", 8},
                                   {"pp", 8},
                                   {"micro_batch", 2},
                                   {"global_batch", 128},
                                   {"interleave", 3},
                                   {"recompute", "selective"},
                                   {"sequence_parallel", true},
                                   {"zero", 1}});
  EXPECT_EQ(l.tp, 8);
  EXPECT_EQ(l.micro_batch, 2);
  EXPECT_EQ(l.recompute, Recompute::selective);
  EXPECT_TRUE(l.sequence_parallel);
  EXPECT_EQ(l.zero, 1);
  const auto recent = layout_from_json({{"gpus", 64},
                                        {"tp", 4},
                                        {"cp", 2},
                                        {"ep", 8},
                                        {"etp", 1},
                                        {"capacity_factor", 1.25},
                                        {"moe_dispatcher", "flex"},
                                        {"fp8", "current"},
                                        {"fp8_params", true},
                                        {"distributed_optimizer", true},
                                        {"tp_comm_overlap", true},
                                        {"pp_comm_overlap", true},
                                        {"uneven_pipeline", true},
                                        {"recompute", "selective"},
                                        {"recompute_modules", {"layernorm", "moe_act"}}});
  EXPECT_EQ(recent.cp, 2);
  EXPECT_EQ(recent.ep, 8);
  EXPECT_EQ(recent.expert_tp(), 1);
  EXPECT_DOUBLE_EQ(recent.capacity_factor, 1.25);
  EXPECT_EQ(recent.moe_dispatcher, Dispatcher::flex);
  EXPECT_EQ(recent.fp8, Fp8::current);
  EXPECT_TRUE(recent.fp8_params && recent.distributed_optimizer && recent.tp_comm_overlap &&
              recent.pp_comm_overlap && recent.uneven_pipeline);
  EXPECT_TRUE(recent.recomputes("moe_act"));
  EXPECT_FALSE(recent.recomputes("core_attn"));
}

}  // namespace
}  // namespace mcr::plan
