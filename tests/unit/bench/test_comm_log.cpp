// CommLog without a launcher: recording, bandwidth per record, summary, stragglers, trace JSON.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/comm/comm_log.hpp"
#include "mcr/errors.hpp"

using namespace mcr;
using namespace std::chrono;

namespace {
OpRecord make(OpType op, std::size_t bytes, int group_size, int rank, std::int64_t start_us,
              std::int64_t dur_us, std::string_view backend = "mpi", std::uint64_t seq = 0) {
  OpRecord r;
  r.sequence = seq;
  r.op = op;
  r.backend = backend;
  r.bytes = bytes;
  r.count = bytes / 4;
  r.group_id = 7;
  r.group_rank = rank;
  r.group_size = group_size;
  r.global_rank = rank;
  r.start = steady_clock::time_point(microseconds(start_us));
  r.end = r.start + microseconds(dur_us);
  return r;
}

// A 4 KiB all_reduce of the 2-rank group 1 on `rank`, as CommLog::collect() gathers it.
LogRecord pair_all_reduce(int rank, std::int64_t start_us, std::int64_t dur_us,
                          std::uint64_t seq = 0, bool async = false) {
  LogRecord r;
  r.op = OpType::all_reduce;
  r.async = async;
  r.bytes = 4096;
  r.backend = "mpi";
  r.group_id = 1;
  r.group_size = 2;
  r.group_rank = rank;
  r.global_rank = rank;
  r.sequence = seq;
  r.start_ns = start_us * 1000;
  r.end_ns = (start_us + dur_us) * 1000;
  return r;
}
}  // namespace

TEST(CommLog, RecordsCarryBytesAndBandwidths) {
  CommLog log;
  // 1 MB all_reduce in 1 ms at 4 ranks: algbw 1 GB/s, busbw 1.5 GB/s.
  log.on_complete(make(OpType::all_reduce, 1'000'000, 4, 0, 0, 1000));
  // 2 MB all_gather (whole output) in 4 ms at 4 ranks: algbw 0.5, busbw 0.375.
  log.on_complete(make(OpType::all_gather, 2'000'000, 4, 0, 2000, 4000, "gloo", 1));
  ASSERT_EQ(log.size(), 2u);
  const auto& a = log[0];
  EXPECT_EQ(a.bytes, 1'000'000u);
  EXPECT_DOUBLE_EQ(a.seconds(), 1e-3);
  EXPECT_DOUBLE_EQ(a.algbw_gbps(), 1.0);
  EXPECT_DOUBLE_EQ(a.busbw_gbps(), 1.5);
  const auto& g = log[1];
  EXPECT_EQ(g.backend, "gloo");
  EXPECT_EQ(g.sequence, 1u);
  EXPECT_DOUBLE_EQ(g.algbw_gbps(), 0.5);
  EXPECT_DOUBLE_EQ(g.busbw_gbps(), 0.375);
}

TEST(CommLog, KeepsAtMostMaxRecords) {
  CommLog log(2);
  for (int i = 0; i < 5; ++i)
    log.on_complete(make(OpType::barrier, 0, 1, 0, i, 1));
  EXPECT_EQ(log.size(), 2u);
  EXPECT_EQ(log.dropped(), 3u);
  log.clear();
  EXPECT_EQ(log.size(), 0u);
}

