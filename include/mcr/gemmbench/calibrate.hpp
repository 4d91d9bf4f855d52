// Fits a device's efficiency parameters (achievable peak, alignment-tier factors, per-tile K
// overhead, per-launch overhead, latency floor, memory efficiency) and its tiles' efficiencies so
// that predict() matches measurements, and reports the error before and after on points held out of
// the fit.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/device.hpp"
#include "mcr/gemmbench/compare.hpp"
#include "mcr/gemmbench/measurement.hpp"

namespace mcr::codesign::bench {

struct CalibrationOptions {
  /// Fraction of the measurements kept out of the fit to judge it (0 fits on everything).
  double holdout_fraction = 0.5;
  std::uint64_t seed = 1;      ///< seeds the train/hold-out split
  int max_evaluations = 3000;  ///< objective evaluations per Nelder-Mead run
  int restarts = 2;            ///< extra Nelder-Mead runs from the best point (escapes stalls)
  /// Parameters held at the starting device's value, by the names the result lists (e.g.
  /// "alignment_tiers[2B].factor"): values the data cannot speak for, such as one the model
  /// cannot represent or one a previous fit pushed to the edge of its range. An unknown name is an
  /// error.
  std::vector<std::string> fixed;
  /// Names the measurements (e.g. their file) in the fitted device's prediction_error.source.
  std::string data_label = "the calibration measurements";
};

/// One fitted value with the interval the data support: moving the value alone anywhere in
/// [low, high] raises the fit's mean |log error| by at most 1%. identified = false: the objective
/// is flat across (almost) the whole physical range, so the value was returned to its prior.
struct FittedValue {
  std::string name;
  double value = 0;
  double low = 0;
  double high = 0;
  bool identified = true;
  /// The value sits at an end of its physical range: the data ask for more than the model can
  /// represent (a wrong peak, a loaded machine), so treat the fit with suspicion.
  bool at_bound = false;
};

struct CalibrationResult {
  /// The input device with fitted efficiency parameters; its prediction_error is the held-out
  /// error after the fit (unset when nothing was held out: errors on fitted points are no bar).
  DeviceSpec device;
  std::uint64_t seed = 0;
  std::size_t train_count = 0;
  std::size_t holdout_count = 0;
  /// Rows left out because an earlier row has the same shape (m, n, k, batch, dtype): each shape
  /// is one point, fitted or held out, never both.
  std::size_t duplicate_rows = 0;
  ComparisonSummary train_before, train_after;
  ComparisonSummary holdout_before, holdout_after;  ///< count 0 when nothing was held out
  int evaluations = 0;
  std::vector<std::string> parameters;  ///< names of the fitted parameters
  std::vector<FittedValue> fitted;      ///< each fitted parameter with its supported interval
  /// Parameters left at their prior, "name: reason" (no training point exercises them, or the
  /// fit is flat across their physical range).
  std::vector<std::string> unidentified;
  std::vector<std::string> fixed;  ///< CalibrationOptions::fixed, held at their starting value
};

/// A small, dependency-free Nelder-Mead minimizer (standard coefficients 1, 2, 0.5, 0.5).
/// Starts from `x0` with initial simplex steps `step`; returns the best point found.
std::vector<double> nelder_mead(const std::function<double(const std::vector<double>&)>& f,
                                std::vector<double> x0, const std::vector<double>& step,
                                int max_evaluations, int* evaluations = nullptr);

/// Seeded split of indices 0..n-1 into (train, holdout); holdout has round(n * fraction) items.
/// The same (n, fraction, seed) always gives the same split.
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split_indices(std::size_t n,
                                                                            double fraction,
                                                                            std::uint64_t seed);

/// The split calibrate() uses: split_indices() of the rows, then each shape (m, n, k, batch,
/// dtype) goes where its first row went and its later rows are left out, so that no shape is both
/// fitted and held out (nor counted twice). Indices into `rows`; without repeated shapes, exactly
/// split_indices(rows.size(), fraction, seed).
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split_by_shape(
    std::span<const GemmMeasurement> rows, double fraction, std::uint64_t seed);

/// Fits `start.efficiency` and the efficiency of every tile but the first to `measured` (which must
/// all be dtypes the device has), each within a physical range (peak fraction in [0.02, 1], other
/// fractions in [0.2, 1], K overhead
/// in [1, 2048] elements, launch overhead in [1e-7, 1e-4] s, latency floor in [1e-7, 1e-3] s).
/// Parameters no training point exercises keep their prior and are listed in `unidentified`.
CalibrationResult calibrate(std::span<const GemmMeasurement> measured, const DeviceSpec& start,
                            const CalibrationOptions& options);

void to_json(nlohmann::json& j, const CalibrationResult& r);

}  // namespace mcr::codesign::bench
