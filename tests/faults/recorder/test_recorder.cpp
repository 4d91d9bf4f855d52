// Flight recorder and timeouts that name ranks, at 2-3 oversubscribed ranks over every usable
// backend: a rank that stops calling is named by its peers' TimeoutError, the peers' flight
// records land in MCR_FLIGHT_DIR, and polling Work::test() gives up after the op's timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace mcr::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string flight_dir() {
  const char* d = std::getenv("MCR_FLIGHT_DIR");
  return d != nullptr ? d : "";
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The last rank stops calling; the others' TimeoutError names them and names it. Async on every
// backend; sync on Gloo too, which enforces the timeout inside its own call (a synchronous MPI
// collective cannot be interrupted: the watchdog case, check_hang.cmake).
TEST(Recorder, TimeoutNamesThisRankAndTheLaggard) {
  if (world().size() < 3) GTEST_SKIP() << "needs 3 ranks";
  std::vector<std::pair<std::string, bool>> cases;  // backend, async
  for (const std::string& backend : world().backends()) {
    cases.emplace_back(backend, true);
    if (backend == "gloo") cases.emplace_back(backend, false);
  }
  for (const auto& [backend, async] : cases) {
    Communicator comm = world().split(0, world().rank());
    const int laggard = comm.size() - 1;
    float x[4] = {1, 1, 1, 1};
    comm.all_reduce(Tensor(x, 4, DType::f32), ReduceOp::sum, {.backend = backend});  // #0
    if (comm.rank() != laggard) {
      const auto start = Clock::now();
      try {
        // 5 s: the other waiting rank must have published its progress when this one times out
        // (1-1.25 s after it issued), however loaded the machine is.
        const CallOptions o{.backend = backend, .timeout = 5s};
        if (async) {
          comm.iall_reduce(Tensor(x, 4, DType::f32), ReduceOp::sum, o).wait();
        } else {
          comm.all_reduce(Tensor(x, 4, DType::f32), ReduceOp::sum, o);
        }
        ADD_FAILURE() << fmt::format("[{}] {}: all_reduce completed without rank {}", rank_tag(),
                                     backend, laggard);
      } catch (const TimeoutError& e) {
        const double waited = seconds_since(start);
        const std::string m = e.what();
        fmt::print("[{}] {} {}: TimeoutError after {:.2f} s: {}\n", rank_tag(), backend,
                   async ? "async" : "sync", waited, m);
        EXPECT_EQ(e.sequence(), 1u) << m;
        EXPECT_NE(m.find(fmt::format("rank {} of group {}", comm.rank(), comm.id())),
                  std::string::npos)
            << backend << ": does not name this rank: " << m;
        EXPECT_NE(m.find(fmt::format("ranks that have not reached sequence #1: {} (world rank {}",
                                     laggard, comm.global_rank(laggard))),
                  std::string::npos)
            << backend << ": does not name exactly the laggard: " << m;
        EXPECT_GE(waited, 4.9) << m;
        EXPECT_LT(waited, 15.0) << m;
        // The dump written at the timeout, which the message names, holds this communicator, op
        // #1 timed out. (The first dump of the process is flight-rank<N>.json; later ones are
        // kept beside it, numbered.)
        const auto named = m.find("flight record: ");
        ASSERT_NE(named, std::string::npos) << "the message names no flight record: " << m;
        const std::string path = m.substr(named + std::string_view("flight record: ").size());
        EXPECT_TRUE(
            path.starts_with(fmt::format("{}/flight-rank{}.", flight_dir(), world().rank())))
            << path;
        std::ifstream in(path);
        ASSERT_TRUE(in) << path << " was not written";
        const auto j = nlohmann::json::parse(in);
        EXPECT_EQ(j.at("world_rank").get<int>(), world().rank());
        EXPECT_FALSE(j.at("snapshot").get<bool>()) << "a timeout's record explains a failure";
        bool found = false;
        for (const auto& c : j.at("communicators")) {
          if (c.at("group_id").get<std::uint64_t>() != comm.id()) continue;
          for (const auto& op : c.at("ops")) {
            if (op.at("seq").get<int>() != 1) continue;
            found = true;
            EXPECT_EQ(op.at("op"), "all_reduce");
            EXPECT_EQ(op.at("state"), "timed_out");
            EXPECT_EQ(op.at("backend"), backend);
            EXPECT_EQ(op.at("form"), async ? "async" : "sync");
          }
        }
        EXPECT_TRUE(found) << path << " lacks sequence #1 of group " << comm.id();
      } catch (const std::exception& e) {
        ADD_FAILURE() << fmt::format("[{}] {}: not a TimeoutError: {}", rank_tag(), backend,
                                     e.what());
      }
    }
    // Everyone leaves the timed-out op before any destroys the communicator.
    world().barrier();
  }
}

