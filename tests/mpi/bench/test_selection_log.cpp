// Two ranks, MCR_TUNING=data/route_table.json and MCR_LOG=summary,trace: the table routes ops to
// the backends it names (seen through an observer), explain agrees, log records carry the
// nccl-tests byte counts and bandwidths for every op, and the trace written at finalize() parses as
// JSON.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcr/comm.hpp"
#include "mcr/comm/comm_log.hpp"
#include "mcr/comm/info.hpp"
#include "observe/comm_log_hooks.hpp"

using namespace mcr;

namespace {

Communicator g_world;
bool g_have_gloo = false;  // the table routes to gloo; builds without it check the fallback
std::string g_trace_path;
std::string g_summary_path;

// The group every test runs on: a copy of the world with its own observer, so the world keeps the
// MCR_LOG observer that finalize() reports on.
Communicator group_with(const std::shared_ptr<CommLog>& log) {
  std::vector<int> all(static_cast<std::size_t>(g_world.size()));
  for (int i = 0; i < g_world.size(); ++i)
    all[static_cast<std::size_t>(i)] = i;
  Communicator g = g_world.new_group(all);
  g.set_observer(nullptr);  // detaches the inherited MCR_LOG log too: its counts are the world's
  g.set_observer(log);
  return g;
}

}  // namespace

TEST(TableSelection, RoutesEachOpToTheTablesBackend) {
  if (!g_have_gloo)
    GTEST_SKIP() << "gloo is not usable in this build: the table's gloo ranges fall back";
  auto log = std::make_shared<CommLog>();
  Communicator g = group_with(log);
  std::vector<float> small(4, 1.0f), big(1024, 1.0f), b(16, 2.0f);
  g.all_reduce(small, ReduceOp::sum);  // 16 B -> gloo
  g.all_reduce(big, ReduceOp::sum);    // 4096 B -> mpi
  g.broadcast(b, 0);                   // any size -> gloo
  ASSERT_EQ(log->size(), 3u);
  EXPECT_EQ((*log)[0].backend, "gloo");
  EXPECT_EQ((*log)[1].backend, "mpi");
  EXPECT_EQ((*log)[2].backend, "gloo");
  EXPECT_EQ(small[0], static_cast<float>(g.size()));
}

TEST(TableSelection, ExplainNamesTheTableAsTheSource) {
  if (!g_have_gloo) GTEST_SKIP() << "gloo is not usable in this build";
  const auto s = explain_selection(OpType::all_reduce, DType::f32, 16, 2);
  EXPECT_EQ(s.backend, "gloo");
  EXPECT_EQ(s.source, "tuning");
  bool mpi_rejected = false;
  for (const auto& step : s.steps)
    mpi_rejected = mpi_rejected || (step.backend == "mpi" && !step.chosen);
  EXPECT_TRUE(mpi_rejected);
  EXPECT_EQ(explain_selection(OpType::all_reduce, DType::f32, 4096, 2).backend, "mpi");
  // No table entry for all_gather: the default priority decides.
  EXPECT_EQ(explain_selection(OpType::all_gather, DType::f32, 16, 2).source, "default");
}

