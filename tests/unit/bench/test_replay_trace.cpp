// Reading traces for `mcr replay`: the JSON op list (expansion, groups, defaults), the trace the
// communication log writes (instances, members, order), scaling, and the rank check.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/bench/replay.hpp"
#include "mcr/comm/comm_log.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {
namespace {

TEST(ReplayTrace, OpListExpandsRepeatsAndSteps) {
  const Trace t = parse_trace(R"({"format": "mcr-trace", "version": 1, "steps": 2, "ops": [
      {"op": "all_reduce", "count": 12, "async": true, "wait": true},
      {"op": "broadcast", "bytes": 96, "dtype": "f64", "root": 1, "group": [3, 1]},
      {"op": "recv", "count": 6, "dtype": "i32", "repeat": 3},
      {"op": "barrier"}]})",
                              "t.json");
  EXPECT_EQ(t.format, "mcr-trace");
  EXPECT_EQ(t.world_size, 4);  // group [3, 1] names rank 3
  ASSERT_EQ(t.ops.size(), 2u * (1 + 1 + 3 + 1));
  EXPECT_EQ(t.ops[0].op, OpType::all_reduce);
  EXPECT_EQ(t.ops[0].bytes, 48u);  // 12 f32
  EXPECT_EQ(t.ops[0].group, -1);
  EXPECT_TRUE(t.ops[0].async);
  EXPECT_TRUE(t.ops[0].wait);
  EXPECT_EQ(t.ops[1].op, OpType::broadcast);
  EXPECT_EQ(t.ops[1].root, 1);
  ASSERT_EQ(t.groups.size(), 1u);
  EXPECT_EQ(t.groups[0], (std::vector<int>{3, 1}));  // order kept: group rank i = entry i
  EXPECT_EQ(t.ops[2].op, OpType::send);              // recv stands for the send/recv pair
  EXPECT_EQ(t.ops[4].bytes, 24u);
  EXPECT_EQ(t.ops[4].source, 2u);
  EXPECT_EQ(t.ops[5].op, OpType::barrier);
  EXPECT_EQ(t.ops[6].op, OpType::all_reduce);  // the second step
}

TEST(ReplayTrace, RejectsNamingFileOpFieldValueAndRule) {
  try {
    parse_trace(R"({"format": "mcr-trace", "version": 1, "ops": [
        {"op": "all_gather", "count": 12}, {"op": "reduce", "count": 12, "root": -1}]})",
                "bad.json");
    FAIL() << "a negative root was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "bad.json: ops[1].root -1: must be a group rank (an integer >= 0)");
  }
  EXPECT_THROW(parse_trace(R"({"format": "mcr-trace", "version": 2, "ops": []})", "v.json"),
               InvalidArgument);
  EXPECT_THROW(parse_trace(R"({"format": "mcr-trace", "version": 1,
                              "ops": [{"op": "all_reduce", "count": 12, "repeat": 1000},
                                      ]})",
                           "j.json"),
               InvalidArgument);  // not JSON (trailing comma)
}

