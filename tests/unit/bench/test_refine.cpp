// `mcr tune --refine`: a tuned table's entry rebuilt from a run's trace where the run ranks the
// backends differently from the tune, and every case where it must not be: one backend only, too
// few operations, an entry edited by hand, a group whose topology the trace cannot tell. Groups
// smaller than the job are placed by the host map the trace carries.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "mcr/bench/refine.hpp"
#include "mcr/bench/table.hpp"
#include "mcr/comm/comm_log.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {
namespace {

TuningSample tuned(OpType op, const char* klass, std::size_t bytes, const char* backend,
                   double us) {
  return TuningSample{op, klass, 4, bytes, backend, us, 2, 2, "async", 1};
}

// A 2 x 2 table as `mcr tune --async` writes it: MPI faster than Gloo at every measured size of
// all_to_all and all_reduce.
TuningTable two_by_two_table() {
  TuningTable t;
  t.provenance = {{"ranks", "4"}, {"hosts", "2"}, {"ranks_per_host", "2"}, {"hysteresis", "0.03"}};
  for (const std::size_t bytes : {65536u, 262144u, 1048576u}) {
    const double us = static_cast<double>(bytes) / 500.0;
    t.samples.push_back(tuned(OpType::all_to_all, "any", bytes, "mpi", us));
    t.samples.push_back(tuned(OpType::all_to_all, "any", bytes, "gloo", us * 1.25));
    t.samples.push_back(tuned(OpType::all_reduce, "float", bytes, "mpi", us));
    t.samples.push_back(tuned(OpType::all_reduce, "float", bytes, "gloo", us * 1.1));
  }
  t.entries = build_entries(t.samples, 0.03);
  return t;
}

// `instances` operations of one size on one backend over the 4-rank world, each member taking
// `member_us` except rank 3, the slowest, which takes `slowest_us`.
void add_ops(GatheredLog& log, std::uint64_t& sequence, OpType op, std::size_t bytes,
             std::string_view backend, int instances, double member_us, double slowest_us) {
  for (int k = 0; k < instances; ++k, ++sequence) {
    const std::int64_t start = static_cast<std::int64_t>(sequence) * 100'000'000;
    for (int r = 0; r < 4; ++r) {
      const double us = r == 3 ? slowest_us : member_us;
      log.records.push_back(LogRecord{start, start + static_cast<std::int64_t>(us * 1e3), sequence,
                                      0, bytes, bytes / 4, backend, op, DType::f32, true, r, 4, r});
    }
  }
}

Trace to_trace(const GatheredLog& log, const std::string& path) {
  std::ostringstream text;
  write_chrome_trace(log, text);
  return parse_trace(text.str(), path);
}

// An empty gathered log of a 4-rank job.
GatheredLog four_rank_log() {
  GatheredLog log;
  log.ranks = 4;
  log.dropped.assign(4, 0);
  return log;
}

// Two runs of the same program, one per backend: inside the steps Gloo's 327,680-byte all_to_all
// (10 ms) beats MPI's (12 ms), where the tune rated MPI faster around that size.
std::vector<Trace> mpi_and_gloo_runs(int gloo_ops = 12) {
  GatheredLog mpi = four_rank_log(), gloo = four_rank_log();
  std::uint64_t seq = 0;
  add_ops(mpi, seq, OpType::all_to_all, 327680, "mpi", 12, 9000, 12000);
  add_ops(mpi, seq, OpType::all_reduce, 262144, "mpi", 12, 500, 600);
  seq = 0;
  add_ops(gloo, seq, OpType::all_to_all, 327680, "gloo", gloo_ops, 7000, 10000);
  return {to_trace(mpi, "mpi.json"), to_trace(gloo, "gloo.json")};
}

const RefinedPoint& point(const RefineResult& r, OpType op) {
  for (const auto& p : r.points) {
    if (p.op == op) return p;
  }
  throw std::runtime_error("no point for the op");
}

TEST(Refine, TraceCarriesBackendAndSlowestMembersLatency) {
  const auto runs = mpi_and_gloo_runs();
  ASSERT_EQ(runs[0].ops.size(), 24u);
  EXPECT_EQ(runs[0].ops[0].backend, "mpi");
  EXPECT_DOUBLE_EQ(runs[0].ops[0].latency_us, 12000.0);  // rank 3's, not the others' 9000
  EXPECT_EQ(runs[1].ops[0].backend, "gloo");
  EXPECT_DOUBLE_EQ(runs[1].ops[0].latency_us, 10000.0);
}

TEST(Refine, RunMediansDecideTheSizeTheRunShowsAndOnlyThat) {
  const TuningTable table = two_by_two_table();
  ASSERT_EQ(table.entries.size(), 2u);  // every size on MPI before
  const auto result = refine_table(table, mpi_and_gloo_runs(), RefineOptions{});
  const auto& a2a = point(result, OpType::all_to_all);
  EXPECT_EQ(a2a.group_size, 4);
  EXPECT_EQ(a2a.form, "async");
  ASSERT_EQ(a2a.observed.size(), 2u);
  EXPECT_EQ(a2a.observed[0].backend, "gloo");
  EXPECT_DOUBLE_EQ(a2a.observed[0].p50_us, 10000.0);
  EXPECT_EQ(a2a.observed[1].ops, 12u);
  EXPECT_EQ(a2a.before, "mpi");
  EXPECT_EQ(a2a.after, "gloo");
  EXPECT_TRUE(a2a.note.empty()) << a2a.note;
  EXPECT_EQ(result.entries_refined, 1u);

  // The entry as build_entries() makes it from the tuned samples at 65536, 262144 and 1048576
  // with the run's at 327680: Gloo between the geometric means of the neighbouring sizes.
  const auto lo = static_cast<std::size_t>(std::ceil(std::sqrt(262144.0 * 327680.0)));
  const auto hi = static_cast<std::size_t>(std::ceil(std::sqrt(327680.0 * 1048576.0)));
  const TuningEntry* e =
      result.table.entry_for(OpType::all_to_all, DType::f32, 4, HostShape{2, 2}, CallForm::async);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->ranges.size(), 3u);
  EXPECT_EQ(e->ranges[0], (TuningRange{0, lo - 1, "mpi"}));
  EXPECT_EQ(e->ranges[1], (TuningRange{lo, hi - 1, "gloo"}));
  EXPECT_EQ(e->ranges[2], (TuningRange{hi, kMaxBytes, "mpi"}));
  EXPECT_TRUE(result.table.validate({"mpi", "gloo"}).empty());

