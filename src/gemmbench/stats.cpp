#include "mcr/gemmbench/stats.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mcr/errors.hpp"

namespace mcr::codesign::bench {
namespace {

void require_pairs(std::span<const double> a, std::span<const double> b, std::size_t minimum,
                   const char* what) {
  if (a.size() != b.size()) {
    throw InvalidArgument(
        fmt::format("{}: the two series differ in length ({} vs {})", what, a.size(), b.size()));
  }
  if (a.size() < minimum) {
    throw InvalidArgument(
        fmt::format("{}: needs at least {} pairs, got {}", what, minimum, a.size()));
  }
}

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) throw InvalidArgument("median: no values");
  const auto mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) throw InvalidArgument("quantile: no values");
  if (!(q >= 0.0 && q <= 1.0)) {
    throw InvalidArgument(fmt::format("quantile: q = {} must be in [0, 1]", q));
  }
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

double abs_pct_error(double predicted, double measured) {
  return std::abs(predicted - measured) / measured * 100.0;
}

double median_abs_pct_error(std::span<const double> predicted, std::span<const double> measured) {
  require_pairs(predicted, measured, 1, "median_abs_pct_error");
  std::vector<double> errors(predicted.size());
  for (std::size_t i = 0; i < predicted.size(); ++i) {
    errors[i] = abs_pct_error(predicted[i], measured[i]);
  }
  return median(std::move(errors));
}

std::vector<double> fractional_ranks(std::span<const double> values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]])
      ++j;
    // Positions i..j (0-based) hold equal values: each gets the mean of ranks i+1..j+1.
    const double shared = 0.5 * static_cast<double>(i + j) + 1.0;
    for (std::size_t p = i; p <= j; ++p)
      ranks[order[p]] = shared;
    i = j + 1;
  }
  return ranks;
}

double spearman(std::span<const double> x, std::span<const double> y) {
  require_pairs(x, y, 2, "spearman");
  const auto rx = fractional_ranks(x);
  const auto ry = fractional_ranks(y);
  const double n = static_cast<double>(rx.size());
  const double mean = (n + 1.0) / 2.0;  // mean of any fractional ranking of n items
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  if (sxx == 0 || syy == 0) return 0.0;
  return sxy / std::sqrt(sxx * syy);
}

}  // namespace mcr::codesign::bench