TEST(CommLogRecords, ByteCountsAndBandwidthsOfEveryOp) {
  auto log = std::make_shared<CommLog>();
  Communicator g = group_with(log);
  const int n = g.size();
  const int r = g.rank();
  const auto un = static_cast<std::size_t>(n);
  constexpr std::size_t c = 8;  // elements per rank (f32): 32 B
  std::vector<float> one(c, 1.0f), out(c), all(c * un), all2(c * un);
  std::vector<std::size_t> counts(un, c);
  const std::size_t msg = c * 4;
  CallOptions hint;
  hint.size_hint = 12345;
  // Expected (op, bytes, busbw / algbw) from docs/tuning-format.md and nccl-tests, written out by
  // hand.
  std::vector<std::tuple<OpType, std::size_t, double>> expected;
  const double nn = n;
  g.broadcast(one, 0), expected.emplace_back(OpType::broadcast, msg, 1.0);
  g.reduce(one, out, ReduceOp::sum, 0), expected.emplace_back(OpType::reduce, msg, 1.0);
  g.all_reduce(one, out, ReduceOp::sum),
      expected.emplace_back(OpType::all_reduce, msg, 2 * (nn - 1) / nn);
  g.all_gather(one, all), expected.emplace_back(OpType::all_gather, msg * un, (nn - 1) / nn);
  g.all_gather_v(one, all, counts),
      expected.emplace_back(OpType::all_gather_v, msg * un, (nn - 1) / nn);
  g.gather(one, all, 0), expected.emplace_back(OpType::gather, msg * un, (nn - 1) / nn);
  g.scatter(all, out, 0), expected.emplace_back(OpType::scatter, msg * un, (nn - 1) / nn);
  g.reduce_scatter(all, out, ReduceOp::sum),
      expected.emplace_back(OpType::reduce_scatter, msg * un, (nn - 1) / nn);
  g.all_to_all(all, all2), expected.emplace_back(OpType::all_to_all, msg * un, (nn - 1) / nn);
  g.all_to_all_v(all, counts, all2, counts, hint),
      expected.emplace_back(OpType::all_to_all_v, 12345, (nn - 1) / nn);
  g.barrier(), expected.emplace_back(OpType::barrier, 0, 1.0);
  if (n > 1) {
    auto rw = g.irecv(out, (r + n - 1) % n);
    auto sw = g.isend(one, (r + 1) % n);
    rw.wait();
    sw.wait();
  }
  ASSERT_GE(log->size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& rec = (*log)[i];
    const auto [op, bytes, factor] = expected[i];
    SCOPED_TRACE(fmt::format("record {} ({})", i, to_string(op)));
    EXPECT_EQ(rec.op, op);
    EXPECT_EQ(rec.bytes, bytes);
    EXPECT_EQ(rec.group_size, n);
    EXPECT_EQ(rec.global_rank, r);
    EXPECT_GE(rec.end_ns, rec.start_ns);
    const double secs = static_cast<double>(rec.end_ns - rec.start_ns) * 1e-9;
    const double algbw = secs > 0 ? static_cast<double>(bytes) / secs / 1e9 : 0.0;
    EXPECT_DOUBLE_EQ(rec.algbw_gbps(), algbw);
    EXPECT_DOUBLE_EQ(rec.busbw_gbps(), algbw * factor);
  }
  if (n > 1) {
    // The irecv completes first or second; both carry the 32-byte message.
    const auto& a = (*log)[expected.size()];
    const auto& b = (*log)[expected.size() + 1];
    EXPECT_EQ(a.bytes, msg);
    EXPECT_EQ(b.bytes, msg);
    EXPECT_TRUE((a.op == OpType::recv && b.op == OpType::send) ||
                (a.op == OpType::send && b.op == OpType::recv));
  }
  // Gathered to rank 0: every rank's records, and a trace that parses with one event per record.
  const auto own = log->size();
  const auto gathered = log->collect(g);
  if (r != 0) {
    EXPECT_TRUE(gathered.records.empty());
    return;
  }
  EXPECT_EQ(gathered.ranks, n);
  EXPECT_EQ(gathered.records.size(), own * un);  // same ops on every rank
  // Every rank's host index, by global rank (g spans the world in rank order); rank 0's is its own.
  ASSERT_EQ(gathered.hosts.size(), un);
  for (const int h : gathered.hosts) {
    EXPECT_GE(h, 0);
    EXPECT_LT(h, g.hosts());
  }
  EXPECT_EQ(gathered.hosts[0], g.host_index());
  std::stringstream trace;
  write_chrome_trace(gathered, trace);
  const auto doc = nlohmann::json::parse(trace.str());
  std::size_t events = 0;
  for (const auto& ev : doc.at("traceEvents"))
    events += ev.at("ph") == "X" ? 1 : 0;
  EXPECT_EQ(events, gathered.records.size());
  const auto summary = summarize(gathered);
  EXPECT_EQ(summary.stragglers.size(), un);
}

