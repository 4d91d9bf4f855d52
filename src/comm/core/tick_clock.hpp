// Timestamps for the per-operation hot path of an attached observer (the communication log).
//
// steady_clock::now() goes through the vDSO: a counter read, then a seqlock and a scaling, 24-33 ns
// per call on the 2-vCPU guest that docs/performance/README.md describes; two of them per
// operation were most of the log's cost on a 0.7 us all_reduce. Reading the CPU's counter directly
// costs about 10 ns there. The counter is used only where the kernel itself trusts it as its clock
// source (x86-64 with clocksource "tsc"; the generic timer on AArch64); elsewhere the readings are
// steady-clock nanoseconds. Readings are mapped to the steady clock by a line through the first
// calibration point and a recent one, re-anchored at doubling intervals from 2 ms up to every
// 100 ms, so the mapped times stay within 2 us of steady_clock (tested) over a run of any length.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace mcr::detail {

/// Whether TickClock::now() reads the CPU counter (decided once, at static initialisation).
extern const bool kTickClockUsesCounter;

class TickClock {
 public:
  /// A raw reading: counter ticks, or steady-clock nanoseconds where no trusted counter exists.
  static std::uint64_t now() noexcept {
#if defined(__x86_64__)
    if (kTickClockUsesCounter) return __rdtsc();
#elif defined(__aarch64__)
    if (kTickClockUsesCounter) {
      std::uint64_t v;
      asm volatile("mrs %0, cntvct_el0" : "=r"(v));
      return v;
    }
#endif
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }

  struct Span {
    std::chrono::steady_clock::time_point start, end;
  };
  /// The steady-clock times of two readings (`end` not before `start`), both mapped by one line so
  /// that end - start is the measured duration. Thread-safe; only the caller that re-anchors
  /// (about every 100 ms) reads the steady clock.
  static Span to_steady(std::uint64_t start, std::uint64_t end) noexcept;

  /// Makes sure the counter's rate is measured (over at least 2 ms since the process started,
  /// waiting out the rest if need be). Called when an observer is attached, so the first
  /// observed operation does not pay for it.
  static void prepare() noexcept;
};

}  // namespace mcr::detail