  // The run's medians are kept as samples marked "run"; the tuned ones are all still there.
  std::size_t run = 0;
  for (const auto& s : result.table.samples) {
    if (s.source != "run") continue;
    ++run;
    EXPECT_EQ(s.bytes, 327680u);
    EXPECT_EQ(s.time_us, s.backend == "gloo" ? 10000.0 : 12000.0);
    EXPECT_EQ(s.form, "async");
    EXPECT_EQ(s.hosts, 2);
  }
  EXPECT_EQ(run, 2u);
  EXPECT_EQ(result.table.samples.size(), table.samples.size() + 2);
  EXPECT_NE(result.table.provenance.at("refined").find("1 of 2"), std::string::npos)
      << result.table.provenance.at("refined");

  // all_reduce ran on MPI only: nothing to compare, the entry unchanged.
  const auto& ar = point(result, OpType::all_reduce);
  EXPECT_EQ(ar.before, "mpi");
  EXPECT_EQ(ar.after, "");
  EXPECT_NE(ar.note.find("fewer than two backends"), std::string::npos) << ar.note;
  EXPECT_EQ(*result.table.lookup(OpType::all_reduce, DType::f32, 4, HostShape{2, 2}, 262144,
                                 CallForm::async),
            "mpi");
  // MPI leads the tuned sizes by more than the hysteresis: none of them changed.
  EXPECT_TRUE(result.shifted.empty());
}

TEST(Refine, TunedSizeCarriedOverANearTieIsNamed) {
  // At 1 MiB the tune rated Gloo 2% slower than MPI, within the 3% hysteresis. Before, the walk
  // came from MPI and kept it; once the run's 327,680 bytes go to Gloo, the walk arrives at 1 MiB
  // from Gloo, MPI's 2% lead is not enough to take over, and 1 MiB changes to Gloo untraced.
  TuningTable table = two_by_two_table();
  for (auto& s : table.samples) {
    if (s.op == OpType::all_to_all && s.bytes == 1048576 && s.backend == "gloo")
      s.time_us = 1048576.0 / 500.0 * 1.02;
  }
  table.entries = build_entries(table.samples, 0.03);
  const auto result = refine_table(table, mpi_and_gloo_runs(), RefineOptions{});
  ASSERT_EQ(result.shifted.size(), 1u);
  const ShiftedSize& s = result.shifted.front();
  EXPECT_EQ(s.op, OpType::all_to_all);
  EXPECT_EQ(s.dtype_class, "any");
  EXPECT_EQ(s.group_size, 4);
  EXPECT_EQ(s.topology, "2x2");
  EXPECT_EQ(s.form, "async");
  EXPECT_EQ(s.bytes, 1048576u);
  EXPECT_EQ(s.before, "mpi");
  EXPECT_EQ(s.after, "gloo");
  EXPECT_EQ(*result.table.lookup(OpType::all_to_all, DType::f32, 4, HostShape{2, 2}, 1048576,
                                 CallForm::async),
            "gloo");
  // The sizes below the refined one keep MPI and are not named.
  EXPECT_EQ(*result.table.lookup(OpType::all_to_all, DType::f32, 4, HostShape{2, 2}, 262144,
                                 CallForm::async),
            "mpi");
}

