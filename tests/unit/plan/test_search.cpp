// Layout search: only valid layouts are predicted, those that fit are ranked fastest first, those
// that do not are kept apart, and a pinned dimension stays pinned.
#include <gtest/gtest.h>

#include <string>

#include "mcr/codesign/device.hpp"
#include "mcr/errors.hpp"
#include "mcr/plan/search.hpp"
#include "test_helpers.hpp"

namespace mcr::plan {
namespace {

using test::gpt;
using test::round_system;

const codesign::DeviceSpec& a100() {
  static const auto d = codesign::device_from_catalog("a100-80gb");
  return d;
}

TEST(PlanSearch, RanksValidLayoutsThatFitFastestFirst) {
  const auto m = gpt();
  const SystemSpec sys = round_system(4, 8);
  SearchSpace space;
  space.gpus = 32;
  space.global_batch = 64;
  const auto r = search_layouts(m, a100(), CommModel(sys), space, 20);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.rejected, 0);  // e.g. tp = 32 > a node, pp that does not divide 24 layers
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& p = r.ranked[i];
    EXPECT_TRUE(p.memory.fits);
    EXPECT_EQ(layout_error(p.layout, m, sys), "");
    EXPECT_EQ(p.layout.tp * p.layout.pp * p.layout.dp, 32);
    if (i > 0) {
      EXPECT_LE(r.ranked[i - 1].step_time_s, p.step_time_s);
    }
  }
}

TEST(PlanSearch, LayoutsThatDoNotFitAreNeverRanked) {
  // GPT-3 175B on 64 GPUs: most layouts are far over 80 GiB.
  const auto m = gpt(12288, 96, 96, 51200, 2048);
  SearchSpace space;
  space.gpus = 64;
  space.global_batch = 64;
  const auto r = search_layouts(m, a100(), CommModel(round_system(8, 8)), space, 5);
  EXPECT_GT(r.out_of_memory, 0);
  for (const auto& p : r.too_big)
    EXPECT_FALSE(p.memory.fits);
  for (const auto& p : r.ranked)
    EXPECT_TRUE(p.memory.fits);
}

TEST(PlanSearch, PinnedDimensionsStayPinned) {
  SearchSpace space;
  space.gpus = 32;
  space.global_batch = 64;
  space.tp = {4};
  space.recompute = {Recompute::full};
  const auto r = search_layouts(gpt(), a100(), CommModel(round_system()), space, 50);
  ASSERT_FALSE(r.ranked.empty());
  for (const auto& p : r.ranked) {
    EXPECT_EQ(p.layout.tp, 4);
    EXPECT_EQ(p.layout.recompute, Recompute::full);
  }
}

TEST(PlanSearch, NeedsAGlobalBatch) {
  SearchSpace space;
  space.gpus = 8;
  EXPECT_THROW(search_layouts(gpt(), a100(), CommModel(round_system()), space, 5), InvalidArgument);
}

// A pinned dimension below its least value is refused, naming it: a pp of 0 divided the GPU count
// by zero, and a negative GPU count quietly meant the whole system.
TEST(PlanSearch, PinnedValuesOutOfRangeAreRefused) {
  auto refused = [](SearchSpace space, const std::string& what) {
    space.gpus = space.gpus == 0 ? 8 : space.gpus;
    space.global_batch = 8;
    try {
      (void)search_layouts(gpt(), a100(), CommModel(round_system()), space, 5);
      ADD_FAILURE() << what << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  SearchSpace s;
  s.pp = {0};
  refused(s, "layout.pp 0 must be >= 1");
  s = {};
  s.tp = {-2};
  refused(s, "layout.tp -2");
  s = {};
  s.cp = {0};
  refused(s, "layout.cp 0");
  s = {};
  s.micro_batch = {0};
  refused(s, "layout.micro_batch 0");
  s = {};
  s.interleave = {0};
  refused(s, "layout.interleave 0");
  s = {};
  s.gpus = -8;
  refused(s, "space.gpus -8");
}

// A pinned dp stays pinned (it was ignored: every dp was searched), and a search in which no
// combination is a valid layout says why (it said only that no layout fits in memory).
TEST(PlanSearch, PinnedDpStaysPinnedAndAnEmptySearchSaysWhy) {
  SearchSpace space;
  space.gpus = 32;
  space.global_batch = 64;
  space.dp = {4};
  const auto r = search_layouts(gpt(), a100(), CommModel(round_system()), space, 50);
  ASSERT_FALSE(r.ranked.empty());
  for (const auto& p : r.ranked)
    EXPECT_EQ(p.layout.dp, 4);
  SearchSpace none;
  none.gpus = 32;
  none.global_batch = 64;
  none.pp = {5};  // divides neither the 32 GPUs nor anything else
  const auto n = search_layouts(gpt(), a100(), CommModel(round_system()), none, 5);
  EXPECT_EQ(n.evaluated, 0);
  EXPECT_GT(n.rejected, 0);
  EXPECT_NE(n.first_rejection.find("does not divide the 32 GPUs"), std::string::npos)
      << n.first_rejection;
  // Pinned values whose product wraps an int (2^32 -> 0) are refused, not divided by.
  SearchSpace huge = none;
  huge.pp = {65536};
  huge.cp = {65536};
  const auto h = search_layouts(gpt(), a100(), CommModel(round_system()), huge, 5);
  EXPECT_EQ(h.evaluated, 0);
  EXPECT_NE(h.first_rejection.find("tp 1 x cp 65536 x pp 65536 does not divide the 32 GPUs"),
            std::string::npos)
      << h.first_rejection;
}

// The modules given for selective recomputation reach the layouts searched (they were dropped:
// each selective layout recomputed the attention core only, and its memory was overstated).
TEST(PlanSearch, SelectiveLayoutsRecomputeTheModulesAskedFor) {
  SearchSpace space;
  space.gpus = 8;
  space.global_batch = 16;
  space.recompute = {Recompute::selective, Recompute::none};
  space.recompute_modules = {"core_attn", "layernorm"};
  const auto r = search_layouts(gpt(), a100(), CommModel(round_system()), space, 500);
  ASSERT_FALSE(r.ranked.empty());
  int selective = 0;
  for (const auto& p : r.ranked) {
    if (p.layout.recompute == Recompute::selective) {
      ++selective;
      EXPECT_EQ(p.layout.recompute_modules, space.recompute_modules);
    } else {
      EXPECT_TRUE(p.layout.recompute_modules.empty());
    }
  }
  EXPECT_GT(selective, 0);
  SearchSpace full = space;
  full.recompute = {Recompute::full};
  try {
    (void)search_layouts(gpt(), a100(), CommModel(round_system()), full, 5);
    ADD_FAILURE() << "modules without selective recomputation accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("space.recompute_modules (core_attn, layernorm) needs "
                                         "selective recomputation"),
              std::string::npos)
        << e.what();
  }
}

