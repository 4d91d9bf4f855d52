// Flight-record dumps that happen at once (two communicators timing out together, a signal during
// a dump): the record file holds one whole dump, every other dump lands beside it whole, numbered,
// and no temporary file is left behind; and a snapshot gives the record file up to a failure.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mcr/comm/flight_recorder.hpp"
#include "observe/flight_recorder.hpp"

namespace mcr::detail {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);  // throws on a file that two writers interleaved
}

TEST(FlightDump, ConcurrentDumpsEachLandWhole) {
  // MCR_FLIGHT_DIR comes from ctest (its own folder); it is read once, at the first dump.
  const char* env = std::getenv("MCR_FLIGHT_DIR");
  ASSERT_NE(env, nullptr) << "run through ctest, which sets MCR_FLIGHT_DIR";
  const fs::path dir = env;
  fs::remove_all(dir);

  FlightRecorder recorder;  // one live communicator: every dump holds a record
  recorder.attach(7, 0, 1, {0});
  constexpr int kThreads = 8;
  constexpr int kDumpsEach = 25;
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> paths(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads)
        std::this_thread::yield();  // start together
      for (int i = 0; i < kDumpsEach; ++i)
        paths[t].push_back(dump_flight_record_to_dir("thread " + std::to_string(t)));
    });
  }
  for (auto& th : threads)
    th.join();

  std::set<std::string> returned;
  for (const auto& list : paths) {
    for (const auto& p : list) {
      EXPECT_FALSE(p.empty()) << "a dump was not written";
      returned.insert(p);
    }
  }
  // The record file once, and every other dump under a name of its own.
  EXPECT_EQ(returned.size(), static_cast<std::size_t>(kThreads * kDumpsEach));
  const fs::path record = dir / "flight-rank0.json";
  EXPECT_EQ(returned.count(record.string()), 1u);

  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << "left behind: " << name;
    if (name.find(".tmp") != std::string::npos) continue;
    ++files;
    const nlohmann::json j = read_json(entry.path());
    EXPECT_EQ(j.at("format"), "mcr-flight-record") << name;
    ASSERT_EQ(j.at("communicators").size(), 1u) << name;
    EXPECT_EQ(j.at("communicators")[0].at("group_id"), 7) << name;
  }
  EXPECT_EQ(files, kThreads * kDumpsEach);
}

// A snapshot of a live job (SIGUSR1, on demand) keeps the record file only until a failure's
// record comes: left in place, it was what `mcr doctor` read after a later hang, and it blamed the
// rank whose snapshot was old. (Its own ctest entry: the record file's state is the process's.)
TEST(FlightDump, ASnapshotGivesTheRecordFileUpToAFailure) {
  const char* env = std::getenv("MCR_FLIGHT_DIR");
  ASSERT_NE(env, nullptr) << "run through ctest, which sets MCR_FLIGHT_DIR";
  const fs::path dir = env;
  fs::remove_all(dir);
  FlightRecorder recorder;
  recorder.attach(7, 0, 1, {0});
  const std::string record = (dir / "flight-rank0.json").string();
  EXPECT_EQ(dump_flight_record_to_dir("SIGUSR1", DumpKind::snapshot), record);
  EXPECT_EQ(mcr::dump_flight_record(), record);  // on demand: a newer snapshot replaces it
  EXPECT_EQ(read_json(record).at("reason"), "on demand");
  EXPECT_EQ(dump_flight_record_to_dir("timeout of sequence #3"), record);
  // From now on the failure's record stays; snapshots and failures alike go beside it.
  const std::string later = dump_flight_record_to_dir("SIGUSR1", DumpKind::snapshot);
  EXPECT_EQ(later, (dir / "flight-rank0.later-1.json").string());
  EXPECT_EQ(mcr::dump_flight_record(), (dir / "flight-rank0.later-2.json").string());
  EXPECT_EQ(dump_flight_record_to_dir("timeout of sequence #9"),
            (dir / "flight-rank0.later-3.json").string());
  EXPECT_EQ(read_json(record).at("reason"), "timeout of sequence #3");
}

}  // namespace
}  // namespace mcr::detail
