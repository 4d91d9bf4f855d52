// Timing across ranks: reductions of per-rank times, paired ratios with a confidence interval, and
// the interleaved, repeated timing of several backends at one point (used by the comparison of
// automatic selection against every backend and by tuning). See docs/bench.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/bench/bandwidth.hpp"
#include "mcr/bench/point.hpp"
#include "mcr/comm/communicator.hpp"

namespace mcr::bench {

enum class TimeReduce { max, min, avg };
/// "max", "min" or "avg"; throws InvalidArgument naming sweep.time.
TimeReduce parse_time_reduce(std::string_view name);
/// The reduce operator of a sweep or comparison, as parse_reduce_op spells it (the benchmark then
/// verifies sum, min and max only); throws InvalidArgument naming options.reduce for other names.
ReduceOp parse_reduce(std::string_view name);
/// Reduces each value across the ranks of `comm` (max, min or mean). Collective.
std::vector<double> reduce_across(Communicator& comm, std::vector<double> values, TimeReduce how);
/// Sum of a count across ranks. Collective.
std::uint64_t sum_across(Communicator& comm, std::uint64_t value);

/// The median of paired ratios numerator[i] / denominator[i] (pairs up to the shorter vector;
/// pairs with a non-positive denominator are left out), with a distribution-free 95% confidence
/// interval: the order statistics of the sorted ratios at ranks (n -+ 1.96 sqrt(n)) / 2 (the normal
/// approximation of the binomial count below the median). Fewer than 6 pairs give [min, max].
struct RatioEstimate {
  double median = 0;
  double low = 0;  ///< 95% confidence interval of the median
  double high = 0;
  std::size_t pairs = 0;
  /// Half the interval's width relative to the median (0.02 = the median is known within ~2%).
  [[nodiscard]] double relative_half_width() const noexcept {
    return median > 0 ? (high - low) / (2 * median) : 0.0;
  }
};
RatioEstimate paired_ratio(const std::vector<double>& numerators,
                           const std::vector<double>& denominators);

/// One backend's result at a point, measured by measure_interleaved().
struct BackendTiming {
  std::string backend;    ///< "" = automatic selection
  bool supported = true;  ///< false: the backend cannot run this op/dtype (nothing was timed)
  int iterations = 0;     ///< per repetition, equal on every rank
  double seconds = 0;     ///< median over repetitions of the max-across-ranks time per iteration
  std::vector<double> repetitions;  ///< max-across-ranks time per iteration of each repetition
  std::uint64_t wrong = 0;          ///< wrong elements over all ranks in the check after timing
};
struct InterleavedOptions {
  int repetitions = 5;
  int warmup = 2;
  double repetition_budget_s = 0.01;  ///< iterations per repetition ~ budget / probed time
  int max_iterations = 2000;
  /// Fewest iterations in any timed run (the probe's included): at least one batch of `in_flight`.
  int min_iterations = 1;
  /// Async form: operations issued before they are waited for, batch after batch (`mcr tune
  /// --in-flight`); 0: every iteration of a timed run at once.
  int in_flight = 0;
  /// When > 0: repetitions are raised from `repetitions` up to `max_repetitions` to fill about
  /// this many seconds per point (more repetitions where they are cheap, i.e. small messages).
  double point_budget_s = 0;
  int max_repetitions = 0;
  /// Optional: after those rounds, called with the results so far; returns the indices of the
  /// backends that need more rounds (none: precise enough; a backend once left out is not taken
  /// back). Further rounds of only those run in
  /// batches of `extra_batch` while it asks and `extra_budget_s` of probed time lasts. It sees
  /// max-across-ranks times, identical on every rank, and must decide from them alone so that
  /// every rank runs the same rounds. Repetition r of every backend ran in round r; a backend
  /// left out of the later rounds has fewer repetitions.
  std::function<std::vector<std::size_t>(const std::vector<BackendTiming>&)> more_rounds;
  double extra_budget_s = 0;
  int extra_batch = 8;
};
/// Times every backend at one point in rounds (one repetition of each backend per round, in a new
/// order each round), so load that drifts during the run hits every backend alike. Each backend's
/// iteration count comes from a probe after its warmup: timed runs grown until one lasts a quarter
/// of `repetition_budget_s`, reduced across ranks so every rank runs the same number. Then
/// `more_rounds`, if set, and finally one check of each backend's result. Collective.
std::vector<BackendTiming> measure_interleaved(Point& point,
                                               const std::vector<std::string>& backends,
                                               const InterleavedOptions& options);

}  // namespace mcr::bench
