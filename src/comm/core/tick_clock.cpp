// TickClock: which counter to read, and the mapping of its readings to the steady clock.
#include "core/tick_clock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace mcr::detail {
namespace {

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool detect_counter() noexcept {
#if defined(__x86_64__)
  // The kernel picks "tsc" only when the counter is invariant and synchronised across CPUs; on a
  // machine where it is not (or under a hypervisor that hides it) the steady clock is used.
  // Plain read(2): no allocation during static initialisation.
  const int fd = ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                        O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char source[16] = {};
  const ssize_t n = ::read(fd, source, sizeof source - 1);
  ::close(fd);
  return n >= 3 && std::strncmp(source, "tsc", 3) == 0 && (n == 3 || source[3] == '\n');
#elif defined(__aarch64__)
  return true;  // the generic timer's virtual count: what the kernel's own vDSO reads
#else
  return false;
#endif
}

struct Pair {
  std::uint64_t tick = 0;
  std::int64_t ns = 0;
};

// A steady-clock reading bracketed by two counter readings; of a few tries, the tightest bracket,
// with the counter value at its midpoint.
Pair read_pair() noexcept {
  Pair best;
  std::uint64_t best_width = ~std::uint64_t{0};
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t t0 = TickClock::now();
    const std::int64_t ns = steady_ns();
    const std::uint64_t t1 = TickClock::now();
    if (t1 - t0 < best_width) {
      best_width = t1 - t0;
      best = {t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}

constexpr std::int64_t kMinCalibrationNs = 2'000'000;   // first rate: over at least 2 ms
constexpr std::int64_t kReanchorEveryNs = 100'000'000;  // then fresh anchors, up to 100 ms apart

// ns = anchor_ns + (reading - anchor_tick) * ns_per_tick, published under a sequence lock: the
// writer makes `sequence` odd while it changes the fields; readers retry when they saw it odd or
// changed. The rate always spans from `first` to the newest anchor, so it gets more exact as the
// run goes on, and each anchor removes what error had built up.
struct Line {
  std::atomic<std::uint32_t> sequence{0};
  std::atomic<std::uint64_t> anchor_tick{0};
  std::atomic<std::int64_t> anchor_ns{0};
  std::atomic<double> ns_per_tick{0.0};
  std::atomic<std::uint64_t> next_anchor_tick{0};
  std::atomic<bool> ready{false};
  std::atomic_flag writer = ATOMIC_FLAG_INIT;
  Pair first;
};

struct Snapshot {
  std::uint64_t anchor_tick;
  std::int64_t anchor_ns;
  double ns_per_tick;
  std::uint64_t next_anchor_tick;
};

}  // namespace

const bool kTickClockUsesCounter = detect_counter();

namespace {

Line& line() noexcept {
  static Line l{};
  return l;
}

// The process's first calibration point, taken at static initialisation (after the choice above,
// which comes first in this file).
[[maybe_unused]] const bool kFirstTaken = [] {
  if (kTickClockUsesCounter) line().first = read_pair();
  return true;
}();

// Takes a new anchor and rate. The caller holds the writer flag.
void reanchor(Line& l) noexcept {
  const Pair now = read_pair();
  const auto ticks = static_cast<double>(now.tick - l.first.tick);
  const double rate = ticks > 0 ? static_cast<double>(now.ns - l.first.ns) / ticks : 1.0;
  // The next anchor comes after as long as the rate's baseline, up to 100 ms: extrapolating no
  // further than the baseline keeps the error near the jitter of one pair of reads.
  const std::int64_t next_ns =
      std::clamp<std::int64_t>(now.ns - l.first.ns, kMinCalibrationNs, kReanchorEveryNs);
  const auto every = static_cast<std::uint64_t>(static_cast<double>(next_ns) / rate);
  l.sequence.fetch_add(1, std::memory_order_acq_rel);  // odd: being changed
  l.anchor_tick.store(now.tick, std::memory_order_relaxed);
  l.anchor_ns.store(now.ns, std::memory_order_relaxed);
  l.ns_per_tick.store(rate, std::memory_order_relaxed);
  l.next_anchor_tick.store(now.tick + every, std::memory_order_relaxed);
  l.sequence.fetch_add(1, std::memory_order_release);  // even again
}

Snapshot read_line(const Line& l) noexcept {
  while (true) {
    const std::uint32_t before = l.sequence.load(std::memory_order_acquire);
    if (before % 2 == 0) {
      Snapshot s{l.anchor_tick.load(std::memory_order_relaxed),
                 l.anchor_ns.load(std::memory_order_relaxed),
                 l.ns_per_tick.load(std::memory_order_relaxed),
                 l.next_anchor_tick.load(std::memory_order_relaxed)};
      std::atomic_thread_fence(std::memory_order_acquire);
      if (l.sequence.load(std::memory_order_relaxed) == before) return s;
    }
  }
}

Snapshot current(std::uint64_t reading) noexcept {
  Line& l = line();
  if (!l.ready.load(std::memory_order_acquire)) TickClock::prepare();
  Snapshot s = read_line(l);
  if (reading > s.next_anchor_tick && !l.writer.test_and_set(std::memory_order_acquire)) {
    if (reading > l.next_anchor_tick.load(std::memory_order_relaxed)) reanchor(l);
    l.writer.clear(std::memory_order_release);
    s = read_line(l);
  }
  return s;
}

}  // namespace

void TickClock::prepare() noexcept {
  if (!kTickClockUsesCounter) return;
  Line& l = line();
  if (l.ready.load(std::memory_order_acquire)) return;
  while (l.writer.test_and_set(std::memory_order_acquire))
    std::this_thread::yield();
  if (!l.ready.load(std::memory_order_relaxed)) {
    // Usually long past: MPI and the store rendezvous take far more than 2 ms.
    const std::int64_t wait = kMinCalibrationNs - (steady_ns() - l.first.ns);
    if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
    reanchor(l);
    l.ready.store(true, std::memory_order_release);
  }
  l.writer.clear(std::memory_order_release);
}

TickClock::Span TickClock::to_steady(std::uint64_t start, std::uint64_t end) noexcept {
  using std::chrono::steady_clock;
  auto at = [](std::int64_t ns) {
    return steady_clock::time_point(
        std::chrono::duration_cast<steady_clock::duration>(std::chrono::nanoseconds(ns)));
  };
  if (!kTickClockUsesCounter) {
    return {at(static_cast<std::int64_t>(start)), at(static_cast<std::int64_t>(end))};
  }
  const Snapshot s = current(end);
  // Signed: a reading taken before the anchor maps backwards from it.
  auto map = [&](std::uint64_t r) {
    const auto delta = static_cast<std::int64_t>(r - s.anchor_tick);
    return s.anchor_ns + static_cast<std::int64_t>(static_cast<double>(delta) * s.ns_per_tick);
  };
  return {at(map(start)), at(map(end))};
}

}  // namespace mcr::detail
