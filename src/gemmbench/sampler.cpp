#include "mcr/gemmbench/sampler.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/stats.hpp"

namespace mcr::codesign::bench {

std::string to_string(Clock clock) {
  return clock == Clock::wall ? "wall" : "cpu";
}

Clock parse_clock(std::string_view name) {
  if (name == "wall") return Clock::wall;
  if (name == "cpu") return Clock::process_cpu;
  throw InvalidArgument(fmt::format("clock '{}' is not one of wall, cpu", name));
}

int rotation_sets(std::size_t set_bytes, std::size_t target_bytes, int max_sets) {
  if (set_bytes == 0 || max_sets <= 1) return 1;
  const auto sets = target_bytes / set_bytes + (target_bytes % set_bytes != 0 ? 1 : 0);
  return static_cast<int>(std::clamp<std::size_t>(sets, 1, static_cast<std::size_t>(max_sets)));
}

OperandLayout operand_layout(std::size_t a_bytes, std::size_t b_bytes, std::size_t c_bytes,
                             std::size_t alignment) {
  const auto round_up = [alignment](std::size_t n) {
    return (n + alignment - 1) & ~(alignment - 1);
  };
  OperandLayout l;
  l.a = 0;
  l.b = round_up(a_bytes);
  l.c = l.b + round_up(b_bytes);
  l.set_bytes = l.c + round_up(c_bytes);
  return l;
}

Timing run_samples(const TimedCalls& run_calls, const MeasureOptions& options,
                   double sample_target_s) {
  if (options.min_samples < 1 || options.max_samples < options.min_samples) {
    throw InvalidArgument(
        fmt::format("measure options: need 1 <= min_samples ({}) <= max_samples ({})",
                    options.min_samples, options.max_samples));
  }
  // Warmup: one call at a time, so the last one also estimates the cost of a call.
  double warm_elapsed = 0;
  double last_call_s = 0;
  int warm_calls = 0;
  for (;
       warm_calls < std::max(1, options.warmup_iterations) || warm_elapsed < options.warmup_seconds;
       ++warm_calls) {
    last_call_s = run_calls(1);
    warm_elapsed += last_call_s;
  }
  // A first call pays once for what later calls do not (a GPU kernel's lazy load, a thread pool
  // waking): alone, it made a small GEMM one call per sample, its launch gap in every sample.
  // One more call says what a call costs.
  if (warm_calls == 1 && last_call_s >= sample_target_s) last_call_s = run_calls(1);
  Timing timing;
  timing.calls_per_sample = 1;
  if (last_call_s > 0 && last_call_s < sample_target_s) {
    timing.calls_per_sample =
        static_cast<int>(std::min(100000.0, std::ceil(sample_target_s / last_call_s)));
  }
  std::vector<double> per_call;
  double measured = 0;
  // Until both minimums are met, at most max_samples; max_seconds ends the sampling once one sample
  // is taken, the minimum count included (so a slow GEMM is bounded in time; as max_seconds >=
  // min_seconds, it could otherwise never take effect).
  const auto done = [&] {
    const auto n = static_cast<int>(per_call.size());
    if (n >= options.max_samples) return true;
    if (n >= 1 && measured >= options.max_seconds) return true;
    return n >= options.min_samples && measured >= options.min_seconds;
  };
  while (!done()) {
    const double elapsed = run_calls(timing.calls_per_sample);
    measured += elapsed;
    per_call.push_back(elapsed / timing.calls_per_sample);
  }
  timing.samples = static_cast<int>(per_call.size());
  timing.min_s = *std::min_element(per_call.begin(), per_call.end());
  timing.max_s = *std::max_element(per_call.begin(), per_call.end());
  timing.median_s = median(std::move(per_call));
  return timing;
}

}  // namespace mcr::codesign::bench