// ZeRO-1 asked for together with the distributed optimizer left no schedule: the search predicted
// nothing and said that no layout fits in memory.
TEST(PlanSearch, ZeroWithTheDistributedOptimizerIsRefused) {
  SearchSpace space;
  space.gpus = 8;
  space.global_batch = 16;
  space.zero = {1};
  space.distributed_optimizer = {true};
  try {
    (void)search_layouts(gpt(), a100(), CommModel(round_system()), space, 5);
    ADD_FAILURE() << "zero 1 with the distributed optimizer accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("space.distributed_optimizer and space.zero 1"),
              std::string::npos)
        << e.what();
  }
}

// --advise lists the input shape's pair and the fastest `top` others (before, --top 1 listed the
// input and every single-field fix), and a smaller `top` lists a prefix of a larger one's
// candidates (the advisor's own ranking, by layer throughput, cut its pool to `top` first).
TEST(PlanSearch, AdviseListsTheInputAndTheTopPairs) {
  SearchSpace space;
  space.gpus = 8;
  space.global_batch = 16;
  space.tp = {1};
  space.pp = {1};
  codesign::AdvisorOptions opts;
  auto m = gpt(2560, 32, 32, 50257, 2048);
  const auto others = [&](int top) {
    opts.top = top;
    std::vector<AdvisedPair> found;
    int inputs = 0;
    for (const auto& p : advise_with_layouts(m, a100(), CommModel(round_system()), space, opts)) {
      if (p.shape.changes.empty()) {
        ++inputs;
      } else {
        found.push_back(p);
      }
    }
    EXPECT_EQ(inputs, 1) << "top " << top << ": the input shape's pair is not listed once";
    return found;
  };
  const auto ten = others(10);
  ASSERT_GE(ten.size(), 3u);
  for (const int top : {1, 2}) {
    const auto few = others(top);
    ASSERT_EQ(few.size(), static_cast<std::size_t>(top)) << "top " << top;
    for (int i = 0; i < top; ++i) {
      EXPECT_EQ(few[i].shape.shape.h, ten[i].shape.shape.h) << "top " << top << ", #" << i;
      EXPECT_DOUBLE_EQ(few[i].best.step_time_s, ten[i].best.step_time_s)
          << "top " << top << ", #" << i;
    }
  }
}

TEST(PlanSearch, AdviseIncludesTheInputAndSortsPairs) {
  SearchSpace space;
  space.gpus = 8;
  space.global_batch = 16;
  space.tp = {1};
  space.pp = {1};
  codesign::AdvisorOptions opts;
  opts.top = 3;
  auto m = gpt(2560, 32, 32, 50257, 2048);
  const auto pairs = advise_with_layouts(m, a100(), CommModel(round_system()), space, opts);
  ASSERT_FALSE(pairs.empty());
  bool has_input = false;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    has_input = has_input || pairs[i].shape.changes.empty();
    if (i > 0) {
      EXPECT_LE(pairs[i - 1].best.step_time_s, pairs[i].best.step_time_s);
    }
  }
  EXPECT_TRUE(has_input);
}

}  // namespace
}  // namespace mcr::plan