TEST(CommLog, RecordsSurviveGrowthAcrossStorageBlocks) {
  CommLog log;
  constexpr std::uint64_t kOps = 250'000;  // three 4 MiB blocks of 104'857 records
  for (std::uint64_t i = 0; i < kOps; ++i) {
    log.on_complete(
        make(OpType::all_reduce, 4 * (i % 7 + 1), 2, 0, static_cast<std::int64_t>(i), 1, "mpi", i));
  }
  ASSERT_EQ(log.size(), kOps);
  for (std::uint64_t i : {std::uint64_t{0}, std::uint64_t{104'856}, std::uint64_t{104'857},
                          std::uint64_t{209'714}, kOps - 1}) {
    EXPECT_EQ(log[i].sequence, i);
    EXPECT_EQ(log[i].bytes, 4 * (i % 7 + 1));
  }
  EXPECT_EQ(log.records().size(), kOps);
}

TEST(CommLog, EveryFieldRoundTripsAcrossGroupsBackendsAndForms) {
  // Records alternate between communicators, backends and sync/async, which the log stores once
  // per combination; every field must come back as recorded.
  CommLog log;
  std::vector<OpRecord> in;
  for (int i = 0; i < 40; ++i) {
    OpRecord r = make(i % 3 == 0 ? OpType::all_gather : OpType::send, 1000 + 8 * i, 2 + i % 4,
                      i % 2, 10 * i, 3 + i, i % 5 == 0 ? "gloo" : "mpi", 100 + i);
    r.group_id = 7 + static_cast<std::uint64_t>(i % 3);
    r.global_rank = 5 + i % 2;
    r.async = i % 4 == 1;
    r.dtype = i % 2 == 0 ? DType::bf16 : DType::i64;
    r.count = 3 * static_cast<std::size_t>(i);
    in.push_back(r);
    log.on_complete(r);
  }
  ASSERT_EQ(log.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const OpRecord& r = in[i];
    const LogRecord k = log[i];
    EXPECT_EQ(k.sequence, r.sequence);
    EXPECT_EQ(k.op, r.op);
    EXPECT_EQ(k.dtype, r.dtype);
    EXPECT_EQ(k.async, r.async);
    EXPECT_EQ(k.backend, r.backend);
    EXPECT_EQ(k.bytes, r.bytes);
    EXPECT_EQ(k.count, r.count);
    EXPECT_EQ(k.group_id, r.group_id);
    EXPECT_EQ(k.group_rank, r.group_rank);
    EXPECT_EQ(k.group_size, r.group_size);
    EXPECT_EQ(k.global_rank, r.global_rank);
    EXPECT_EQ(k.start_ns, duration_cast<nanoseconds>(r.start.time_since_epoch()).count());
    EXPECT_EQ(k.end_ns, duration_cast<nanoseconds>(r.end.time_since_epoch()).count());
  }
}

TEST(CommLog, ByteCountsSaturateAt48Bits) {
  CommLog log;
  OpRecord r = make(OpType::broadcast, 0, 2, 0, 0, 1);
  r.bytes = (std::size_t{1} << 48) - 1;  // the largest kept exactly
  r.count = std::size_t{1} << 50;
  log.on_complete(r);
  r.bytes = std::size_t{1} << 50;
  log.on_complete(r);
  EXPECT_EQ(log[0].bytes, (std::size_t{1} << 48) - 1);
  EXPECT_EQ(log[0].count, (std::size_t{1} << 48) - 1);
  EXPECT_EQ(log[1].bytes, (std::size_t{1} << 48) - 1);
}

TEST(CommLog, SummaryTakesTheSlowestMemberAndStragglersAgainstTheFastest) {
  // Two all_reduce instances of 4 KiB on 2 ranks: latencies (rank0, rank1) = (10, 30) and (20, 20)
  // us.
  GatheredLog g;
  g.ranks = 2;
  g.dropped = {0, 0};
  g.records = {pair_all_reduce(0, 0, 10), pair_all_reduce(0, 100, 20), pair_all_reduce(1, 0, 30),
               pair_all_reduce(1, 100, 20)};
  const auto s = summarize(g);
  ASSERT_EQ(s.rows.size(), 1u);
  const auto& row = s.rows[0];
  EXPECT_EQ(row.count, 2u);
  EXPECT_DOUBLE_EQ(row.max_us, 30.0);
  EXPECT_DOUBLE_EQ(row.total_us, 50.0);  // slowest members: 30 + 20
  EXPECT_DOUBLE_EQ(row.avg_us, 25.0);
  EXPECT_DOUBLE_EQ(row.p50_us, 25.0);
  EXPECT_DOUBLE_EQ(row.algbw_gbps, 4096 / 25e-6 / 1e9);
  EXPECT_DOUBLE_EQ(row.busbw_gbps, row.algbw_gbps * 1.0);  // 2(n-1)/n = 1 at n = 2
  ASSERT_EQ(s.stragglers.size(), 2u);
  EXPECT_DOUBLE_EQ(s.stragglers[0].straggler_us, 0.0);   // 10 - 10, 20 - 20
  EXPECT_DOUBLE_EQ(s.stragglers[1].straggler_us, 20.0);  // 30 - 10, 20 - 20
  EXPECT_DOUBLE_EQ(s.stragglers[1].comm_us, 50.0);
  const auto text = format_summary(s, g);
  EXPECT_NE(text.find("all_reduce"), std::string::npos) << text;
  EXPECT_NE(text.find("straggler view"), std::string::npos) << text;
}

// Two same-sized async all_reduces, A (issued first, 10 us on each rank) and B (50 us on each),
// waited for in opposite orders: rank 0 records B then A, rank 1 A then B. Each instance's members
// are paired by issue order (sequence), so neither rank straggles; paired in the order the
// completions were recorded, A on rank 1 met B on rank 0 and each rank took 40 us of straggling.
TEST(CommLog, SummaryPairsInstancesInIssueOrder) {
  GatheredLog g;
  g.ranks = 2;
  g.dropped = {0, 0};
  const auto rec = [](int rank, std::uint64_t seq, std::int64_t dur) {
    return pair_all_reduce(rank, 0, dur, seq, /*async=*/true);
  };
  g.records = {rec(0, 1, 50), rec(0, 0, 10), rec(1, 0, 10), rec(1, 1, 50)};
  const auto s = summarize(g);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].count, 2u);
  EXPECT_DOUBLE_EQ(s.rows[0].total_us, 60.0);  // slowest members: 10 + 50
  ASSERT_EQ(s.stragglers.size(), 2u);
  EXPECT_DOUBLE_EQ(s.stragglers[0].straggler_us, 0.0);
  EXPECT_DOUBLE_EQ(s.stragglers[1].straggler_us, 0.0);
}

