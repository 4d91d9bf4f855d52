// The watchdog's progress publication (observe/flight_progress.cpp): a publication that the store
// did not take is tried again at the next period. Marked published but never written, a rank
// waiting in a collective stayed unpublished for the rest of it, and a peer's timeout named it
// among the ranks that had not reached the collective.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bootstrap/bootstrap.hpp"
#include "mcr/errors.hpp"
#include "observe/flight_recorder.hpp"

namespace mcr::detail {
namespace {

// An in-memory store that can be told to be slow (the probe fails) or to refuse writes.
class FlakyStore final : public Store {
 public:
  bool answers = true;
  bool takes_writes = true;
  std::map<std::string, std::string> kv;

  void set(const std::string& key, const Bytes& value) override {
    if (!takes_writes) throw Error("store: connection reset");
    kv[key] = std::string(value.begin(), value.end());
  }
  Bytes get(const std::string& key, std::chrono::milliseconds) override {
    const std::string& v = kv.at(key);
    return Bytes(v.begin(), v.end());
  }
  std::int64_t add(const std::string&, std::int64_t) override {
    throw std::logic_error("not used");
  }
  bool check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys)
      if (kv.count(k) == 0) return false;
    return true;
  }
  bool responds_within(std::chrono::milliseconds) override { return answers; }
};

// Rank 1 of a 3-rank group 7, with one all_reduce outstanding that the watchdog has seen for long
// enough to count as stuck.
struct StuckRank {
  FlightRecorder recorder;
  StuckRank() {
    recorder.attach(7, 1, 3, {0, 1, 2});
    recorder.issued(0, OpType::all_reduce, DType::f32, 4, -1, true, "mpi", 16);
    recorder.watch_oldest = 0;
    recorder.watch_since_ns = 1;  // long ago
  }
};

constexpr const char* kKey = "mcr/progress/7/1";

// A steady clock for the publications, `seconds` after the previous one: one clock for every test
// of the process, as the publication's back-off after an unanswered probe is process-wide.
std::int64_t later(double seconds = 0.25) {
  static std::int64_t now = 100'000'000'000;  // 100 s: the StuckRank's operation is long stuck
  now += static_cast<std::int64_t>(seconds * 1e9);
  return now;
}

TEST(FlightProgress, PublishesAStuckOperation) {
  StuckRank rank;
  FlakyStore store;
  publish_stuck_progress(&store, later());
  ASSERT_EQ(store.kv.count(kKey), 1u);
  EXPECT_EQ(store.kv.at(kKey), "1 1");  // one operation issued, one collective
}

TEST(FlightProgress, RetriesWhenTheStoreDidNotAnswer) {
  StuckRank rank;
  FlakyStore store;
  store.answers = false;
  publish_stuck_progress(&store, later());
  EXPECT_EQ(store.kv.count(kKey), 0u);
  store.answers = true;
  // The next probe waits a second after one the store did not answer.
  publish_stuck_progress(&store, later(0.25));
  EXPECT_EQ(store.kv.count(kKey), 0u) << "probed again within the second";
  publish_stuck_progress(&store, later(1.0));
  ASSERT_EQ(store.kv.count(kKey), 1u) << "not published again once the store answered";
  EXPECT_EQ(store.kv.at(kKey), "1 1");
}

TEST(FlightProgress, RetriesWhenAWriteFailed) {
  StuckRank rank;
  FlakyStore store;
  store.takes_writes = false;
  publish_stuck_progress(&store, later());
  store.takes_writes = true;
  publish_stuck_progress(&store, later());
  ASSERT_EQ(store.kv.count(kKey), 1u) << "not published again once the store took writes";
}

TEST(FlightProgress, RetriesWithoutAStore) {
  StuckRank rank;
  publish_stuck_progress(nullptr, later());
  FlakyStore store;
  publish_stuck_progress(&store, later());
  ASSERT_EQ(store.kv.count(kKey), 1u) << "not published once a store was there";
}

