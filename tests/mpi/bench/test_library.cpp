// The benchmark library called directly, as a program other than the CLI would: a sweep, the
// comparison of automatic selection with every backend, and tuning, each on tiny sizes. Checks the
// results' structure and that the callbacks report every result as it completes (2 ranks).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "mcr/bench.hpp"
#include "mcr/comm.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

using namespace mcr;

namespace {

Communicator g_world;

TEST(Library, SweepReportsEveryRowThroughItsCallback) {
  bench::SweepOptions o;
  o.ops = {OpType::all_reduce, OpType::all_gather, OpType::broadcast, OpType::barrier};
  o.sizes = {64, 4096};
  o.place = bench::Placement::both;
  o.iterations = 2;
  o.warmup = 1;
  o.min_time_s = 0;  // exactly -n
  std::size_t groups = 0;
  std::vector<bench::SweepRow> seen;
  bench::SweepCallbacks cb;
  cb.on_group = [&](const bench::SweepGroup&) { ++groups; };
  cb.on_row = [&](const bench::SweepRow& r) { seen.push_back(r); };
  const auto result = bench::run_sweep(g_world, o, cb);
  // all_reduce and all_gather in and out of place (2 sizes each); broadcast, whose one form has
  // one buffer, once (it was timed twice, once labelled out of place); barrier once (1 row).
  EXPECT_EQ(groups, 6u);
  ASSERT_EQ(result.rows.size(), 11u);
  ASSERT_EQ(seen.size(), result.rows.size());
  EXPECT_EQ(result.wrong, 0u);
  for (const auto& r : result.rows) {
    EXPECT_EQ(r.requested, "auto");
    EXPECT_FALSE(r.backend.empty());
    EXPECT_GT(r.time_us, 0);
    EXPECT_EQ(r.iterations, 2);
    if (r.op != OpType::barrier) {
      // Bytes per second, in 1e9: computed here, not by the library's own formula.
      EXPECT_DOUBLE_EQ(r.algbw_gbps, static_cast<double>(r.bytes) / (r.time_us * 1e-6) / 1e9);
    }
  }
  EXPECT_EQ(result.rows.back().op, OpType::barrier);
  for (const auto& r : result.rows) {
    if (r.op == OpType::broadcast) {
      EXPECT_FALSE(r.in_place);
    }
  }
}

// --place in: ops without an in-place form run out of place once instead of being dropped (before,
// a sweep of send and barrier in place measured nothing and reported success).
TEST(Library, SweepInPlaceKeepsOpsWithoutAnInPlaceForm) {
  bench::SweepOptions o;
  o.ops = {OpType::send, OpType::barrier, OpType::all_reduce};
  o.sizes = {64};
  o.place = bench::Placement::in;
  o.iterations = 2;
  o.warmup = 1;
  o.min_time_s = 0;
  const auto result = bench::run_sweep(g_world, o);
  ASSERT_EQ(result.rows.size(), g_world.size() > 1 ? 3u : 2u);
  for (const auto& r : result.rows)
    EXPECT_EQ(r.in_place, r.op == OpType::all_reduce) << to_string(r.op);
  EXPECT_EQ(result.wrong, 0u);
}

TEST(Library, SweepFillsTheMinimumTimeWithMoreIterations) {
  bench::SweepOptions o;
  o.sizes = {4, 64};
  o.iterations = 2;
  o.warmup = 2;
  o.min_time_s = 0.05;  // a 4-byte all_reduce takes far less than 25 ms even on a loaded machine
  const auto result = bench::run_sweep(g_world, o);
  ASSERT_EQ(result.rows.size(), 2u);
  EXPECT_EQ(result.wrong, 0u);
  for (const auto& r : result.rows) {
    EXPECT_GT(r.iterations, 2) << r.bytes;
    EXPECT_LE(r.iterations, o.max_iterations) << r.bytes;
  }
  bench::SweepOptions bad = o;
  bad.min_time_s = -1;
  try {
    bench::run_sweep(g_world, bad);
    ADD_FAILURE() << "a negative min_time_s was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("sweep.min_time_s -1"), std::string::npos) << e.what();
  }
}

TEST(Library, SweepRejectsAnUnusableBackendBeforeMeasuring) {
  bench::SweepOptions o;
  o.sizes = {64};
  o.backends = {"no_such_backend"};
  EXPECT_THROW(bench::run_sweep(g_world, o), InvalidArgument);
}

TEST(Library, CompareGivesEveryBackendAndARatioWithItsInterval) {
  bench::CompareOptions o;
  o.ops = {OpType::all_reduce};
  o.sizes = {64, 4096};
  o.repetitions = 3;
  o.extra_budget_s = 0;
  std::size_t reported = 0;
  bench::CompareCallbacks cb;
  cb.on_point = [&](const bench::ComparePoint&) { ++reported; };
  const auto result = bench::run_compare(g_world, o, cb);
  EXPECT_EQ(result.backends, g_world.backends());
  ASSERT_EQ(result.points.size(), 2u);
  EXPECT_EQ(reported, 2u);
  EXPECT_EQ(result.wrong, 0u);
  std::size_t met = 0;
  for (const auto& p : result.points) {
    ASSERT_EQ(p.timings.size(), result.backends.size() + 1);  // auto first
    EXPECT_EQ(p.timings[0].backend, "");
    EXPECT_FALSE(p.auto_backend.empty());
    ASSERT_GE(p.best, 1u);
    // The fastest supported single backend (timings[0] is auto), found here.
    std::size_t fastest = 0;
    for (std::size_t i = 1; i < p.timings.size(); ++i) {
      if (p.timings[i].supported &&
          (fastest == 0 || p.timings[i].seconds < p.timings[fastest].seconds)) {
        fastest = i;
      }
    }
    EXPECT_EQ(p.best, fastest);
    EXPECT_GE(p.ratio.pairs, 3u);
    EXPECT_LE(p.ratio.low, p.ratio.median);
    EXPECT_LE(p.ratio.median, p.ratio.high);
    EXPECT_EQ(p.met, p.ratio.median >= o.min_ratio);
    met += p.met ? 1 : 0;
  }
  EXPECT_EQ(result.met, met);
}

TEST(Library, TuneBuildsATableFromItsSamples) {
  bench::TuneOptions o;
  o.ops = {OpType::all_reduce, OpType::send};
  o.sizes = {64, 4096};
  o.repetitions = 2;
  o.budget_ms = 1;
  o.command = "library_test";
  std::vector<std::size_t> indices;
  std::size_t usable_timings = 0;  // supported and correct: each becomes a sample
  bench::TuneCallbacks cb;
  cb.on_point = [&](const bench::TunePoint& p) {
    indices.push_back(p.index);
    for (const auto& r : p.timings)
      usable_timings += r.supported && r.wrong == 0 ? 1 : 0;
    EXPECT_EQ(p.total, 4u);
    EXPECT_EQ(p.timings.size(), g_world.backends().size());
  };
  const auto result = bench::run_tune(g_world, o, cb);
  EXPECT_EQ(indices, (std::vector<std::size_t>{1, 2, 3, 4}));
  EXPECT_EQ(result.wrong, 0u);
  const TuningTable& t = result.table;
  EXPECT_EQ(t.samples.size(), usable_timings);
  EXPECT_GE(t.samples.size(), 4u);
  EXPECT_TRUE(t.validate(backend_names()).empty());
  // all_reduce, send, and recv copied from send.
  EXPECT_EQ(t.entries.size(), 3u);
  EXPECT_EQ(t.provenance.at("command"), "library_test");
  EXPECT_EQ(t.provenance.at("ranks"), std::to_string(g_world.size()));
  EXPECT_GT(result.wall_seconds, 0);
}

// The progress total counts what the sweep runs: 2 and 4 bytes are one fp32 element each (one
// point) but two sizes in u8 (two points).
TEST(Library, TuneProgressTotalCountsEachDtypesSizes) {
  bench::TuneOptions o;
  o.ops = {OpType::all_reduce};
  o.dtypes = {DType::f32, DType::u8};
  o.sizes = {2, 4};
  o.repetitions = 1;
  o.budget_ms = 1;
  std::vector<std::size_t> indices;
  std::vector<std::size_t> totals;
  bench::TuneCallbacks cb;
  cb.on_point = [&](const bench::TunePoint& p) {
    indices.push_back(p.index);
    totals.push_back(p.total);
  };
  bench::run_tune(g_world, o, cb);
  EXPECT_EQ(indices, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(totals, (std::vector<std::size_t>{3, 3, 3}));
}

// `mcr tune --in-flight N`: the asynchronous form keeps N operations in flight, batch after batch
// (it was a floor: every iteration of a timed run was issued before any was waited for, so at small
// sizes every depth timed the same hundreds in flight). Each operation of a batch starts after
// every operation of the batches before it has completed.
TEST(Library, AsyncTimingKeepsItsNumberInFlight) {
  struct Spans final : OpObserver {
    std::mutex mu;
    std::map<std::uint64_t, std::pair<std::chrono::steady_clock::time_point,
                                      std::chrono::steady_clock::time_point>>
        by_sequence;
    void on_complete(const OpRecord& r) noexcept override {
      const std::lock_guard lock(mu);
      by_sequence[r.sequence] = {r.start, r.end};
    }
  };
  Communicator c = g_world.split(0, g_world.rank());
  bench::Point point(c, {OpType::all_reduce, DType::f32, 4096, false, 0, ReduceOp::sum, true, 1});
  point.time("", 2, 3);  // warm: connections and first-call costs
  auto spans = std::make_shared<Spans>();
  c.set_observer(spans);
  constexpr int kIterations = 9, kInFlight = 3;
  point.time("", kIterations, kInFlight);
  c.set_observer(nullptr);
  std::vector<
      std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>>
      ops;
  for (const auto& [sequence, span] : spans->by_sequence)
    ops.push_back(span);
  ASSERT_EQ(ops.size(), static_cast<std::size_t>(kIterations));
  // Within a batch they are in flight together: some operation starts before an earlier one of
  // its batch has been seen to complete (waiting after each would pass the check below alone).
  bool overlapped = false;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    for (std::size_t j = i / kInFlight * kInFlight; j < i; ++j)
      overlapped = overlapped || ops[i].first < ops[j].second;
  }
  EXPECT_TRUE(overlapped) << "no two operations of a batch were in flight together";
  for (std::size_t i = kInFlight; i < ops.size(); ++i) {
    const std::size_t batch_start = i / kInFlight * kInFlight;
    for (std::size_t j = 0; j < batch_start; ++j)
      EXPECT_GE(ops[i].first, ops[j].second)
          << "operation " << i << " started before " << j << " ended";
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  g_world = init();
  const int rank = g_world.rank();
  if (rank != 0) ::testing::GTEST_FLAG(print_time) = false;
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  std::vector<std::int32_t> verdict{failed};
  g_world.all_reduce(verdict, ReduceOp::max);
  g_world = Communicator();
  finalize();
  return verdict[0];
}