// Counts that would wrap the length check around: steps x iterations of 2^32 each (2^64, read as 0:
// a division by zero), repeats summing to 2^64 + 1 (read as 1: a trace of 10^19 ops), a count whose
// bytes wrap. Each is refused, naming the field and the bounds.
TEST(ReplayTrace, CountsThatWouldWrapAreRefused) {
  auto refuses = [](const std::string& doc, const std::string& field) {
    try {
      parse_trace(doc, "big.json");
      ADD_FAILURE() << "accepted: " << doc;
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("big.json: " + field), std::string::npos) << what;
      EXPECT_NE(what.find("must be an integer from 1 to"), std::string::npos) << what;
    }
  };
  refuses(R"({"format": "mcr-trace", "version": 1, "steps": 4294967296,
              "iterations": 4294967296, "ops": [{"op": "barrier"}]})",
          "steps");
  refuses(R"({"format": "mcr-trace", "version": 1, "ops": [
              {"op": "barrier", "repeat": 9223372036854775807},
              {"op": "barrier", "repeat": 9223372036854775807}, {"op": "barrier", "repeat": 3}]})",
          "ops[0].repeat");
  refuses(R"({"format": "mcr-trace", "version": 1, "ops": [
              {"op": "all_reduce", "dtype": "f64", "count": 4611686018427387905}]})",
          "ops[0].count");
  refuses(R"({"format": "mcr-trace", "version": 1, "ops": [
              {"op": "all_reduce", "bytes": 18446744073709551615}]})",
          "ops[0].bytes");
  refuses(R"({"format": "mcr-trace", "version": 1, "world_size": 4294967298,
              "ops": [{"op": "barrier"}]})",
          "world_size");
  // The bounds themselves are accepted.
  EXPECT_EQ(parse_trace(R"({"format": "mcr-trace", "version": 1,
                            "ops": [{"op": "barrier", "repeat": 1000000}]})",
                        "big.json")
                .ops.size(),
            1000000u);
}

// A field of another JSON type than the reader expects is an InvalidArgument naming the file, not
// a bare nlohmann type error that init's and the CLI's handlers do not catch.
TEST(ReplayTrace, FieldsOfTheWrongTypeNameTheFile) {
  for (const char* doc : {R"({"traceEvents": [{"ph": 5, "name": "x"}]})",
                          R"({"traceEvents": [{"ph": "X", "ts": "soon", "dur": 1}]})"}) {
    try {
      parse_trace(doc, "odd.json");
      ADD_FAILURE() << "accepted: " << doc;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("odd.json"), std::string::npos) << e.what();
    }
  }
}

// Records as CommLog::collect() gathers them for 3 ranks: two world all_reduces, a broadcast on
// the group {0, 2}, and a send/recv pair. Each instance's records share group id and sequence.
GatheredLog three_rank_log() {
  GatheredLog log;
  log.ranks = 3;
  log.dropped.assign(3, 0);
  auto add = [&](std::int64_t start, std::uint64_t seq, std::uint64_t group, OpType op,
                 std::size_t bytes, DType dtype, bool async, int grank, int gsize, int global) {
    log.records.push_back(LogRecord{start, start + 1000, seq, group, bytes, bytes / 4, "mpi", op,
                                    dtype, async, grank, gsize, global});
  };
  for (int r = 0; r < 3; ++r)  // world sequence 0, started at 100..102
    add(100 + r, 0, 0, OpType::all_reduce, 4096, DType::f32, true, r, 3, r);
  // The sub-group's broadcast starts at 150, before world sequence 1 (at 200).
  add(150, 0, 7, OpType::broadcast, 64, DType::i32, false, 0, 2, 0);
  add(160, 0, 7, OpType::broadcast, 64, DType::i32, false, 1, 2, 2);
  for (int r = 0; r < 3; ++r)
    add(200 + r, 1, 0, OpType::all_reduce, 8, DType::f64, false, r, 3, r);
  add(300, 2, 0, OpType::send, 16, DType::f32, false, 0, 3, 0);
  add(301, 2, 0, OpType::recv, 16, DType::f32, false, 1, 3, 1);
  return log;
}