TEST(FlightProgress, RefreshesAPublishedValueOnlyWhenItChanged) {
  StuckRank rank;
  FlakyStore store;
  publish_stuck_progress(&store, later());
  store.kv.clear();
  publish_stuck_progress(&store, later());
  EXPECT_EQ(store.kv.count(kKey), 0u) << "the same value written again";
  rank.recorder.ended(0, FlightState::completed);
  rank.recorder.issued(1, OpType::send, DType::f32, 4, 0, true, "mpi", 16);
  publish_stuck_progress(&store, later());
  ASSERT_EQ(store.kv.count(kKey), 1u) << "a published value was not kept fresh";
  EXPECT_EQ(store.kv.at(kKey), "2 1");  // two operations, one of them a collective
}

// A rank that keeps issuing (sends that complete, here) while an earlier collective hangs is
// stuck in that collective: timed from when it was issued, not from the last operation issued,
// which left the rank unpublished and named by its peers' timeouts as not having reached it.
TEST(FlightProgress, ARankIssuingOnWhileACollectiveHangsIsPublished) {
  FlightRecorder recorder;
  recorder.attach(8, 1, 3, {0, 1, 2});
  FlakyStore store;
  recorder.issued(0, OpType::all_reduce, DType::f32, 4, -1, true, "mpi", 16);
  publish_stuck_progress(&store, later());
  EXPECT_EQ(store.kv.count("mcr/progress/8/1"), 0u) << "published before a second had passed";
  for (std::uint64_t seq = 1; seq <= 6; ++seq) {
    recorder.issued(seq, OpType::send, DType::f32, 4, 0, true, "mpi", 16);
    publish_stuck_progress(&store, later());
    recorder.ended(seq, FlightState::completed);
  }
  ASSERT_EQ(store.kv.count("mcr/progress/8/1"), 1u)
      << "the all_reduce open for 1.5 s was not published while the rank issued sends";
  EXPECT_EQ(store.kv.at("mcr/progress/8/1"), "7 1");  // 7 operations, one of them a collective
  // Once the collective has ended and nothing is open, nothing new is stuck: the value published
  // is kept fresh, as before.
  recorder.ended(0, FlightState::completed);
  store.kv.clear();
  publish_stuck_progress(&store, later(2.0));
  EXPECT_EQ(store.kv.count("mcr/progress/8/1"), 0u) << "the same value written again";
}

// The collective watched is overwritten in the ring by the sends issued after it (more than the
// ring holds, within a second): it may still be open, so it stays timed from its issue. Taken for
// ended, it restarted the second, and the rank was published late or never.
TEST(FlightProgress, ACollectiveOverwrittenInTheRingStaysTimed) {
  FlightRecorder recorder;
  recorder.attach(10, 1, 3, {0, 1, 2});
  FlakyStore store;
  recorder.issued(0, OpType::all_reduce, DType::f32, 4, -1, true, "mpi", 16);
  publish_stuck_progress(&store, later());  // first seen open
  for (std::uint64_t seq = 1; seq <= recorder.capacity() + 10; ++seq) {
    recorder.issued(seq, OpType::send, DType::f32, 4, 2, false, "mpi", 16);
    recorder.ended(seq, FlightState::completed);
  }
  ASSERT_EQ(recorder.find(0), nullptr);
  publish_stuck_progress(&store, later(0.25));
  EXPECT_EQ(store.kv.count("mcr/progress/10/1"), 0u) << "published before a second had passed";
  publish_stuck_progress(&store, later(0.8));  // 1.05 s after it was first seen open
  EXPECT_EQ(store.kv.count("mcr/progress/10/1"), 1u)
      << "the collective's second restarted when the ring no longer held it";
}

