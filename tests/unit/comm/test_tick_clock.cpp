// TickClock: readings mapped to the steady clock agree with it, across re-anchoring, and durations
// come out as measured.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/tick_clock.hpp"

using mcr::detail::TickClock;
using std::chrono::nanoseconds;
using std::chrono::steady_clock;

namespace {

struct Sample {
  std::uint64_t reading;
  std::int64_t steady_ns;
  std::int64_t bracket_ns;  // how far apart the two steady reads around the reading were
};

// A reading with the steady clock read just before and after it (the tightest of a few tries).
Sample sample() {
  Sample best{0, 0, INT64_MAX};
  for (int i = 0; i < 20; ++i) {
    const auto a = steady_clock::now();
    const std::uint64_t r = TickClock::now();
    const auto b = steady_clock::now();
    const std::int64_t width = (b - a).count();
    if (width < best.bracket_ns) best = {r, (a.time_since_epoch() + (b - a) / 2).count(), width};
  }
  return best;
}

std::int64_t mapped_ns(std::uint64_t reading) {
  return TickClock::to_steady(reading, reading).start.time_since_epoch().count();
}

}  // namespace

TEST(TickClock, ReportsWhichClockItReads) {
  std::printf("TickClock reads %s\n", mcr::detail::kTickClockUsesCounter
                                          ? "the CPU counter"
                                          : "the steady clock (no trusted counter)");
  TickClock::prepare();
  const std::uint64_t a = TickClock::now();
  const std::uint64_t b = TickClock::now();
  EXPECT_LE(a, b);
}

TEST(TickClock, MappedReadingsStayOnTheSteadyClockAcrossReanchoring) {
  TickClock::prepare();
  // 350 ms crosses at least three re-anchorings (every 100 ms).
  const auto until = steady_clock::now() + std::chrono::milliseconds(350);
  std::int64_t worst = 0;
  std::int64_t previous = INT64_MIN;
  int samples = 0;
  while (steady_clock::now() < until) {
    const Sample s = sample();
    const std::int64_t m = mapped_ns(s.reading);
    // Allowed: the bracket around the reading, plus 20 us for the line's error: the steady clock
    // is slewed by NTP and the counter is not, and a change of the slew by 20 ppm within one
    // 100 ms extrapolation already moves them 2 us apart (a freshly booted machine).
    const std::int64_t off = std::llabs(m - s.steady_ns) - s.bracket_ns;
    worst = std::max(worst, off);
    EXPECT_LT(off, 20'000) << "reading " << s.reading << " maps " << m - s.steady_ns
                           << " ns from the steady clock (bracket " << s.bracket_ns << " ns)";
    EXPECT_GE(m, previous) << "mapped times went backwards";
    previous = m;
    ++samples;
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  std::printf("%d samples, worst distance beyond the bracket: %lld ns\n", samples,
              static_cast<long long>(worst));
  EXPECT_GT(samples, 20);
}

TEST(TickClock, SpansMeasureTheElapsedTime) {
  TickClock::prepare();
  for (int ms : {1, 20}) {
    const auto a = steady_clock::now();
    const std::uint64_t r0 = TickClock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    const std::uint64_t r1 = TickClock::now();
    const auto b = steady_clock::now();
    const auto span = TickClock::to_steady(r0, r1);
    const auto measured = span.end - span.start;
    EXPECT_GE(measured, std::chrono::milliseconds(ms) - std::chrono::microseconds(5));
    EXPECT_LE(measured, b - a + std::chrono::microseconds(5));
    EXPECT_EQ(TickClock::to_steady(r0, r0).end, TickClock::to_steady(r0, r0).start);
  }
}