TEST(ReplayTrace, CommLogTraceBecomesInstancesInStartOrder) {
  std::ostringstream text;
  write_chrome_trace(three_rank_log(), text);
  const Trace t = parse_trace(text.str(), "log.json");
  EXPECT_EQ(t.format, "mcr-log");
  EXPECT_EQ(t.world_size, 3);
  EXPECT_EQ(t.skipped_p2p, 2u);
  ASSERT_EQ(t.ops.size(), 3u);
  EXPECT_EQ(t.ops[0].op, OpType::all_reduce);
  EXPECT_EQ(t.ops[0].bytes, 4096u);
  EXPECT_TRUE(t.ops[0].async);
  EXPECT_EQ(t.ops[1].op, OpType::broadcast);
  EXPECT_EQ(t.ops[1].dtype, DType::i32);
  EXPECT_EQ(t.groups[static_cast<std::size_t>(t.ops[1].group)], (std::vector<int>{0, 2}));
  EXPECT_EQ(t.ops[2].op, OpType::all_reduce);
  EXPECT_EQ(t.ops[2].dtype, DType::f64);
  EXPECT_FALSE(t.ops[2].async);
  EXPECT_EQ(t.groups[static_cast<std::size_t>(t.ops[0].group)], (std::vector<int>{0, 1, 2}));
}

// Async operations of one backend overlap without nesting (DDP's buckets): each slice goes to a
// lane of its rank and backend where it overlaps nothing, as a trace viewer draws only nested
// slices (they shared one track). The trace still replays alike.
TEST(ReplayTrace, CommLogOverlappingSlicesGetTheirOwnLanes) {
  GatheredLog log;
  log.ranks = 1;
  log.dropped.assign(1, 0);
  log.records.push_back(
      LogRecord{0, 10000, 0, 0, 48, 12, "mpi", OpType::all_reduce, DType::f32, true, 0, 1, 0});
  log.records.push_back(
      LogRecord{5000, 15000, 1, 0, 48, 12, "mpi", OpType::all_reduce, DType::f32, true, 0, 1, 0});
  log.records.push_back(
      LogRecord{12000, 20000, 2, 0, 48, 12, "mpi", OpType::all_reduce, DType::f32, true, 0, 1, 0});
  std::ostringstream text;
  write_chrome_trace(log, text);
  const auto j = nlohmann::json::parse(text.str());
  std::map<int, std::vector<std::pair<double, double>>> slices;  // tid -> [ts, ts + dur)
  std::map<int, std::string> names;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] == "X") {
      slices[ev["tid"].get<int>()].emplace_back(ev["ts"].get<double>(),
                                                ev["ts"].get<double>() + ev["dur"].get<double>());
    } else if (ev["name"] == "thread_name") {
      names[ev["tid"].get<int>()] = ev["args"]["name"].get<std::string>();
    }
  }
  ASSERT_EQ(slices.size(), 2u);  // the first and third on one lane, the second on another
  for (const auto& [tid, list] : slices) {
    for (std::size_t a = 0; a < list.size(); ++a)
      for (std::size_t b = a + 1; b < list.size(); ++b)
        EXPECT_TRUE(list[a].second <= list[b].first || list[b].second <= list[a].first)
            << "tid " << tid << " has overlapping slices";
  }
  std::set<std::string> lane_names;
  for (const auto& [tid, list] : slices)
    lane_names.insert(names[tid]);
  EXPECT_EQ(lane_names, (std::set<std::string>{"mpi", "mpi (2)"}));
  EXPECT_EQ(parse_trace(text.str(), "lanes.json").ops.size(), 3u);
}

TEST(ReplayTrace, CommLogTraceKeepsEachGroupsSequenceOrder) {
  // Async ops: sequence 1 (all_gather) was issued after sequence 0 (all_reduce) but started first
  // on the wire; the group's own order must still hold, since every member issues in that order.
  GatheredLog log;
  log.ranks = 2;
  log.dropped.assign(2, 0);
  for (int r = 0; r < 2; ++r) {
    log.records.push_back(
        LogRecord{500, 900, 0, 0, 48, 12, "mpi", OpType::all_reduce, DType::f32, true, r, 2, r});
    log.records.push_back(
        LogRecord{400, 800, 1, 0, 96, 12, "mpi", OpType::all_gather, DType::f32, true, r, 2, r});
  }
  std::ostringstream text;
  write_chrome_trace(log, text);
  const Trace t = parse_trace(text.str(), "async.json");
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].op, OpType::all_reduce);
  EXPECT_EQ(t.ops[1].op, OpType::all_gather);
}