// A timeout of an operation the ring no longer holds (an irecv posted before 300 others, sends
// among them): its kind and collective index are unknown, so the peers' progress is reported,
// not judged. Judged by its sequence number as a collective's, every peer had "reached" it.
TEST(FlightProgress, AnOperationNoLongerInTheRingIsNotJudged) {
  FlightRecorder recorder;
  recorder.attach(9, 1, 3, {0, 1, 2});
  recorder.issued(0, OpType::recv, DType::f32, 4, 0, true, "mpi", 16);
  const std::uint64_t later_ops = recorder.capacity() + 44;
  for (std::uint64_t seq = 1; seq <= later_ops; ++seq) {
    recorder.issued(seq, seq % 2 == 0 ? OpType::all_reduce : OpType::send, DType::f32, 4, 2, false,
                    "mpi", 16);
    recorder.ended(seq, FlightState::completed);
  }
  ASSERT_EQ(recorder.find(0), nullptr) << "the ring still holds the irecv";
  FlakyStore store;
  store.kv["mcr/progress/9/0"] = "3 1";
  store.kv["mcr/progress/9/2"] = "400 200";
  const std::string said = peers_context(recorder, 0, store);
  EXPECT_NE(said.find("sequence #0 is no longer in this rank's flight record"), std::string::npos)
      << said;
  EXPECT_NE(said.find("0 (world rank 0, last issued #2, 1 collective)"), std::string::npos) << said;
  EXPECT_NE(said.find("2 (world rank 2, last issued #399, 200 collectives)"), std::string::npos)
      << said;
  EXPECT_EQ(said.find("reached sequence"), std::string::npos) << said;
  EXPECT_EQ(store.kv.at("mcr/progress/9/1"), fmt::format("{} {}", later_ops + 1, later_ops / 2))
      << "this rank's own progress was not published first";

  // A collective still in the ring is judged by its index among the collectives.
  const std::uint64_t last = later_ops;  // an all_reduce (even), collective #(later_ops / 2 - 1)
  recorder.issued(last + 1, OpType::all_reduce, DType::f32, 4, 0, true, "mpi", 16);
  const std::uint64_t index = later_ops / 2;
  store.kv["mcr/progress/9/0"] = fmt::format("{} {}", last + 2, index + 1);  // reached it
  store.kv["mcr/progress/9/2"] = fmt::format("{} {}", last, index);          // not yet
  const std::string judged = peers_context(recorder, last + 1, store);
  EXPECT_NE(judged.find("ranks that have not reached sequence #"), std::string::npos) << judged;
  EXPECT_NE(judged.find("2 (world rank 2"), std::string::npos) << judged;
  EXPECT_EQ(judged.find("0 (world rank 0"), std::string::npos) << judged;
}

// A verified collective (Verifier::pick, then CommState::issue): open in the record between the
// two, the waits before its start being its own, but counted in flight once; a failure in those
// waits ends it as failed, and leaves an operation that was not verified alone.
TEST(FlightProgress, AVerifiedCollectiveStaysOpenUntilItIsIssued) {
  FlightRecorder r;
  r.attach(7, 0, 2, {0, 1});
  r.issued(0, OpType::all_reduce, DType::f32, 4, -1, false, "verify", 16);
  r.verified();
  ASSERT_NE(r.find(0), nullptr);
  EXPECT_EQ(r.find(0)->state.load(), FlightState::issued) << "not completed before it starts";
  EXPECT_EQ(r.in_flight(), 0);
  r.issued(0, OpType::all_reduce, DType::f32, 4, -1, false, "mpi", 16);
  EXPECT_EQ(r.in_flight(), 1);
  EXPECT_EQ(r.find(0)->backend, "mpi");
  EXPECT_EQ(r.counts().issued, 1U);
  EXPECT_EQ(r.counts().collectives, 1U);
  r.ended(0, FlightState::completed);
  EXPECT_EQ(r.in_flight(), 0);

  r.issued(1, OpType::broadcast, DType::f32, 4, 0, false, "verify", 16);
  r.verified();
  r.failed_before_issue(1);
  EXPECT_EQ(r.find(1)->state.load(), FlightState::failed);
  EXPECT_EQ(r.in_flight(), 0);
  r.failed_before_issue(2);  // not verified: not in the record, and #1 stays as it was
  EXPECT_EQ(r.find(2), nullptr);
  EXPECT_EQ(r.find(1)->state.load(), FlightState::failed);
  EXPECT_EQ(r.in_flight(), 0);
}

}  // namespace
}  // namespace mcr::detail
