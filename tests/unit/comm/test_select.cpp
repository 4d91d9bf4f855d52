// The pure selection function (mcr::select_backend), which the runtime's Selector and the planner
// both call: its order (override, rules, table, presets, default priority) and its verdicts.
#include <gtest/gtest.h>

#include <map>

#include "mcr/comm/selection.hpp"

namespace mcr {
namespace {

using Source = SelectionCandidate::Source;
using Verdict = SelectionCandidate::Verdict;

const std::vector<std::string> kPriority = {"nccl", "mpi", "gloo"};

// A fit function from a table of answers: absent names are unavailable, listed ones fit unless
// they carry a reason.
BackendFitFn fits(std::map<std::string, std::string> unsupported, std::vector<std::string> absent) {
  return [=](std::string_view name) -> BackendFit {
    for (const auto& a : absent) {
      if (a == name) return {false, "not in this process"};
    }
    const auto it = unsupported.find(std::string(name));
    return {true, it == unsupported.end() ? std::string() : it->second};
  };
}

TuningTable table_mpi_small_gloo_large(int group_size) {
  TuningTable t;
  TuningEntry e;
  e.op = OpType::all_reduce;
  e.dtype_class = "float";
  e.group_size = group_size;
  e.ranges = {{0, 1023, "mpi"}, {1024, kMaxBytes, "gloo"}};
  t.entries.push_back(e);
  return t;
}

TEST(SelectBackend, DefaultPriorityFirstFitWins) {
  SelectionInputs in;
  in.priority = kPriority;
  const auto c = select_backend(in, fits({{"nccl", "host buffers"}}, {}), {});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].name, "nccl");
  EXPECT_EQ(c[0].verdict, Verdict::unsupported);
  EXPECT_EQ(c[0].detail, "host buffers");
  EXPECT_EQ(c[1].name, "mpi");
  EXPECT_EQ(c[1].verdict, Verdict::chosen);
  EXPECT_EQ(c[1].source, Source::fallback);
  EXPECT_EQ(c[1].index, 1u);
  ASSERT_NE(chosen_backend(c), nullptr);
  EXPECT_EQ(*chosen_backend(c), "mpi");
  EXPECT_EQ(to_string(c[1].source), "default");
}

TEST(SelectBackend, OverrideIsNeverReplaced) {
  SelectionInputs in;
  in.priority = kPriority;
  SelectionQuery q;
  q.override_name = "gloo";
  auto c = select_backend(in, fits({}, {}), q);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].verdict, Verdict::chosen);
  EXPECT_EQ(c[0].source, Source::override);
  c = select_backend(in, fits({{"gloo", "no"}}, {}), q);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(chosen_backend(c), nullptr);  // an unfit override is an error, not a fallback
}

TEST(SelectBackend, RulesInOrderSkippingUnfitBackends) {
  const RuleSet rules = RuleSet::parse("all_reduce:0-1K=gloo;all_reduce:*=mpi;*:*=nccl");
  SelectionInputs in;
  in.rules = &rules;
  in.priority = kPriority;
  SelectionQuery q;
  q.bytes = 512;
  auto c = select_backend(in, fits({{"gloo", "busy"}}, {}), q);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].verdict, Verdict::unsupported);
  EXPECT_EQ(c[1].name, "mpi");
  EXPECT_EQ(c[1].source, Source::rule);
  EXPECT_EQ(c[1].index, 1u);
  q.op = OpType::broadcast;  // only the catch-all rule matches; nccl is absent: default priority
  c = select_backend(in, fits({}, {"nccl"}), q);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].source, Source::rule);
  EXPECT_EQ(c[0].verdict, Verdict::unavailable);
  EXPECT_EQ(c[1].source, Source::fallback);
  EXPECT_EQ(c[2].name, "mpi");
  EXPECT_EQ(c[2].verdict, Verdict::chosen);
}

TEST(SelectBackend, TableBeforePresetsAndTheOthersAreSlower) {
  const TuningTable t = table_mpi_small_gloo_large(2);
  const RuleSet presets = RuleSet::parse("*:*=gloo");
  SelectionInputs in;
  in.table = &t;
  in.presets = &presets;
  in.priority = kPriority;
  in.group_size = 2;
  SelectionQuery q;
  q.bytes = 100;
  auto c = select_backend(in, fits({}, {}), q);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].name, "mpi");
  EXPECT_EQ(c[0].source, Source::tuning);
  EXPECT_EQ(c[1].verdict, Verdict::slower);
  EXPECT_EQ(c[2].verdict, Verdict::slower);
  // No entry for 4 ranks: the presets decide, before the default priority.
  in.group_size = 4;
  c = select_backend(in, fits({}, {}), q);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].name, "gloo");
  EXPECT_EQ(c[0].source, Source::preset);
}

TEST(SelectBackend, TableOfAnotherTopologyIsNotedOnTheDefault) {
  TuningTable t = table_mpi_small_gloo_large(4);
  t.entries[0].hosts = 4;
  t.entries[0].ranks_per_host = 1;
  SelectionInputs in;
  in.table = &t;
  in.priority = kPriority;
  in.group_size = 4;
  in.shape = HostShape{2, 2};
  const auto c = select_backend(in, fits({}, {}), {});
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].source, Source::fallback);
  EXPECT_NE(c[0].table_note.find("4x1"), std::string::npos) << c[0].table_note;
}

TEST(SelectBackend, TheCallFormPicksTheTablesEntry) {
  TuningTable t = table_mpi_small_gloo_large(2);
  t.entries[0].form = "sync";
  TuningEntry async = t.entries[0];
  async.form = "async";
  async.ranges = {{0, kMaxBytes, "gloo"}};
  t.entries.push_back(async);
  SelectionInputs in;
  in.table = &t;
  in.priority = kPriority;
  in.group_size = 2;
  SelectionQuery q;
  q.bytes = 16;
  EXPECT_EQ(*chosen_backend(select_backend(in, fits({}, {}), q)), "mpi");
  q.form = CallForm::async;
  const auto c = select_backend(in, fits({}, {}), q);
  EXPECT_EQ(*chosen_backend(c), "gloo");
  EXPECT_EQ(c[0].detail, "measured with async calls");
}

}  // namespace
}  // namespace mcr