// A log gathered in rounds of 2 records, ranks holding different numbers of them (rank 1 clears
// its log after two operations: 3 and 4 records per round boundary, padded blocks): the same
// records, rank by rank, as gathered in one round. collect()'s own all_gather and gathers are not
// recorded, so the log is the same for both collects.
TEST(CommLogGather, InRoundsAsInOne) {
  auto log = std::make_shared<CommLog>();
  Communicator g = group_with(log);
  const int n = g.size();
  const int r = g.rank();
  std::vector<float> v(8, 1.0f);
  for (int i = 0; i < 5; ++i) {
    if (i == 2 && r == 1) log->clear();
    g.all_reduce(v, ReduceOp::sum);
  }
  if (n > 1) {
    std::vector<float> msg(3, 2.0f);
    for (int i = 0; i < 4; ++i) {
      if (r == 0) g.send(Tensor(msg.data(), msg.size(), DType::f32), 1);
      if (r == 1) g.recv(Tensor(msg.data(), msg.size(), DType::f32), 0);
    }
  }
  const std::size_t own = log->size();
  const GatheredLog whole = log->collect(g);
  EXPECT_EQ(log->size(), own) << "collect() recorded its own operations";
  detail::set_log_gather_round_records(2);
  const GatheredLog rounds = log->collect(g);
  detail::set_log_gather_round_records(0);
  EXPECT_EQ(log->size(), own) << "collect() recorded its own operations";
  if (r != 0) {
    EXPECT_TRUE(rounds.records.empty());
    return;
  }
  // Per rank: 5 all_reduces (rank 1: the last 3), and rank 0's 4 sends, rank 1's 4 receives.
  std::vector<std::size_t> per_rank(static_cast<std::size_t>(n), 5);
  if (n > 1) {
    per_rank[0] += 4;
    per_rank[1] += 4 - 2;
  }
  std::vector<std::size_t> seen(static_cast<std::size_t>(n), 0);
  for (const LogRecord& rec : whole.records)
    ++seen.at(static_cast<std::size_t>(rec.global_rank));
  ASSERT_EQ(seen, per_rank);
  ASSERT_EQ(rounds.records.size(), whole.records.size());
  for (std::size_t i = 0; i < whole.records.size(); ++i) {
    const LogRecord& a = whole.records[i];
    const LogRecord& b = rounds.records[i];
    EXPECT_EQ(std::tie(a.start_ns, a.end_ns, a.sequence, a.group_id, a.bytes, a.count, a.backend,
                       a.op, a.dtype, a.async, a.group_rank, a.group_size, a.global_rank),
              std::tie(b.start_ns, b.end_ns, b.sequence, b.group_id, b.bytes, b.count, b.backend,
                       b.op, b.dtype, b.async, b.group_rank, b.group_size, b.global_rank))
        << "record " << i;
  }
  EXPECT_EQ(rounds.dropped, whole.dropped);
  EXPECT_EQ(rounds.hosts, whole.hosts);
}

// Counts what it is told (the program's own observer, beside MCR_LOG's).
struct Counter final : OpObserver {
  std::atomic<int> seen{0};
  void on_complete(const OpRecord&) noexcept override { ++seen; }
};

// An asynchronous operation issued before an observer is attached, completed after: its start was
// not taken, and it is not recorded (its record spanned the clock's whole epoch, hours long).
TEST(Observer, AnOperationIssuedBeforeItIsNotRecorded) {
  Communicator g = group_with(nullptr);
  std::vector<float> v(4, 1.0f);
  Work w = g.iall_reduce(Tensor(v.data(), v.size(), DType::f32), ReduceOp::sum);
  auto log = std::make_shared<CommLog>();
  g.set_observer(log);
  w.wait();
  EXPECT_EQ(log->size(), 0u);
  g.all_reduce(v, ReduceOp::sum);
  ASSERT_EQ(log->size(), 1u);
  const LogRecord r = (*log)[0];
  EXPECT_GE(r.end_ns, r.start_ns);
  EXPECT_LT(r.end_ns - r.start_ns, std::int64_t{60} * 1000 * 1000 * 1000);
}

