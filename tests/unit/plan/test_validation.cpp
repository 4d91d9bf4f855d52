// The published Megatron runs (published_runs.json): the planner stays within the targets of
// docs/planner.md on the runs not used to fit the system's compute efficiency.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "mcr/plan/validation.hpp"

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
}

}  // namespace
}  // namespace mcr::plan