// Sends and receives move a communicator's sequence on the ranks that issue them only: after rank 0
// sent to rank 1 (a pipeline stage's activations), the next all_reduce is sequence 1 on ranks 0
// and 1 and sequence 0 on rank 2. It is still one collective of all three, and the one after too.
TEST(ReplayTrace, CommLogCollectivesAreMatchedPastUnevenSendsAndReceives) {
  GatheredLog log;
  log.ranks = 3;
  log.dropped.assign(3, 0);
  auto add = [&](std::int64_t start, std::uint64_t seq, OpType op, std::size_t bytes, int r) {
    log.records.push_back(LogRecord{start, start + 1000, seq, 0, bytes, bytes / 4, "mpi", op,
                                    DType::f32, false, r, 3, r});
  };
  add(100, 0, OpType::send, 64, 0);
  add(100, 0, OpType::recv, 64, 1);
  for (int r = 0; r < 3; ++r)
    add(2000 + r, r < 2 ? 1 : 0, OpType::all_reduce, 4096, r);
  for (int r = 0; r < 3; ++r)
    add(4000 + r, r < 2 ? 2 : 1, OpType::all_gather, 96, r);
  std::ostringstream text;
  write_chrome_trace(log, text);
  const Trace t = parse_trace(text.str(), "pipeline.json");
  EXPECT_EQ(t.skipped_p2p, 2u);
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].op, OpType::all_reduce);
  EXPECT_EQ(t.ops[0].bytes, 4096u);
  EXPECT_EQ(t.ops[1].op, OpType::all_gather);
  EXPECT_EQ(t.groups[static_cast<std::size_t>(t.ops[0].group)], (std::vector<int>{0, 1, 2}));
}

// A rank that recorded one sequence number twice wrote a corrupt log: refused, naming both events.
TEST(ReplayTrace, CommLogASequenceRecordedTwiceByOneRankIsRefused) {
  GatheredLog log = three_rank_log();
  LogRecord again = log.records.front();
  again.start_ns += 50;
  log.records.push_back(again);
  std::ostringstream text;
  write_chrome_trace(log, text);
  try {
    parse_trace(text.str(), "twice.json");
    FAIL() << "a sequence recorded twice was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("recorded sequence 0 of group"), std::string::npos)
        << e.what();
  }
}

// An all_to_all_v issued without a size hint logs 0 bytes: it is left out and counted, not replayed
// as one element per rank. One with a hint replays at that size.
TEST(ReplayTrace, CommLogAllToAllVWithoutASizeIsLeftOut) {
  GatheredLog log;
  log.ranks = 2;
  log.dropped.assign(2, 0);
  for (int r = 0; r < 2; ++r) {
    log.records.push_back(
        LogRecord{100, 200, 0, 0, 0, 0, "mpi", OpType::all_to_all_v, DType::f32, true, r, 2, r});
    log.records.push_back(LogRecord{300, 400, 1, 0, 8192, 2048, "mpi", OpType::all_to_all_v,
                                    DType::f32, true, r, 2, r});
  }
  std::ostringstream text;
  write_chrome_trace(log, text);
  const Trace t = parse_trace(text.str(), "moe.json");
  EXPECT_EQ(t.skipped_unsized, 2u);  // each rank's record
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_EQ(t.ops[0].bytes, 8192u);
}