// The program attaches its own observer to the world: MCR_LOG's log keeps recording beside it (it
// was replaced, and the finalize report missed every later operation).
TEST(EnvLog, WorldOpsForTheFinalizeReport) {
  static const auto counter = std::make_shared<Counter>();  // stays attached until finalize
  g_world.set_observer(counter);
  std::vector<float> v(4, 1.0f);
  for (int i = 0; i < 3; ++i)
    g_world.all_reduce(v, ReduceOp::sum);  // 16 B: gloo by the table
  for (int i = 0; i < 2; ++i)
    g_world.broadcast(v, 0);
  EXPECT_EQ(counter->seen.load(), 5);
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string table, dir = ".";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--table=", 0) == 0) table = a.substr(8);
    if (a.rfind("--outdir=", 0) == 0) dir = a.substr(9);
  }
  g_trace_path = dir + "/mpi_bench_trace.json";
  g_summary_path = dir + "/mpi_bench_summary.txt";
  setenv("MCR_TUNING", table.c_str(), 1);
  setenv("MCR_LOG", "summary,trace", 1);
  setenv("MCR_TRACE_FILE", g_trace_path.c_str(), 1);
  setenv("MCR_LOG_FILE", g_summary_path.c_str(), 1);
  g_world = init();
  for (const auto& b : g_world.backends())
    g_have_gloo = g_have_gloo || b == "gloo";
  const int rank = g_world.rank();
  const int size = g_world.size();
  // The files of an earlier run must not pass for this one's (rank 0 writes them at finalize()).
  if (rank == 0) {
    (void)std::remove(g_trace_path.c_str());
    (void)std::remove(g_summary_path.c_str());
  }
  if (rank != 0) ::testing::GTEST_FLAG(print_time) = false;
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  std::vector<std::int32_t> verdict{failed};
  g_world.all_reduce(verdict, ReduceOp::max);
  g_world = Communicator();
  finalize();  // writes the MCR_LOG summary and trace on rank 0
  if (rank != 0) return verdict[0];
  // The trace of the world's operations (the tests' world ops plus the verdict all_reduce).
  std::ifstream in(g_trace_path);
  if (!in) {
    fmt::print(stderr, "FAIL: no trace file at {}\n", g_trace_path);
    return 1;
  }
  const auto doc = nlohmann::json::parse(in);
  int all_reduce_events = 0, broadcast_gloo = 0;
  std::set<int> pids;
  for (const auto& ev : doc.at("traceEvents")) {
    if (ev.at("ph") != "X") continue;
    pids.insert(ev.at("pid").get<int>());
    if (ev.at("name") == "all_reduce") ++all_reduce_events;
    if (ev.at("name") == "broadcast" && ev.at("cat") == (g_have_gloo ? "gloo" : "mpi"))
      ++broadcast_gloo;
  }
  // 3 + 1 (verdict) all_reduce per rank; 2 broadcasts per rank on gloo; one pid per rank.
  bool ok = all_reduce_events == 4 * size && broadcast_gloo == 2 * size &&
            static_cast<int>(pids.size()) == size;
  std::ifstream sum(g_summary_path);
  std::stringstream ss;
  ss << sum.rdbuf();
  ok = ok && ss.str().find("straggler view") != std::string::npos &&
       ss.str().find("broadcast") != std::string::npos;
  if (!ok) {
    fmt::print(
        stderr,
        "FAIL: trace/summary: {} all_reduce events, {} gloo broadcasts, {} pids; summary:\n{}\n",
        all_reduce_events, broadcast_gloo, pids.size(), ss.str());
    return 1;
  }
  fmt::print("trace {} and summary {} hold the expected events\n", g_trace_path, g_summary_path);
  return verdict[0];
}
