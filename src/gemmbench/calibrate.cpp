#include "mcr/gemmbench/calibrate.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

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

// Every parameter is optimised in an unconstrained coordinate mapped onto a physical range:
// value = lo + (hi - lo) * sigmoid(x), on a log scale for times and the K overhead. The ranges keep
// the fit physical (a tile running at 1e-6 of the best one, or a 5e-14 s kernel floor, is no
// device) and the simplex never leaves them, so no clamping flattens the objective.
struct Range {
  double lo, hi;
  bool log_scale;
};
constexpr Range kFraction{0.2, 1.0, false};  // tiers, tiles, memory efficiency
// A loaded or throttled machine (or a guessed peak) can reach only a few percent of it.
constexpr Range kPeak{0.02, 1.0, false};
constexpr Range kKOverhead{1.0, 2048.0, true};  // elements of K
constexpr Range kLaunch{1e-7, 1e-4, true};      // seconds
constexpr Range kFloor{1e-7, 1e-3, true};       // seconds

double to_value(double x, const Range& r) {
  if (!r.log_scale) return r.lo + (r.hi - r.lo) * sigmoid(x);
  return std::exp(std::log(r.lo) + (std::log(r.hi) - std::log(r.lo)) * sigmoid(x));
}
double to_coordinate(double v, const Range& r) {
  const double u = r.log_scale ? (std::log(std::max(v, r.lo)) - std::log(r.lo)) /
                                     (std::log(r.hi) - std::log(r.lo))
                               : (v - r.lo) / (r.hi - r.lo);
  return logit(u);
}

/// Index of the alignment tier that `bytes` of alignment falls into (tiers sorted by min_bytes
/// descending; below every tier means the last one), as alignment_tier_factor() decides.
std::size_t tier_index(const std::vector<AlignmentTier>& tiers, std::int64_t bytes) {
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    if (bytes >= tiers[i].min_bytes) return i;
  }
  return tiers.size() - 1;
}

// One fitted parameter: where it lives in the device, its range, and its name.
struct Param {
  std::string name;
  Range range;
  double* (*slot)(DeviceSpec&, std::size_t);
  std::size_t index = 0;
};

double* peak_slot(DeviceSpec& d, std::size_t) {
  return &d.efficiency.peak_fraction;
}
double* k_slot(DeviceSpec& d, std::size_t) {
  return &d.efficiency.k_overhead;
}
double* launch_slot(DeviceSpec& d, std::size_t) {
  return &d.efficiency.launch_overhead_s;
}
double* floor_slot(DeviceSpec& d, std::size_t) {
  return &d.efficiency.latency_floor_s;
}
double* memory_slot(DeviceSpec& d, std::size_t) {
  return &d.efficiency.memory_efficiency;
}
double* tier_slot(DeviceSpec& d, std::size_t i) {
  return &d.efficiency.alignment_tiers[i].factor;
}
double* tile_slot(DeviceSpec& d, std::size_t i) {
  return &d.tiles[i].efficiency;
}

struct ParamMap {
  std::vector<Param> params;
  std::vector<std::string> unidentified;  ///< "name: reason", left at the prior

  // A parameter is fitted only if some training point exercises it under the starting device;
  // otherwise the data cannot say anything about it and it keeps its prior. The first alignment
  // tier and the first tile are references: scaling either is the same as scaling peak_fraction.
  ParamMap(const DeviceSpec& d, std::span<const GemmMeasurement> data,
           const std::vector<std::string>& fixed) {
    const auto& tiers = d.efficiency.alignment_tiers;
    std::vector<bool> tier_used(tiers.size(), false);
    std::vector<bool> tile_used(d.tiles.size(), false);
    bool near_floor = false, launch_matters = false, memory_matters = false;
    for (const auto& m : data) {
      for (const auto dim : {m.gemm.m, m.gemm.n, m.gemm.k}) {
        tier_used[tier_index(tiers, pow2_divisor(dim) * dtype_bytes(m.gemm.dtype))] = true;
      }
      const GemmPrediction p = predict(m.gemm, d);
      for (std::size_t i = 0; i < d.tiles.size(); ++i) {
        if (d.tiles[i].m == p.tile.m && d.tiles[i].n == p.tile.n) tile_used[i] = true;
      }
      near_floor = near_floor || m.timing.median_s < 3.0 * d.efficiency.latency_floor_s;
      launch_matters = launch_matters || m.timing.median_s < 20.0 * d.efficiency.launch_overhead_s;
      memory_matters = memory_matters || p.memory_time_s > 0.5 * p.compute_time_s;
    }
    std::vector<std::string> all_names;
    const auto maybe = [&](bool used, Param param, const char* reason) {
      all_names.push_back(param.name);
      if (std::find(fixed.begin(), fixed.end(), param.name) != fixed.end()) return;
      if (used) {
        params.push_back(std::move(param));
      } else {
        unidentified.push_back(param.name + ": " + reason);
      }
    };
    maybe(true, {"peak_fraction", kPeak, peak_slot}, "");
    maybe(true, {"k_overhead", kKOverhead, k_slot}, "");
    maybe(launch_matters, {"launch_overhead_s", kLaunch, launch_slot},
          "no measured time is within 20x of it");
    maybe(near_floor, {"latency_floor_s", kFloor, floor_slot},
          "no measured time is within 3x of it");
    maybe(memory_matters, {"memory_efficiency", kFraction, memory_slot},
          "no GEMM is near the memory roofline");
    for (std::size_t i = 1; i < tiers.size(); ++i) {
      maybe(
          tier_used[i],
          {fmt::format("alignment_tiers[{}B].factor", tiers[i].min_bytes), kFraction, tier_slot, i},
          "no dimension falls into this tier");
    }
    for (std::size_t i = 1; i < d.tiles.size(); ++i) {
      maybe(tile_used[i],
            {fmt::format("tiles[{}x{}].efficiency", d.tiles[i].m, d.tiles[i].n), kFraction,
             tile_slot, i},
            "no GEMM of the sweep is predicted to use this tile");
    }
    for (const auto& name : fixed) {
      if (std::find(all_names.begin(), all_names.end(), name) == all_names.end()) {
        throw InvalidArgument(
            fmt::format("calibration.fixed '{}' is not a parameter of device '{}' ({})", name,
                        d.name, fmt::join(all_names, ", ")));
      }
    }
    if (params.empty()) {
      throw InvalidArgument("calibration: every parameter is fixed or unexercised; nothing to fit");
    }
  }