// The same op, size and backend on a group of 2 and on the world of 4 are two rows: each instance
// is matched against its own group's size, its latency is its slowest member's, and each row's
// bus factor is its group's. Before, the row took the first record's group size, so every world
// instance looked incomplete: its 4 members each counted as an operation, and no straggler time.
TEST(CommLog, SummarySeparatesGroupsOfDifferentSizes) {
  GatheredLog g;
  g.ranks = 4;
  g.dropped = {0, 0, 0, 0};
  auto rec = [](std::uint64_t group, int size, int rank, std::int64_t dur) {
    LogRecord r;
    r.op = OpType::all_reduce;
    r.bytes = 4;
    r.backend = "mpi";
    r.group_id = group;
    r.group_size = size;
    r.group_rank = rank;
    r.global_rank = rank;
    r.start_ns = 0;
    r.end_ns = dur * 1000;
    return r;
  };
  g.records = {rec(1, 2, 0, 5),  rec(1, 2, 1, 7),  // a pair: ranks 0 and 1
               rec(2, 4, 0, 10), rec(2, 4, 1, 20), rec(2, 4, 2, 30), rec(2, 4, 3, 40)};
  const auto s = summarize(g);
  ASSERT_EQ(s.rows.size(), 2u);
  const auto& pair = s.rows[0].group_size == 2 ? s.rows[0] : s.rows[1];
  const auto& world = s.rows[0].group_size == 4 ? s.rows[0] : s.rows[1];
  EXPECT_EQ(pair.group_size, 2);
  EXPECT_EQ(world.group_size, 4);
  EXPECT_EQ(pair.count, 1u);
  EXPECT_DOUBLE_EQ(pair.max_us, 7.0);
  EXPECT_EQ(world.count, 1u);
  EXPECT_DOUBLE_EQ(world.max_us, 40.0);
  EXPECT_DOUBLE_EQ(world.busbw_gbps, world.algbw_gbps * 1.5);  // 2(n-1)/n at n = 4
  ASSERT_EQ(s.stragglers.size(), 4u);
  EXPECT_DOUBLE_EQ(s.stragglers[3].straggler_us, 30.0);  // 40 - 10 in the world's instance
  EXPECT_DOUBLE_EQ(s.stragglers[1].straggler_us, 12.0);  // 7 - 5, and 20 - 10
  const auto text = format_summary(s, g);
  EXPECT_NE(text.find("ranks"), std::string::npos) << text;
}