// The log records no waits: an async op is a wait point where the next op started after every op
// in flight had ended. All_reduces at 100-300 and 150-350 overlap; the next starts at 400 (after
// both), the one after at 600; the last op ends the trace. Before, none was a wait point and the
// whole trace was replayed in flight.
TEST(ReplayTrace, CommLogAsyncOpsAreWaitedWhereTheRunHadNoOverlap) {
  GatheredLog log;
  log.ranks = 2;
  log.dropped.assign(2, 0);
  const std::int64_t spans[][2] = {{100, 300}, {150, 350}, {400, 500}, {600, 700}};
  for (int r = 0; r < 2; ++r) {
    for (std::uint64_t k = 0; k < 4; ++k) {
      log.records.push_back(LogRecord{spans[k][0] * 1000, spans[k][1] * 1000, k, 0, 4096, 1024,
                                      "gloo", OpType::all_reduce, DType::f32, true, r, 2, r});
    }
  }
  std::ostringstream text;
  write_chrome_trace(log, text);
  const Trace t = parse_trace(text.str(), "torch.json");
  ASSERT_EQ(t.ops.size(), 4u);
  EXPECT_FALSE(t.ops[0].wait);
  EXPECT_TRUE(t.ops[1].wait);
  EXPECT_TRUE(t.ops[2].wait);
  EXPECT_TRUE(t.ops[3].wait);
}

TEST(ReplayTrace, CommLogTraceCarriesTheHostMap) {
  GatheredLog log = three_rank_log();
  std::ostringstream plain;
  write_chrome_trace(log, plain);
  EXPECT_TRUE(parse_trace(plain.str(), "log.json").hosts.empty());  // none gathered: none read

  // Ranks 0 and 1 on one host, rank 2 on another; a fourth rank that logged nothing keeps its host
  // in the map, and the trace still needs only the ranks its operations name.
  log.ranks = 4;
  log.hosts = {0, 0, 1, 1};
  std::ostringstream text;
  write_chrome_trace(log, text);
  const Trace t = parse_trace(text.str(), "hosts.json");
  EXPECT_EQ(t.hosts, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(t.world_size, 3);

  // Every rank or none: a trace whose rank 2 lost its host is refused, naming the rank.
  log.hosts = {0, 0, -1, 1};
  std::ostringstream partial;
  write_chrome_trace(log, partial);
  try {
    parse_trace(partial.str(), "partial.json");
    FAIL() << "a host map without rank 2 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "partial.json: rank 2 has no host in the trace's process metadata while other ranks "
              "have one (a trace written at finalize names every rank's host)");
  }
}

TEST(ReplayTrace, CommLogCollectedOverASubGroupKeepsItsGlobalRanksHosts) {
  // collect() over the group of global ranks {1, 2} of a 3-rank job: 2 ranks gathered, the host
  // map indexed by global rank, rank 0 not in it.
  GatheredLog log;
  log.ranks = 2;
  log.dropped.assign(2, 0);
  log.hosts = {-1, 0, 1};
  for (int g = 0; g < 2; ++g) {
    log.records.push_back(LogRecord{100, 900, 0, 3, 64, 16, "gloo", OpType::all_reduce, DType::f32,
                                    true, g, 2, g + 1});
  }
  std::ostringstream text;
  write_chrome_trace(log, text);
  const Trace t = parse_trace(text.str(), "sub.json");
  EXPECT_EQ(t.hosts, (std::vector<int>{-1, 0, 1}));
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_EQ(t.groups[static_cast<std::size_t>(t.ops[0].group)], (std::vector<int>{1, 2}));
}

