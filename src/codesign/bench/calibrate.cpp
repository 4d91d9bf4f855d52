#include "mcr/codesign/bench/calibrate.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "mcr/codesign/gemm_model.hpp"
#include "mcr/errors.hpp"

namespace mcr::codesign::bench {
namespace {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
// Starting points are kept off the flat ends of the logistic curve (a factor of exactly 1 would
// map to +infinity), where simplex steps could not move the value any more.
double logit(double p) {
  p = std::clamp(p, 0.02, 0.98);
  return std::log(p / (1.0 - p));
}

// Every parameter is optimised in an unconstrained coordinate: fractions in (0, 1) through a
// logistic map, positive quantities through log. This keeps the simplex from stepping outside the
// legal range without clamping, which would flatten the objective.
/// Index of the alignment tier that `bytes` of alignment falls into (tiers sorted by min_bytes
/// descending; below every tier means the last one), as alignment_tier_factor() decides.
std::size_t tier_index(const std::vector<AlignmentTier>& tiers, std::int64_t bytes) {
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    if (bytes >= tiers[i].min_bytes) return i;
  }
  return tiers.size() - 1;
}

struct ParamMap {
  std::vector<std::string> names;
  // The first alignment tier and the first tile are references kept as they are: scaling either
  // is the same as scaling peak_fraction, so fitting them too would leave the fit undetermined.
  // Tiers that no fitted dimension falls into are left alone for the same reason.
  std::vector<std::size_t> tiers;
  std::size_t tile_count = 0;
  static constexpr std::size_t kScalars = 5;

  ParamMap(const DeviceSpec& d, std::span<const GemmMeasurement> data) {
    names = {"peak_fraction", "k_overhead", "launch_overhead_s", "latency_floor_s",
             "memory_efficiency"};
    const auto& all_tiers = d.efficiency.alignment_tiers;
    std::vector<bool> reached(all_tiers.size(), false);
    for (const auto& m : data) {
      for (const auto dim : {m.gemm.m, m.gemm.n, m.gemm.k}) {
        reached[tier_index(all_tiers, pow2_divisor(dim) * dtype_bytes(m.gemm.dtype))] = true;
      }
    }
    for (std::size_t i = 1; i < all_tiers.size(); ++i) {
      if (!reached[i]) continue;
      tiers.push_back(i);
      names.push_back(fmt::format("alignment_tiers[{}B].factor", all_tiers[i].min_bytes));
    }
    tile_count = d.tiles.empty() ? 0 : d.tiles.size() - 1;
    for (std::size_t i = 1; i < d.tiles.size(); ++i) {
      names.push_back(fmt::format("tiles[{}x{}].efficiency", d.tiles[i].m, d.tiles[i].n));
    }
  }

  std::vector<double> encode(const DeviceSpec& d) const {
    const auto& e = d.efficiency;
    // Zero overheads would sit at log(0): start them at a tiny positive value instead.
    std::vector<double> x = {logit(e.peak_fraction), std::log(std::max(e.k_overhead, 1e-3)),
                             std::log(std::max(e.launch_overhead_s, 1e-9)),
                             std::log(std::max(e.latency_floor_s, 1e-9)),
                             logit(e.memory_efficiency)};
    for (const auto i : tiers)
      x.push_back(logit(e.alignment_tiers[i].factor));
    for (std::size_t i = 1; i <= tile_count; ++i)
      x.push_back(logit(d.tiles[i].efficiency));
    return x;
  }

  /// Writes the parameters in `x` into `d` (which starts as a copy of the input device).
  void decode(const std::vector<double>& x, DeviceSpec& d) const {
    auto& e = d.efficiency;
    e.peak_fraction = fraction(x[0]);
    e.k_overhead = std::exp(x[1]);
    e.launch_overhead_s = std::exp(x[2]);
    e.latency_floor_s = std::exp(x[3]);
    e.memory_efficiency = fraction(x[4]);
    std::size_t at = kScalars;
    for (const auto i : tiers)
      e.alignment_tiers[i].factor = fraction(x[at++]);
    for (std::size_t i = 1; i <= tile_count; ++i)
      d.tiles[i].efficiency = fraction(x[at++]);
  }

  /// A fraction in [1e-6, 1]: the logistic map can round to exactly 0 far out, which no device
  /// file may contain.
  static double fraction(double x) { return std::max(sigmoid(x), 1e-6); }
};

std::vector<GemmMeasurement> pick(std::span<const GemmMeasurement> all,
                                  const std::vector<std::size_t>& idx) {
  std::vector<GemmMeasurement> out;
  out.reserve(idx.size());
  for (auto i : idx)
    out.push_back(all[i]);
  return out;
}

ComparisonSummary summary_on(std::span<const GemmMeasurement> points, const DeviceSpec& device) {
  const auto rows = compare(points, device);
  return summarize(rows);
}

}  // namespace