// A log collected over a sub-communicator of world ranks 2 and 3 (log.ranks 2, hosts gathered for
// ranks 2 and 3): the straggler rows are those ranks' (rows 0 and 1 showed empty, other ranks, and
// the members' records were dropped).
TEST(CommLog, StragglersOfASubCommunicatorAreItsMembers) {
  GatheredLog g;
  g.ranks = 2;
  g.dropped = {0, 0};
  g.hosts = {-1, -1, 0, 0};
  g.records = {pair_all_reduce(2, 0, 10), pair_all_reduce(3, 0, 30)};
  for (auto& r : g.records)
    r.group_rank = r.global_rank - 2;
  const auto s = summarize(g);
  ASSERT_EQ(s.stragglers.size(), 2u);
  EXPECT_EQ(s.stragglers[0].rank, 2);
  EXPECT_EQ(s.stragglers[0].ops, 1u);
  EXPECT_EQ(s.stragglers[1].rank, 3);
  EXPECT_DOUBLE_EQ(s.stragglers[1].straggler_us, 20.0);  // 30 - 10
}

// The trace of the same log: a process per member (world ranks 2 and 3), none for world ranks 0
// and 1, which are not in it.
TEST(CommLog, ChromeTraceOfASubCommunicatorShowsItsMembers) {
  GatheredLog g;
  g.ranks = 2;
  g.dropped = {0, 0};
  g.hosts = {-1, -1, 0, 0};
  g.records = {pair_all_reduce(2, 0, 10), pair_all_reduce(3, 0, 30)};
  std::stringstream out;
  write_chrome_trace(g, out);
  const auto doc = nlohmann::json::parse(out.str());
  std::set<int> named;
  for (const auto& ev : doc.at("traceEvents")) {
    if (ev["ph"] == "M" && ev["name"] == "process_name") named.insert(ev["pid"].get<int>());
  }
  EXPECT_EQ(named, (std::set<int>{2, 3}));
}

// A world collective in a log collected over a sub-communicator of 2 of its 4 ranks (or whose other
// members' logs filled): one operation at its slowest member present, not one per member present,
// and no straggler time.
TEST(CommLog, AnInstanceWithMembersMissingCountsOnce) {
  GatheredLog g;
  g.ranks = 2;
  g.dropped = {0, 0};
  g.records = {pair_all_reduce(0, 0, 10, 0), pair_all_reduce(1, 0, 30, 0),
               pair_all_reduce(0, 100, 20, 1), pair_all_reduce(1, 100, 20, 1)};
  for (auto& r : g.records)
    r.group_size = 4;
  const auto s = summarize(g);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].count, 2u);
  EXPECT_DOUBLE_EQ(s.rows[0].total_us, 50.0);  // 30 + 20
  EXPECT_DOUBLE_EQ(s.rows[0].max_us, 30.0);
  ASSERT_EQ(s.stragglers.size(), 2u);
  EXPECT_DOUBLE_EQ(s.stragglers[0].straggler_us, 0.0);
  EXPECT_DOUBLE_EQ(s.stragglers[1].straggler_us, 0.0);
  EXPECT_EQ(s.stragglers[1].ops, 2u);
}

