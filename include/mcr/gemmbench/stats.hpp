// Summary statistics used to judge a performance model against measurements.
#pragma once

#include <span>
#include <vector>

namespace mcr::codesign::bench {

/// Median of `values` (mean of the two middle values for an even count). Throws on an empty input.
double median(std::vector<double> values);

/// The q-quantile of `values` (q in [0, 1]), interpolating linearly between order statistics
/// (position q x (n - 1), as numpy's default). Throws on an empty input or q outside [0, 1].
double quantile(std::vector<double> values, double q);

/// |predicted - measured| / measured * 100 for one pair.
double abs_pct_error(double predicted, double measured);

/// Median over pairs of abs_pct_error. Both spans must have the same, non-zero length.
double median_abs_pct_error(std::span<const double> predicted, std::span<const double> measured);

/// Ranks starting at 1; tied values share the average of their ranks (fractional ranking).
std::vector<double> fractional_ranks(std::span<const double> values);

/// Spearman rank correlation: Pearson correlation of the fractional ranks, so ties are handled
/// exactly. Returns 0 when either side is constant. Needs at least two pairs.
double spearman(std::span<const double> x, std::span<const double> y);

}  // namespace mcr::codesign::bench