// Send/recv shift sequence numbers (rank 0 sends rank 1 two messages; rank 2 has none), so ranks
// that reached a collective are told from those that did not by its index among the collectives:
// rank 0 stops calling, and the TimeoutError of ranks 1 and 2 names rank 0 only, not the peer
// whose sequence numbers are smaller.
TEST(Recorder, TimeoutAfterSendRecvNamesOnlyTheLaggard) {
  if (world().size() != 3) GTEST_SKIP() << "needs 3 ranks";
  const std::string backend = world().backends().front();
  Communicator comm = world().split(0, world().rank());
  const int laggard = 0;
  float x[4] = {1, 1, 1, 1};
  const CallOptions on{.backend = backend};
  if (comm.rank() == 0) {
    comm.send(Tensor(x, 4, DType::f32), 1, on);  // #0
    comm.send(Tensor(x, 4, DType::f32), 1, on);  // #1
  } else if (comm.rank() == 1) {
    comm.recv(Tensor(x, 4, DType::f32), 0, on);
    comm.recv(Tensor(x, 4, DType::f32), 0, on);
  }
  comm.all_reduce(Tensor(x, 4, DType::f32), ReduceOp::sum, on);  // collective #0
  if (comm.rank() != laggard) {
    // Collective #1: sequence #3 on rank 1, #1 on rank 2.
    const std::uint64_t seq = comm.rank() == 1 ? 3 : 1;
    try {
      // As the first test's 5 s: the peer that waits too must have published (its watchdog does
      // so 1-1.25 s after the issue) however loaded the machine is.
      comm.iall_reduce(Tensor(x, 4, DType::f32), ReduceOp::sum, {.backend = backend, .timeout = 5s})
          .wait();
      ADD_FAILURE() << fmt::format("[{}] all_reduce completed without rank 0", rank_tag());
    } catch (const TimeoutError& e) {
      const std::string m = e.what();
      fmt::print("[{}] {}: TimeoutError: {}\n", rank_tag(), backend, m);
      EXPECT_EQ(e.sequence(), seq) << m;
      const std::string which =
          seq == 1 ? "sequence #1"
                   : "sequence #3 (collective #1 of the group; sequence numbers count send/recv "
                     "too)";
      const std::string named = fmt::format("ranks that have not reached {}: 0 (world rank {}, ",
                                            which, comm.global_rank(laggard));
      const auto at = m.find(named);
      ASSERT_NE(at, std::string::npos) << "does not name rank 0 as the laggard: " << m;
      const std::string list = m.substr(at, m.find("; flight record", at) - at);
      EXPECT_EQ(list.find(fmt::format("{} (world rank", comm.rank() == 1 ? 2 : 1)),
                std::string::npos)
          << "names a peer that reached the collective: " << list;
    } catch (const std::exception& e) {
      ADD_FAILURE() << fmt::format("[{}] not a TimeoutError: {}", rank_tag(), e.what());
    }
  }
  world().barrier();
}

// Polling Work::test() on an op that never completes raises TimeoutError once the op's timeout
// has passed since it was issued.
TEST(Recorder, TestLoopTimesOut) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  for (const std::string& backend : world().backends()) {
    Communicator comm = world().split(0, world().rank());
    if (comm.rank() == 0) {
      std::int32_t v = 0;
      const auto start = Clock::now();
      Work w = comm.irecv(Tensor(&v, 1, DType::i32), 1, {.backend = backend, .timeout = 1s});
      try {
        while (!w.test())
          std::this_thread::sleep_for(1ms);
        ADD_FAILURE() << backend << ": recv completed without a sender";
      } catch (const TimeoutError& e) {
        const double waited = seconds_since(start);
        fmt::print("[{}] {}: test() loop raised TimeoutError after {:.2f} s: {}\n", rank_tag(),
                   backend, waited, e.what());
        EXPECT_EQ(e.op(), "recv") << e.what();
        EXPECT_NE(std::string(e.what()).find(
                      fmt::format("peer rank 1 (world rank {}) has", comm.global_rank(1))),
                  std::string::npos)
            << e.what();
        EXPECT_EQ(e.backend(), backend) << e.what();
        EXPECT_GE(waited, 0.95) << e.what();
        EXPECT_LT(waited, 5.0) << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << backend << ": not a TimeoutError: " << e.what();
      }
    }
    world().barrier();
  }
}

// On demand: the public call writes this rank's record wherever asked.
TEST(Recorder, DumpOnDemand) {
  float x = 1;
  world().all_reduce(Tensor(&x, 1, DType::f32), ReduceOp::sum);
  const std::string path = fmt::format("{}/on-demand-rank{}.json", flight_dir(), world().rank());
  EXPECT_EQ(dump_flight_record(path), path);
  std::ifstream in(path);
  ASSERT_TRUE(in);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("format"), "mcr-flight-record");
  EXPECT_EQ(j.at("reason"), "on demand");
  EXPECT_TRUE(j.at("snapshot").get<bool>()) << "a dump on demand is a snapshot of a live job";
  EXPECT_EQ(j.at("world_size").get<int>(), world().size());
  const auto& w = j.at("communicators").at(0);
  EXPECT_EQ(w.at("group_id").get<int>(), 0);
  ASSERT_FALSE(w.at("ops").empty());
  const auto& last = w.at("ops").back();
  EXPECT_EQ(last.at("op"), "all_reduce");
  EXPECT_EQ(last.at("state"), "completed");
  EXPECT_EQ(last.at("seq").get<std::uint64_t>() + 1, w.at("issued").get<std::uint64_t>());
}

}  // namespace
}  // namespace mcr::test
