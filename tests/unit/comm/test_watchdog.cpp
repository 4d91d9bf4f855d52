// The watchdog never fires early (src/comm/core/watchdog.hpp). An arming thread alternates a long
// operation (a generous timeout, held longer than the short one's) with a short one (1 ms timeout,
// released well within it), while a watchdog with no grace polls without sleeping. A watchdog that
// read the long arming's token and then, after a re-arming, the short one's timeout would pair the
// long one's start with the short one's timeout and report a short operation as expired after far
// less than 1 ms.
//
// ReArmingBetweenTheTwoReads makes that interleaving happen on every cycle: the watchdog's hook
// between its two reads asks the arming thread to re-arm and waits until it has. FreeRunning lets
// both threads race on their own. Expiries are checked against the arming thread's own clock, so a
// scheduler that preempts the arming thread past 1 ms (a real expiry) cannot fail either test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/watchdog.hpp"

namespace mcr::detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kShortTimeout = std::chrono::milliseconds(1);
constexpr auto kLongHeld = std::chrono::microseconds(1200);  // > the short op's timeout
constexpr auto kShortHeld = std::chrono::microseconds(20);   // << the short op's timeout

void hold(std::chrono::microseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

// Arming times by sequence number (written before arm()), and the expiries judged against them.
struct Judge {
  static constexpr std::size_t kMax = 1 << 16;
  std::vector<std::atomic<std::int64_t>> armed_at = std::vector<std::atomic<std::int64_t>>(kMax);
  std::atomic<int> expiries{0};
  std::atomic<int> early{0};
  std::string first_early;  // written once, by the watchdog thread, before the test reads it

  void armed(std::uint64_t seq) {
    armed_at[seq % kMax].store(Clock::now().time_since_epoch().count());
  }
  void expired(const ArmedOp& a) {
    expiries.fetch_add(1);
    const auto since = armed_at[a.sequence % kMax].load();
    const auto really = std::chrono::nanoseconds(Clock::now().time_since_epoch().count() - since);
    if (really >= std::chrono::milliseconds(a.timeout_ms)) return;  // a real, late expiry
    if (early.fetch_add(1) == 0) {
      first_early = std::string(a.op) + " #" + std::to_string(a.sequence) + " expired after " +
                    std::to_string(really.count()) + " ns armed, its timeout " +
                    std::to_string(a.timeout_ms) + " ms";
    }
  }
};

Watchdog::Options fast_options(Judge& judge) {
  Watchdog::Options o;
  o.tick = std::chrono::nanoseconds(0);
  o.grace = std::chrono::nanoseconds(0);
  o.process_duties = false;
  o.on_expired = [&judge](const ArmedOp& a) { judge.expired(a); };
  return o;
}

TEST(WatchdogStress, ReArmingBetweenTheTwoReads) {
  constexpr int kCycles = 200;
  enum Phase : int { kIdle, kLongArmed, kSwitchAsked, kSwitched };
  Judge judge;
  std::atomic<int> phase{kIdle};
  std::atomic<std::int64_t> long_since{0};
  std::atomic<int> switched_inside{0};

  auto o = fast_options(judge);
  o.between_reads = [&] {
    // Once the long arming has been up longer than the short timeout, have the arming thread
    // re-arm now, between this thread's read of the token and its read of the fields.
    if (phase.load() != kLongArmed) return;
    if (Clock::now().time_since_epoch().count() - long_since.load() <
        std::chrono::nanoseconds(kLongHeld).count()) {
      return;
    }
    int expected = kLongArmed;
    if (!phase.compare_exchange_strong(expected, kSwitchAsked)) return;
    const auto give_up = Clock::now() + std::chrono::seconds(1);
    while (phase.load() != kSwitched && Clock::now() < give_up)
      std::this_thread::yield();
    switched_inside.fetch_add(1);
  };
  Watchdog dog(std::move(o));
  dog.start();

  std::uint64_t seq = 0;
  for (int c = 0; c < kCycles; ++c) {
    judge.armed(seq);
    long_since.store(Clock::now().time_since_epoch().count());
    dog.arm("long", seq++, "test", std::chrono::milliseconds(60'000), nullptr);
    phase.store(kLongArmed);
    const auto give_up = Clock::now() + std::chrono::seconds(1);
    while (phase.load() != kSwitchAsked && Clock::now() < give_up)
      std::this_thread::yield();
    dog.disarm();
    judge.armed(seq);
    dog.arm("short", seq++, "test", kShortTimeout, nullptr);
    phase.store(kSwitched);
    hold(kShortHeld);
    dog.disarm();
    phase.store(kIdle);
  }
  dog.stop();
  std::printf("watchdog, re-armed between reads: %d of %d cycles, %d expiries, %d early\n",
              switched_inside.load(), kCycles, judge.expiries.load(), judge.early.load());
  EXPECT_EQ(judge.early.load(), 0) << judge.first_early;
  EXPECT_GE(switched_inside.load(), kCycles / 2) << "the interleaving under test rarely happened";
}

TEST(WatchdogStress, FreeRunning) {
  constexpr auto kRun = std::chrono::milliseconds(1500);
  Judge judge;
  Watchdog dog(fast_options(judge));
  dog.start();
  std::uint64_t seq = 0;
  const auto end = Clock::now() + kRun;
  while (Clock::now() < end) {
    judge.armed(seq);
    dog.arm("long", seq++, "test", std::chrono::milliseconds(60'000), nullptr);
    hold(kLongHeld);
    dog.disarm();
    judge.armed(seq);
    dog.arm("short", seq++, "test", kShortTimeout, nullptr);
    hold(kShortHeld);
    dog.disarm();
  }
  dog.stop();
  std::printf("watchdog, free running: %llu armings, %d expiries, %d early\n",
              static_cast<unsigned long long>(seq), judge.expiries.load(), judge.early.load());
  EXPECT_EQ(judge.early.load(), 0) << judge.first_early;
  EXPECT_GT(seq, 200u) << "too few armings to exercise the race";
}

TEST(WatchdogStress, StillFiresForAnArmingThatOutlivesItsTimeout) {
  std::atomic<int> fired{0};
  std::atomic<std::uint64_t> which{0};
  Watchdog::Options o;
  o.tick = std::chrono::milliseconds(1);
  o.grace = std::chrono::nanoseconds(0);
  o.process_duties = false;
  o.on_expired = [&](const ArmedOp& a) {
    which.store(a.sequence);
    fired.fetch_add(1);
  };
  Watchdog dog(std::move(o));
  dog.start();
  dog.arm("blocked", 7, "test", std::chrono::milliseconds(20), nullptr);
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (fired.load() == 0 && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  dog.disarm();
  dog.stop();
  EXPECT_GE(fired.load(), 1);
  EXPECT_EQ(which.load(), 7u);
}

}  // namespace
}  // namespace mcr::detail