std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& f,
                                std::vector<double> x0, const std::vector<double>& step,
                                int max_evaluations, int* evaluations) {
  const std::size_t n = x0.size();
  std::vector<std::vector<double>> simplex(n + 1, x0);
  for (std::size_t i = 0; i < n; ++i)
    simplex[i + 1][i] += step[i];
  std::vector<double> values(n + 1);
  int evals = 0;
  auto eval = [&](const std::vector<double>& x) {
    ++evals;
    const double v = f(x);
    return std::isfinite(v) ? v : std::numeric_limits<double>::max();
  };
  for (std::size_t i = 0; i <= n; ++i)
    values[i] = eval(simplex[i]);
  std::vector<std::size_t> order(n + 1);
  while (evals < max_evaluations) {
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return values[a] < values[b]; });
    const auto best = order.front(), worst = order.back(), second = order[n - 1];
    if (std::abs(values[worst] - values[best]) <= 1e-10 * (std::abs(values[best]) + 1e-12)) break;
    std::vector<double> centroid(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j)
        centroid[j] += simplex[order[i]][j] / static_cast<double>(n);
    }
    auto along = [&](double t) {  // centroid + t * (centroid - worst)
      std::vector<double> x(n);
      for (std::size_t j = 0; j < n; ++j)
        x[j] = centroid[j] + t * (centroid[j] - simplex[worst][j]);
      return x;
    };
    auto reflected = along(1.0);
    const double fr = eval(reflected);
    if (fr < values[best]) {
      auto expanded = along(2.0);
      const double fe = eval(expanded);
      if (fe < fr) {
        simplex[worst] = std::move(expanded);
        values[worst] = fe;
      } else {
        simplex[worst] = std::move(reflected);
        values[worst] = fr;
      }
      continue;
    }
    if (fr < values[second]) {
      simplex[worst] = std::move(reflected);
      values[worst] = fr;
      continue;
    }
    // Contract towards the better of the worst point and its reflection.
    const bool outside = fr < values[worst];
    auto contracted = along(outside ? 0.5 : -0.5);
    const double fc = eval(contracted);
    if (fc < (outside ? fr : values[worst])) {
      simplex[worst] = std::move(contracted);
      values[worst] = fc;
      continue;
    }
    for (std::size_t i = 1; i <= n; ++i) {  // shrink towards the best point
      auto& x = simplex[order[i]];
      for (std::size_t j = 0; j < n; ++j)
        x[j] = simplex[best][j] + 0.5 * (x[j] - simplex[best][j]);
      values[order[i]] = eval(x);
    }
  }
  if (evaluations) *evaluations += evals;
  const auto best =
      static_cast<std::size_t>(std::min_element(values.begin(), values.end()) - values.begin());
  return simplex[best];
}

std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split_indices(std::size_t n,
                                                                            double fraction,
                                                                            std::uint64_t seed) {
  if (!(fraction >= 0.0 && fraction < 1.0)) {
    throw InvalidArgument(
        fmt::format("holdout fraction {} must be in [0, 1) so that something is fitted", fraction));
  }
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  // Fisher-Yates with mt19937_64 directly: std::shuffle's algorithm is implementation-defined, and
  // a split must be reproducible from its seed on any standard library.
  std::mt19937_64 rng(seed);
  for (std::size_t i = n; i > 1; --i) {
    const auto j = static_cast<std::size_t>(rng() % i);
    std::swap(idx[i - 1], idx[j]);
  }
  const auto holdout = static_cast<std::size_t>(std::llround(static_cast<double>(n) * fraction));
  std::vector<std::size_t> test(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(holdout));
  std::vector<std::size_t> train(idx.begin() + static_cast<std::ptrdiff_t>(holdout), idx.end());
  std::sort(test.begin(), test.end());
  std::sort(train.begin(), train.end());
  return {train, test};
}

CalibrationResult calibrate(std::span<const GemmMeasurement> measured, const DeviceSpec& start,
                            const CalibrationOptions& options) {
  start.validate();
  for (std::size_t i = 0; i < measured.size(); ++i) {
    if (!start.supports(measured[i].gemm.dtype)) {
      throw InvalidArgument(fmt::format(
          "measurement {} is {}, which device '{}' has no peak for: add peak_tflops.{} to the "
          "device or drop those rows",
          i, to_string(measured[i].gemm.dtype), start.name, to_string(measured[i].gemm.dtype)));
    }
  }
  const auto [train_idx, test_idx] =
      split_indices(measured.size(), options.holdout_fraction, options.seed);
  if (train_idx.size() < 3) {
    throw InvalidArgument(
        fmt::format("calibration needs at least 3 measurements to fit, got {} after holding out {}",
                    train_idx.size(), test_idx.size()));
  }
  const auto train = pick(measured, train_idx);
  const auto test = pick(measured, test_idx);

  CalibrationResult result;
  result.seed = options.seed;
  result.train_count = train.size();
  result.holdout_count = test.size();
  result.train_before = summary_on(train, start);
  result.holdout_before = summary_on(test, start);

  const ParamMap map(start, train);
  result.parameters = map.names;
  DeviceSpec trial = start;
  // Mean |log(predicted time / measured time)|: scale-free, so tiny and huge GEMMs weigh the same,
  // and an L1 loss, so a few noisy points cannot drag the fit (the target metric is a median).
  auto objective = [&](const std::vector<double>& x) {
    map.decode(x, trial);
    double sum = 0;
    for (const auto& m : train) {
      const double predicted = predict(m.gemm, trial).time_s;
      sum += std::abs(std::log(predicted / m.timing.median_s));
    }
    return sum / static_cast<double>(train.size());
  };
  auto x = map.encode(start);
  const std::vector<double> step(x.size(), 0.5);
  for (int run = 0; run <= options.restarts; ++run) {
    x = nelder_mead(objective, x, step, options.max_evaluations, &result.evaluations);
  }
  result.device = start;
  map.decode(x, result.device);
  result.train_after = summary_on(train, result.device);
  result.holdout_after = summary_on(test, result.device);
  return result;
}

void to_json(nlohmann::json& j, const CalibrationResult& r) {
  j = {{"seed", r.seed},
       {"train_count", r.train_count},
       {"holdout_count", r.holdout_count},
       {"train_before", r.train_before},
       {"train_after", r.train_after},
       {"holdout_before", r.holdout_before},
       {"holdout_after", r.holdout_after},
       {"evaluations", r.evaluations},
       {"parameters", r.parameters},
       {"efficiency", r.device.efficiency},
       {"tiles", r.device.tiles}};
}

}  // namespace mcr::codesign::bench