  std::vector<double> encode(const DeviceSpec& d) const {
    DeviceSpec copy = d;
    std::vector<double> x;
    for (const auto& p : params)
      x.push_back(to_coordinate(*p.slot(copy, p.index), p.range));
    return x;
  }

  /// Writes the parameters in `x` into `d` (which starts as a copy of the input device).
  void decode(const std::vector<double>& x, DeviceSpec& d) const {
    for (std::size_t i = 0; i < params.size(); ++i)
      *params[i].slot(d, params[i].index) = to_value(x[i], params[i].range);
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& p : params)
      out.push_back(p.name);
    return out;
  }
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
  // A fraction above 0 holds out at least one row (of two or more): rounded to none, a small set
  // with --holdout 0.1 stored no error bar, the user told to ask for a hold-out they had asked for.
  const auto rounded = static_cast<std::size_t>(std::llround(static_cast<double>(n) * fraction));
  const std::size_t holdout =
      fraction > 0.0 && n >= 2 ? std::max<std::size_t>(rounded, 1) : rounded;
  std::vector<std::size_t> test(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(holdout));
  std::vector<std::size_t> train(idx.begin() + static_cast<std::ptrdiff_t>(holdout), idx.end());
  std::sort(test.begin(), test.end());
  std::sort(train.begin(), train.end());
  return {train, test};
}

// Each shape is one point: a sweep writes one row per GEMM asked for, and several GEMMs of a
// model share a shape (Llama's gate and up projections) and one timing. Kept twice, a shape would
// weigh twice in the fit, and could be both fitted and held out, so that the held-out error,
// stored as the device's error bar, would partly be measured on fitted points. A shape goes where
// its first row went, so a set without repeated shapes splits as before.
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split_by_shape(
    std::span<const GemmMeasurement> rows, double fraction, std::uint64_t seed) {
  const auto [train_rows, test_rows] = split_indices(rows.size(), fraction, seed);
  std::vector<bool> held_out(rows.size(), false);
  for (const auto i : test_rows)
    held_out[i] = true;
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, DType>;
  std::set<Key> seen;
  std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& g = rows[i].gemm;
    if (!seen.insert(Key{g.m, g.n, g.k, g.batch, g.dtype}).second) continue;
    (held_out[i] ? split.second : split.first).push_back(i);
  }
  return split;
}