TEST(Refine, AsyncRunRefinesTheSyncEntryItsCallsRead) {
  // A table tuned with blocking calls only: the asynchronous calls of the run read its entries
  // (docs/tuning-format.md, "Call form"), so those are the ones refined, in their own form.
  TuningTable table = two_by_two_table();
  for (auto& s : table.samples) {
    s.form = "sync";
    s.in_flight = 0;
  }
  table.entries = build_entries(table.samples, 0.03);
  const auto result = refine_table(table, mpi_and_gloo_runs(), RefineOptions{});
  EXPECT_EQ(point(result, OpType::all_to_all).after, "gloo");
  EXPECT_EQ(*result.table.lookup(OpType::all_to_all, DType::f32, 4, HostShape{2, 2}, 327680,
                                 CallForm::sync),
            "gloo");
  for (const auto& s : result.table.samples) {
    if (s.source == "run") {
      EXPECT_EQ(s.form, "sync");
    }
  }
}

TEST(Refine, RefinedTableRoundTripsAndSourceIsChecked) {
  const auto result = refine_table(two_by_two_table(), mpi_and_gloo_runs(), RefineOptions{});
  const auto back = TuningTable::parse_json(result.table.to_json());
  EXPECT_EQ(back.samples, result.table.samples);
  EXPECT_EQ(back.entries, result.table.entries);
  const auto problems = TuningTable::problems(R"({"format": "mcr-tuning", "version": 1,
      "entries": [{"op": "all_reduce", "ranges": [{"min_bytes": 0, "max_bytes": null,
                   "backend": "mpi"}]}],
      "samples": [{"op": "all_reduce", "bytes": 4, "backend": "mpi", "time_us": 1,
                   "source": "tuned"}]})");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "samples[0]: \"source\" must be \"run\" (a latency read from a run's trace) or absent "
            "(timed by mcr tune), not \"tuned\"");
}

TEST(Refine, TooFewOperationsOfABackendDecideNothing) {
  RefineOptions o;
  o.min_ops = 13;  // each backend ran it 12 times
  const auto result = refine_table(two_by_two_table(), mpi_and_gloo_runs(), o);
  EXPECT_EQ(result.entries_refined, 0u);
  EXPECT_EQ(point(result, OpType::all_to_all).after, "");
  EXPECT_EQ(result.table.entries, two_by_two_table().entries);
  // With the default 10, 9 Gloo operations are not enough either.
  const auto nine = refine_table(two_by_two_table(), mpi_and_gloo_runs(9), RefineOptions{});
  EXPECT_EQ(nine.entries_refined, 0u);
}

TEST(Refine, EntryItsSamplesDoNotGiveIsLeftAlone) {
  TuningTable table = two_by_two_table();
  for (auto& e : table.entries) {
    if (e.op == OpType::all_to_all) e.ranges = {TuningRange{0, kMaxBytes, "gloo"}};
  }
  const auto result = refine_table(table, mpi_and_gloo_runs(), RefineOptions{});
  const auto& a2a = point(result, OpType::all_to_all);
  EXPECT_EQ(a2a.before, "gloo");
  EXPECT_EQ(a2a.after, "");
  EXPECT_NE(a2a.note.find("edited by hand"), std::string::npos) << a2a.note;
  EXPECT_EQ(result.table.entries, table.entries);
}