TEST(CommLog, ChromeTraceParsesAndHoldsOneEventPerRecord) {
  GatheredLog g;
  g.ranks = 2;
  g.dropped = {0, 0};
  LogRecord a;
  a.op = OpType::broadcast;
  a.bytes = 1000;
  a.backend = "gloo";
  a.group_size = 2;
  a.start_ns = 5'000;
  a.end_ns = 7'000;
  LogRecord b = a;
  b.global_rank = 1;
  b.group_rank = 1;
  b.backend = "mpi";
  b.start_ns = 6'000;
  b.end_ns = 10'000;
  g.records = {a, b};
  std::stringstream out;
  write_chrome_trace(g, out);
  const auto doc = nlohmann::json::parse(out.str());
  int complete = 0, thread_names = 0, process_names = 0;
  for (const auto& ev : doc.at("traceEvents")) {
    if (ev["ph"] == "X") {
      ++complete;
      EXPECT_EQ(ev["name"], "broadcast");
      EXPECT_EQ(ev["args"]["bytes"], 1000);
      if (ev["pid"] == 1) {
        EXPECT_DOUBLE_EQ(ev["ts"].get<double>(), 1.0);   // us after the earliest start
        EXPECT_DOUBLE_EQ(ev["dur"].get<double>(), 4.0);  // 4000 ns
        EXPECT_EQ(ev["cat"], "mpi");
        EXPECT_DOUBLE_EQ(ev["args"]["algbw_gbps"].get<double>(), 1000 / 4e-6 / 1e9);
      }
    }
    if (ev["ph"] == "M" && ev["name"] == "thread_name") ++thread_names;
    if (ev["ph"] == "M" && ev["name"] == "process_name") ++process_names;
  }
  EXPECT_EQ(complete, 2);
  EXPECT_EQ(thread_names, 2);  // (rank 0, gloo), (rank 1, mpi)
  EXPECT_EQ(process_names, 2);
}

TEST(CommLog, ChromeTraceNamesEachRanksHostWhenGathered) {
  GatheredLog g;
  g.ranks = 3;
  g.dropped = {0, 0, 0};
  g.hosts = {0, 1, 1};
  std::stringstream out;
  write_chrome_trace(g, out);
  const auto doc = nlohmann::json::parse(out.str());
  std::vector<int> hosts(3, -1);
  std::vector<std::string> labels(3);
  for (const auto& ev : doc.at("traceEvents")) {
    const auto q = ev["pid"].get<std::size_t>();
    if (ev["ph"] == "M" && ev["name"] == "process_name") hosts.at(q) = ev["args"]["host"];
    if (ev["ph"] == "M" && ev["name"] == "process_labels") labels.at(q) = ev["args"]["labels"];
  }
  EXPECT_EQ(hosts, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(labels, (std::vector<std::string>{"host 0", "host 1", "host 1"}));

  // Without a host map (a rank's own log), the names carry none.
  g.hosts.clear();
  std::stringstream bare;
  write_chrome_trace(g, bare);
  const auto bare_doc = nlohmann::json::parse(bare.str());  // kept: the loop reads into it
  for (const auto& ev : bare_doc.at("traceEvents")) {
    EXPECT_FALSE(ev["args"].contains("host")) << ev.dump();
    EXPECT_NE(ev["name"], "process_labels");
  }
}

// Where MCR_LOG writes, as finalize() writes it: the defaults, the variables, and init()'s refusal.
TEST(CommLogOutputs, ReadFromTheEnvironmentAsInitReadsIt) {
  ::setenv("MCR_LOG", "trace", 1);
  ::unsetenv("MCR_LOG_FILE");
  ::unsetenv("MCR_TRACE_FILE");
  CommLogOutputs out = env_comm_log_outputs();
  EXPECT_TRUE(out.trace);
  EXPECT_FALSE(out.summary);
  EXPECT_EQ(out.trace_file, "mcr_trace.json");
  EXPECT_EQ(out.summary_file, "");  // standard error

  ::setenv("MCR_LOG", "summary,trace", 1);
  ::setenv("MCR_LOG_FILE", "run/summary.txt", 1);
  ::setenv("MCR_TRACE_FILE", "run/trace.json", 1);
  out = env_comm_log_outputs();
  EXPECT_TRUE(out.summary && out.trace);
  EXPECT_EQ(out.summary_file, "run/summary.txt");
  EXPECT_EQ(out.trace_file, "run/trace.json");

  ::setenv("MCR_LOG", "summary,traces", 1);
  try {
    env_comm_log_outputs();
    ADD_FAILURE() << "MCR_LOG='summary,traces' was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown mode 'traces'"), std::string::npos) << e.what();
  }
  ::unsetenv("MCR_LOG");
  ::unsetenv("MCR_LOG_FILE");
  ::unsetenv("MCR_TRACE_FILE");
  out = env_comm_log_outputs();
  EXPECT_FALSE(out.summary || out.trace);
}