CalibrationResult calibrate(std::span<const GemmMeasurement> rows, const DeviceSpec& given,
                            const CalibrationOptions& options) {
  given.validate();
  // Tiers largest first, as tier_index() and "the first tier is the reference" read them; the
  // model itself takes them in any order, so a hand-built device may list them otherwise.
  DeviceSpec start = given;
  std::sort(
      start.efficiency.alignment_tiers.begin(), start.efficiency.alignment_tiers.end(),
      [](const AlignmentTier& a, const AlignmentTier& b) { return a.min_bytes > b.min_bytes; });
  const std::span<const GemmMeasurement> measured = rows;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    if (!start.supports(measured[i].gemm.dtype)) {
      throw InvalidArgument(fmt::format(
          "measurement {} is {}, which device '{}' has no peak for: add peak_tflops.{} to the "
          "device or drop those rows",
          i, to_string(measured[i].gemm.dtype), start.name, to_string(measured[i].gemm.dtype)));
    }
  }
  const auto [train_idx, test_idx] =
      split_by_shape(measured, options.holdout_fraction, options.seed);
  if (train_idx.size() < 3) {
    throw InvalidArgument(
        fmt::format("calibration needs at least 3 measurements to fit, got {} after holding out {}",
                    train_idx.size(), test_idx.size()));
  }
  const auto train = pick(measured, train_idx);
  const auto test = pick(measured, test_idx);

  CalibrationResult result;
  result.seed = options.seed;
  result.duplicate_rows = rows.size() - train_idx.size() - test_idx.size();
  result.train_count = train.size();
  result.holdout_count = test.size();
  result.train_before = summary_on(train, start);
  result.holdout_before = summary_on(test, start);

  ParamMap map(start, train, options.fixed);
  result.fixed = options.fixed;
  result.parameters = map.names();
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
  // Initial simplex steps: 0.5 in the logistic coordinate for fractions; for log-scaled values the
  // step that moves log(value) by 0.5, so the range's width does not set the search scale.
  std::vector<double> step(x.size(), 0.5);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Range& r = map.params[i].range;
    if (!r.log_scale) continue;
    const double s = sigmoid(x[i]);
    step[i] = 0.5 / std::max((std::log(r.hi) - std::log(r.lo)) * s * (1.0 - s), 0.05);
  }
  for (int run = 0; run <= options.restarts; ++run) {
    x = nelder_mead(objective, x, step, options.max_evaluations, &result.evaluations);
  }
  result.device = start;
  map.decode(x, result.device);
  // How well the data pin each fitted value: the range over which the fit's mean |log error|
  // rises by at most 1% (relative) when that value alone moves, within its physical range. A value
  // the objective barely notices across its whole range is returned to its prior.
  const double best = objective(x);
  DeviceSpec prior = start;
  for (std::size_t i = 0; i < map.params.size(); ++i) {
    const Param& p = map.params[i];
    const double value = *p.slot(result.device, p.index);
    const auto edge = [&](double direction) {
      double lo_step = 0, hi_step = 8;  // in the unconstrained coordinate
      for (int it = 0; it < 30; ++it) {
        const double mid = 0.5 * (lo_step + hi_step);
        auto y = x;
        y[i] += direction * mid;
        if (objective(y) <= best * 1.01 + 1e-12) {
          lo_step = mid;
        } else {
          hi_step = mid;
        }
      }
      return to_value(x[i] + direction * lo_step, p.range);
    };
    FittedValue f{p.name, value, edge(-1.0), edge(+1.0), true, false};
    // Within 0.1% of the range's width from an end: the data push past the physical range.
    const double u = p.range.log_scale
                         ? std::log(value / p.range.lo) / std::log(p.range.hi / p.range.lo)
                         : (value - p.range.lo) / (p.range.hi - p.range.lo);
    f.at_bound = u < 1e-3 || u > 1.0 - 1e-3;
    const double span = p.range.log_scale
                            ? std::log(f.high / f.low) / std::log(p.range.hi / p.range.lo)
                            : (f.high - f.low) / (p.range.hi - p.range.lo);
    if (span > 0.9) {
      f.identified = false;
      f.value = *p.slot(prior, p.index);
      *p.slot(result.device, p.index) = f.value;
    }
    result.fitted.push_back(f);
  }
  for (const auto& u : map.unidentified)
    result.unidentified.push_back(u);
  for (const auto& f : result.fitted) {
    if (!f.identified) {
      result.unidentified.push_back(f.name + ": the fit is flat across its range");
    }
  }
  result.train_after = summary_on(train, result.device);
  result.holdout_after = summary_on(test, result.device);
  result.device.prediction_error.reset();
  if (!test.empty()) {
    result.device.prediction_error = PredictionError{
        test.size(), result.holdout_after.median_abs_pct_error,
        result.holdout_after.p90_abs_pct_error,
        fmt::format("held out of mcr calibrate: {} of {} GEMMs of {} (--holdout {}, --seed {})",
                    test.size(), measured.size(), options.data_label, options.holdout_fraction,
                    options.seed)};
  }
  return result;
}

void to_json(nlohmann::json& j, const CalibrationResult& r) {
  j = {{"seed", r.seed},
       {"train_count", r.train_count},
       {"holdout_count", r.holdout_count},
       {"duplicate_rows", r.duplicate_rows},
       {"train_before", r.train_before},
       {"train_after", r.train_after},
       {"holdout_before", r.holdout_before},
       {"holdout_after", r.holdout_after},
       {"evaluations", r.evaluations},
       {"parameters", r.parameters},
       {"fitted",
        [&r] {
          nlohmann::json a = nlohmann::json::array();
          for (const auto& f : r.fitted) {
            a.push_back({{"name", f.name},
                         {"value", f.value},
                         {"low", f.low},
                         {"high", f.high},
                         {"identified", f.identified},
                         {"at_bound", f.at_bound}});
          }
          return a;
        }()},
       {"unidentified", r.unidentified},
       {"fixed", r.fixed},
       {"efficiency", r.device.efficiency},
       {"tiles", r.device.tiles}};
}

}  // namespace mcr::codesign::bench