TEST(Refine, SubGroupOfATraceWithoutHostMapIsNotRefined) {
  TuningTable table = two_by_two_table();
  // hier's step groups: 2 ranks within a host (1x2) and across hosts (2x1).
  for (const auto& [hosts, rph] : {std::pair{1, 2}, std::pair{2, 1}}) {
    table.entries.push_back(
        TuningEntry{OpType::all_to_all, "any", 2, {{0, kMaxBytes, "mpi"}}, hosts, rph, "async"});
  }
  GatheredLog log = four_rank_log();
  std::uint64_t seq = 0;  // one sequence per communicator, whichever backend runs the op
  for (const char* backend : {"mpi", "gloo"}) {
    for (int k = 0; k < 10; ++k, ++seq) {
      for (int r = 0; r < 2; ++r) {
        log.records.push_back(LogRecord{0, 1000, seq, 5, 4096, 1024, backend, OpType::all_to_all,
                                        DType::f32, true, r, 2, r * 3});
      }
    }
  }
  const auto result = refine_table(table, {to_trace(log, "sub.json")}, RefineOptions{});
  ASSERT_EQ(result.points.size(), 1u);
  EXPECT_EQ(result.points[0].group_size, 2);
  EXPECT_EQ(result.points[0].note,
            "a group of 2 of the trace's 4 ranks: the trace does not record which hosts its ranks "
            "are on, so which entry it reads is unknown");
  EXPECT_EQ(result.entries_refined, 0u);
}

// 2-rank groups of a 2 x 2 job as DeepSpeed forms them with expert parallel size 2: the expert
// groups within a host (1x2) and the expert-data-parallel groups across hosts (2x1), each with its
// own tuned entry (MPI faster in the tune for both).
TuningTable with_pair_entries(TuningTable t) {
  for (const auto& [hosts, rph] : {std::pair{1, 2}, std::pair{2, 1}}) {
    for (const std::size_t bytes : {65536u, 262144u, 1048576u}) {
      const double us = static_cast<double>(bytes) / 1000.0;
      for (const auto& [backend, factor] : {std::pair{"mpi", 1.0}, std::pair{"gloo", 1.2}}) {
        t.samples.push_back(TuningSample{OpType::all_reduce, "float", 2, bytes, backend,
                                         us * factor, hosts, rph, "async", 1});
      }
    }
  }
  t.entries = build_entries(t.samples, 0.03);
  return t;
}

// `instances` all_reduces of 327,680 bytes on `backend` by the groups {0, 2} and {1, 3} (across
// hosts) and {0, 1} and {2, 3} (within), taking `across_us` and `within_us`.
void add_pair_ops(GatheredLog& log, std::uint64_t& seq, std::string_view backend, int instances,
                  double across_us, double within_us) {
  const std::vector<std::pair<std::vector<int>, double>> groups = {
      {{0, 2}, across_us}, {{1, 3}, across_us}, {{0, 1}, within_us}, {{2, 3}, within_us}};
  for (int k = 0; k < instances; ++k, ++seq) {
    std::uint64_t id = 10;
    for (const auto& [members, us] : groups) {
      for (int g = 0; g < 2; ++g) {
        const std::int64_t start = static_cast<std::int64_t>(seq) * 100'000'000;
        log.records.push_back(LogRecord{start, start + static_cast<std::int64_t>(us * 1e3), seq, id,
                                        327680, 81920, backend, OpType::all_reduce, DType::f32,
                                        true, g, 2, members[static_cast<std::size_t>(g)]});
      }
      ++id;
    }
  }
}

// One MPI and one Gloo run of the 2-rank groups (add_pair_ops, 10 instances each) on a job whose
// ranks sit on `hosts`.
std::vector<Trace> pair_runs(const std::vector<int>& hosts, double mpi_across_us,
                             double mpi_within_us, double gloo_across_us, double gloo_within_us) {
  GatheredLog mpi = four_rank_log(), gloo = four_rank_log();
  mpi.hosts = gloo.hosts = hosts;
  std::uint64_t seq = 0;
  add_pair_ops(mpi, seq, "mpi", 10, mpi_across_us, mpi_within_us);
  seq = 0;
  add_pair_ops(gloo, seq, "gloo", 10, gloo_across_us, gloo_within_us);
  return {to_trace(mpi, "mpi.json"), to_trace(gloo, "gloo.json")};
}