TEST(ReplayTrace, CommLogHostsAreOnePerRankAndBounded) {
  auto event = [](const std::string& pid, const std::string& host) {
    return R"({"ph": "M", "name": "process_name", "pid": )" + pid +
           R"(, "tid": 0, "args": {"name": "rank", "host": )" + host + "}}";
  };
  auto refused = [](const std::string& events, const std::string& expected) {
    try {
      parse_trace(R"({"traceEvents": [)" + events + "]}", "t.json");
      ADD_FAILURE() << "accepted: " << events;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refused(event("0", "0") + ", " + event("0", "1"),
          "rank 0 was given host 0 before: a rank has one host");
  refused(event("2000000000", "0"), "must be a global rank (an integer from 0 to 1048575)");
}

TEST(ReplayTrace, CommLogHostMustBeAnIndex) {
  const std::string text =
      R"({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0,)"
      R"( "args": {"name": "rank 0", "host": "h0"}}]})";
  try {
    parse_trace(text, "bad.json");
    FAIL() << "a host name was accepted as a host index";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("traceEvents[0].args.host"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("must be a host index (an integer >= 0)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ReplayTrace, CommLogTraceOfOneRankIsRefused) {
  GatheredLog log = three_rank_log();
  std::erase_if(log.records, [](const LogRecord& r) { return r.global_rank != 1; });
  std::ostringstream text;
  write_chrome_trace(log, text);
  try {
    parse_trace(text.str(), "rank1.json");
    FAIL() << "a one-rank log was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("records of 1 of its 3 ranks"), std::string::npos)
        << e.what();
  }
}

TEST(ReplayTrace, ScaleKeepsWholeElementsAndMultiplesOf12) {
  Trace t = parse_trace(R"({"format": "mcr-trace", "version": 1, "ops": [
      {"op": "all_reduce", "count": 1200}, {"op": "all_gather", "count": 12, "dtype": "f16"},
      {"op": "reduce", "count": 10, "dtype": "f64"}, {"op": "barrier"}]})",
                        "s.json");
  scale_trace(t, 0.5);
  EXPECT_EQ(t.ops[0].bytes, 600u * 4);
  EXPECT_EQ(t.ops[1].bytes, 12u * 2);  // 6 would not divide on 4 ranks: kept at 12
  EXPECT_EQ(t.ops[2].bytes, 5u * 8);   // not a multiple of 12 to begin with: whole elements
  EXPECT_EQ(t.ops[3].bytes, 0u);
  scale_trace(t, 0.1);
  EXPECT_EQ(t.ops[0].bytes, 60u * 4);
  scale_trace(t, 1e-9);
  EXPECT_EQ(t.ops[0].bytes, 12u * 4);
  EXPECT_EQ(t.ops[2].bytes, 1u * 8);
  EXPECT_THROW(scale_trace(t, 0), InvalidArgument);
}

// A factor that takes an op past the trace's 2^48-byte limit is refused, naming the op, and
// changes nothing. It was accepted: past 2^64 bytes the conversion was undefined (2^44 bytes x
// 12 x 2^20 here), and a product of units, 12 and the element size could wrap to a small size
// that was replayed silently.
TEST(ReplayTrace, ScaleRefusesSizesPastTheLimit) {
  Trace t = parse_trace(R"({"format": "mcr-trace", "version": 1, "ops": [
      {"op": "all_reduce", "count": 12},
      {"op": "all_gather", "count": 17592186044416, "dtype": "u8"}]})",
                        "big.json");
  try {
    scale_trace(t, 1048576.0 * 12);
    FAIL() << "a scaled size past 2^48 bytes was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("replay.scale 12582912: big.json op 1 would move"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(t.ops[0].bytes, 12u * 4);  // unchanged: the refusal came after op 0 was scaled
  EXPECT_EQ(t.ops[1].bytes, std::size_t{1} << 44);
  EXPECT_THROW(scale_trace(t, 1e30), InvalidArgument);  // past 2^64
  scale_trace(t, 16.0);                                 // 2^48 exactly is allowed
  EXPECT_EQ(t.ops[1].bytes, std::size_t{1} << 48);
}

TEST(ReplayTrace, NeedsEnoughRanks) {
  const Trace t = parse_trace(R"({"format": "mcr-trace", "version": 1, "world_size": 3,
                                  "ops": [{"op": "all_reduce", "count": 12}]})",
                              "w.json");
  EXPECT_NO_THROW(check_trace_fits(t, 3));
  try {
    check_trace_fits(t, 2);
    FAIL() << "a 3-rank trace fitted 2 ranks";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "w.json: the trace needs 3 ranks, but this job has 2 (run it with mpirun -np 3 "
                 "or more)");
  }
}

}  // namespace
}  // namespace mcr::bench