TEST(Refine, SubGroupsAreRefinedByTheShapeTheHostMapGivesThem) {
  const TuningTable table = with_pair_entries(two_by_two_table());
  // In the runs Gloo is faster across hosts (8 against 12 ms) and slower within (3 against 2 ms).
  const auto result = refine_table(table, pair_runs({0, 0, 1, 1}, 12000, 2000, 8000, 3000), {});
  ASSERT_EQ(result.points.size(), 2u);  // one per shape: each pools its two groups' operations
  const auto& within = result.points[0];
  const auto& across = result.points[1];
  EXPECT_EQ(within.shape, (HostShape{1, 2}));
  EXPECT_EQ(across.shape, (HostShape{2, 1}));
  for (const auto* p : {&within, &across}) {
    EXPECT_EQ(p->group_size, 2);
    EXPECT_TRUE(p->note.empty()) << p->note;
    EXPECT_EQ(p->before, "mpi");
    ASSERT_EQ(p->observed.size(), 2u);
    EXPECT_EQ(p->observed[0].ops, 20u);  // 10 instances of each of the shape's two groups
  }
  EXPECT_EQ(within.after, "mpi");
  EXPECT_EQ(across.after, "gloo");
  EXPECT_DOUBLE_EQ(across.observed[0].p50_us, 8000.0);
  EXPECT_EQ(result.entries_refined, 2u);
  const TuningEntry* e =
      result.table.entry_for(OpType::all_reduce, DType::f32, 2, HostShape{2, 1}, CallForm::async);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->ranges.size(), 3u);
  EXPECT_EQ(e->ranges[1].backend, "gloo");
  EXPECT_EQ(e->ranges[1].min_bytes,
            static_cast<std::size_t>(std::ceil(std::sqrt(262144.0 * 327680.0))));
  // The within-host entry keeps MPI everywhere; the world's entries are untouched.
  const TuningEntry* w =
      result.table.entry_for(OpType::all_reduce, DType::f32, 2, HostShape{1, 2}, CallForm::async);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->ranges.size(), 1u);
  EXPECT_EQ(w->ranges[0].backend, "mpi");
  EXPECT_EQ(result.table.entries[0], table.entries[0]);
}

TEST(Refine, GroupOfAShapeTheTableLacksIsNamed) {
  // Three ranks on two hosts (uneven): no entry in the table measured that shape.
  GatheredLog log = four_rank_log();
  log.hosts = {0, 0, 1, 1};
  std::uint64_t seq = 0;
  for (const char* backend : {"mpi", "gloo"}) {
    for (int k = 0; k < 10; ++k, ++seq) {
      for (int r = 0; r < 3; ++r) {
        log.records.push_back(LogRecord{0, 1000, seq, 9, 4096, 1024, backend, OpType::all_reduce,
                                        DType::f32, true, r, 3, r});
      }
    }
  }
  const auto result = refine_table(two_by_two_table(), {to_trace(log, "three.json")}, {});
  ASSERT_EQ(result.points.size(), 1u);
  EXPECT_EQ(result.points[0].shape, (HostShape{2, 0}));
  EXPECT_EQ(result.points[0].note,
            "the table has no entry for all_reduce on 3 ranks (" + describe(HostShape{2, 0}) + ")");
}

TEST(Refine, WholeJobOnOtherHostsIsNotApplied) {
  // The 2 x 2 table, and a 4-rank run whose host map puts every rank on a host of its own.
  auto runs = mpi_and_gloo_runs();
  for (auto& t : runs)
    t.hosts = {0, 1, 2, 3};
  const auto result = refine_table(two_by_two_table(), runs, RefineOptions{});
  const auto& a2a = point(result, OpType::all_to_all);
  EXPECT_EQ(a2a.shape, (HostShape{4, 1}));
  EXPECT_EQ(a2a.note, "the traced job ran on " + describe(HostShape{4, 1}) +
                          "; the table was measured on " + describe(HostShape{2, 2}));
  EXPECT_EQ(result.entries_refined, 0u);
}

TEST(Refine, SubGroupsOfAJobOnOtherHostsAreNotApplied) {
  // The table's 2x1 entries were measured across the 2 x 2 job's hosts; a 4 x 1 job's 2-rank
  // groups across hosts have that shape too, but not those links.
  const TuningTable table = with_pair_entries(two_by_two_table());
  const auto result = refine_table(table, pair_runs({0, 1, 2, 3}, 12000, 12000, 8000, 8000), {});
  ASSERT_EQ(result.points.size(), 1u);  // every pair is 2x1 here
  EXPECT_EQ(result.points[0].shape, (HostShape{2, 1}));
  EXPECT_EQ(result.points[0].note, "the traced job ran on " + describe(HostShape{4, 1}) +
                                       "; the table was measured on " + describe(HostShape{2, 2}));
  EXPECT_EQ(result.entries_refined, 0u);
}

TEST(Refine, TraceOfAnotherJobSizeIsNotApplied) {
  TuningTable table = two_by_two_table();
  table.provenance["ranks"] = "8";
  const auto result = refine_table(table, mpi_and_gloo_runs(), RefineOptions{});
  EXPECT_EQ(point(result, OpType::all_to_all).note,
            "the traced job has 4 ranks; the table was measured on 8");
  EXPECT_EQ(result.entries_refined, 0u);
}

TEST(Refine, TablesBackendThatTheRunsDidNotRunIsNotOverruled) {
  // The tune put 327680 bytes on hier; the runs ran MPI and Gloo only.
  TuningTable table = two_by_two_table();
  for (const std::size_t bytes : {65536u, 262144u, 1048576u}) {
    table.samples.push_back(tuned(OpType::all_to_all, "any", bytes, "hier", 1.0));
  }
  table.entries = build_entries(table.samples, 0.03);
  const auto result = refine_table(table, mpi_and_gloo_runs(), RefineOptions{});
  const auto& a2a = point(result, OpType::all_to_all);
  EXPECT_EQ(a2a.before, "hier");
  EXPECT_EQ(a2a.note,
            "the table's backend here, hier, did not run it 10 times or more in the traces: not "
            "compared");
  EXPECT_EQ(result.table.entries, table.entries);
}

TEST(Refine, RunAtATunedSizeReplacesItsFiguresAndRefiningAgainChangesNothing) {
  // The runs show 262144 bytes, a size the tune measured (MPI 524 us, Gloo 655 us there).
  GatheredLog mpi = four_rank_log(), gloo = four_rank_log();
  std::uint64_t seq = 0;
  add_ops(mpi, seq, OpType::all_to_all, 262144, "mpi", 10, 900, 1200);
  seq = 0;
  add_ops(gloo, seq, OpType::all_to_all, 262144, "gloo", 10, 700, 1000);
  const std::vector<Trace> runs{to_trace(mpi, "mpi.json"), to_trace(gloo, "gloo.json")};
  const TuningTable table = two_by_two_table();
  const auto once = refine_table(table, runs, RefineOptions{});
  ASSERT_EQ(point(once, OpType::all_to_all).after, "gloo");
  const TuningEntry* e =
      once.table.entry_for(OpType::all_to_all, DType::f32, 4, HostShape{2, 2}, CallForm::async);
  ASSERT_NE(e, nullptr);
  const auto lo = static_cast<std::size_t>(std::ceil(std::sqrt(65536.0 * 262144.0)));
  const auto hi = static_cast<std::size_t>(std::ceil(std::sqrt(262144.0 * 1048576.0)));
  EXPECT_EQ(e->ranges, (std::vector<TuningRange>{
                           {0, lo - 1, "mpi"}, {lo, hi - 1, "gloo"}, {hi, kMaxBytes, "mpi"}}));
  EXPECT_EQ(once.table.samples.size(), table.samples.size() + 2);  // the tuned ones all stay

  // Refining the refined table with the same runs: accepted (its ranges are what its samples,
  // the run's included, give), the same entries, no duplicate run samples.
  const auto twice = refine_table(once.table, runs, RefineOptions{});
  EXPECT_TRUE(point(twice, OpType::all_to_all).note.empty())
      << point(twice, OpType::all_to_all).note;
  EXPECT_EQ(twice.table.entries, once.table.entries);
  EXPECT_EQ(twice.table.samples.size(), once.table.samples.size());
}

TEST(Refine, OpListOrBadOptionsAreRefused) {
  const Trace list = parse_trace(
      R"({"format": "mcr-trace", "version": 1, "ops": [{"op": "all_reduce", "count": 12}]})",
      "list.json");
  try {
    refine_table(two_by_two_table(), {list}, RefineOptions{});
    FAIL() << "an op list was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "refine: no operation with a backend and a latency in list.json (MCR_LOG=trace "
                 "writes them; an op list has neither)");
  }
  RefineOptions o;
  o.min_ops = 0;
  EXPECT_THROW(refine_table(two_by_two_table(), mpi_and_gloo_runs(), o), InvalidArgument);
  o.min_ops = 10;
  o.hysteresis = 1.0;
  EXPECT_THROW(refine_table(two_by_two_table(), mpi_and_gloo_runs(), o), InvalidArgument);
}

}  // namespace
}  // namespace mcr::bench
